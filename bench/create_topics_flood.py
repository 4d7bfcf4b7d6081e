"""CreateTopics with many topics in one request (issue 20): how long the request takes to be
answered, and the slowest request of another client meanwhile.

``python -m bench.create_topics_flood [--counts 1000,4000,20000] [--rate -1]`` starts one
broker per count (``max.partitions`` raised to fit, ``controller.mutation.rate`` as given:
-1 = unlimited, to time the write path itself), sends one CreateTopics v7 with that many
one-partition topics over a raw connection (the frame encoded beforehand; timed from its
send to the last byte of the response, decoded afterwards), and meanwhile has a second
connection produce one record at a time (acks=1) to an existing topic, timing each produce. Prints one line per
count and, with ``--json FILE``, writes the figures.

``producer_while_flooding`` is shared with the reliability suite's ``create_topics_flood``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .reliability_common import broker, raw


@dataclass
class ProducerTimes:
    """Latencies (s) of a well-behaved client's produces, each answered or failed."""

    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def slowest(self) -> float:
        return max(self.latencies, default=0.0)


def producer_while_flooding(instance, topic: str, stop: threading.Event) -> tuple[threading.Thread, ProducerTimes]:
    """A thread producing one record at a time to ``topic`` partition 0 until ``stop``."""
    times = ProducerTimes()

    def run() -> None:
        with raw.KafkaRaw(instance.host, instance.port) as conn:
            while not stop.is_set():
                began = time.monotonic()
                try:
                    response = conn.produce_request({(topic, 0): raw.make_batch([b"x"])}, acks=1, timeout=30)
                    code = response.responses[0].partition_responses[0].error_code
                    if code != raw.ErrorCode.none:
                        times.errors.append(code.name)
                except Exception as exc:  # noqa: BLE001  # counted: a broker that stalls or drops us
                    times.errors.append(f"{type(exc).__name__}: {exc}")
                    return
                times.latencies.append(time.monotonic() - began)
                time.sleep(0.005)

    thread = threading.Thread(target=run, name="well-behaved-producer", daemon=True)
    thread.start()
    return thread, times


def create_frame(names: list[str], version: int = 7, correlation_id: int = 1_000_000) -> bytes:
    """A CreateTopics request frame for one-partition topics ``names``, encoded up front so
    that the client's own (kio) encoding is not timed as the broker's."""
    body = raw.build(raw.load_request_schema(raw.ApiKey.CREATE_TOPICS, version),
                     topics=[dict(name=n, num_partitions=1, replication_factor=1, assignments=(), configs=())
                             for n in names],
                     timeout=120_000, validate_only=False)
    return raw.encode_request(raw.ApiKey.CREATE_TOPICS, version, correlation_id, body)


def send_and_time(conn, frame: bytes, timeout: float = 600) -> tuple[float, bytes]:
    """(seconds until the whole response frame arrived, the frame)."""
    began = time.monotonic()
    conn.send_raw(frame)
    payload = conn.recv_frame(timeout)
    return time.monotonic() - began, payload


def topic_codes(payload: bytes, version: int = 7) -> list:
    _, response = raw.decode_response(raw.ApiKey.CREATE_TOPICS, version, payload)
    return [t.error_code for t in response.topics]


@dataclass
class FloodFigures:
    topics: int
    answer_seconds: float
    created: int
    other_errors: int  # topic results that are not NONE
    producer_requests: int
    producer_slowest_ms: float
    producer_errors: list[str]


def measure(workdir: Path, count: int, rate: int) -> FloodFigures:
    instance = broker(workdir / f"flood-{count}", config={
        "max.partitions": str(count + 100), "controller.mutation.rate": str(rate)})
    try:
        with raw.KafkaRaw(instance.host, instance.port) as conn:
            conn.create_topic("steady")
            frame = create_frame([f"flood-{i:06d}" for i in range(count)])
            stop = threading.Event()
            thread, times = producer_while_flooding(instance, "steady", stop)
            time.sleep(0.3)  # the producer is under way
            answered, payload = send_and_time(conn, frame)
            time.sleep(0.3)
            stop.set()
            thread.join(60)
        codes = topic_codes(payload)
        return FloodFigures(count, round(answered, 2), codes.count(raw.ErrorCode.none),
                            sum(c != raw.ErrorCode.none for c in codes), len(times.latencies),
                            round(times.slowest * 1000, 1), times.errors[:5])
    finally:
        instance.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1000,4000,20000")
    parser.add_argument("--rate", type=int, default=-1, help="controller.mutation.rate (-1: unlimited)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    figures = []
    with tempfile.TemporaryDirectory(prefix="rmqk-flood-") as tmp:
        for count in (int(c) for c in args.counts.split(",")):
            result = measure(Path(tmp), count, args.rate)
            figures.append(result)
            print(f"{count:>7} topics: answered in {result.answer_seconds:6.2f} s, {result.created} created, "
                  f"{result.other_errors} refused; other client: {result.producer_requests} produces, "
                  f"slowest {result.producer_slowest_ms} ms, errors {result.producer_errors}")
    if args.json:
        args.json.write_text(json.dumps([asdict(f) for f in figures], indent=2))


if __name__ == "__main__":
    main()
