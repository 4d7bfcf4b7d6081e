"""The connections an HTTP port (adapter.http_server) holds, and which one goes when it is full.

A held connection is either *waiting on its client* (its request is still arriving, or its
answer is still being taken) or *busy* (the handler is computing its answer: waiting on us).
A client decides how long it keeps a connection waiting, so waiting connections are the ones
given up when a new client comes:

- At most ``max_connections`` are held, and at most ``max_per_peer`` from one address.
- A new connection from a peer at its own cap takes the place of that peer's oldest waiting
  connection: a flood from one address displaces only its own connections, never another
  client's. Otherwise, when the port is full, it takes the place of the oldest waiting
  connection of any peer.
- A new connection is refused only when every place it could take is busy.

So a new client is always answered while slow ones hold the port (its head must arrive before
``max_connections`` newer connections displace it), and what slow clients cost stays bounded
by the caps whatever their number: a displaced connection is dropped at once (its ``drop``
callback aborts the socket). "Oldest" is by when the connection started waiting: order of
insertion, no clock. The table is used from one event loop only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(eq=False, slots=True)
class Held:
    """One held connection: its peer's address and how to drop it."""

    peer: str
    drop: Callable[[], None] = field(repr=False)


class ConnectionTable:
    def __init__(self, max_connections: int, max_per_peer: int) -> None:
        if max_connections < 1 or max_per_peer < 1:
            raise ValueError("the caps must be at least 1")
        self.max_connections = max_connections
        self.max_per_peer = min(max_per_peer, max_connections)
        self._held: set[Held] = set()
        self._waiting: dict[Held, None] = {}  # insertion order: oldest first
        self._per_peer: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._held)

    def held_by(self, peer: str) -> int:
        return self._per_peer.get(peer, 0)

    def admit(self, peer: str, drop: Callable[[], None]) -> Held | None:
        """A place for a new connection from ``peer`` (waiting on its client), displacing a
        waiting one if needed; None when the port is full of busy connections."""
        if self.held_by(peer) >= self.max_per_peer:
            candidates = (held for held in self._waiting if held.peer == peer)
        elif len(self._held) >= self.max_connections:
            candidates = iter(self._waiting)
        else:
            candidates = None
        if candidates is not None:
            victim = next(candidates, None)
            if victim is None:
                return None
            self.release(victim)
            victim.drop()
        held = Held(peer, drop)
        self._held.add(held)
        self._per_peer[peer] = self.held_by(peer) + 1
        self._waiting[held] = None
        return held

    def busy(self, held: Held) -> None:
        """The client's part is done for now: the connection may not be displaced."""
        self._waiting.pop(held, None)

    def waiting(self, held: Held) -> None:
        """The connection waits on its client again (from now: the newest waiting)."""
        if held in self._held:
            self._waiting.pop(held, None)
            self._waiting[held] = None

    def release(self, held: Held) -> None:
        """The connection is closed; releasing one already displaced does nothing."""
        if held not in self._held:
            return
        self._held.discard(held)
        self._waiting.pop(held, None)
        left = self._per_peer[held.peer] - 1
        if left:
            self._per_peer[held.peer] = left
        else:
            del self._per_peer[held.peer]
