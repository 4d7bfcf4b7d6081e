"""compose/: static checks of docker-compose.yml, the Dockerfile and server.properties.

Nothing is started here (tests/integration/test_docker_image.py builds the images and runs the
stack where a Docker daemon exists). What is checked:
the YAML parses; the services exist and are wired (pipeline waits for a healthy broker, the
broker has a healthcheck); compose/server.properties is accepted by the broker's own config
builder (rmqkafka.adapter.properties) and its advertised listener agrees with the service name, the
published port and the clients' bootstrap address; the Dockerfile has the targets the
services build and installs the package with the spark extra; every referenced file exists;
the pipeline's command line is accepted by the example's argument parser; the images install
from local wheels only (no registry: a local base image, ``pip install --no-index``, no
``# syntax=`` line) and the file has no top-level ``name:`` (docker-compose v1 rejects it). With
a docker CLI that has the compose plugin (or docker-compose), ``config -q`` validates the file
as well.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed: pip install -e '.[test]'")

from rmqkafka.adapter.properties import load_config

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_DIR = ROOT / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
SERVICES = {"broker", "spark-master", "spark-worker", "pipeline"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, Any]:
    return compose["services"]


def _command(service: dict[str, Any]) -> list[str]:
    cmd = service.get("command")
    if cmd is None:
        return []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(x) for x in cmd]


def _flag(argv: list[str], name: str) -> str:
    assert name in argv, f"{name} missing from {argv}"
    return argv[argv.index(name) + 1]


def _build(service: dict[str, Any]) -> tuple[Path, Path, str | None]:
    build = service["build"]
    if isinstance(build, str):
        context, dockerfile, target = build, "Dockerfile", None
    else:
        context, dockerfile, target = build["context"], build.get("dockerfile", "Dockerfile"), build.get("target")
    ctx = (COMPOSE_DIR / context).resolve()
    return ctx, (ctx / dockerfile).resolve(), target


def _substitute(text: str) -> str:
    """``${VAR:-default}`` -> default (compose's interpolation with the variable unset)."""
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:-([^}]*)\}", r"\1", text)


def _ports(service: dict[str, Any]) -> dict[int, int]:
    """container port -> published host port (short syntax "HOST:CONTAINER" only)."""
    found: dict[int, int] = {}
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            found[int(entry["target"])] = int(_substitute(str(entry["published"])))
            continue
        parts = _substitute(str(entry)).split("/")[0].split(":")
        found[int(parts[-1])] = int(parts[-2]) if len(parts) > 1 else int(parts[-1])
    return found


def _bind_mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    mounts = []
    for entry in service.get("volumes", []):
        if isinstance(entry, dict):
            if entry.get("type") == "bind":
                mounts.append((entry["source"], entry["target"]))
            continue
        source, target = str(entry).split(":")[:2]
        if source.startswith((".", "/", "~")):
            mounts.append((source, target))
    return mounts


def _broker_config(services: dict[str, Any]) -> Any:
    mounts = {t: s for s, t in _bind_mounts(services["broker"])}
    config_path = _flag(_command(services["broker"]), "--config")
    assert config_path in mounts, "the broker's --config file is not mounted"
    return load_config(COMPOSE_DIR / mounts[config_path], environ={})


# --------------------------------------------------------------------------- tests


def test_services_exist(services: dict[str, Any]) -> None:
    assert SERVICES <= set(services)


def test_pipeline_waits_for_a_healthy_broker_and_the_cluster(services: dict[str, Any]) -> None:
    depends = services["pipeline"]["depends_on"]
    assert isinstance(depends, dict), "depends_on needs the long form to name conditions"
    assert depends["broker"]["condition"] == "service_healthy"
    assert depends["spark-master"]["condition"] == "service_healthy"
    assert "spark-worker" in depends
    assert services["spark-worker"]["depends_on"]["spark-master"]["condition"] == "service_healthy"


def test_healthchecks(services: dict[str, Any]) -> None:
    for name in ("broker", "spark-master"):
        check = services[name].get("healthcheck")
        assert check and check.get("test"), f"{name} has no healthcheck"
        assert check["test"][0] in ("CMD", "CMD-SHELL")
    # the broker's healthcheck asks /ready on its metrics port (metrics.port), which is published
    test = services["broker"]["healthcheck"]["test"]
    metrics_port = _broker_config(services).adapter.metrics_port
    assert metrics_port, "compose/server.properties sets no metrics.port"
    assert any(f"localhost:{metrics_port}/ready" in str(arg) for arg in test), test
    assert metrics_port in _ports(services["broker"])


def test_server_properties_is_accepted_and_consistent(services: dict[str, Any]) -> None:
    cfg = _broker_config(services)  # raises ConfigError if the broker would refuse it
    broker = services["broker"]
    # in-network clients: the advertised host is the broker's service name / hostname
    assert cfg.adapter.host == "0.0.0.0"
    assert cfg.adapter.advertised_host in {"broker", broker.get("hostname")}
    assert cfg.adapter.advertised_host == "broker"
    # host clients: a second listener advertises localhost on a port published as itself
    (external,) = cfg.adapter.extra_listeners
    assert external.advertised_host == "localhost"
    ports = _ports(broker)
    assert external.port in ports, f"container port {external.port} is not published"
    assert ports[external.port] == external.advertised_port
    # the data directory lives on the named volume
    named = {str(v).split(":")[1] for v in broker.get("volumes", [])
             if not str(v).startswith((".", "/"))}
    assert any(str(cfg.storage.data_dir).startswith(m) for m in named), cfg.storage.data_dir
    # the clients bootstrap from exactly the advertised address
    advertised = f"{cfg.adapter.advertised_host}:{cfg.adapter.advertised_port}"
    assert _flag(_command(services["pipeline"]), "--bootstrap-servers") == advertised


def test_spark_services_and_pipeline_command(services: dict[str, Any]) -> None:
    master = _command(services["spark-master"])
    assert "org.apache.spark.deploy.master.Master" in master
    master_url = f"spark://spark-master:{_flag(master, '--port')}"
    assert master_url in _command(services["spark-worker"])
    # the web UIs are published (host port overridable); 7077 stays inside the network
    assert _ports(services["spark-master"]).get(int(_flag(master, "--webui-port")))
    pipeline = _command(services["pipeline"])
    assert pipeline[:3] == ["python", "-m", "rmqkafka.spark_connector.examples.order_pipeline"]
    assert _flag(pipeline, "--master") == master_url
    assert "spark.driver.host=pipeline" in pipeline
    assert services["pipeline"].get("hostname") == "pipeline"

    from rmqkafka.spark_connector.examples.order_pipeline import parse_args

    args = parse_args(pipeline[3:])  # exits (SystemExit) if the example would refuse them
    assert args.master == master_url and not args.streaming


def test_builds_reference_existing_files_and_targets(services: dict[str, Any]) -> None:
    for name in SERVICES:
        ctx, dockerfile, target = _build(services[name])
        assert ctx.is_dir(), f"{name}: build context {ctx} does not exist"
        assert dockerfile.is_file(), f"{name}: {dockerfile} does not exist"
        text = dockerfile.read_text()
        stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.MULTILINE | re.IGNORECASE))
        assert target in stages, f"{name}: target {target!r} not in {sorted(stages)}"
        # every COPY source of the Dockerfile exists in the context, or is a wheels/ folder
        # that compose/build-offline.sh fills (compose/wheels/ is not in git)
        script = (COMPOSE_DIR / "build-offline.sh").read_text()
        for line in re.findall(r"^COPY\s+(?!--from)(.+)$", text, re.MULTILINE):
            *sources, _dest = line.split()
            for source in sources:
                if source.startswith("wheels/"):
                    assert f'"$WHEELS/{source.removeprefix("wheels/")}"' in script, source
                    continue
                assert (ctx / source).exists(), f"{dockerfile}: COPY {source} missing"
    assert _build(services["broker"])[2] == "broker"
    for name in ("spark-master", "spark-worker", "pipeline"):
        assert _build(services[name])[2] == "spark", name
    for name in SERVICES:
        for source, _target in _bind_mounts(services[name]):
            assert (COMPOSE_DIR / source).exists(), f"{name}: mounted {source} missing"


def _stage(text: str, name: str) -> str:
    body = re.split(rf"^FROM\s+\S+\s+AS\s+{name}\s*$", text, flags=re.MULTILINE | re.IGNORECASE)[1]
    return re.split(r"^FROM\s", body, flags=re.MULTILINE)[0]


def test_dockerfile_installs_the_package_offline(services: dict[str, Any]) -> None:
    _ctx, dockerfile, _target = _build(services["pipeline"])
    text = dockerfile.read_text()
    # nothing from a registry: no BuildKit frontend image, a local base image
    assert not re.search(r"^#\s*syntax\s*=", text, re.MULTILINE | re.IGNORECASE)
    assert re.search(r"^ARG BASE_IMAGE=rmqkafka-base:bookworm$", text, re.MULTILINE)
    assert re.search(r"^FROM \$\{BASE_IMAGE\} AS base$", text, re.MULTILINE)
    # dependencies, then the project's own wheel in a layer of its own
    assert "pip install --no-index --find-links /tmp/wheels/broker" in _stage(text, "base")
    broker_stage = _stage(text, "broker")
    assert "pip install --no-index --no-deps /tmp/wheels/project/rmqkafka-" in broker_stage
    assert re.search(r"^FROM base AS broker$", text, re.MULTILINE)
    spark_deps = _stage(text, "spark-deps")
    assert "openjdk-17" in spark_deps and "JAVA_HOME" in spark_deps
    assert re.search(r"^FROM spark-deps AS spark$", text, re.MULTILINE)
    spark_stage = _stage(text, "spark")
    assert re.search(r"pip install --no-index .*[\"']rmqkafka\[spark\][\"']", spark_stage), spark_stage
    assert '"rmqk", "serve", "--config", "/etc/rmqk/server.properties"' in broker_stage
    assert _command(services["broker"])[:4] == ["rmqk", "serve", "--config",
                                               "/etc/rmqk/server.properties"]
    # the pyproject really has the extra the image installs
    assert re.search(r"^spark\s*=\s*\[", (ROOT / "pyproject.toml").read_text(), re.MULTILINE)


def test_offline_build_script_and_ignores(compose: dict[str, Any], services: dict[str, Any]) -> None:
    assert "name" not in compose, "docker-compose v1 rejects a top-level name:"
    script = COMPOSE_DIR / "build-offline.sh"
    assert script.is_file() and script.stat().st_mode & 0o111, "compose/build-offline.sh"
    text = script.read_text()
    for needle in ("debootstrap --variant=minbase", "docker import", "-m pip wheel",
                   "DOCKER_BUILDKIT=0"):
        assert needle in text, needle
    proc = subprocess.run(["bash", "-n", str(script)], check=False, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # the images compose runs are the ones the script tags
    assert services["broker"]["image"] == "rmqkafka:latest"
    assert services["pipeline"]["image"] == "rmqkafka-spark:latest"
    # the wheels stay out of git and in the (small) build context
    assert "compose/wheels/" in (ROOT / ".gitignore").read_text().splitlines()
    ignore = (COMPOSE_DIR / ".dockerignore").read_text().splitlines()
    assert "**" in ignore
    for folder in ("broker", "project", "spark"):
        assert f"!wheels/{folder}/*.whl" in ignore, folder


def _compose_cli() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run([docker, "compose", "version"], check=False, capture_output=True,
                               timeout=30)
        if probe.returncode == 0:
            return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


def test_docker_compose_config_validates() -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no `docker compose` plugin or docker-compose binary: cannot run "
                    "`docker compose config -q` (YAML and static checks above still ran)")
    proc = subprocess.run([*cli, "-f", str(COMPOSE_FILE), "config", "-q"],
                          check=False, capture_output=True, text=True, timeout=60, cwd=COMPOSE_DIR)
    assert proc.returncode == 0, proc.stderr
