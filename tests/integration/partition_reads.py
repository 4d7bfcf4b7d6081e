"""Reading partition 0 of a topic with kafka-python or aiokafka, bounded in time.

Each reader assigns the partition (no group), positions it at ``start`` (None: the
beginning, as the client's seek_to_beginning finds it), asks for the high watermark, and
polls until ``done(records, high)`` holds or ``timeout`` seconds have passed; it returns
the client's own records (``.offset``, ``.key``, ``.value``) for the test to judge.
``config`` goes to the client's consumer as it is (``auto_offset_reset`` for a start below
the log start, for instance).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

Done = Callable[[list[Any], int], bool]


def up_to_the_high_watermark(records: list[Any], high: int) -> bool:
    return bool(records) and records[-1].offset >= high - 1


def at_least(count: int) -> Done:
    return lambda records, _high: len(records) >= count


def read_kafka_python(bootstrap: str, topic: str, done: Done = up_to_the_high_watermark, *,
                      start: int | None = None, timeout: float = 60, **config: Any) -> list[Any]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **config)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        if start is None:
            consumer.seek_to_beginning(tp)
        else:
            consumer.seek(tp, start)
        high = consumer.end_offsets([tp])[tp]
        records: list[Any] = []
        deadline = time.monotonic() + timeout
        while not done(records, high) and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                records.extend(batch)
        return records
    finally:
        consumer.close()


def read_aiokafka(bootstrap: str, topic: str, done: Done = up_to_the_high_watermark, *,
                  start: int | None = None, timeout: float = 60, **config: Any) -> list[Any]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def read() -> list[Any]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, **config)
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            if start is None:
                await consumer.seek_to_beginning(tp)
            else:
                consumer.seek(tp, start)
            high = (await consumer.end_offsets([tp]))[tp]
            records: list[Any] = []
            deadline = time.monotonic() + timeout
            while not done(records, high) and time.monotonic() < deadline:
                for batch in (await consumer.getmany(tp, timeout_ms=1000)).values():
                    records.extend(batch)
            return records
        finally:
            await consumer.stop()

    return asyncio.run(read())
