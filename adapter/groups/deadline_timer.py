"""DeadlineTimer: one task that sleeps until the earliest deadline its owner reports, or until
it is woken, and then lets the owner act on what is due.

The owner gives two callables: ``next_deadline()`` (monotonic seconds, None when nothing is
pending) and ``tick()`` (act on every deadline that has passed). A change that makes a
deadline earlier than the one the task sleeps until calls ``deadline_set``; any other change
that matters calls ``wake``. So moving a deadline later (a heartbeat) costs no scan of every
member: the task finds the new deadline when it wakes at the old one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from rmqkafka.storage.clock import Clock


class DeadlineTimer:
    def __init__(self, clock: Clock, name: str, next_deadline: Callable[[], float | None],
                 tick: Callable[[], None]) -> None:
        self._clock = clock
        self._name = name
        self._next_deadline = next_deadline
        self._tick = tick
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._sleeping_until: float | None = None  # None: asleep with nothing pending

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=self._name)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None

    def wake(self) -> None:
        self._wakeup.set()

    def deadline_set(self, deadline: float) -> None:
        """A deadline was set or moved to ``deadline``: wake the task if it sleeps past it."""
        if self._sleeping_until is None or deadline < self._sleeping_until:
            self._wakeup.set()

    async def _run(self) -> None:
        while True:
            deadline = self._next_deadline()
            self._wakeup.clear()
            self._sleeping_until = deadline
            timeout = None if deadline is None else deadline - self._clock.monotonic()
            if timeout is None or timeout > 0:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                except TimeoutError:
                    pass
            self._tick()
