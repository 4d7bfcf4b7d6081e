"""The consumer group protocol's coordinator (KIP-848): ConsumerGroupHeartbeat and its timers.

Behaviour follows Kafka 4's GroupMetadataManager.consumerGroupHeartbeat:

1. the member is created (epoch 0), found, or replaced (a static member coming back under
   a new member id takes over the old one's place, epoch and assignment); a change of
   subscription, or of the subscribed topics' partitions, bumps the group epoch;
2. when the group epoch is ahead of the assignment epoch, the assignor computes a new target
   assignment for every member;
3. the member reconciles towards its target (``reconciliation.py``); the answer carries
   its epoch and, when it changed or the request was a full one, its assignment.

A member not heard from for ``group.consumer.session.timeout.ms`` is removed, and so is one
that has not revoked its partitions within its rebalance timeout; both bump the group epoch.
Deadlines are kept on the injected clock and served by one timer task.

Group ids are shared with the classic coordinator: an id has one type. A heartbeat joining
an empty classic group replaces it; one joining a classic group with members converts it to
a consumer group (online migration, ``migration.py``) if ``group.consumer.migration.policy``
allows it, else GROUP_ID_NOT_FOUND with Kafka's message. Classic members of a consumer
group are served by ``classic_members.py``; when the last member using the consumer protocol
leaves, a group of classic members goes back to the classic coordinator (if the policy
allows it).

Membership is kept in memory only; see docs/guides/consumer-groups.md for what a
restart does.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from rmqkafka.storage.clock import Clock

from .assignors import ASSIGNORS, MemberSpec
from .classic_members import ClassicMembers
from .consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupState,
    ConsumerMember,
    ConsumerProtocolGroup,
)
from .deadline_timer import DeadlineTimer
from .group import ConsumerGroup
from .migration import (
    MigrationPolicy,
    UpgradeRefused,
    check_upgrade,
    classic_group_from_consumer,
    consumer_group_from_classic,
)
from .reconciliation import MemberState, TopicPartitions, reconcile
from .regex_resolution import resolve
from .topic_regex import InvalidRegex, compile_subscription

log = logging.getLogger(__name__)


class TopicCatalog(Protocol):
    """The topics (and views) a consumer group may subscribe to."""

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count), or None if there is no such topic."""

    def names(self) -> list[str]:
        """Every name a regular expression may match."""

    def generation(self) -> int:
        """Grows whenever a topic or view is created."""

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ConsumerGroupSettings:
    """Kafka's group.consumer.* broker settings."""

    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 2**31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    regex_refresh_interval_ms: int = 600_000
    migration_policy: MigrationPolicy = MigrationPolicy.BIDIRECTIONAL


class ClassicGroups(Protocol):
    """The classic coordinator's side of online migration."""

    def classic_group(self, group_id: str) -> ConsumerGroup | None:
        """The classic group with this id, if any."""

    def take_classic(self, group_id: str) -> None:
        """Forget it (it became a consumer group); its waiting requests get REBALANCE_IN_PROGRESS."""

    def adopt_classic(self, group: ConsumerGroup) -> None:
        """Take a consumer group turned classic and start its rebalance."""


class HeartbeatError(Exception):
    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: tuple[str, ...] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None  # None: not sent (unchanged)
    # Whether the sender may DESCRIBE a topic: a regular expression matches only those.
    may_describe: Callable[[str], bool] = lambda name: True


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: TopicPartitions | None = None
    error: ErrorCode = ErrorCode.none
    message: str | None = None


class ConsumerGroupCoordinator:
    def __init__(self, clock: Clock, settings: ConsumerGroupSettings, catalog: TopicCatalog,
                 classic_members: Callable[[str], int | None],
                 drop_classic: Callable[[str], None],
                 existed_before_start: Callable[[str], bool] = lambda group_id: False,
                 timeouts: Callable[[str], tuple[int, int]] | None = None,
                 is_share_group: Callable[[str], bool] = lambda group_id: False,
                 classic: ClassicGroups | None = None) -> None:
        """``classic_members(group id)``: the member count of a classic group with that id
        (None: there is none); ``drop_classic`` forgets an empty one;
        ``existed_before_start(group id)``: whether the group had committed offsets when the
        broker started (it may have members of the previous run still consuming);
        ``timeouts(group id)``: (session timeout, heartbeat interval) in ms for that group's
        members (its group configs), read at each heartbeat; the settings' by default;
        ``is_share_group(group id)``: whether a share group has the id (a heartbeat then
        gets GROUP_ID_NOT_FOUND, as in Kafka); ``classic``: the classic groups, for online
        migration (None: no migration)."""
        self._clock = clock
        self._timeouts = timeouts or (lambda group_id: (settings.session_timeout_ms, settings.heartbeat_interval_ms))
        self._existed_before_start = existed_before_start
        # Members of the previous run learn that they are unknown at their next heartbeat,
        # at most a heartbeat interval after the broker is back: until two intervals have
        # passed, partitions of groups that existed then are handed to nobody.
        self._recovery_until = clock.monotonic() + 2 * settings.heartbeat_interval_ms / 1000
        self.settings = settings
        self._catalog = catalog
        self._classic_members = classic_members
        self._drop_classic = drop_classic
        self._is_share_group = is_share_group
        self._classic = classic
        self.classic_members = ClassicMembers(self)
        self.groups: dict[str, ConsumerProtocolGroup] = {}
        self._timers = DeadlineTimer(clock, "consumer-group-timers", self._next_deadline, self.tick)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._timers.start()

    async def stop(self) -> None:
        await self._timers.stop()

    def _next_deadline(self) -> float | None:
        deadlines = [d for group in self.groups.values() for m in group.members.values()
                     for d in (m.session_deadline, m.revocation_deadline, m.sync_deadline, m.join_deadline)
                     if d is not None]
        return min(deadlines, default=None)

    def tick(self) -> None:
        """Remove every member whose session or revocation deadline has passed."""
        now = self._clock.monotonic()
        for group in list(self.groups.values()):
            for member in list(group.members.values()):
                if group.dead:  # downgraded to a classic group: its timers are there now
                    break
                if now >= member.session_deadline:
                    log.info("group %s: member %s timed out", group.group_id, member.member_id)
                    self.remove(group, member, reason="timed out")
                elif member.revocation_deadline is not None and now >= member.revocation_deadline:
                    log.info("group %s: member %s did not revoke its partitions in time",
                             group.group_id, member.member_id)
                    self.remove(group, member, reason="did not revoke in time")
                elif member.sync_deadline is not None and now >= member.sync_deadline:
                    self.remove(group, member, reason="did not send SyncGroup in time")
                elif member.join_deadline is not None and now >= member.join_deadline:
                    self.remove(group, member, reason="did not rejoin in time")

    # -- the heartbeat ---------------------------------------------------------------------
    def heartbeat(self, request: HeartbeatRequest, client_id: str, client_host: str,
                  api_version: int) -> HeartbeatAnswer:
        try:
            return self._heartbeat(request, client_id, client_host, api_version)
        except HeartbeatError as exc:
            return HeartbeatAnswer(request.member_id, request.member_epoch, 0, error=exc.code,
                                   message=exc.message)

    def _heartbeat(self, request: HeartbeatRequest, client_id: str, client_host: str,
                   api_version: int) -> HeartbeatAnswer:
        self._validate(request, api_version)
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        joining = request.member_epoch == 0
        member_id = request.member_id or str(uuid.uuid4())  # v0 lets the broker make it
        group = self._group(request.group_id, member_id, create=joining)
        if len(group.members) >= self.settings.max_size and member_id not in group.members:
            # Kafka's throwIfConsumerGroupIsFull, before anything else is looked at: a
            # static member coming back under a new id is refused too.
            raise HeartbeatError(ErrorCode.group_max_size_reached,
                                 f"The consumer group has reached its maximum capacity of "
                                 f"{self.settings.max_size} members.")
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, request)
        else:
            member = self._static_member(group, member_id, request)
        new = member.member_id not in group.members
        if new:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            self.groups[group.group_id] = group
        changed = self._update_member(member, request, client_id, client_host)
        before = member.assigned
        self.advance(group, member, request.owned, changed or new, joined=new)
        session_timeout_ms, heartbeat_interval_ms = self._timeouts(group.group_id)
        self.touch(member, session_timeout_ms)
        full = joining or (request.rebalance_timeout_ms != -1 and request.subscribed_names is not None
                           and request.owned is not None)
        return HeartbeatAnswer(
            member.member_id, member.epoch, heartbeat_interval_ms,
            assignment=member.assigned if full or member.assigned != before else None,
        )

    def advance(self, group: ConsumerProtocolGroup, member: ConsumerMember, owned: TopicPartitions | None,
                changed: bool, joined: bool = False) -> None:
        """Bump the group epoch if ``changed`` (a member joined or changed its subscription) or
        the subscribed topics changed, compute the target assignment if the epoch moved past
        it, and move ``member`` one reconciliation step (``owned``: what it says it owns).
        ``joined``: ``member`` was just added and nothing else changed in the group.

        What a heartbeat costs does not grow with the group where it can be helped: the
        subscribed topics are looked up from the names the group subscribes to, kept between
        heartbeats (``subscribed_topics``), and a join that cannot change anyone's target
        (``shared_subscription``) does not run the assignor over every member."""
        bump = group.epoch == 0 or changed
        matches = self._regex_matches(group, member)
        metadata = self._subscription_metadata(group, matches,
                                               *self._topics_after(group, member, matches, changed, joined))
        moved = metadata != group.subscription_metadata or matches != group.regex_matches
        if moved:
            group.subscription_metadata, group.regex_matches = metadata, matches
            bump = True
        if joined and not moved and self._join_keeps_target(group, member):
            group.epoch += 1
            group.target[member.member_id] = {}
            group.target_holds_for = group.epoch
            log.info("group %s: epoch %d, the join of %s changes no target", group.group_id, group.epoch,
                     member.member_id)
        elif bump:
            group.epoch += 1
            log.info("group %s: epoch %d", group.group_id, group.epoch)
        if group.epoch > group.assignment_epoch:
            if group.target_holds_for == group.epoch:
                group.assignment_epoch = group.epoch
            else:
                self._assign(group)
        self._reconcile(group, member, owned)

    def now(self) -> float:
        return self._clock.monotonic()

    def deadline_set(self, deadline: float) -> None:
        """A member's deadline was set to ``deadline``: the timer task wakes for it if it
        sleeps past it (a later one it finds when it wakes; no scan of every member now)."""
        self._timers.deadline_set(deadline)

    def touch(self, member: ConsumerMember, session_timeout_ms: int) -> None:
        """The member was heard from: its session starts over."""
        member.session_deadline = self._clock.monotonic() + session_timeout_ms / 1000
        self.deadline_set(member.session_deadline)

    def partition_owner(self, group: ConsumerProtocolGroup) -> Callable[[uuid.UUID, int], int]:
        """The epoch of the member owning a partition (-1: free) as reconciliation must see
        it: right after a start, partitions of groups that existed before belong to members
        of the previous run, which may still consume."""
        if self._clock.monotonic() < self._recovery_until and self._existed_before_start(group.group_id):
            return _owned_by_the_previous_run
        return group.owner_epoch

    def lookup_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        return self._catalog.lookup(name)

    def _validate(self, request: HeartbeatRequest, api_version: int) -> None:
        def invalid(message: str) -> HeartbeatError:
            return HeartbeatError(ErrorCode.invalid_request, message)

        epoch = request.member_epoch
        if (api_version >= 1 or epoch > 0 or epoch == LEAVE_EPOCH) and not request.member_id.strip():
            raise invalid("MemberId can't be empty.")
        if not request.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if request.instance_id is not None and not request.instance_id.strip():
            raise invalid("InstanceId can't be empty.")
        if request.rack_id is not None and not request.rack_id.strip():
            raise invalid("RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_names is None and request.subscribed_regex is None:
                raise invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                              "when (re-)joining.")
        elif epoch == STATIC_LEAVE_EPOCH:
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif epoch < STATIC_LEAVE_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self.settings.assignors:
            raise HeartbeatError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
                f"{', '.join(self.settings.assignors)}.")
        if request.subscribed_regex:
            try:
                compile_subscription(request.subscribed_regex)
            except InvalidRegex as exc:
                raise HeartbeatError(ErrorCode.invalid_regular_expression, str(exc)) from None

    def _group(self, group_id: str, member_id: str, create: bool) -> ConsumerProtocolGroup:
        group = self.groups.get(group_id)
        if group is not None and not group.dead:
            return group
        if self._is_share_group(group_id):
            raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        classic = self._classic_members(group_id)
        if classic is not None:
            if classic > 0 and create and self._classic is not None:
                return self._upgrade(group_id)
            if not create and self._classic is not None \
                    and not self._classic.classic_group(group_id).was_consumer_group:
                # A member of the previous run's consumer group (membership is not persisted)
                # whose id classic members took (or are joining) after the restart: Kafka
                # would still know it. Rejoining with epoch 0 upgrades the group
                # (GROUP_ID_NOT_FOUND is fatal to librdkafka); a group that was a consumer
                # group earlier in this run answers as Kafka does.
                raise HeartbeatError(ErrorCode.unknown_member_id,
                                     f"Member {member_id} is not a member of group {group_id}.")
            if classic > 0 or not create:
                raise HeartbeatError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
            self._drop_classic(group_id)  # Kafka replaces an empty classic group
        if not create:
            # Membership is not persisted: after a restart a group's members are unknown
            # here. Kafka would still know them, and its clients rejoin on this error
            # (GROUP_ID_NOT_FOUND is fatal to librdkafka's consumer).
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group_id}.")
        return ConsumerProtocolGroup(group_id)

    def _upgrade(self, group_id: str) -> ConsumerProtocolGroup:
        """Kafka's validateOnlineUpgrade and convertToConsumerGroup."""
        classic = self._classic.classic_group(group_id)
        try:
            check_upgrade(classic, self.settings.migration_policy, self.settings.max_size)
            group = consumer_group_from_classic(classic, self._catalog.lookup, self._clock.monotonic())
        except UpgradeRefused as exc:
            log.info("group %s: %s", group_id, exc)
            raise HeartbeatError(ErrorCode.group_id_not_found, str(exc)) from None
        self._classic.take_classic(group_id)
        group.subscription_metadata = self._subscription_metadata(group)
        group.assignor_name = self._preferred_assignor(group)
        self.groups[group_id] = group
        self._timers.wake()
        log.info("group %s: converted the classic group to a consumer group (%d classic members, epoch %d)",
                 group_id, len(group.members), group.epoch)
        return group

    def _dynamic_member(self, group: ConsumerProtocolGroup, member_id: str,
                        request: HeartbeatRequest) -> ConsumerMember:
        member = group.members.get(member_id)
        if request.member_epoch == 0:
            if member is None:
                return self._new_member(member_id, request.instance_id, request)
            # A member rejoining with epoch 0 (after a fencing) starts over: nothing owned.
            group.release(member)
            member.assigned, member.pending_revocation = {}, {}
            member.epoch, member.state = 0, MemberState.STABLE
            return member
        if member is None:
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {member_id} is not a member of group {group.group_id}.")
        self._check_epoch(member, request)
        return member

    def _static_member(self, group: ConsumerProtocolGroup, member_id: str,
                       request: HeartbeatRequest) -> ConsumerMember:
        instance_id = request.instance_id
        holder_id = group.static_members.get(instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if request.member_epoch == 0:
            if holder is None or holder.member_id == member_id:
                return self._dynamic_member(group, member_id, request)
            if holder.epoch != STATIC_LEAVE_EPOCH:
                raise HeartbeatError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group "
                    f"because the instance id is owned by {holder.member_id} member.")
            # The static member comes back under a new id: it takes the old one's place and
            # target assignment, without a new group epoch (its partitions were released
            # when it left, so reconciliation hands them back at once).
            del group.members[holder.member_id]
            group.release(holder)
            replacement = self._new_member(member_id, instance_id, request)
            replacement.subscribed_names, replacement.subscribed_regex = holder.subscribed_names, holder.subscribed_regex
            replacement.server_assignor = holder.server_assignor
            if holder.member_id in group.target:
                group.target[member_id] = group.target.pop(holder.member_id)
            group.members[member_id] = replacement
            group.static_members[instance_id] = member_id
            return replacement
        if holder is None:
            raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
        if holder.member_id != member_id:
            raise HeartbeatError(ErrorCode.fenced_instance_id,
                                 f"Static member {member_id} with instance id {instance_id} was fenced "
                                 f"by member {holder.member_id}.")
        self._check_epoch(holder, request)
        return holder

    def _new_member(self, member_id: str, instance_id: str | None, request: HeartbeatRequest) -> ConsumerMember:
        return ConsumerMember(member_id, instance_id, request.rack_id, "", "", request.rebalance_timeout_ms)

    @staticmethod
    def _check_epoch(member: ConsumerMember, request: HeartbeatRequest) -> None:
        received = request.member_epoch
        if received > member.epoch:
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({received}) than the one known "
                f"by the group coordinator ({member.epoch}). The member must abandon all its partitions "
                f"and rejoin.")
        if received < member.epoch and (received != member.previous_epoch
                                        or not _is_subset(request.owned, member.assigned)):
            # The previous epoch is accepted when the answer that moved the member on was lost.
            raise HeartbeatError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({received}) than the one known "
                f"by the group coordinator ({member.epoch}). The member must abandon all its partitions "
                f"and rejoin.")

    def _update_member(self, member: ConsumerMember, request: HeartbeatRequest, client_id: str,
                       client_host: str) -> bool:
        """Apply the request's non-null fields; whether the subscription changed."""
        member.client_id, member.client_host = client_id, client_host
        member.may_describe = request.may_describe
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        changed = False
        if request.server_assignor is not None and request.server_assignor != member.server_assignor:
            member.server_assignor = request.server_assignor
            changed = True
        if request.subscribed_names is not None and tuple(sorted(request.subscribed_names)) != member.subscribed_names:
            member.subscribed_names = tuple(sorted(request.subscribed_names))
            changed = True
        if request.subscribed_regex is not None:
            regex = request.subscribed_regex or None  # "" is no regex
            if regex != member.subscribed_regex:
                member.subscribed_regex = regex
                changed = True
        return changed

    # -- assignment ------------------------------------------------------------------------
    @staticmethod
    def _resolved(member: ConsumerMember, matches: dict[str, frozenset[str]]) -> set[str]:
        """The member's subscribed names and what its regular expression resolved to."""
        return set(member.subscribed_names) | matches.get(member.member_id, frozenset())

    def _subscription_metadata(self, group: ConsumerProtocolGroup,
                               matches: dict[str, frozenset[str]] | None = None,
                               topics: dict[str, int] | None = None,
                               added: tuple[str, ...] = ()) -> dict[str, tuple[uuid.UUID, int]]:
        """Topic name -> (id, partition count) of every subscribed topic that exists.
        ``topics``: name -> members subscribing, if known (else every member is read), kept
        in ``group.subscribed_topics``; ``added``: names this heartbeat brought. A name that
        did not exist at the last look-up is looked up again only when it was just added or
        a topic or view was created since, so a heartbeat costs a look-up per existing
        subscribed topic, not per name the members made up."""
        matches = group.regex_matches if matches is None else matches
        generation = self._catalog.generation()
        if topics is None:
            topics = {}
            for member in group.members.values():
                for name in self._resolved(member, matches):
                    topics[name] = topics.get(name, 0) + 1
            candidates: Iterable[str] = topics
        elif generation != group.topics_generation:
            candidates = topics
        else:
            candidates = [*(name for name in group.subscription_metadata if name in topics),
                          *(name for name in added if name not in group.subscription_metadata)]
        group.subscribed_topics, group.topics_generation = topics, generation
        metadata = {}
        for name in candidates:
            found = self._catalog.lookup(name)
            if found is not None:
                metadata[name] = found
        return metadata

    def _topics_after(self, group: ConsumerProtocolGroup, member: ConsumerMember,
                      matches: dict[str, frozenset[str]], changed: bool,
                      joined: bool) -> tuple[dict[str, int] | None, tuple[str, ...]]:
        """The group's subscribed names (with their member counts) after a heartbeat of
        ``member`` and the names it added, from those kept in the group when only this
        member can have changed them; (None, ()) when every member must be read."""
        kept = group.subscribed_topics
        if kept is None:
            return None, ()
        if not changed and matches == group.regex_matches:
            return kept, ()
        others = {member_id: names for member_id, names in matches.items() if member_id != member.member_id}
        if joined and others == group.regex_matches:
            names = tuple(self._resolved(member, matches))
            for name in names:
                kept[name] = kept.get(name, 0) + 1
            return kept, names
        return None, ()

    def _regex_matches(self, group: ConsumerProtocolGroup, member: ConsumerMember) -> dict[str, frozenset[str]]:
        """Member id -> the topics its regular expression resolves to, resolved again when
        group.consumer.regex.refresh.interval.ms says (regex_resolution.py)."""
        if not group.resolved_regexes and not member.subscribed_regex:
            # No member has a regular expression: every one that has is in resolved_regexes
            # from the heartbeat that brought it (regex_resolution.py's invariant).
            return {}
        return resolve(group, self._catalog, self._clock.monotonic(),
                       self.settings.regex_refresh_interval_ms / 1000)

    def _assign(self, group: ConsumerProtocolGroup) -> None:
        metadata = group.subscription_metadata
        specs = {}
        for member in group.members.values():
            subscribed = frozenset(metadata[n][0] for n in self._resolved(member, group.regex_matches)
                                   if n in metadata)
            specs[member.member_id] = MemberSpec(member.member_id, member.instance_id, subscribed,
                                                 group.target.get(member.member_id, {}))
        group.assignor_name = self._preferred_assignor(group)
        partitions = {topic_id: count for topic_id, count in metadata.values()}
        group.target = ASSIGNORS[group.assignor_name](specs, partitions)
        group.assignment_epoch = group.target_holds_for = group.epoch
        group.shared_subscription, group.join_cutoff = self._shared_subscription(group, specs, partitions)
        log.info("group %s: target assignment for epoch %d by %s", group.group_id, group.epoch,
                 group.assignor_name)

    @staticmethod
    def _shared_subscription(group: ConsumerProtocolGroup, specs: dict[str, MemberSpec],
                             partitions: dict[uuid.UUID, int]) -> tuple[frozenset[uuid.UUID] | None,
                                                                         tuple[str, str] | None]:
        """(the topics every member subscribes to, the sort key a joining member must be
        above) when a member joining with these topics (or leaving with an empty target)
        changes no one's target; (None, None) otherwise. Every member has the same topics,
        and then:

        - ``uniform`` gave each partition to a member and none more than one: sticky, it
          gives each member its quota (0 or 1 here), so the holders keep theirs;
        - ``range`` had at least as many members as any topic has partitions: the first
          members in sort-key order hold one partition of each topic (as many as it has),
          so a member sorting after every holder gets none and moves no one.
        """
        subscriptions = {spec.subscribed for spec in specs.values()}
        if len(subscriptions) != 1:
            return None, None
        shared = subscriptions.pop()
        if group.assignor_name == "uniform":
            held = 0
            for target in group.target.values():
                count = sum(len(ps) for ps in target.values())
                if count > 1:
                    return None, None
                held += count
            return (shared, None) if held == sum(partitions.values()) else (None, None)
        if group.assignor_name == "range":
            if any(partitions[topic_id] > len(specs) for topic_id in shared):
                return None, None
            holders = [(spec.sort_key, spec.member_id) for spec in specs.values()
                       if any(group.target.get(spec.member_id, {}).values())]
            return shared, max(holders, default=None)
        return None, None

    @staticmethod
    def _subscribed_ids(group: ConsumerProtocolGroup, member: ConsumerMember) -> frozenset[uuid.UUID]:
        """The existing topics a member without a regular expression subscribes to."""
        metadata = group.subscription_metadata
        return frozenset(metadata[name][0] for name in member.subscribed_names if name in metadata)

    def _join_keeps_target(self, group: ConsumerProtocolGroup, member: ConsumerMember) -> bool:
        """Whether the target assignment after ``member`` joined is the previous one with an
        empty target for it (``shared_subscription``): the group's target holds for its
        epoch, the member subscribes to the shared topics (and sorts after ``join_cutoff``),
        and the assignor the group uses stays the one most members ask for."""
        return (group.shared_subscription is not None and group.target_holds_for == group.epoch > 0
                and member.subscribed_regex is None and member.member_id not in group.target
                and member.server_assignor in (None, group.assignor_name)
                and (group.join_cutoff is None
                     or (member.instance_id or member.member_id, member.member_id) > group.join_cutoff)
                and self._subscribed_ids(group, member) == group.shared_subscription)

    def _leave_keeps_target(self, group: ConsumerProtocolGroup, member: ConsumerMember) -> bool:
        """Whether removing ``member`` leaves the subscribed topics and every other member's
        target as they are: it has an empty target in a group with a ``shared_subscription``
        whose target holds for its epoch, others remain and still subscribe to every
        subscribed name that exists, no topic changed or was created, and its vote (if any)
        was not for the assignor the group uses."""
        topics = group.subscribed_topics
        if (group.shared_subscription is None or not group.target_holds_for == group.epoch > 0
                or topics is None or len(group.members) < 2 or member.subscribed_regex is not None
                or any(group.target.get(member.member_id, {}).values())
                or member.server_assignor == group.assignor_name
                or self._catalog.generation() != group.topics_generation
                or self._subscribed_ids(group, member) != group.shared_subscription):
            return False
        mine = set(member.subscribed_names)
        if any(topics.get(name, 0) <= (name in mine) for name in group.subscription_metadata):
            return False
        return all(self._catalog.lookup(name) == topic for name, topic in group.subscription_metadata.items())

    def _preferred_assignor(self, group: ConsumerProtocolGroup) -> str:
        """The assignor most members asked for; the configured default if none did."""
        votes: dict[str, int] = {}
        for member in group.members.values():
            if member.server_assignor is not None:
                votes[member.server_assignor] = votes.get(member.server_assignor, 0) + 1
        if not votes:
            return self.settings.assignors[0]
        return max(sorted(votes), key=lambda name: votes[name])

    def _reconcile(self, group: ConsumerProtocolGroup, member: ConsumerMember,
                   owned: TopicPartitions | None) -> None:
        metadata = group.subscription_metadata
        subscribed = frozenset(metadata[n][0] for n in self._resolved(member, group.regex_matches) if n in metadata)
        owner_epoch = self.partition_owner(group)
        result = reconcile(
            state=member.state, epoch=member.epoch, assigned=member.assigned,
            pending_revocation=member.pending_revocation, target_epoch=group.assignment_epoch,
            target=group.target.get(member.member_id, {}), subscribed=subscribed, owned=owned,
            owner_epoch=owner_epoch,
        )
        if (result.state, result.epoch, result.assigned, result.pending_revocation) == (
                member.state, member.epoch, member.assigned, member.pending_revocation):
            return
        group.release(member)
        if result.epoch != member.epoch:
            member.previous_epoch = member.epoch
        member.state, member.epoch = result.state, result.epoch
        member.assigned, member.pending_revocation = result.assigned, result.pending_revocation
        group.claim(member)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if member.revocation_deadline is None:
                member.revocation_deadline = self._clock.monotonic() + member.rebalance_timeout_ms / 1000
                self.deadline_set(member.revocation_deadline)
        else:
            member.revocation_deadline = None

    # -- leaving ---------------------------------------------------------------------------
    def _leave(self, request: HeartbeatRequest) -> HeartbeatAnswer:
        group = self.groups.get(request.group_id)
        if group is None or group.dead:
            raise HeartbeatError(ErrorCode.unknown_member_id,
                                 f"Member {request.member_id} is not a member of group {request.group_id}.")
        if request.instance_id is not None:
            holder_id = group.static_members.get(request.instance_id)
            member = group.members.get(holder_id) if holder_id is not None else None
            if member is None:
                raise HeartbeatError(ErrorCode.unknown_member_id, f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise HeartbeatError(ErrorCode.fenced_instance_id,
                                     f"Static member {request.member_id} with instance id "
                                     f"{request.instance_id} was fenced by member {member.member_id}.")
            if request.member_epoch == STATIC_LEAVE_EPOCH:
                # It will come back: it keeps its place (and its target) until its session
                # ends; its partitions are released at once.
                log.info("group %s: static member %s left temporarily", group.group_id, member.member_id)
                group.release(member)
                member.previous_epoch = member.epoch
                member.epoch = STATIC_LEAVE_EPOCH
                member.assigned, member.pending_revocation = {}, {}
                member.revocation_deadline = None
                self._timers.wake()
                return HeartbeatAnswer(member.member_id, STATIC_LEAVE_EPOCH, 0)
        else:
            member = group.members.get(request.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.unknown_member_id,
                                     f"Member {request.member_id} is not a member of group {group.group_id}.")
        log.info("group %s: member %s left", group.group_id, member.member_id)
        self.remove(group, member, reason="left")
        return HeartbeatAnswer(member.member_id, request.member_epoch, 0)

    def remove(self, group: ConsumerProtocolGroup, member: ConsumerMember, reason: str) -> None:
        """Remove a member (it left, or was fenced: ``reason`` is logged); a group left with
        classic members only goes back to the classic coordinator if the policy allows it."""
        if self._may_downgrade(group, member):
            self._downgrade(group, member, reason)
            return
        keeps_target = self._leave_keeps_target(group, member)
        group.release(member)
        del group.members[member.member_id]
        if member.instance_id is not None and group.static_members.get(member.instance_id) == member.member_id:
            del group.static_members[member.instance_id]
        group.target.pop(member.member_id, None)
        group.epoch += 1
        group.regex_matches.pop(member.member_id, None)
        group.resolved_regexes.pop(member.member_id, None)
        if keeps_target:
            # The others subscribe to every topic it did: the topics and the targets stay.
            topics = group.subscribed_topics
            for name in member.subscribed_names:
                topics[name] -= 1
                if not topics[name]:
                    del topics[name]
            group.target_holds_for = group.epoch
        else:
            group.subscription_metadata = self._subscription_metadata(group)
        # No timer wake: removing deadlines never brings the next one closer.

    def downgrade_for_static_replacement(self, group: ConsumerProtocolGroup, instance_id: str | None) -> bool:
        """Kafka's validateOnlineDowngradeWithReplacedMember: a classic member taking over the
        static id of the group's last consumer-protocol member turns the group classic (when
        the policy allows it); the caller then serves the join in the classic group."""
        holder_id = group.static_members.get(instance_id) if instance_id is not None else None
        holder = group.members.get(holder_id) if holder_id is not None else None
        if holder is None or holder.classic is not None or not self._may_downgrade(group, holder):
            return False
        self._downgrade(group, holder, "was replaced by a classic member with its instance id")
        return True

    def _may_downgrade(self, group: ConsumerProtocolGroup, leaving: ConsumerMember) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMembers: every other member uses the
        classic protocol (there is one), and the policy allows it."""
        return (self._classic is not None and group.only_classic_members_besides(leaving)
                and self.settings.migration_policy.downgrade_enabled)

    def _downgrade(self, group: ConsumerProtocolGroup, leaving: ConsumerMember, reason: str) -> None:
        classic = classic_group_from_consumer(group, leaving, self._catalog.name_of, self._clock.monotonic())
        self.forget(group.group_id)
        log.info("group %s: member %s %s; converted the consumer group to a classic group (generation %d)",
                 group.group_id, leaving.member_id, reason, classic.generation_id)
        self._classic.adopt_classic(classic)

    # -- offsets ---------------------------------------------------------------------------
    def check_commit(self, group: ConsumerProtocolGroup, member_id: str, member_epoch: int,
                     transactional: bool, api_version: int | None) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit: an epoch below 0 commits only to an
        empty group (admin tools, simple consumers); otherwise the member must exist, commit
        with OffsetCommit v9+ (transactional commits and classic members excepted) and at its
        current epoch (a classic member's generation is its epoch)."""
        if member_epoch < 0 and not group.members:
            return ErrorCode.none
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.classic is None and not transactional and api_version is not None and api_version < 9:
            return ErrorCode.unsupported_version
        return _check_epoch(member, member_epoch)

    def check_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetFetch: epoch -1 (admin tools, and librdkafka's
        own fetches) is always allowed; else the member must exist at that epoch."""
        group = self.groups.get(group_id)
        if group is None or member_epoch < 0:
            return ErrorCode.none
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.unknown_member_id
        return _check_epoch(member, member_epoch)

    # -- administration --------------------------------------------------------------------
    def state_of(self, group_id: str) -> ConsumerGroupState | None:
        group = self.groups.get(group_id)
        return None if group is None else group.state

    def member_count(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        return None if group is None or group.dead else len(group.members)

    def subscribed_topics(self, group_id: str) -> set[str]:
        """Topic names the group's members subscribe to, regular expressions resolved."""
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return set()
        return {topic for member in group.members.values() for topic in self._resolved(member, group.regex_matches)}

    def forget(self, group_id: str) -> None:
        """Drop an empty group (deleted, or its id taken by a classic group)."""
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.dead = True

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._catalog.name_of(topic_id)


def _check_epoch(member: ConsumerMember, epoch: int) -> ErrorCode:
    """Kafka's validateMemberEpoch: a classic member's mismatch is ILLEGAL_GENERATION."""
    if epoch == member.epoch:
        return ErrorCode.none
    return ErrorCode.illegal_generation if member.classic is not None else ErrorCode.stale_member_epoch


def _owned_by_the_previous_run(topic_id: uuid.UUID, partition: int) -> int:
    return 0


def _is_subset(owned: TopicPartitions | None, assigned: TopicPartitions) -> bool:
    if owned is None:
        return False
    return all(partitions <= assigned.get(topic_id, frozenset()) for topic_id, partitions in owned.items()
               if partitions)
