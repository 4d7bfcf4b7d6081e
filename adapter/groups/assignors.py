"""Server-side assignors of the consumer group protocol (KIP-848): ``uniform`` and ``range``.

An assignor maps every member of a group to the partitions it should own (the group's
target assignment), from each member's subscribed topics (by topic id) and the previous
target assignment. It is a pure function: the coordinator runs it when the group epoch
moves past the assignment epoch, and reconciliation (``reconciliation.py``) moves members
towards its result.

- ``uniform`` (Kafka's default): balanced (two members' partition counts differ by at most
  one when they subscribe to the same topics; with different subscriptions, no partition
  could move to a member owning two fewer) and sticky (a member keeps every partition of
  its previous target that balance allows).
- ``range``: per topic, the subscribed members sorted by instance id (static members) or
  member id get contiguous ranges, the first ``partitions % members`` one more: members of
  the same subscription get the same partition numbers of co-partitioned topics.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

Assignment = Mapping[uuid.UUID, frozenset[int]]  # topic id -> partitions


@dataclass(frozen=True, slots=True)
class MemberSpec:
    """What an assignor knows of one member."""

    member_id: str
    instance_id: str | None
    subscribed: frozenset[uuid.UUID]  # topic ids that exist now
    previous: Assignment  # this member's previous target assignment

    @property
    def sort_key(self) -> str:
        return self.instance_id if self.instance_id is not None else self.member_id


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, int]], dict[str, dict[uuid.UUID, frozenset[int]]]]


def uniform(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Kafka's UniformAssignor: ``partitions`` is topic id -> partition count."""
    order = sorted(members.values(), key=lambda m: (m.sort_key, m.member_id))
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {m.member_id: set() for m in order}
    taken: set[tuple[uuid.UUID, int]] = set()
    # Stickiness: everything of the previous target that still exists and is subscribed.
    for member in order:
        for topic_id, previous in member.previous.items():
            count = partitions.get(topic_id)
            if count is None or topic_id not in member.subscribed:
                continue
            for p in previous:
                if p < count and (topic_id, p) not in taken:
                    taken.add((topic_id, p))
                    owned[member.member_id].add((topic_id, p))
    subscribers: dict[uuid.UUID, list[MemberSpec]] = {}
    for member in order:
        for topic_id in member.subscribed:
            if topic_id in partitions:
                subscribers.setdefault(topic_id, []).append(member)
    if len({frozenset(m.subscribed & partitions.keys()) for m in order}) == 1:
        _trim_to_quotas(order, owned, taken, sum(partitions[t] for t in subscribers))
    # Free partitions go to the least loaded subscriber, one at a time.
    for topic_id in sorted(subscribers, key=str):
        for p in range(partitions[topic_id]):
            if (topic_id, p) in taken:
                continue
            target = min(subscribers[topic_id], key=lambda m: (len(owned[m.member_id]), m.sort_key))
            owned[target.member_id].add((topic_id, p))
            taken.add((topic_id, p))
    _balance(order, owned, subscribers)
    return {member_id: _by_topic(tps) for member_id, tps in owned.items()}


def _trim_to_quotas(order: list[MemberSpec], owned: dict[str, set[tuple[uuid.UUID, int]]],
                    taken: set[tuple[uuid.UUID, int]], total: int) -> None:
    """Same subscriptions everywhere: each member keeps at most its quota (``total //
    members``, one more for the first ``total % members`` members that already have more)."""
    minimum, extra = divmod(total, len(order))
    for member in sorted(order, key=lambda m: (-len(owned[m.member_id]), m.sort_key)):
        mine = owned[member.member_id]
        quota = minimum
        if len(mine) > minimum and extra > 0:
            quota += 1
            extra -= 1
        for tp in sorted(mine, key=lambda tp: (str(tp[0]), tp[1]))[quota:]:
            mine.discard(tp)
            taken.discard(tp)


def _balance(order: list[MemberSpec], owned: dict[str, set[tuple[uuid.UUID, int]]],
             subscribers: dict[uuid.UUID, list[MemberSpec]]) -> None:
    """Move partitions from a member to a subscriber of theirs owning at least two fewer,
    until none can move. Each move lowers the sum of squared loads, so this ends."""
    moved = True
    while moved:
        moved = False
        for member in sorted(order, key=lambda m: -len(owned[m.member_id])):
            load = len(owned[member.member_id])
            for topic_id, p in sorted(owned[member.member_id], key=lambda tp: (str(tp[0]), -tp[1])):
                lighter = [m for m in subscribers[topic_id] if len(owned[m.member_id]) <= load - 2]
                if lighter:
                    target = min(lighter, key=lambda m: (len(owned[m.member_id]), m.sort_key))
                    owned[member.member_id].discard((topic_id, p))
                    owned[target.member_id].add((topic_id, p))
                    moved = True
                    break
            if moved:
                break


def range_assignor(members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Kafka's server-side RangeAssignor (co-partitioned contiguous ranges per topic)."""
    result: dict[str, dict[uuid.UUID, frozenset[int]]] = {member_id: {} for member_id in members}
    for topic_id, count in partitions.items():
        subscribed = sorted((m for m in members.values() if topic_id in m.subscribed),
                            key=lambda m: (m.sort_key, m.member_id))
        if not subscribed:
            continue
        per_member, extra = divmod(count, len(subscribed))
        start = 0
        for i, member in enumerate(subscribed):
            length = per_member + (1 if i < extra else 0)
            if length:
                result[member.member_id][topic_id] = frozenset(range(start, start + length))
            start += length
    return result


def _by_topic(tps: set[tuple[uuid.UUID, int]]) -> dict[uuid.UUID, frozenset[int]]:
    grouped: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in tps:
        grouped.setdefault(topic_id, set()).add(p)
    return {topic_id: frozenset(ps) for topic_id, ps in grouped.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform, "range": range_assignor}
# Kafka accepts the class names in group.consumer.assignors too.
CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}
