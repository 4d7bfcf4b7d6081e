"""pytest fixtures for any project that installs rmqkafka: a real Kafka-protocol broker, no conftest.

Registered through the ``pytest11`` entry point (``rmqkafka = "rmqkafka.pytest_plugin"``), so
pytest loads it in every project whose environment has rmqkafka installed. Hence the rules here:

- Importing this module must be cheap: only pytest and the standard library at module level;
  the broker (:class:`rmqkafka.EmbeddedBroker`) and confluent-kafka are imported inside the
  fixtures, so a project that never asks for a broker pays nothing.
- Every name starts with ``rmqkafka_``, so nothing clashes with a project's own ``broker``
  fixtures (this repository's tests/conftest.py has ``broker`` and ``broker_factory``).

Fixtures:

``rmqkafka_broker``          session-scoped, a started broker (``.bootstrap_servers``);
                             options from the ``rmqkafka_broker_options`` fixture (override it
                             in a conftest to change flush policy, properties, ...).
``rmqkafka_broker_factory``  ``make(start=True, *, data_dir=None, flush=None, properties=None,
                             **EmbeddedBroker options)``; ``properties`` is a dict of
                             ``server.properties`` keys. Brokers are closed after the test; each
                             has ``.restart()``, ``.kill()``, ``.stop()``, ``.data_dir``.
``rmqkafka_admin``           :class:`RmqkafkaAdmin` on the session broker:
                             ``create_topic(partitions=1, config=None) -> unique name``.
``rmqkafka_topic``           a fresh unique topic on the session broker (one partition, or
                             ``@pytest.mark.rmqkafka_topic(partitions=3, config={...})``).

Why a session broker by default: starting one is an interpreter start plus recovery (a few
hundred ms); unique topic names keep tests on one broker independent of each other.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from rmqkafka.adapter.embedded import EmbeddedBroker

__all__ = ["RmqkafkaAdmin", "write_properties"]

_MARKER = "rmqkafka_topic"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_MARKER}(partitions=1, config=None, prefix='t'): options of the rmqkafka_topic fixture",
    )


# ---------------------------------------------------------------------------------------------
# helpers (importable: ``from rmqkafka.pytest_plugin import RmqkafkaAdmin``)


def _escape(text: str, key: bool = False) -> str:
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    if key:
        out = out.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ")
    elif out[:1].isspace():
        out = "\\" + out
    return out


def write_properties(path: Path, properties: Mapping[str, object]) -> Path:
    """Write ``properties`` as a Java properties file (``server.properties``) at ``path``."""
    lines = [f"{_escape(str(k), key=True)}={_escape(_text(v))}\n" for k, v in properties.items()]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class RmqkafkaAdmin:
    """Creates uniquely named topics on one broker through confluent-kafka's AdminClient.

    Unique names (``PREFIX-<test counter>-<random>``) let every test share one broker; the
    topics are left in place (a session broker's data directory is removed at the end).
    """

    def __init__(self, bootstrap_servers: str, timeout: float = 15.0) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.timeout = timeout
        self._client: Any = None
        self._counter = itertools.count(1)

    @property
    def client(self) -> Any:
        """The underlying ``confluent_kafka.admin.AdminClient`` (created on first use)."""
        if self._client is None:
            from confluent_kafka.admin import AdminClient

            self._client = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        return self._client

    def unique_name(self, prefix: str = "t") -> str:
        return f"{prefix}-{next(self._counter)}-{uuid.uuid4().hex[:10]}"

    def create_topic(
        self,
        name: str | None = None,
        *,
        partitions: int = 1,
        config: Mapping[str, object] | None = None,
        prefix: str = "t",
    ) -> str:
        """Create a topic (a unique name unless ``name`` is given) and return its name."""
        from confluent_kafka.admin import NewTopic

        topic = name or self.unique_name(prefix)
        new = NewTopic(
            topic,
            num_partitions=partitions,
            replication_factor=1,
            config={k: _text(v) for k, v in (config or {}).items()},
        )
        futures = self.client.create_topics([new], request_timeout=self.timeout, operation_timeout=self.timeout)
        futures[topic].result(timeout=self.timeout)
        return topic

    def delete_topic(self, name: str) -> None:
        futures = self.client.delete_topics([name], request_timeout=self.timeout, operation_timeout=self.timeout)
        futures[name].result(timeout=self.timeout)

    def list_topics(self) -> list[str]:
        return sorted(self.client.list_topics(timeout=self.timeout).topics)


def _broker(
    data_dir: Path,
    properties: Mapping[str, object] | None,
    options: dict[str, Any],
) -> EmbeddedBroker:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    if properties:
        if options.get("config_file") is not None:
            raise ValueError("give either properties= or config_file=, not both")
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        options["config_file"] = write_properties(data_dir.parent / f"{data_dir.name}.properties", properties)
    return EmbeddedBroker(data_dir=data_dir, **options)


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="session")
def rmqkafka_broker_options() -> dict[str, Any]:
    """Options of the session broker: override in a conftest to change them, e.g.
    ``return {"flush": "sync", "properties": {"num.partitions": 3}}``."""
    return {}


@pytest.fixture(scope="session")
def rmqkafka_broker(
    tmp_path_factory: pytest.TempPathFactory, rmqkafka_broker_options: dict[str, Any]
) -> Iterator[EmbeddedBroker]:
    """One started broker for the whole session; stopped (SIGTERM) at its end."""
    options = dict(rmqkafka_broker_options)
    properties = options.pop("properties", None)
    data_dir = options.pop("data_dir", None) or tmp_path_factory.mktemp("rmqkafka") / "data"
    instance = _broker(Path(data_dir), properties, options)
    with instance:
        yield instance


@pytest.fixture
def rmqkafka_broker_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., EmbeddedBroker]]:
    """``make(start=True, *, data_dir=None, flush=None, properties=None, **options)``.

    Each broker gets its own data directory unless ``data_dir`` is given; ``properties`` (a
    dict of server.properties keys) is written to a file passed as ``--config``; the other
    options go to :class:`rmqkafka.EmbeddedBroker` (``args=``, ``env=``, ``config_file=``, ...).
    All brokers are closed after the test, the others even if one fails to close.
    """
    base = tmp_path_factory.mktemp("rmqkafka-factory")
    created: list[EmbeddedBroker] = []

    def make(
        start: bool = True,
        *,
        data_dir: Path | str | None = None,
        flush: str | None = None,
        properties: Mapping[str, object] | None = None,
        **options: Any,
    ) -> EmbeddedBroker:
        path = Path(data_dir) if data_dir is not None else base / f"broker-{len(created)}"
        instance = _broker(path, properties, dict(options, flush=flush))
        created.append(instance)
        return instance.start() if start else instance

    yield make
    failures: list[BaseException] = []
    for instance in reversed(created):
        try:
            instance.close()
        except Exception as exc:  # noqa: BLE001 - close the others before reporting
            failures.append(exc)
    if failures:
        raise failures[0]


@pytest.fixture
def rmqkafka_admin(rmqkafka_broker: EmbeddedBroker) -> RmqkafkaAdmin:
    """A :class:`RmqkafkaAdmin` on the session broker (``create_topic(partitions=N)``)."""
    return RmqkafkaAdmin(rmqkafka_broker.bootstrap_servers)


@pytest.fixture
def rmqkafka_topic(request: pytest.FixtureRequest, rmqkafka_admin: RmqkafkaAdmin) -> str:
    """The name of a fresh topic on the session broker (see the ``rmqkafka_topic`` marker)."""
    marker = request.node.get_closest_marker(_MARKER)
    kwargs = dict(marker.kwargs) if marker is not None else {}
    prefix = kwargs.pop("prefix", None) or _safe(request.node.name)
    return rmqkafka_admin.create_topic(prefix=prefix, **kwargs)


def _safe(name: str) -> str:
    """A topic-name prefix from a test name (Kafka allows ``[a-zA-Z0-9._-]``, 249 chars)."""
    cleaned = "".join(c if c.isalnum() or c in "._-" else "_" for c in name)
    return cleaned[:80] or "t"
