"""Issue #13: the pytest plugin (``rmqkafka.pytest_plugin``) works in a project with no conftest.

Why pytester in a subprocess: the point of the plugin is that installing rmqkafka is enough,
so the throwaway project below has no conftest and no ``-p`` option; its fixtures can only
come from the ``pytest11`` entry point of the installed distribution (``-p no:rmqkafka``
makes them disappear, which shows that it is that entry point which provides them). The
throwaway tests use the three client libraries people test with: kafka-python,
aiokafka and confluent-kafka.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

THROWAWAY = r'''
import asyncio
import time

import pytest


@pytest.fixture(scope="session")
def rmqkafka_broker_options():  # overrides the plugin's (empty) options of the session broker
    return {"flush": "sync", "properties": {"num.partitions": 2}}


def test_session_broker_options(rmqkafka_broker):
    command = rmqkafka_broker.command()
    assert command[command.index("--flush") + 1] == "sync"
    with open(command[command.index("--config") + 1]) as f:
        assert f.read() == "num.partitions=2\n"


def test_session_broker_with_kafka_python(rmqkafka_broker, rmqkafka_topic):
    from kafka import KafkaConsumer, KafkaProducer

    producer = KafkaProducer(bootstrap_servers=rmqkafka_broker.bootstrap_servers)
    for i in range(3):
        producer.send(rmqkafka_topic, key=b"k", value=b"v%d" % i)
    producer.flush()
    producer.close()
    consumer = KafkaConsumer(rmqkafka_topic, bootstrap_servers=rmqkafka_broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=5000)
    values = [m.value for m in consumer]
    consumer.close()
    assert values == [b"v0", b"v1", b"v2"]


@pytest.mark.rmqkafka_topic(partitions=3)
def test_topic_marker_and_aiokafka(rmqkafka_broker, rmqkafka_topic):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def main():
        producer = AIOKafkaProducer(bootstrap_servers=rmqkafka_broker.bootstrap_servers)
        await producer.start()
        try:
            assert len(await producer.partitions_for(rmqkafka_topic)) == 3
            for p in range(3):
                await producer.send_and_wait(rmqkafka_topic, b"p%d" % p, partition=p)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(rmqkafka_topic, bootstrap_servers=rmqkafka_broker.bootstrap_servers,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            got = []
            while len(got) < 3:
                batch = await consumer.getmany(timeout_ms=5000)
                assert batch, got
                got += [m.value for ms in batch.values() for m in ms]
            return sorted(got)
        finally:
            await consumer.stop()

    assert asyncio.run(main()) == [b"p0", b"p1", b"p2"]


def test_admin_makes_unique_topics(rmqkafka_admin):
    a = rmqkafka_admin.create_topic(partitions=2)
    b = rmqkafka_admin.create_topic(partitions=2)
    assert a != b
    assert {a, b} <= set(rmqkafka_admin.list_topics())


def test_factory_properties_kill_restart_with_confluent_kafka(rmqkafka_broker_factory, rmqkafka_broker):
    from confluent_kafka import Consumer, Producer

    broker = rmqkafka_broker_factory(flush="sync", properties={"num.partitions": 4, "node.id": 7})
    assert broker.bootstrap_servers != rmqkafka_broker.bootstrap_servers
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(5):
        producer.produce("auto", value=b"r%d" % i, partition=0)
    assert producer.flush(10) == 0
    metadata = producer.list_topics("auto", timeout=5)
    assert len(metadata.topics["auto"].partitions) == 4
    assert 7 in metadata.brokers

    broker.kill()  # a crash: no clean-shutdown marker
    assert not broker.running
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["auto"])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < 5 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [b"r%d" % i for i in range(5)]


def test_factory_unstarted(rmqkafka_broker_factory, tmp_path):
    broker = rmqkafka_broker_factory(start=False, data_dir=tmp_path / "kept")
    assert not broker.running
    broker.start()
    assert (tmp_path / "kept").is_dir()
'''


def _env() -> dict[str, str]:
    env = os.environ.copy()
    env.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)  # autoloading is what is tested
    env.pop("PYTEST_PLUGINS", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def test_entry_point_is_registered() -> None:
    found = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert found.get("rmqkafka") == "rmqkafka.pytest_plugin", f"reinstall (pip install -e .) to register it: {found}"


def test_importing_the_plugin_is_cheap() -> None:
    code = (
        "import sys, rmqkafka.pytest_plugin\n"
        "heavy = [m for m in sys.modules if m.startswith(('rmqkafka.adapter', 'rmqkafka.storage', "
        "'confluent_kafka', 'kafka', 'aiokafka', 'asyncio'))]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


def test_fixtures_in_a_project_without_conftest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_throwaway=THROWAWAY)
    assert not list(pytester.path.glob("conftest.py"))

    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider", timeout=200)
    result.assert_outcomes(passed=6)

    # the fixtures are the plugin's, found through the entry point named "rmqkafka"
    listed = pytester.runpytest_subprocess("--fixtures", "-p", "no:cacheprovider", timeout=60)
    text = listed.stdout.str()
    for name in ("rmqkafka_broker", "rmqkafka_broker_factory", "rmqkafka_admin", "rmqkafka_topic"):
        assert name in text, text
    assert "rmqkafka/pytest_plugin.py" in text or "rmqkafka.pytest_plugin" in text, text
    off = pytester.runpytest_subprocess("-p", "no:rmqkafka", "-p", "no:cacheprovider", "-k", "unique", timeout=60)
    off.stdout.fnmatch_lines(["*fixture 'rmqkafka_admin' not found*"])
    assert off.ret != 0
