"""adapter.http_connections: which held connection a new one displaces, and when it is refused."""

from __future__ import annotations

import pytest

from rmqkafka.adapter.http_connections import ConnectionTable, Held


class Port:
    """A table and what it dropped, by name."""

    def __init__(self, max_connections: int, max_per_peer: int) -> None:
        self.table = ConnectionTable(max_connections, max_per_peer)
        self.dropped: list[str] = []

    def admit(self, peer: str, name: str) -> Held | None:
        return self.table.admit(peer, lambda: self.dropped.append(name))


def test_a_full_port_drops_the_oldest_waiting_connection_not_the_new_one() -> None:
    port = Port(3, 3)
    a, b, c = (port.admit("p", name) for name in "abc")
    assert port.admit("p", "d") is not None
    assert port.dropped == ["a"] and len(port.table) == 3
    port.table.release(a)  # its own close after the drop: nothing more happens
    assert len(port.table) == 3 and port.table.held_by("p") == 3


def test_busy_connections_are_never_dropped_and_waiting_again_makes_one_the_newest() -> None:
    port = Port(3, 3)
    a, b, c = (port.admit("p", name) for name in "abc")
    port.table.busy(a)
    port.table.busy(b)
    port.table.waiting(b)  # b's answer drains now: waiting on its client, since after c
    d = port.admit("p", "d")
    assert d is not None and port.dropped == ["c"]
    e = port.admit("p", "e")
    assert e is not None and port.dropped == ["c", "b"]
    for held in (d, e):  # a is busy still: every place is
        port.table.busy(held)
    assert port.admit("p", "f") is None  # refused: nothing to displace
    assert port.dropped == ["c", "b"] and len(port.table) == 3


def test_a_peer_at_its_cap_displaces_its_own_oldest_even_when_anothers_is_older() -> None:
    port = Port(10, 2)
    port.admit("other", "o")
    port.admit("flood", "f1")
    port.admit("flood", "f2")
    assert port.admit("flood", "f3") is not None
    assert port.dropped == ["f1"]
    assert port.table.held_by("flood") == 2 and port.table.held_by("other") == 1


def test_a_peer_at_its_cap_with_every_connection_busy_is_refused_though_the_port_has_room() -> None:
    port = Port(10, 2)
    for name in ("f1", "f2"):
        port.table.busy(port.admit("flood", name))
    assert port.admit("flood", "f3") is None
    assert port.admit("other", "o") is not None and port.dropped == []


def test_release_forgets_the_peer_and_bad_caps_are_refused() -> None:
    port = Port(2, 5)  # the per-peer cap is at most the port's
    assert port.table.max_per_peer == 2
    held = port.admit("p", "a")
    port.table.release(held)
    port.table.release(held)
    assert len(port.table) == 0 and port.table.held_by("p") == 0
    with pytest.raises(ValueError):
        ConnectionTable(0, 1)
