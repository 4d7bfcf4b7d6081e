"""Incremental reconciliation of one consumer-protocol member (Kafka's CurrentAssignmentBuilder).

A member moves towards its target assignment in steps that never let two members own a
partition:

1. partitions it must give up are revoked first: it keeps its epoch and only the partitions
   it may keep (UNREVOKED_PARTITIONS) until a heartbeat's owned partitions no longer list
   any revoked one;
2. then it takes the target epoch and every partition of its target that no other member
   still owns; partitions still owned elsewhere wait (UNRELEASED_PARTITIONS) and are handed
   over at a later heartbeat, once their owner has released them.

Assignments are ``{topic id: frozenset(partitions)}``. ``owner_epoch(topic id, partition)``
tells whether a partition is owned (assigned or pending revocation) by any member (-1: free).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

TopicPartitions = dict[uuid.UUID, frozenset[int]]


class MemberState(enum.Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


@dataclass(frozen=True, slots=True)
class Reconciled:
    state: MemberState
    epoch: int
    assigned: TopicPartitions
    pending_revocation: TopicPartitions = field(default_factory=dict)


def reconcile(
    *,
    state: MemberState,
    epoch: int,
    assigned: Mapping[uuid.UUID, frozenset[int]],
    pending_revocation: Mapping[uuid.UUID, frozenset[int]],
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    subscribed: frozenset[uuid.UUID],
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
    owner_epoch: Callable[[uuid.UUID, int], int],
) -> Reconciled:
    """The member's next step; ``owned`` is what its heartbeat reported (None: not sent)."""
    current = Reconciled(state, epoch, dict(assigned), dict(pending_revocation))
    if state is MemberState.STABLE:
        if epoch == target_epoch:
            return current
    elif state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, pending_revocation):
            return current
    return _next(current, target_epoch, target, subscribed, owned, owner_epoch)


def _next(member: Reconciled, target_epoch: int, target: Mapping[uuid.UUID, frozenset[int]],
          subscribed: frozenset[uuid.UUID], owned: Mapping[uuid.UUID, frozenset[int]] | None,
          owner_epoch: Callable[[uuid.UUID, int], int]) -> Reconciled:
    unreleased = False
    new_assigned: TopicPartitions = {}
    revoking: TopicPartitions = {}
    pending_assignment: TopicPartitions = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, frozenset())
        keep = current & wanted
        revoke = current - keep
        mine_pending = member.pending_revocation.get(topic_id, frozenset())
        missing = set()
        for p in wanted - keep:
            # Still owned by another member (not our own pending revocation): wait for it.
            if owner_epoch(topic_id, p) != -1 and p not in mine_pending:
                unreleased = True
            else:
                missing.add(p)
        if keep:
            new_assigned[topic_id] = keep
        if revoke:
            revoking[topic_id] = revoke
        if missing:
            pending_assignment[topic_id] = frozenset(missing)
    if revoking and _owns_any(owned, revoking):
        return Reconciled(MemberState.UNREVOKED_PARTITIONS, member.epoch, new_assigned, revoking)
    for topic_id, partitions in pending_assignment.items():
        new_assigned[topic_id] = new_assigned.get(topic_id, frozenset()) | partitions
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Reconciled(state, target_epoch, new_assigned, {})


def _owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None,
              partitions: Mapping[uuid.UUID, frozenset[int]]) -> bool:
    """Whether the member may still hold one of ``partitions``: an absent owned list
    proves nothing, so it counts as holding them."""
    if owned is None:
        return True
    return any(owned.get(topic_id, frozenset()) & ps for topic_id, ps in partitions.items())
