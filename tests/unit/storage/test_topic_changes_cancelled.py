"""A topic creation, partition increase or deletion under way finishes even when the request
that asked for it is cancelled (its client disconnected). Before, a Metadata auto-creation
cancelled while the metadata thread wrote the topic left its name reserved and never
served: every later Metadata for it answered TOPIC_ALREADY_EXISTS with no partitions, and a
librdkafka producer to that topic stalled until a restart."""

from __future__ import annotations

import asyncio
import threading

from rmqkafka.storage.errors import TopicExistsError


def slow_commits(store):
    """The topic registry's commit waits for ``release`` (it runs in the metadata thread)."""
    release, started = threading.Event(), threading.Event()
    commit = store.topics.commit

    def slow(*args, **kwargs):
        started.set()
        release.wait(10)
        return commit(*args, **kwargs)

    store.topics.commit = slow
    return release, started


async def wait_for(event: threading.Event) -> None:
    for _ in range(500):
        if event.is_set():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the metadata thread never started the commit")


async def cancelled_midway(store, call):
    release, started = slow_commits(store)
    task = asyncio.ensure_future(call)
    await wait_for(started)
    task.cancel()
    release.set()
    try:
        await task
    except asyncio.CancelledError:
        pass


async def test_a_creation_cancelled_while_it_is_written_is_served_afterwards(stores):
    store = stores.open()
    await cancelled_midway(store, store.create_topics([("orders", 2, {})]))
    await store.settled("orders")
    meta = store.topics.get("orders")
    assert meta is not None and meta.partitions == 2
    again = (await store.create_topics([("orders", 2, {})]))[0]
    assert isinstance(again, TopicExistsError)
    assert store.partition("orders", 1).next_offset == 0


async def test_a_partition_increase_cancelled_midway_takes_effect(stores):
    store = stores.open()
    await store.create_topics([("orders", 1, {})])
    await cancelled_midway(store, store.add_partitions_to([("orders", 3)]))
    await store.settled("orders")
    assert store.topics.get("orders").partitions == 3


async def test_a_deletion_cancelled_midway_deletes(stores):
    store = stores.open()
    await store.create_topics([("orders", 1, {})])
    await cancelled_midway(store, store.delete_topics(["orders"]))
    for _ in range(200):
        if store.topics.get("orders") is None and not store.topics.taken("orders"):
            break
        await asyncio.sleep(0.01)
    assert store.topics.get("orders") is None and not store.topics.taken("orders")
    assert not isinstance((await store.create_topics([("orders", 1, {})]))[0], Exception)
