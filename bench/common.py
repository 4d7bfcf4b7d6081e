"""Shared pieces of the benchmarks: starting our broker and the librdkafka mock cluster."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

STARTED = re.compile(r"rmqk broker started on (\S+):(\d+)")


@dataclass
class BrokerProcess:
    process: subprocess.Popen
    bootstrap: str
    ready_seconds: float
    data_dir: str

    def rss_mb(self) -> float:
        import psutil

        return psutil.Process(self.process.pid).memory_info().rss / 2**20

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=10)
        shutil.rmtree(self.data_dir, ignore_errors=True)


def start_broker(flush: str = "async", extra: list[str] | None = None,
                 data_dir: str | None = None, stderr=None) -> BrokerProcess:
    """Start ``rmqk serve`` as a process (on ``data_dir``, by default a new temporary one);
    ready time = spawn until the started line. ``stderr`` (a file) receives the broker's log."""
    data_dir = data_dir or tempfile.mkdtemp(prefix="rmqk-bench-")
    began = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "rmqkafka", "serve", "--port", "0", "--data-dir", data_dir,
         "--flush", flush, "--log-level", "WARNING", *(extra or [])],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    ready = time.perf_counter() - began
    match = STARTED.search(line)
    if not match:
        process.kill()
        raise RuntimeError(f"broker did not start: {line!r}")
    return BrokerProcess(process, f"{match.group(1)}:{match.group(2)}", ready, data_dir)


def produce_when_room(producer, topic: str, *args, wait_s: float = 0.05, **kwargs) -> None:
    """``producer.produce(topic, *args, **kwargs)`` (confluent-kafka); while its queue is full
    (BufferError), serves delivery reports for up to ``wait_s`` and tries again."""
    while True:
        try:
            producer.produce(topic, *args, **kwargs)
            return
        except BufferError:
            producer.poll(wait_s)


class MockCluster:
    """librdkafka's in-process mock cluster, reachable by other clients on loopback.

    It has no CreateTopics handler; it auto-creates topics with 4 partitions on first use.
    """

    def __init__(self) -> None:
        from confluent_kafka import Producer

        began = time.perf_counter()
        self._owner = Producer({"test.mock.num.brokers": 1, "bootstrap.servers": ""})
        brokers = self._owner.list_topics(timeout=10).brokers
        self.ready_seconds = time.perf_counter() - began
        broker = next(iter(brokers.values()))
        self.bootstrap = f"{broker.host}:{broker.port}"


def create_topic(bootstrap: str, name: str, is_mock: bool, partitions: int = 4, timeout: float = 10) -> None:
    """A topic of ``partitions`` partitions on our broker (CreateTopics); on the librdkafka
    mock, which has no CreateTopics, auto-created with 4 by one empty record."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    quiet = {"log_level": 0}
    if is_mock:
        producer = Producer({"bootstrap.servers": bootstrap, **quiet})
        producer.produce(name, b"", partition=0)
        producer.flush(10)
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, **quiet})
    admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=timeout)[name].result(timeout)


def metrics_url(broker: BrokerProcess) -> str:
    """The broker's /metrics address: the second line ``rmqk serve --metrics-port`` prints
    (read it once, right after start_broker)."""
    line = broker.process.stdout.readline()
    return "http://" + line.strip().rsplit("http://", 1)[1] + "/metrics"


_DURATION = re.compile(
    r'^rmqk_request_duration_seconds_(bucket|sum|count)\{api="(\w+)"(?:,le="([^"]+)")?\} (\S+)$', re.MULTILINE)


def request_durations(url: str, api: str) -> dict[str, float]:
    """The broker's own request-duration histogram of one Kafka API, from a decoded request
    to its response written: ``le`` bound (str) -> cumulative count, plus "sum" and "count"."""
    import urllib.request

    text = urllib.request.urlopen(url, timeout=30).read().decode()
    out: dict[str, float] = {"sum": 0.0, "count": 0.0}
    for kind, name, le, value in _DURATION.findall(text):
        if name == api:
            out[le if kind == "bucket" else kind] = float(value)
    return out


def duration_summary(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Mean, and the bucket bound holding the median and the 99th percentile, in ms, of the
    requests answered between two ``request_durations`` readings."""
    count = after["count"] - before["count"]
    if count <= 0:
        return {"mean_ms": float("nan"), "p50_le_ms": float("nan"), "p99_le_ms": float("nan"), "count": 0}
    bounds = sorted((float(le), after[le] - before.get(le, 0.0)) for le in after if le not in ("sum", "count"))

    def bound(q: float) -> float:
        return next((le * 1000 for le, n in bounds if n >= q * count), float("inf"))

    return {"mean_ms": (after["sum"] - before["sum"]) / count * 1000, "p50_le_ms": bound(0.5),
            "p99_le_ms": bound(0.99), "count": count}
