"""The broker in a Docker container, for test suites: a testcontainers-python module.

    from rmqkafka.testcontainers import RmqkafkaContainer

    with RmqkafkaContainer() as broker:                  # image rmqkafka:latest
        bootstrap = broker.get_bootstrap_server()        # "localhost:PORT" (the mapped port)

Shaped like testcontainers' ``KafkaContainer``: the container starts with a command that waits
for a start script; once Docker has mapped the client port, the script and a
``server.properties`` that advertises that host port are copied in, the script runs
``rmqk serve``, and :meth:`start` waits for the broker's one started line,
``rmqk broker started on HOST:PORT``, then for its ``/ready`` probe on the metrics port
(9404, published too; ``metrics_port=None`` leaves the port off and waits for the line only). Two listeners, as with Kafka: ``PLAINTEXT`` on
:attr:`port` (9093), advertised as the host's address and mapped port, for clients on the
host; ``BROKER`` on 9092, advertised as the container's own address (or its first network
alias), for other containers on the same Docker network.

The image is configurable (default ``rmqkafka:latest``, built without a registry by
``compose/build-offline.sh``); :meth:`with_properties` adds ``server.properties`` keys
(``num.partitions``, ``flush.policy``, ...). Nothing is pulled for a local image. The
testcontainers reaper (Ryuk) is an image from Docker Hub: when it is not present locally and
the reaper is not disabled, :meth:`start` disables it (``testcontainers_config.ryuk_disabled``,
with a warning) rather than fail on a pull; the ``with`` block still removes the container.

This module imports testcontainers (the ``test`` extra, ``pip install testcontainers``); the
rest of the package never imports it.
"""

from __future__ import annotations

import logging
import tarfile
import time
import urllib.request
from io import BytesIO
from typing import Any

try:
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import LogMessageWaitStrategy
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "rmqkafka.testcontainers needs testcontainers-python: pip install 'testcontainers>=4.8' "
        "(part of rmqkafka's test extra)"
    ) from exc

__all__ = ["DEFAULT_IMAGE", "READY_PREFIX", "RmqkafkaContainer"]

DEFAULT_IMAGE = "rmqkafka:latest"
READY_PREFIX = "rmqk broker started on "  # must match rmqkafka.cli.serve.READY_PREFIX
logger = logging.getLogger(__name__)


class RmqkafkaContainer(DockerContainer):
    """An rmqkafka broker container; :meth:`get_bootstrap_server` for host clients.

    ``image``: the broker image (``rmqk`` on PATH). ``port``: the container port of the host
    clients' listener (published on a random host port). ``metrics_port``: the container port
    of the broker's HTTP port (``/metrics``, ``/ready``, ``/healthz``, the console), published
    and waited on through ``/ready`` (default 9404); None leaves it off. Other keyword
    arguments go to ``DockerContainer``.
    """

    TC_START_SCRIPT = "/tc-start.sh"
    TC_START_MARKER = "/tc-start.ready"  # extracted after the script: the script is complete
    TC_CONFIG = "/tc-server.properties"
    BROKER_PORT = 9092  # the in-network listener (other containers)
    DATA_DIR = "/var/lib/rmqk/data"

    def __init__(
        self,
        image: str = DEFAULT_IMAGE,
        port: int = 9093,
        *,
        metrics_port: int | None = 9404,
        **kwargs: Any,
    ) -> None:
        super().__init__(image, **kwargs)
        self.port = port
        self.metrics_port = metrics_port
        self.properties: dict[str, str] = {
            "node.id": "0",
            "num.partitions": "1",
            "auto.create.topics.enable": "true",
            "log.dirs": self.DATA_DIR,
        }
        self.with_exposed_ports(port)
        if metrics_port is not None:
            self.with_exposed_ports(metrics_port)
            self.properties["metrics.port"] = str(metrics_port)

    def with_properties(self, **properties: Any) -> RmqkafkaContainer:
        """Add ``server.properties`` keys; underscores in names stand for dots."""
        for key, value in properties.items():
            self.properties[key.replace("_", ".")] = str(value)
        return self

    def with_property(self, key: str, value: Any) -> RmqkafkaContainer:
        """Add one ``server.properties`` key (dotted name as in Kafka)."""
        self.properties[key] = str(value)
        return self

    def get_container_host_ip(self) -> str:
        """The host address clients use; 127.0.0.1 when Docker published the port only there.

        testcontainers picks the bridge gateway when it believes it runs inside a container
        (``/.dockerenv``); a daemon started with ``--ip=127.0.0.1`` publishes ports on the
        loopback address only, where the gateway address does not reach them. An explicit
        ``TESTCONTAINERS_HOST_OVERRIDE`` / ``TC_HOST`` always wins.
        """
        if testcontainers_config.tc_host_override:
            return testcontainers_config.tc_host_override
        client = self.get_docker_client()
        bindings = client.client.api.port(self.get_container_id(), self.port) or []
        host_ips = {b.get("HostIp") for b in bindings}
        if host_ips and host_ips <= {"127.0.0.1"} and client.host() in {"localhost", "127.0.0.1"}:
            return "127.0.0.1"
        return super().get_container_host_ip()

    def get_bootstrap_server(self) -> str:
        """``HOST:PORT`` for clients on the Docker host (the mapped port)."""
        return f"{self.get_container_host_ip()}:{self.get_exposed_port(self.port)}"

    @property
    def bootstrap_servers(self) -> str:
        """Same as :meth:`get_bootstrap_server` (the ``EmbeddedBroker`` spelling)."""
        return self.get_bootstrap_server()

    def get_metrics_url(self) -> str:
        """``http://HOST:PORT`` of the broker's metrics port (needs ``metrics_port=``)."""
        if self.metrics_port is None:
            raise RuntimeError("RmqkafkaContainer was created without metrics_port=")
        return f"http://{self.get_container_host_ip()}:{self.get_exposed_port(self.metrics_port)}"

    # ------------------------------------------------------------------ start-up

    def _in_network_host(self) -> str:
        aliases = getattr(self, "_network_aliases", None)
        if getattr(self, "_network", None) is not None and aliases:
            return str(aliases[0])
        return "$(hostname -i | cut -d' ' -f1)"  # expanded by the start script

    def _server_properties(self, host: str, port: int) -> str:
        props = dict(self.properties)
        props.update({
            "listeners": f"PLAINTEXT://0.0.0.0:{self.port},BROKER://0.0.0.0:{self.BROKER_PORT}",
            "advertised.listeners":
                f"PLAINTEXT://{host}:{port},BROKER://{self._in_network_host()}:{self.BROKER_PORT}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:PLAINTEXT",
        })
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def tc_start(self) -> None:
        """Write the config with the advertised host port and the start script into the container."""
        host = self.get_container_host_ip()
        port = self.get_exposed_port(self.port)
        config = self._server_properties(host, port)
        script = (
            "#!/bin/sh\n"
            "set -e\n"
            # the heredoc is unquoted: $(hostname -i) in the in-network listener is expanded
            f"cat > {self.TC_CONFIG} <<EOF\n{config}EOF\n"
            f"exec rmqk serve --config {self.TC_CONFIG}\n"
        )
        self._create_files({self.TC_START_SCRIPT: script.encode(), self.TC_START_MARKER: b""})

    def start(self, timeout: float = 60) -> RmqkafkaContainer:
        marker, script = self.TC_START_MARKER, self.TC_START_SCRIPT
        self.with_command(["sh", "-c", f"while [ ! -f {marker} ]; do sleep 0.05; done; exec sh {script}"])
        self._avoid_pulling_the_reaper()
        super().start()
        self.tc_start()
        wait = LogMessageWaitStrategy(READY_PREFIX)
        wait.with_startup_timeout(int(timeout))
        wait.wait_until_ready(self)
        if self.metrics_port is not None:
            self._wait_ready_endpoint(timeout)
        return self

    def _wait_ready_endpoint(self, timeout: float) -> None:
        url = f"{self.get_metrics_url()}/ready"
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{url} not ready after {timeout}s: {exc}") from exc
            time.sleep(0.1)

    def _avoid_pulling_the_reaper(self) -> None:
        if testcontainers_config.ryuk_disabled:
            return
        from docker.errors import ImageNotFound

        try:
            self.get_docker_client().client.images.get(testcontainers_config.ryuk_image)
        except ImageNotFound:
            logger.warning(
                "%s is not present locally; disabling the testcontainers reaper "
                "(TESTCONTAINERS_RYUK_DISABLED=true) instead of pulling it",
                testcontainers_config.ryuk_image,
            )
            testcontainers_config.ryuk_disabled = True

    def _create_files(self, files: dict[str, bytes]) -> None:
        """Copy files into the container in one archive, extracted in the given order."""
        with BytesIO() as archive:
            with tarfile.TarFile(fileobj=archive, mode="w") as tar:
                for path, content in files.items():
                    info = tarfile.TarInfo(name=path.lstrip("/"))
                    info.size = len(content)
                    info.mtime = int(time.time())
                    info.mode = 0o644
                    tar.addfile(info, BytesIO(content))
            archive.seek(0)
            self.get_wrapped_container().put_archive("/", archive)
