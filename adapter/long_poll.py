"""Long polling: a waiting Fetch sleeps until an append to one of its partitions wakes it.

This is RocketMQ's PullRequestHoldService + MessageArrivingListener in Kafka terms: the store
calls ``notify`` after every append, and nothing polls on a timer.

A fetch on a view waits on the view's source partition with a test of the append (the
semantics layer's ``arrivals``): it is woken only by an append holding a record of the view,
so a busy source whose records the view filters out does not make it read again and again.
The test runs only for the waiters of the appended partition; an append nobody waits for
costs one dict lookup.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

Wanted = Callable[[Any], bool] | None  # a test of the append; None: any append
WaitKey = tuple[str, int, Wanted]


class FetchWaiters:
    def __init__(self) -> None:
        self._waiting: dict[tuple[str, int], dict[asyncio.Event, Wanted]] = defaultdict(dict)

    def notify(self, topic: str, partition: int, appended: Any = None) -> None:
        waiters = self._waiting.get((topic, partition))
        if not waiters:
            return
        for event, wanted in list(waiters.items()):
            if wanted is None or appended is None or _wants(wanted, appended):
                del waiters[event]
                event.set()
        if not waiters:
            del self._waiting[(topic, partition)]

    async def wait(self, partitions: list[WaitKey], timeout: float) -> bool:
        """Wait until an append to any of ``partitions`` passes its test; False on timeout."""
        event = asyncio.Event()
        for topic, partition, wanted in partitions:
            waiters = self._waiting[(topic, partition)]
            if event in waiters and (waiters[event] is None or wanted is None):
                waiters[event] = None  # the same partition asked for plainly and through a view
            elif event in waiters:
                waiters[event] = _either(waiters[event], wanted)
            else:
                waiters[event] = wanted
        try:
            await asyncio.wait_for(event.wait(), timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for topic, partition, _ in partitions:
                waiters = self._waiting.get((topic, partition))
                if waiters is not None:
                    waiters.pop(event, None)
                    if not waiters:
                        del self._waiting[(topic, partition)]


def _wants(wanted: Callable[[Any], bool], appended: Any) -> bool:
    try:
        return wanted(appended)
    except Exception:  # a test that fails must not lose a wake-up, nor the append
        log.exception("append test of a waiting fetch failed; waking it")
        return True


def _either(first: Callable[[Any], bool], second: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda appended: first(appended) or second(appended)
