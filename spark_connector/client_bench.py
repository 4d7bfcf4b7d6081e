"""Which Kafka client should executors read with?  ``python -m rmqkafka.spark_connector.client_bench``

The executor's job (what ``read()`` does for one Spark partition): assign one
topic-partition, seek to ``start``, poll until ``end``, and collect every record's key,
value, offset, timestamp and headers into columns. This script produces ``--records``
(default 200000) records of ``--size`` (default 100) bytes to a one-partition topic on a
fresh :class:`rmqkafka.adapter.embedded.EmbeddedBroker` and times exactly that job with
confluent-kafka (librdkafka), aiokafka and kafka-python, best of ``--rounds`` runs each.

The last line, "rmqkafka task", is the data source's own executor read
(:func:`rmqkafka.spark_connector.range_read.read_range`: confluent-kafka plus building Arrow
record batches with headers). It is a measurement, not a test: numbers vary by 10-20 % on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections.abc import Callable

TOPIC = "client-bench"


def _produce(bootstrap: str, count: int, size: int) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1)])[TOPIC].result()
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20}
    )
    value = os.urandom(size)
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, key=b"%08d" % i, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush()


def _columns() -> tuple[list, list, list, list, list]:
    return [], [], [], [], []


def read_confluent(bootstrap: str, start: int, end: int) -> int:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "client-bench",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "queued.min.messages": 1_000_000,  # prefetch: the default (100k) stalls the loop
        }
    )
    keys, values, offsets, stamps, headers = _columns()
    try:
        consumer.assign([TopicPartition(TOPIC, 0, start)])
        done = False
        while not done:
            for msg in consumer.consume(10000, 1.0):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        done = (msg.offset() or 0) >= end
                        continue
                    raise RuntimeError(str(err))
                off = msg.offset() or 0
                if off >= end:
                    done = True
                    break
                keys.append(msg.key())
                values.append(msg.value())
                offsets.append(off)
                stamps.append(msg.timestamp()[1])
                headers.append(msg.headers())
                if off == end - 1:
                    done = True
                    break
    finally:
        consumer.close()
    return len(offsets)


def read_aiokafka(bootstrap: str, start: int, end: int) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> int:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            enable_auto_commit=False,
            auto_offset_reset="none",
            max_partition_fetch_bytes=16 << 20,
            fetch_max_bytes=64 << 20,
        )
        await consumer.start()
        keys, values, offsets, stamps, headers = _columns()
        tp = TopicPartition(TOPIC, 0)
        try:
            consumer.assign([tp])
            consumer.seek(tp, start)
            while not offsets or offsets[-1] < end - 1:
                batch = await consumer.getmany(tp, timeout_ms=1000, max_records=50000)
                for rec in batch.get(tp, ()):
                    if rec.offset >= end:
                        break
                    keys.append(rec.key)
                    values.append(rec.value)
                    offsets.append(rec.offset)
                    stamps.append(rec.timestamp)
                    headers.append(rec.headers)
        finally:
            await consumer.stop()
        return len(offsets)

    return asyncio.run(run())


def read_kafka_python(bootstrap: str, start: int, end: int) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        auto_offset_reset="none",
        max_partition_fetch_bytes=16 << 20,
        fetch_max_bytes=64 << 20,
        max_poll_records=50000,
    )
    keys, values, offsets, stamps, headers = _columns()
    tp = TopicPartition(TOPIC, 0)
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        while not offsets or offsets[-1] < end - 1:
            for rec in consumer.poll(timeout_ms=1000).get(tp, ()):
                if rec.offset >= end:
                    break
                keys.append(rec.key)
                values.append(rec.value)
                offsets.append(rec.offset)
                stamps.append(rec.timestamp)
                headers.append(rec.headers)
    finally:
        consumer.close()
    return len(offsets)


def read_data_source(bootstrap: str, start: int, end: int) -> int:
    """What an rmqkafka executor task runs: confluent-kafka plus Arrow batch building."""
    from .offsets import OffsetRange
    from .options import ClientOptions
    from .range_read import read_range
    from .schema import arrow_schema, spark_schema

    batches = read_range(
        ClientOptions(bootstrap),
        OffsetRange(TOPIC, 0, start, end),
        arrow_schema(spark_schema(True)),
        include_headers=True,
        fail_on_data_loss=True,
        group_id="client-bench",
        poll_timeout_ms=30_000,
    )
    return sum(batch.num_rows for batch in batches)


CLIENTS: dict[str, Callable[[str, int, int], int]] = {
    "confluent-kafka": read_confluent,
    "aiokafka": read_aiokafka,
    "kafka-python": read_kafka_python,
    "rmqkafka task": read_data_source,  # the chosen client inside the data source
}


def main(argv: list[str] | None = None) -> None:
    from rmqkafka.adapter.embedded import EmbeddedBroker

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    with EmbeddedBroker() as broker:
        _produce(broker.bootstrap_servers, args.records, args.size)
        print(f"{args.records} records x {args.size} B, one partition, best of {args.rounds}")
        print(f"{'client':<16}{'seconds':>10}{'records/s':>14}")
        for name, read in CLIENTS.items():
            best = float("inf")
            for _ in range(args.rounds):
                began = time.perf_counter()
                got = read(broker.bootstrap_servers, 0, args.records)
                best = min(best, time.perf_counter() - began)
                if got != args.records:
                    raise SystemExit(f"{name} read {got} records, expected {args.records}")
            print(f"{name:<16}{best:>10.3f}{args.records / best:>14.0f}")


if __name__ == "__main__":
    main()
