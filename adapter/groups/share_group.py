"""One share group (KIP-932): its members, epochs and target assignment.

A share group has no reconciliation: nobody must give a partition up before another member
may read it (records, not partitions, are what a member holds), so a member's assignment is
its target assignment as soon as it heartbeats, and its member epoch is then the assignment
epoch. The group epoch moves on every change that may change the assignment (a member
joins, leaves or changes its subscription; a subscribed topic appears, disappears or grows);
the target is recomputed at the next heartbeat after it moved.

States, as Kafka names them: Empty (no members), Stable (members), Dead (deleted).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field

from .share_assignor import TopicPartitions

LEAVE_EPOCH = -1
PROTOCOL_TYPE = "share"  # ListGroups' ProtocolType of share groups


class ShareGroupState(enum.Enum):
    EMPTY = "Empty"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class ShareMember:
    member_id: str
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_names: tuple[str, ...] = ()  # sorted
    epoch: int = 0
    previous_epoch: int = -1
    assigned: TopicPartitions = field(default_factory=dict)  # topic id -> partitions
    session_deadline: float = 0.0  # clock.monotonic() after which it is removed


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    target: dict[str, TopicPartitions] = field(default_factory=dict)  # member id -> target
    # Topic name -> (id, partition count) of every subscribed topic when the epoch was last
    # bumped: a difference on a later heartbeat (created, deleted, grown) bumps it again.
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    # Topic name -> how many members subscribe to it: a heartbeat costs the group's distinct
    # names, not every member's list.
    subscribers: dict[str, int] = field(default_factory=dict)
    dead: bool = False

    @property
    def state(self) -> ShareGroupState:
        if self.dead:
            return ShareGroupState.DEAD
        return ShareGroupState.STABLE if self.members else ShareGroupState.EMPTY

    def subscribed_names(self) -> set[str]:
        return set(self.subscribers)

    def set_subscription(self, member: ShareMember, names: tuple[str, ...]) -> None:
        """Replace ``member``'s subscribed names (sorted) and the group's counts."""
        for name in member.subscribed_names:
            left = self.subscribers[name] - 1
            if left:
                self.subscribers[name] = left
            else:
                del self.subscribers[name]
        member.subscribed_names = names
        for name in names:
            self.subscribers[name] = self.subscribers.get(name, 0) + 1
