"""Long polling: a waiting Fetch sleeps until an append to one of its partitions wakes it.

This is RocketMQ's PullRequestHoldService + MessageArrivingListener in Kafka terms: the store
calls ``notify`` after every append, and nothing polls on a timer.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], set[asyncio.Event]] = defaultdict(set)

    def notify(self, topic: str, partition: int) -> None:
        events = self._waiting.pop((topic, partition), None)
        if events:
            for event in events:
                event.set()

    async def wait(self, partitions: list[tuple[str, int]], timeout: float) -> bool:
        """Wait until any of ``partitions`` gets an append; False on timeout."""
        event = asyncio.Event()
        for key in partitions:
            self._waiting[key].add(event)
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for key in partitions:
                waiters = self._waiting.get(key)
                if waiters is not None:
                    waiters.discard(event)
                    if not waiters:
                        del self._waiting[key]
