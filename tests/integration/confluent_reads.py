"""Reading records with confluent-kafka in the integration tests, bounded in time.

A loaded two-core machine makes any fixed number of polls a flaky test, so every read here
polls until it has what it wants or its deadline passed, and says how much it got: the test
asserts on that. Events that are errors (partition EOF, a transient refusal) are not
records and are passed over.
"""

from __future__ import annotations

import time
from typing import Any


def poll_records(consumer: Any, count: int, timeout: float, poll_s: float = 1.0) -> list[Any]:
    """The records ``consumer`` returns until there are ``count`` of them or ``timeout``
    seconds have passed (then fewer)."""
    records: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        message = consumer.poll(poll_s)
        if message is not None and message.error() is None:
            records.append(message)
    return records


def read_and_commit(bootstrap: str, topic: str, group: str, count: int, timeout: float = 60.0) -> int:
    """A new member of ``group`` reads ``topic`` from the earliest offset until it has read
    ``count`` records (or ``timeout`` passed), commits what it read synchronously and
    leaves; how many it read."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    try:
        read = len(poll_records(consumer, count, timeout))
        if read:  # a commit with nothing read fails: the caller's assertion on the count says more
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return read
