"""Writing a response's parts to a plaintext socket without joining or buffering them.

asyncio's selector transport (Python 3.11) writes a list of parts by joining them into one
bytes object, then copying what the kernel did not take into its buffer and moving that
buffer's rest down after each send: a Fetch response of several MB is copied two or three
times before its last byte leaves (py-spy: 23-30 % of the broker's samples under a consume
load, in ``WriteTransport.writelines``). Here the parts go to the kernel in place
(``os.writev``, scatter-gather) whenever the transport's own buffer is empty; when the socket
is full, the transport is handed only a small head of the rest (``split_head``), so that it
waits for the socket and says when it has drained (the caller's ``resume_writing``), and the
rest goes in place again. The transport and this module never hold bytes at the same time,
so the bytes leave in order.

Only for a plaintext socket: a TLS transport encrypts, so its raw socket must never be
written to directly.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

# Linux's IOV_MAX; a longer list is written in several calls
_MAX_PARTS = 1024
# what the transport is handed to wait on a full socket: copied once, sent on its next turn
HANDOFF_BYTES = 16 << 10


def write_now(fd: int, parts: Sequence[bytes | bytearray | memoryview]) -> list:
    """Write as much of ``parts`` to the non-blocking socket ``fd`` as it takes now; the rest.
    An error other than a full socket stops here too: the transport, handed the rest, meets
    it and reports it as it does for its own writes (closing the connection)."""
    rest = list(parts)
    while rest:
        try:
            sent = os.writev(fd, rest[:_MAX_PARTS])
        except OSError:  # BlockingIOError (full) included
            return rest
        rest = _after(rest, sent)
    return rest


def split_head(parts: list, limit: int = HANDOFF_BYTES) -> tuple[list, list]:
    """The first at most ``limit`` bytes of ``parts`` (at least one byte), and the rest."""
    head: list = []
    for i, part in enumerate(parts):
        view = memoryview(part)
        if view.nbytes >= limit:
            head.append(view[:limit])
            rest = [view[limit:]] if view.nbytes > limit else []
            return head, rest + list(parts[i + 1:])
        head.append(part)
        limit -= view.nbytes
    return head, []


def _after(parts: list, sent: int) -> list:
    """``parts`` less their first ``sent`` bytes."""
    for i, part in enumerate(parts):
        size = memoryview(part).nbytes
        if sent < size:
            return [memoryview(part)[sent:], *parts[i + 1:]] if sent else parts[i:]
        sent -= size
    return []
