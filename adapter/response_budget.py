"""A broker-wide bound on Fetch response bytes that sockets have not taken yet.

Each connection already builds one Fetch at a time and only once its socket has drained
(adapter.connection). Across connections, this budget adds the rest: a Fetch response
handed to a socket that could not send it at once counts against ``response.buffer.max.bytes``
until that socket drains (or closes), and no connection starts building a Fetch while the
count is at or above the limit. Many clients that pipeline large fetches and read slowly then
cost at most about the limit plus one response each being built, not a response per client.
"""

from __future__ import annotations

import asyncio


class ResponseBudget:
    def __init__(self, limit_bytes: int) -> None:
        self.limit = limit_bytes
        self.outstanding = 0
        self._freed = asyncio.Event()

    async def turn(self) -> None:
        """Wait until a new Fetch response may be built."""
        while self.outstanding >= self.limit:
            self._freed.clear()
            await self._freed.wait()

    def hold(self, size: int) -> None:
        self.outstanding += size

    def release(self, size: int) -> None:
        self.outstanding -= size
        self._freed.set()
