"""The console's dead-letter resend (adapter.console_api.ConsoleApi.resend) runs a child
process per request: how many run at once is bounded before one is started. Before, every
POST started one (a Python process of some 50 MB, for up to 60 s), as many as clients sent.

The child is faked: it finishes when the test says so."""

from __future__ import annotations

import asyncio
import json

from rmqkafka.adapter import console_api
from rmqkafka.adapter.console_api import ConsoleApi


def test_one_resend_runs_at_a_time_and_another_meanwhile_is_refused(monkeypatch) -> None:
    started: list[tuple[str, ...]] = []
    finish = asyncio.Event

    async def scenario() -> tuple[list, tuple]:
        release = finish()

        class Child:
            returncode = 0

            async def communicate(self) -> tuple[bytes, bytes]:
                await release.wait()
                return json.dumps({"resent": [{"sent": True}]}).encode(), b""

        async def spawn(*argv, **_):
            started.append(argv)
            return Child()

        monkeypatch.setattr(console_api.asyncio, "create_subprocess_exec", spawn)
        api = ConsoleApi(lambda: None, lambda: "127.0.0.1:9092")
        first = asyncio.create_task(api.resend("a"))
        while not started:
            await asyncio.sleep(0)
        during = [await asyncio.wait_for(api.resend(group), 30) for group in ("b", "c")]  # not queued
        release.set()
        after_first = await first
        return during, (after_first, await api.resend("d"))

    during, (first, later) = asyncio.run(scenario())
    assert [status for status, _ in during] == [429, 429]
    assert "already running" in during[0][1]["error"]
    assert first[0] == 200 and first[1]["resent"] == 1
    assert later[0] == 200  # the place is free again once the first finished
    assert [argv[-1] for argv in started] == ["a", "d"]


def test_one_resend_sends_a_bounded_number_of_dead_letters(monkeypatch) -> None:
    """What one click costs is bounded: the child resends at most RESEND_LIMIT records (its
    memory and its --json answer, read whole by the broker, grow with them); the next click
    goes on from the position. Before, a group's every dead letter went in one run."""
    started: list[tuple[str, ...]] = []

    class Child:
        returncode = 0

        async def communicate(self) -> tuple[bytes, bytes]:
            return b"{}", b""

    async def spawn(*argv, **_):
        started.append(argv)
        return Child()

    monkeypatch.setattr(console_api.asyncio, "create_subprocess_exec", spawn)
    status, _ = asyncio.run(ConsoleApi(lambda: None, lambda: "127.0.0.1:9092").resend("g"))
    [argv] = started
    assert status == 200
    assert argv[argv.index("--limit") + 1] == str(console_api.RESEND_LIMIT) and argv.index("--limit") < argv.index("--")
    assert 0 < console_api.RESEND_LIMIT <= 10_000
