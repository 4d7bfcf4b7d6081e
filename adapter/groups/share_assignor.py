"""The share groups' server-side assignor: Kafka's ``simple`` (KIP-932).

Unlike a consumer group's assignors, many members may own one partition: records of a
share-partition are handed out one acquisition at a time, so sharing a partition is safe
and is how a group with more members than partitions keeps every member busy.

The rules, as Kafka's SimpleHomogeneousAssignmentBuilder and
SimpleHeterogeneousAssignmentBuilder apply them:

- Every partition of a subscribed topic is assigned (while the topic has a subscriber).
- Sharing: with M members and P partitions each partition goes to ``ceil(M / P)`` members
  (one when there are at least as many partitions as members), so there are
  ``ceil(M / P) * P`` assignments in all, spread over the members so that two members'
  counts differ by at most one.
- Balance before stickiness: a member keeps what it had as far as the counts above allow;
  only the rest moves.
- When every member subscribes to the same topics, all their partitions form one pool;
  otherwise each topic is balanced on its own among its subscribers (a member subscribed to
  two topics gets its share of each).

It is a pure function of the members' subscriptions (topic ids that exist now), the
partition counts and the previous target assignment.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Mapping

TopicPartitions = Mapping[uuid.UUID, frozenset[int]]
Slot = tuple[uuid.UUID, int]


def simple(subscriptions: Mapping[str, frozenset[uuid.UUID]], partitions: Mapping[uuid.UUID, int],
           previous: Mapping[str, TopicPartitions]) -> dict[str, dict[uuid.UUID, frozenset[int]]]:
    """Member id -> topic id -> partitions. ``subscriptions``: member id -> subscribed topic
    ids; ``partitions``: topic id -> partition count (a topic missing here does not exist);
    ``previous``: the previous target assignment."""
    subscribed = {m: frozenset(t for t in topics if t in partitions) for m, topics in subscriptions.items()}
    kept = {m: {(t, p) for t, ps in previous.get(m, {}).items() for p in ps} for m in subscribed}
    result: dict[str, set[Slot]] = {m: set() for m in subscribed}
    topics = sorted(set().union(*subscribed.values()), key=str)
    if len(set(subscribed.values())) <= 1:
        pools = [(sorted(subscribed), [(t, p) for t in topics for p in range(partitions[t])])]
    else:
        pools = [(sorted(m for m, subscribed_to in subscribed.items() if t in subscribed_to),
                  [(t, p) for p in range(partitions[t])]) for t in topics]
    for members, slots in pools:
        for member, owned in _share_pool(members, slots, kept).items():
            result[member] |= owned
    return {m: _by_topic(slots) for m, slots in result.items()}


def _share_pool(members: list[str], slots: list[Slot], previous: Mapping[str, set[Slot]]) -> dict[str, set[Slot]]:
    """Assign ``slots`` to ``members`` (both in a stable order) with the sharing and balance
    rules of the module docstring, keeping as much of ``previous`` as they allow.

    Work is O(assignments + members + slots) apart from the rare last pass: slots are handled
    by their index in ``slots``, members with room to fill wait in a round-robin queue."""
    result: dict[str, set[Slot]] = {m: set() for m in members}
    if not members or not slots:
        return result
    sharing = -(-len(members) // len(slots))
    total = sharing * len(slots)
    index = {slot: i for i, slot in enumerate(slots)}
    held = {m: sorted(index[s] for s in previous.get(m, ()) if s in index) for m in members}
    # The larger quotas go to the members that held the most, so fewer partitions move.
    order = sorted(members, key=lambda m: (-len(held[m]), m))
    quota = {m: -(-total * (i + 1) // len(members)) - -(-total * i // len(members)) for i, m in enumerate(order)}
    owned: dict[str, set[int]] = {m: set() for m in members}
    owners: list[set[str]] = [set() for _ in slots]

    def give(member: str, i: int) -> None:
        owned[member].add(i)
        owners[i].add(member)

    for member in order:
        for i in held[member]:
            if len(owned[member]) < quota[member] and len(owners[i]) < sharing:
                give(member, i)
    with_room = deque(m for m in order if len(owned[m]) < quota[m])
    for i in sorted(range(len(slots)), key=lambda i: len(owners[i])):
        skipped = 0
        while len(owners[i]) < sharing and with_room and skipped < len(with_room):
            member = with_room.popleft()
            if member in owners[i]:
                with_room.append(member)
                skipped += 1
                continue
            give(member, i)
            skipped = 0
            if len(owned[member]) < quota[member]:
                with_room.append(member)
    # What the round-robin could not place (every member with room already owned the slots
    # still short of sharers) goes to the least shared slots the member lacks.
    for member in with_room:
        while len(owned[member]) < quota[member]:
            free = [i for i in range(len(slots)) if member not in owners[i]]
            if not free:
                break
            give(member, min(free, key=lambda i: len(owners[i])))
    return {m: {slots[i] for i in owned[m]} for m in members}


def _by_topic(slots: set[Slot]) -> dict[uuid.UUID, frozenset[int]]:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic_id, p in slots:
        by_topic.setdefault(topic_id, set()).add(p)
    return {t: frozenset(ps) for t, ps in by_topic.items()}
