"""The share groups' coordinator (KIP-932): ShareGroupHeartbeat, its timers, and what the
share-partition side (ShareFetch, ShareAcknowledge) asks of membership.

Behaviour follows Kafka 4's GroupMetadataManager.shareGroupHeartbeat:

1. the request is checked (member id and group id not empty, SubscribedTopicNames non-empty
   on a join, epoch 0 joins, -1 leaves, anything below is INVALID_REQUEST);
2. the group is found or, on a join, created (an id of a classic or consumer group is
   GROUP_ID_NOT_FOUND); a group at ``group.share.max.size`` refuses new members
   (GROUP_MAX_SIZE_REACHED); the member is found (else UNKNOWN_MEMBER_ID) or created on a
   join, and its epoch checked (FENCED_MEMBER_EPOCH unless it is the current or the
   previous one: the answer that moved it on may have been lost);
3. a change of subscription, or of the subscribed topics (created, deleted, more
   partitions), bumps the group epoch, and the ``simple`` assignor (share_assignor.py)
   computes a new target for everyone;
4. there is no revocation handshake: the member's assignment becomes its target at once and
   its epoch the assignment epoch; the answer carries the assignment on a join and whenever
   it changed.

A member not heard from for its session timeout (group config ``share.session.timeout.ms``
over ``group.share.session.timeout.ms``) is removed, as is one that leaves (epoch -1); both
bump the group epoch and call ``on_member_left`` so that the share-partition side releases
what the member acquired and closes its share session. Deadlines are on the injected clock,
served by one timer task.

Membership is kept in memory only, as for consumer groups: after a restart a member's next
heartbeat gets UNKNOWN_MEMBER_ID and it joins again with epoch 0.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from rmqkafka.storage.clock import Clock

from .consumer_coordinator import HeartbeatAnswer, HeartbeatError, TopicCatalog
from .deadline_timer import DeadlineTimer
from .share_assignor import simple
from .share_group import LEAVE_EPOCH, ShareGroup, ShareGroupState, ShareMember

log = logging.getLogger(__name__)

ASSIGNOR_NAME = "simple"  # group.share.assignors: Kafka has this one


@dataclass(frozen=True, slots=True)
class ShareCoordinatorSettings:
    """Kafka's group.share.* membership settings."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200


@dataclass(frozen=True, slots=True)
class ShareHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_names: tuple[str, ...] | None = None  # None: unchanged since the last heartbeat


def _nothing(*args: object) -> None:
    return None


class ShareGroupCoordinator:
    def __init__(self, clock: Clock, settings: ShareCoordinatorSettings, catalog: TopicCatalog,
                 other_group_type: Callable[[str], str | None] = lambda group_id: None,
                 timeouts: Callable[[str], tuple[int, int]] | None = None,
                 on_member_left: Callable[[str, str], None] = _nothing,
                 on_group_deleted: Callable[[str], None] = _nothing) -> None:
        """``other_group_type(group id)``: "classic" or "consumer" when a group of that type
        has the id (None: none has); ``timeouts(group id)``: (session timeout, heartbeat
        interval) in ms for that group's members (its group configs), read at each
        heartbeat; ``on_member_left(group id, member id)``: a member left, was fenced or
        timed out; ``on_group_deleted(group id)``: the group was deleted."""
        self._clock = clock
        self.settings = settings
        self._catalog = catalog
        self._other_group_type = other_group_type
        self._timeouts = timeouts or (lambda group_id: (settings.session_timeout_ms, settings.heartbeat_interval_ms))
        self._on_member_left = on_member_left
        self._on_group_deleted = on_group_deleted
        self.groups: dict[str, ShareGroup] = {}
        self._timers = DeadlineTimer(clock, "share-group-timers", self._next_deadline, self.tick)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._timers.start()

    async def stop(self) -> None:
        await self._timers.stop()

    def _next_deadline(self) -> float | None:
        return min((m.session_deadline for g in self.groups.values() for m in g.members.values()), default=None)

    def tick(self) -> None:
        """Remove every member whose session has expired."""
        now = self._clock.monotonic()
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if now >= member.session_deadline:
                    log.info("share group %s: member %s timed out", group.group_id, member.member_id)
                    self._remove(group, member)

    # -- the heartbeat ---------------------------------------------------------------------
    def heartbeat(self, request: ShareHeartbeatRequest, client_id: str, client_host: str) -> HeartbeatAnswer:
        try:
            return self._heartbeat(request, client_id, client_host)
        except HeartbeatError as exc:
            return HeartbeatAnswer(request.member_id, request.member_epoch, 0, error=exc.code, message=exc.message)

    def _heartbeat(self, request: ShareHeartbeatRequest, client_id: str, client_host: str) -> HeartbeatAnswer:
        _validate(request)
        if request.member_epoch == LEAVE_EPOCH:
            return self._leave(request)
        joining = request.member_epoch == 0
        group = self._group(request.group_id, request.member_id, create=joining)
        member = group.members.get(request.member_id)
        if member is None and len(group.members) >= self.settings.max_size:
            raise HeartbeatError(ErrorCode.group_max_size_reached,
                                 f"The share group has reached its maximum capacity of "
                                 f"{self.settings.max_size} members.")
        if member is None:
            if not joining:
                raise HeartbeatError(ErrorCode.unknown_member_id,
                                     f"Member {request.member_id} is not a member of group {group.group_id}.")
            member = ShareMember(request.member_id)
            group.members[member.member_id] = member
            self.groups[group.group_id] = group
            log.info("share group %s: member %s joins", group.group_id, member.member_id)
        else:
            _check_epoch(member, request.member_epoch)
        before = member.assigned
        member.client_id, member.client_host = client_id, client_host
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        bump = False
        names = None if request.subscribed_names is None else tuple(sorted(set(request.subscribed_names)))
        if names is not None and names != member.subscribed_names:
            group.set_subscription(member, names)
            bump = True
        metadata = self._subscription_metadata(group)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            bump = True
        if bump:
            group.epoch += 1
            log.info("share group %s: epoch %d", group.group_id, group.epoch)
        if group.epoch > group.assignment_epoch:
            self._assign(group)
        if member.epoch != group.assignment_epoch:
            member.previous_epoch, member.epoch = member.epoch, group.assignment_epoch
            member.assigned = group.target.get(member.member_id, {})
        session_timeout_ms, heartbeat_interval_ms = self._timeouts(group.group_id)
        member.session_deadline = self._clock.monotonic() + session_timeout_ms / 1000
        self._timers.deadline_set(member.session_deadline)
        return HeartbeatAnswer(member.member_id, member.epoch, heartbeat_interval_ms,
                               assignment=member.assigned if joining or member.assigned != before else None)

    def _group(self, group_id: str, member_id: str, create: bool) -> ShareGroup:
        group = self.groups.get(group_id)
        if group is not None and not group.dead:
            return group
        if self._other_group_type(group_id) is not None:
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
        if not create:
            # Membership is not persisted: after a restart a group's members are unknown
            # here (Kafka would still know them); they join again on this error.
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group_id}.")
        return ShareGroup(group_id)

    def _subscription_metadata(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        metadata = {}
        for name in group.subscribed_names():
            found = self._catalog.lookup(name)
            if found is not None:
                metadata[name] = found
        return metadata

    def _assign(self, group: ShareGroup) -> None:
        metadata = group.subscription_metadata
        subscriptions = {m.member_id: frozenset(metadata[n][0] for n in m.subscribed_names if n in metadata)
                         for m in group.members.values()}
        group.target = simple(subscriptions, dict(metadata.values()), group.target)
        group.assignment_epoch = group.epoch
        log.info("share group %s: target assignment for epoch %d", group.group_id, group.epoch)

    # -- leaving ---------------------------------------------------------------------------
    def _leave(self, request: ShareHeartbeatRequest) -> HeartbeatAnswer:
        group = self.groups.get(request.group_id)
        if group is None or group.dead:
            if self._other_group_type(request.group_id) is not None:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {request.group_id} is not a share group.")
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {request.member_id} is not a member of group {request.group_id}.")
        member = group.members.get(request.member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {request.member_id} is not a member of group {group.group_id}.")
        log.info("share group %s: member %s left", group.group_id, member.member_id)
        self._remove(group, member)
        return HeartbeatAnswer(member.member_id, LEAVE_EPOCH, 0)

    def _remove(self, group: ShareGroup, member: ShareMember) -> None:
        group.set_subscription(member, ())
        del group.members[member.member_id]
        group.target.pop(member.member_id, None)
        group.epoch += 1
        group.subscription_metadata = self._subscription_metadata(group)
        try:
            self._on_member_left(group.group_id, member.member_id)
        except Exception:  # the share-partition side's failure must not stop membership
            log.exception("share group %s: releasing what member %s held failed", group.group_id, member.member_id)

    # -- what the share-partition side asks ------------------------------------------------
    def is_member(self, group_id: str, member_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not group.dead and member_id in group.members

    def assignment_of(self, group_id: str, member_id: str) -> dict[str, set[int]]:
        """Topic name -> partitions the member is assigned now (empty if it is no member)."""
        group = self.groups.get(group_id)
        member = None if group is None or group.dead else group.members.get(member_id)
        if member is None:
            return {}
        names = {topic_id: name for name, (topic_id, _) in group.subscription_metadata.items()}
        return {names[t]: set(ps) for t, ps in member.assigned.items() if t in names and ps}

    def is_assigned(self, group_id: str, topic: str, partition: int) -> bool:
        """Whether some member of the group is assigned the partition now: only such a
        share-partition may get state (Kafka initializes it from the heartbeat path)."""
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return False
        subscribed = group.subscription_metadata.get(topic)
        if subscribed is None:
            return False
        topic_id = subscribed[0]
        return any(partition in member.assigned.get(topic_id, ()) for member in group.members.values())

    def subscribed_topics(self, group_id: str) -> set[str]:
        group = self.groups.get(group_id)
        return set() if group is None or group.dead else group.subscribed_names()

    # -- administration --------------------------------------------------------------------
    def restore(self, group_ids: set[str]) -> None:
        """At start: the share groups whose share-partitions have durable state, as Empty
        groups (Kafka keeps a share group's record in __consumer_offsets; here its state in
        __share_group_state is what survives). Membership is not persisted: members join
        again. An id another group type holds is left to that type."""
        for group_id in sorted(group_ids):
            if group_id not in self.groups and self._other_group_type(group_id) is None:
                self.groups[group_id] = ShareGroup(group_id)

    def has_group(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not group.dead

    def state_of(self, group_id: str) -> ShareGroupState | None:
        group = self.groups.get(group_id)
        return None if group is None or group.dead else group.state

    def member_count(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        return None if group is None or group.dead else len(group.members)

    def delete(self, group_id: str) -> ErrorCode:
        """DeleteGroups of a share group: only an empty one (NON_EMPTY_GROUP)."""
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        group.dead = True
        del self.groups[group_id]
        try:
            self._on_group_deleted(group_id)
        except Exception:  # as above: the group is gone whatever its state's deletion did
            log.exception("share group %s: deleting its share-partition state failed", group_id)
        return ErrorCode.none

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._catalog.name_of(topic_id)

    @property
    def assignor_name(self) -> str:
        return ASSIGNOR_NAME


def _validate(request: ShareHeartbeatRequest) -> None:
    def invalid(message: str) -> HeartbeatError:
        return HeartbeatError(ErrorCode.invalid_request, message)

    if not request.member_id.strip():
        raise invalid("MemberId can't be empty.")
    if not request.group_id.strip():
        raise invalid("GroupId can't be empty.")
    if request.rack_id is not None and not request.rack_id.strip():
        raise invalid("RackId can't be empty.")
    if request.member_epoch == 0:
        if not request.subscribed_names:
            raise invalid("SubscribedTopicNames must be set in first request.")
    elif request.member_epoch < LEAVE_EPOCH:
        raise invalid("MemberEpoch is invalid.")


def _check_epoch(member: ShareMember, received: int) -> None:
    if received > member.epoch:
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a greater member epoch ({received}) than the one known by the "
            f"group coordinator ({member.epoch}). The member must abandon all its partitions and rejoin.")
    if received < member.epoch and received != member.previous_epoch:
        raise HeartbeatError(
            ErrorCode.fenced_member_epoch,
            f"The share group member has a smaller member epoch ({received}) than the one known by the "
            f"group coordinator ({member.epoch}), and it does not match the previous member epoch "
            f"({member.previous_epoch}). The member must abandon all its partitions and rejoin.")

