"""One consumer group's membership and its rebalance state machine (Kafka's classic protocol).

States follow Kafka's GroupMetadata: Empty -> PreparingRebalance (members (re)join) ->
CompletingRebalance (the leader computes assignments; members wait in SyncGroup) -> Stable
(members heartbeat) -> back to PreparingRebalance on any membership change. The broker never
interprets protocol metadata or assignments: any client-side assignor works (range,
roundrobin, sticky, cooperative-sticky, whose incremental rebalances are just two rounds).

A group holds asyncio futures for the JoinGroup and SyncGroup requests that are waiting; it
is driven by ``GroupCoordinator``, which owns the clock and the timers.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    last_seen: float  # clock.monotonic() of the last join, sync or heartbeat
    assignment: bytes = b""
    join_waiter: asyncio.Future | None = None
    sync_waiter: asyncio.Future | None = None

    @property
    def awaiting_rebalance(self) -> bool:
        """Parked in JoinGroup or SyncGroup: Kafka counts that wait as heartbeats."""
        return any(w is not None and not w.done() for w in (self.join_waiter, self.sync_waiter))

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    # Member ids handed out with MEMBER_ID_REQUIRED, not yet joined: id -> deadline.
    pending_members: dict[str, float] = field(default_factory=dict)
    rebalance_deadline: float = 0.0
    join_not_before: float = 0.0  # group.initial.rebalance.delay for a group starting empty
    # Members of this generation that have not sent SyncGroup yet, and when they must have:
    # Kafka removes them then (its pending-sync timeout, the rebalance timeout).
    pending_sync: set[str] = field(default_factory=set)
    sync_deadline: float = 0.0
    # Whether this id was a consumer-protocol group earlier in this run (replaced, or
    # downgraded): its consumer-protocol members are then known to be gone.
    was_consumer_group: bool = False

    def all_rejoined(self) -> bool:
        return all(m.join_waiter is not None for m in self.members.values()) and not self.pending_members

    def select_protocol(self) -> str:
        """The protocol every member supports, by Kafka's vote: each member votes for the
        first of its protocols that all members support."""
        candidates = set.intersection(*(set(m.protocol_names()) for m in self.members.values()))
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = next(name for name in member.protocol_names() if name in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(sorted(votes), key=lambda name: votes[name])

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Whether a member with these protocols may join (same type, a protocol in common)."""
        if not self.members:
            return bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        names = {name for name, _ in protocols}
        common = set.intersection(*(set(m.protocol_names()) for m in self.members.values()))
        return bool(names & common)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
