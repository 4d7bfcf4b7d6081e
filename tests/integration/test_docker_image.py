"""The broker image for real: built offline, started through RmqkafkaContainer and compose.

Once per module, ``compose/build-offline.sh --spark`` builds the images without any registry
(base image by debootstrap + docker import when missing, wheels downloaded on the host with this
interpreter, ``pip install --no-index`` in the image). Then:

- ``RmqkafkaContainer`` (rmqkafka.testcontainers) starts the broker image; confluent-kafka and
  aiokafka on the host produce and consume through the mapped, advertised port; a second
  container reaches the broker's in-network listener.
- ``docker compose up`` (or docker-compose v1) of compose/docker-compose.yml: the broker is
  healthy (its healthcheck asks /ready on the metrics port), host clients use localhost:19092, and the example pipeline on the Spark standalone
  cluster prints ``check: OK``.

Everything skips, saying why, where there is no Docker daemon (``docker info`` fails), where the
images cannot be built here (not root without a base image, interpreter not CPython 3.11), or
for compose where no compose CLI exists or port 19092 is taken. ``RMQK_TEST_IMAGE=NAME`` uses an
existing broker image and builds nothing for the container tests.
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_DIR = ROOT / "compose"
EXAMPLES = ROOT / "docs" / "examples"  # the getting-started pages include these files
BUILD_SCRIPT = COMPOSE_DIR / "build-offline.sh"
IMAGE = "rmqkafka:latest"
SPARK_IMAGE = "rmqkafka-spark:latest"
BASE_IMAGE = "rmqkafka-base:bookworm"
EXTERNAL_PORT = 19092  # compose/server.properties: EXTERNAL advertised as localhost:19092


def _run(*argv: str, timeout: float = 60, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), check=False, capture_output=True, text=True,
                          timeout=timeout, **kwargs)  # type: ignore[call-overload]


def _docker_or_skip() -> str:
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker CLI on PATH (apt-get install docker.io): the Docker tests cannot run")
    try:
        info = _run(docker, "info", "--format", "{{.ServerVersion}}", timeout=30)
    except subprocess.TimeoutExpired:
        pytest.skip("`docker info` timed out: no usable Docker daemon")
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"no Docker daemon (`docker info` failed: {reason})")
    return docker


def _image_exists(docker: str, image: str) -> bool:
    return _run(docker, "image", "inspect", image, timeout=30).returncode == 0


@pytest.fixture(scope="module")
def docker() -> str:
    return _docker_or_skip()


@pytest.fixture(scope="module")
def built_images(docker: str) -> dict[str, float]:
    """Build rmqkafka:latest and rmqkafka-spark:latest with the offline script (once)."""
    if not (sys.version_info[:2] == (3, 11) and sys.platform == "linux"
            and platform.machine() == "x86_64"):
        pytest.skip("the images' wheels are downloaded with this interpreter, which must be "
                    f"CPython 3.11 on Linux x86_64 (Debian bookworm's python3), not {sys.version}")
    if not _image_exists(docker, BASE_IMAGE) and os.geteuid() != 0:
        pytest.skip(f"no base image {BASE_IMAGE} and not root: debootstrap needs root "
                    "(run compose/build-offline.sh as root once)")
    if not _image_exists(docker, BASE_IMAGE) and shutil.which("debootstrap") is None \
            and shutil.which("apt-get") is None:
        pytest.skip(f"no base image {BASE_IMAGE}, no debootstrap and no apt-get to install it")
    started = time.monotonic()
    env = dict(os.environ, PYTHON=sys.executable)
    # the documentation's build example, as a reader runs it from the checkout: the broker
    # image, then both (the second finds the first in Docker's cache)
    assert str(BUILD_SCRIPT.relative_to(ROOT)) + " --spark" in (EXAMPLES / "build_images.sh").read_text()
    proc = _run("bash", "-e", str(EXAMPLES / "build_images.sh"), timeout=1500, env=env, cwd=ROOT)
    elapsed = time.monotonic() - started
    log = proc.stdout + proc.stderr
    sys.stderr.write("".join(line + "\n" for line in log.splitlines()
                             if line.startswith("[build-offline")))
    assert proc.returncode == 0, f"docs/examples/build_images.sh failed:\n{log[-6000:]}"
    return {"build_seconds": elapsed}


@pytest.fixture(scope="module")
def broker_image(docker: str, request: pytest.FixtureRequest) -> str:
    override = os.environ.get("RMQK_TEST_IMAGE")
    if override:
        if not _image_exists(docker, override):
            pytest.skip(f"RMQK_TEST_IMAGE={override} is not a local image")
        return override
    request.getfixturevalue("built_images")
    return IMAGE


@pytest.fixture
def container(broker_image: str) -> Iterator[object]:
    pytest.importorskip("testcontainers", reason="testcontainers is not installed: pip install -e '.[test]'")
    from rmqkafka.testcontainers import RmqkafkaContainer

    started = time.monotonic()
    with RmqkafkaContainer(broker_image).with_properties(num_partitions=3) as broker:
        sys.stderr.write(f"RmqkafkaContainer ready in {time.monotonic() - started:.2f}s "
                         f"at {broker.get_bootstrap_server()}\n")
        yield broker


# --------------------------------------------------------------------------- RmqkafkaContainer


def test_container_confluent_kafka_produce_consume(container: object) -> None:
    from confluent_kafka import Consumer, Producer

    bootstrap = container.get_bootstrap_server()  # type: ignore[attr-defined]
    host = bootstrap.rsplit(":", 1)[0]
    topic = f"docker-ck-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    sent = [(f"k{i % 7}".encode(), f"value-{i}".encode()) for i in range(200)]
    for key, value in sent:
        producer.produce(topic, key=key, value=value, headers=[("TAGS", b"TagA")])
    assert producer.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    try:
        while len(got) < len(sent) and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None or msg.error():
                continue
            got.append((msg.key(), msg.value()))
            assert dict(msg.headers() or [])["TAGS"] == b"TagA"
        consumer.commit(asynchronous=False)
        metadata = consumer.list_topics(topic, timeout=10)
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)
    # the broker advertises the mapped host port, not its container port
    brokers = {(b.host, b.port) for b in metadata.brokers.values()}
    assert brokers == {(host, int(bootstrap.rsplit(":", 1)[1]))}
    assert len(metadata.topics[topic].partitions) == 3


def test_container_aiokafka_produce_consume(container: object) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap = container.get_bootstrap_server()  # type: ignore[attr-defined]
    topic = f"docker-aio-{uuid.uuid4().hex[:8]}"

    async def scenario() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for i in range(100):
                await producer.send_and_wait(topic, f"aio-{i}".encode(), key=b"k")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=f"g-{topic}",
                                    auto_offset_reset="earliest")
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for msg in consumer:
                    values.append(msg.value)
                    if len(values) == 100:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    values = asyncio.run(scenario())
    assert values == [f"aio-{i}".encode() for i in range(100)]  # one key: one partition, in order


def test_container_in_network_listener(container: object, docker: str, broker_image: str) -> None:
    """Another container on the same Docker network reaches the BROKER listener (port 9092)."""
    wrapped = container.get_wrapped_container()  # type: ignore[attr-defined]
    wrapped.reload()
    ip = wrapped.attrs["NetworkSettings"]["IPAddress"]
    assert ip, wrapped.attrs["NetworkSettings"]
    topic = f"docker-net-{uuid.uuid4().hex[:8]}"
    produce = _run(docker, "run", "--rm", "-i", broker_image, "rmqk", "produce", topic,
                   "--bootstrap-server", f"{ip}:9092", input="from-another-container\n", timeout=120)
    assert produce.returncode == 0, produce.stderr
    listed = _run(docker, "run", "--rm", broker_image, "rmqk", "topics", "list",
                  "--bootstrap-server", f"{ip}:9092", "--timeout", "10", timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout


def test_container_waits_for_ready_and_publishes_the_metrics_port(broker_image: str) -> None:
    """By default start() also waits for /ready; /metrics is reachable from the host."""
    pytest.importorskip("testcontainers", reason="testcontainers is not installed: pip install -e '.[test]'")
    from rmqkafka.testcontainers import RmqkafkaContainer

    with RmqkafkaContainer(broker_image) as broker:
        base = broker.get_metrics_url()
        with urllib.request.urlopen(f"{base}/ready", timeout=5) as response:
            assert response.status == 200
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            text = response.read().decode()
        assert "kafka_" in text or "rmqk" in text, text[:2000]


# --------------------------------------------------------------------------- docker compose


def _compose_cli(docker: str) -> list[str]:
    if _run(docker, "compose", "version", timeout=30).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    if legacy is None:
        pytest.skip("neither the `docker compose` plugin nor docker-compose is installed")
    return [legacy]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_healthy(docker: str, cli: list[str], env: dict[str, str], service: str,
                  timeout: float) -> float:
    started = time.monotonic()
    while True:
        ids = _run(*cli, "ps", "-q", service, env=env, cwd=COMPOSE_DIR).stdout.split()
        if ids:
            state = _run(docker, "inspect", "--format", "{{.State.Health.Status}}", ids[0]).stdout.strip()
            if state == "healthy":
                return time.monotonic() - started
        if time.monotonic() - started > timeout:
            logs = _run(*cli, "logs", "--no-color", service, env=env, cwd=COMPOSE_DIR)
            raise AssertionError(f"{service} not healthy after {timeout}s:\n{logs.stdout[-4000:]}")
        time.sleep(0.5)


def test_compose_up_pipeline_check_ok(docker: str, built_images: dict[str, float]) -> None:
    from confluent_kafka import Consumer, Producer

    cli = _compose_cli(docker)
    if _port_taken(EXTERNAL_PORT):
        pytest.skip(f"port {EXTERNAL_PORT} (the compose broker's published EXTERNAL listener) "
                    "is in use on this host")
    project = f"rmqktest{uuid.uuid4().hex[:8]}"
    metrics_port = _free_port()
    env = dict(os.environ, COMPOSE_PROJECT_NAME=project, RMQK_METRICS_PORT=str(metrics_port),
               SPARK_MASTER_UI_PORT=str(_free_port()), SPARK_WORKER_UI_PORT=str(_free_port()))
    try:
        up = _run(*cli, "up", "-d", "broker", env=env, cwd=COMPOSE_DIR, timeout=300)
        assert up.returncode == 0, up.stderr
        healthy_after = _wait_healthy(docker, cli, env, "broker", timeout=120)
        sys.stderr.write(f"compose broker healthy {healthy_after:.1f}s after `up -d` returned\n")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/ready", timeout=5) as response:
            assert response.status == 200  # the published metrics port, as the healthcheck sees it

        # host clients through the published EXTERNAL listener
        bootstrap = f"localhost:{EXTERNAL_PORT}"
        topic = f"compose-host-{uuid.uuid4().hex[:8]}"
        producer = Producer({"bootstrap.servers": bootstrap})
        for i in range(50):
            producer.produce(topic, key=b"k", value=f"host-{i}".encode())
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                             "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        try:
            while len(got) < 50 and time.monotonic() < deadline:
                msg = consumer.poll(1.0)
                if msg is not None and not msg.error():
                    got.append(msg.value())
        finally:
            consumer.close()
        assert got == [f"host-{i}".encode() for i in range(50)]

        # the example pipeline on the Spark standalone cluster, against broker:9092: the
        # documentation's compose example as it is shown (up, then down -v), with this host's
        # compose CLI
        example = (EXAMPLES / "compose_pipeline.sh").read_text()
        assert example.count("docker-compose ") == 2
        script = example.replace("docker-compose ", " ".join(cli) + " ")
        started = time.monotonic()
        run = _run("bash", "-e", "-c", script, env=env, cwd=ROOT, timeout=1200)
        sys.stderr.write(f"compose pipeline finished in {time.monotonic() - started:.1f}s\n")
        out = run.stdout + run.stderr
        assert run.returncode == 0, out[-8000:]
        assert "check: OK" in out, out[-8000:]
    finally:
        down = _run(*cli, "down", "-v", "--remove-orphans", env=env, cwd=COMPOSE_DIR, timeout=300)
        if down.returncode != 0:
            sys.stderr.write(f"compose down failed: {down.stderr}\n")


def test_the_testcontainers_example_runs(broker_image: str, tmp_path: Path) -> None:
    """docs/examples/testcontainers_example.py, as the testcontainers page shows it."""
    pytest.importorskip("testcontainers", reason="testcontainers is not installed: pip install -e '.[test]'")
    source = (EXAMPLES / "testcontainers_example.py").read_text()
    assert "RmqkafkaContainer()" in source
    script = tmp_path / "testcontainers_example.py"
    script.write_text(source.replace("RmqkafkaContainer()", f"RmqkafkaContainer({broker_image!r})"))
    started = time.monotonic()
    run = _run(sys.executable, str(script), cwd=tmp_path, timeout=300)
    sys.stderr.write(f"testcontainers example took {time.monotonic() - started:.1f}s\n")
    assert run.returncode == 0, run.stdout + run.stderr[-4000:]
    assert run.stdout.strip() == "b'hello' {'TAGS': b'TagA'}", run.stdout


def test_the_docker_run_example_runs(docker: str, broker_image: str) -> None:
    """docs/examples/docker_run.sh, as the compose page shows it, with a container name, volume
    and metrics port of its own (19092 is the port server.properties advertises: it stays)."""
    if shutil.which("curl") is None:
        pytest.skip("no curl on PATH (apt-get install curl): the docker run example uses it")
    if _port_taken(EXTERNAL_PORT):
        pytest.skip(f"port {EXTERNAL_PORT} (the image's advertised EXTERNAL listener) is in use on this host")
    name, volume, metrics_port = f"rmqk-doc-{uuid.uuid4().hex[:8]}", f"rmqk-doc-{uuid.uuid4().hex[:8]}", _free_port()
    source = (EXAMPLES / "docker_run.sh").read_text()
    replacements = {"--name rmqk ": f"--name {name} ", "docker stop rmqk ": f"docker stop {name} ",
                    "rmqk-data:": f"{volume}:", "127.0.0.1:9404:9404": f"127.0.0.1:{metrics_port}:9404",
                    "localhost:9404": f"localhost:{metrics_port}", "rmqkafka:latest": broker_image,
                    "rmqk topics": f"{sys.executable} -m rmqkafka topics"}
    script = source
    for documented, used in replacements.items():
        assert documented in source, documented
        script = script.replace(documented, used)
    try:
        # timeout: the example's wait for /ready has no bound of its own
        run = _run("timeout", "120", "bash", "-e", "-c", script, timeout=300)
        assert run.returncode == 0, run.stdout + run.stderr
        lines = run.stdout.splitlines()  # the container id, ready, created ..., greetings, the name
        assert "ready" in lines and "greetings" in lines, run.stdout
        state = _run(docker, "inspect", "--format", "{{.State.Running}} {{.State.ExitCode}}", name).stdout.split()
        assert state == ["false", "0"], state  # stopped by SIGTERM, exited cleanly
    finally:
        _run(docker, "rm", "-f", name, timeout=60)
        _run(docker, "volume", "rm", volume, timeout=60)


def test_container_without_a_metrics_port_waits_for_the_started_line(broker_image: str) -> None:
    pytest.importorskip("testcontainers", reason="testcontainers is not installed: pip install -e '.[test]'")
    from confluent_kafka.admin import AdminClient

    from rmqkafka.testcontainers import RmqkafkaContainer

    with RmqkafkaContainer(broker_image, metrics_port=None) as broker:
        with pytest.raises(RuntimeError, match="without metrics_port"):
            broker.get_metrics_url()
        metadata = AdminClient({"bootstrap.servers": broker.get_bootstrap_server()}).list_topics(timeout=10)
        assert len(metadata.brokers) == 1
