"""The group coordinator: every consumer group of this broker, their timers and offsets.

Behaviour follows Kafka's classic GroupCoordinator:

- JoinGroup: a dynamic member without an id gets one back with MEMBER_ID_REQUIRED (v4+) and
  joins with it; a static member (group.instance.id) keeps its place across restarts and
  a rejoin with the same id fences the old member id (FENCED_INSTANCE_ID). A join starts a
  rebalance; it completes when every member has rejoined, or when the largest rebalance
  timeout passes (members that did not rejoin are dropped). The first member is the
  leader; only the leader receives the member list.
- SyncGroup: followers wait for the leader's assignments; then the group is Stable. A member
  that has not sent SyncGroup within the rebalance timeout after the join completed is
  removed (Kafka's pending-sync timeout), so a leader that never syncs cannot hang the group.
- Heartbeat: REBALANCE_IN_PROGRESS tells members to rejoin; a member silent for its session
  timeout is removed and the group rebalances. Members parked in JoinGroup or SyncGroup are
  exempt, as in Kafka: the wait is on the coordinator or the leader, not on them. Generations fence stale members
  (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID).
- OffsetCommit is accepted from the current generation (also while a rebalance is being
  prepared, so eager members can commit before rejoining) and from "simple" clients of a
  group without members; offsets go to the store durably before the answer.

A group id may instead belong to a consumer-protocol group (``consumer_coordinator.py``);
classic members of such a group (online migration) are served by it, and a classic group
converts to it and back (``migration.py``).

Classic groups' metadata is persisted as Kafka's GroupMetadata record is
(``classic_persistence.py``): written when the leader's SyncGroup completes a generation
(before any member is answered; a failed write answers NOT_COORDINATOR, Kafka's mapping of
a storage error, and starts a new rebalance), when a group becomes Empty, and as a tombstone
when it is deleted, expires or becomes a consumer-protocol group. On start a group comes back
as Kafka loads it: Stable with the same generation, protocol, leader, members and
assignments (Empty without members), every member's session timer restarted at load; a
member that does not come back is removed after its session timeout and the group
rebalances. So members keep heartbeating and committing across a restart or a kill -9,
without a rebalance. Consumer-protocol (KIP-848) and share groups are not persisted here:
after a restart their members rejoin (share groups' acquisition state is durable on its
own). A broker of an earlier version ignores the file: its members rejoin as before.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from rmqkafka.storage.clock import Clock
from rmqkafka.storage.offset_store import CommittedOffset
from rmqkafka.storage.store import MessageStore

from ..group_configs import GroupConfigStore
from . import classic_persistence
from .classic_members import ClassicJoin
from .consumer_coordinator import ConsumerGroupCoordinator, ConsumerGroupSettings, TopicCatalog
from .consumer_group import ConsumerGroupState
from .group import ConsumerGroup, GroupState, Member
from .share_coordinator import ShareCoordinatorSettings, ShareGroupCoordinator
from .share_group import ShareGroupState

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GroupSettings:
    """Kafka's group.* broker settings, in milliseconds."""

    initial_rebalance_delay_ms: int = 0
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1  # group.max.size: members of a classic group
    offset_metadata_max_bytes: int = 4096
    offsets_check_interval_ms: int = 600_000


class GroupError(Exception):
    def __init__(self, code: ErrorCode) -> None:
        super().__init__(code.name)
        self.code = code


class GroupCoordinator:
    """Classic groups here; consumer-protocol groups in ``consumer``, share groups in
    ``share`` (one id namespace: an id has one type)."""

    def __init__(self, store: MessageStore, clock: Clock, settings: GroupSettings,
                 catalog: TopicCatalog | None = None,
                 consumer_settings: ConsumerGroupSettings = ConsumerGroupSettings(),
                 consumer_timeouts: Callable[[str], tuple[int, int]] | None = None,
                 configs: GroupConfigStore | None = None,
                 share_settings: ShareCoordinatorSettings = ShareCoordinatorSettings(),
                 share_timeouts: Callable[[str], tuple[int, int]] | None = None,
                 on_share_member_left: Callable[[str, str], None] = lambda group_id, member_id: None,
                 on_share_group_deleted: Callable[[str], None] = lambda group_id: None) -> None:
        """``consumer_timeouts(group id)`` / ``share_timeouts(group id)``: a consumer or share
        group's session timeout and heartbeat interval (its group configs); ``configs``: the
        group configs, dropped with the group; ``on_share_member_left(group id, member id)``
        and ``on_share_group_deleted(group id)``: see ShareGroupCoordinator."""
        self._store = store
        self._clock = clock
        self.settings = settings
        self.groups: dict[str, ConsumerGroup] = {}
        self.configs = configs or GroupConfigStore(None)
        self._wakeup = asyncio.Event()
        self._timer: asyncio.Task | None = None
        self._metadata = classic_persistence.open_metadata(Path(store.config.data_dir) / "offsets", clock.now_ms)
        self._metadata_lock = asyncio.Lock()  # FIFO: entries reach the disk in the order made
        self._metadata_writes: set[asyncio.Task] = set()
        now = clock.monotonic()
        for group_id, entry in self._metadata.entries.items():
            group = self.groups[group_id] = classic_persistence.restore(group_id, entry, now)
            if len(group.members) > settings.max_size:  # Kafka's onLoaded: the cap was lowered
                self._prepare_rebalance(group, f"loaded with {len(group.members)} members, over group.max.size "
                                               f"{settings.max_size}")
        groups_at_start = frozenset(store.offsets.groups()) | frozenset(self.groups)
        self.consumer = ConsumerGroupCoordinator(
            clock, consumer_settings, catalog or _NoTopics(), self._classic_member_count, self._drop_empty_classic,
            groups_at_start.__contains__, consumer_timeouts, is_share_group=self._is_share, classic=self)
        self.share = ShareGroupCoordinator(
            clock, share_settings, catalog or _NoTopics(), self._non_share_type, share_timeouts,
            on_share_member_left, on_share_group_deleted)

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        self._timer = asyncio.create_task(self._run_timers(), name="group-timers")
        self.consumer.start()
        self.share.start()

    async def stop(self) -> None:
        if self._metadata_writes:
            await asyncio.gather(*self._metadata_writes, return_exceptions=True)
        await self.consumer.stop()
        await self.share.stop()
        self.configs.close()
        if self._timer is not None:
            self._timer.cancel()
            try:
                await self._timer
            except asyncio.CancelledError:
                pass
        for group in self.groups.values():
            for member in group.members.values():
                _fail(member.join_waiter, ErrorCode.coordinator_not_available)
                _fail(member.sync_waiter, ErrorCode.coordinator_not_available)

    async def _run_timers(self) -> None:
        """Sleep until the earliest deadline (or a change), then act on what is due."""
        last_expiry = self._clock.monotonic()
        while True:
            timeout = self._next_deadline() - self._clock.monotonic()
            self._wakeup.clear()
            if timeout > 0:
                try:
                    await asyncio.wait_for(self._wakeup.wait(), timeout)
                except TimeoutError:
                    pass
            self.tick()
            now = self._clock.monotonic()
            if now - last_expiry >= self.settings.offsets_check_interval_ms / 1000:
                last_expiry = now
                self.expire_offsets()

    def _next_deadline(self) -> float:
        now = self._clock.monotonic()
        deadlines = [now + self.settings.offsets_check_interval_ms / 1000]
        for group in self.groups.values():
            deadlines.extend(group.pending_members.values())
            for member in group.members.values():
                if not member.awaiting_rebalance:
                    deadlines.append(member.last_seen + member.session_timeout_ms / 1000)
            if group.pending_sync:
                deadlines.append(group.sync_deadline)
            if group.state is GroupState.PREPARING_REBALANCE:
                if group.all_rejoined():
                    deadlines.append(group.join_not_before)
                else:
                    deadlines.append(max(group.rebalance_deadline, group.join_not_before))
        return min(deadlines)

    def _changed(self) -> None:
        self._wakeup.set()

    def tick(self) -> None:
        """Act on every deadline that has passed (session and rebalance timeouts)."""
        now = self._clock.monotonic()
        for group in list(self.groups.values()):
            for member_id, deadline in list(group.pending_members.items()):
                if now >= deadline:
                    del group.pending_members[member_id]
            for member in list(group.members.values()):
                if not member.awaiting_rebalance and now >= member.last_seen + member.session_timeout_ms / 1000:
                    log.info("group %s: member %s timed out", group.group_id, member.member_id)
                    self._remove_member(group, member, ErrorCode.unknown_member_id)
            if group.pending_sync and now >= group.sync_deadline:
                late = sorted(group.pending_sync)
                log.info("group %s: member(s) %s did not send SyncGroup in time", group.group_id, late)
                for member_id in late:
                    self._remove_member(group, group.members[member_id], ErrorCode.unknown_member_id,
                                        rebalance=False)
                self._prepare_rebalance(group, f"members {late} did not sync")
            if group.state is GroupState.PREPARING_REBALANCE:
                if now >= group.rebalance_deadline and now >= group.join_not_before:
                    for member in list(group.members.values()):
                        if member.join_waiter is None:
                            log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
                            self._remove_member(group, member, ErrorCode.unknown_member_id, rebalance=False)
                    group.pending_members.clear()
                    self._complete_join(group)
                else:
                    self._maybe_complete_join(group)

    # -- membership ------------------------------------------------------------------------
    async def join(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
        can_skip_assignment: bool = False,
    ) -> dict:
        """A JoinGroup; returns the response fields (error_code, generation_id, ...)."""
        if not group_id:
            return _join_error(ErrorCode.invalid_group_id, member_id)
        if self.share.has_group(group_id):  # Kafka 4 answers this before looking at the request
            return _join_error(ErrorCode.inconsistent_group_protocol, member_id)
        s = self.settings
        if not s.min_session_timeout_ms <= session_timeout_ms <= s.max_session_timeout_ms:
            return _join_error(ErrorCode.invalid_session_timeout, member_id)
        group = self.groups.get(group_id)
        if group is None:
            members = self.consumer.member_count(group_id)
            if members and not (not member_id and self.consumer.downgrade_for_static_replacement(
                    self.consumer.groups[group_id], group_instance_id)):
                return self._join_consumer_group(ClassicJoin(
                    group_id, member_id, group_instance_id, protocol_type, tuple(protocols), session_timeout_ms,
                    rebalance_timeout_ms, client_id, client_host, require_known_member_id))
            group = self.groups.get(group_id)  # the classic group a downgrade just made
        if group is None:
            group = self.groups[group_id] = ConsumerGroup(group_id)
            if members == 0:
                self.consumer.forget(group_id)  # Kafka replaces an empty consumer group
                group.was_consumer_group = True
        if group.state is GroupState.DEAD:
            return _join_error(ErrorCode.coordinator_not_available, member_id)
        if not group.supports(protocol_type, protocols):
            return _join_error(ErrorCode.inconsistent_group_protocol, member_id)
        if not self._accepts_joining(group, member_id, group_instance_id):
            # Kafka's group.remove(memberId): a known member refused leaves the group, so the
            # rebalance does not wait out its rebalance timeout for it
            group.pending_members.pop(member_id, None)
            refused = group.members.get(member_id)
            if refused is not None:
                self._remove_member(group, refused, ErrorCode.group_max_size_reached)
            return _join_error(ErrorCode.group_max_size_reached, "")
        now = self._clock.monotonic()

        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if member_id and known is not None and member_id != known:
                return _join_error(ErrorCode.fenced_instance_id, member_id)
            if not member_id and known is not None:
                return await self._rejoin_static(group, known, protocols, session_timeout_ms,
                                                 rebalance_timeout_ms, client_id, client_host,
                                                 can_skip_assignment)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id and group_instance_id is None:
                group.pending_members[member_id] = now + session_timeout_ms / 1000
                self._changed()
                return _join_error(ErrorCode.member_id_required, member_id)
        elif member_id in group.pending_members:
            del group.pending_members[member_id]
        elif member_id not in group.members:
            return _join_error(ErrorCode.unknown_member_id, member_id)

        member = group.members.get(member_id)
        if member is None:
            member = Member(member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                            rebalance_timeout_ms, protocol_type, protocols, now)
            group.members[member_id] = member
            if group_instance_id is not None:
                group.static_members[group_instance_id] = member_id
            if len(group.members) == 1:  # the first member decides the group's protocol type
                group.protocol_type = protocol_type
            self._prepare_rebalance(group, f"member {member_id} joined")
        else:
            unchanged = member.protocols == protocols
            member.protocols = protocols
            member.session_timeout_ms = session_timeout_ms
            member.rebalance_timeout_ms = rebalance_timeout_ms
            member.last_seen = now
            if unchanged and group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE) \
                    and member_id != group.leader_id:
                # A follower repeating its join (e.g. it missed the answer): nothing changes.
                return self._join_answer(group, member)
            if group.state is not GroupState.PREPARING_REBALANCE:
                self._prepare_rebalance(group, f"member {member_id} rejoined")
        _fail(member.join_waiter, ErrorCode.unknown_member_id)  # a duplicate join replaces it
        member.join_waiter = asyncio.get_running_loop().create_future()
        return await self._await_join(group, member)

    def _accepts_joining(self, group: ConsumerGroup, member_id: str, group_instance_id: str | None) -> bool:
        """Kafka's acceptJoiningMember (``group.max.size``): a group rebalancing takes members
        up to the cap among those rejoining, any other group up to the cap among its members;
        a known member (or static instance) always."""
        known = member_id in group.members or (
            group_instance_id is not None and group_instance_id in group.static_members)
        if group.state is GroupState.EMPTY:
            return True
        if group.state is GroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            if member is not None and member.join_waiter is not None:
                return True
            awaiting = sum(1 for m in group.members.values() if m.join_waiter is not None)
            return awaiting < self.settings.max_size
        return known or len(group.members) < self.settings.max_size

    def _join_consumer_group(self, request: ClassicJoin) -> dict:
        """A classic member joining a consumer group with members (Kafka 4 serves it there)."""
        answer = self.consumer.classic_members.join(self.consumer.groups[request.group_id], request)
        if answer.error is not ErrorCode.none:
            return _join_error(answer.error, answer.member_id)
        return dict(error_code=ErrorCode.none, generation_id=answer.generation_id, protocol_type="consumer",
                    protocol_name=answer.protocol_name, leader="", skip_assignment=False,
                    member_id=answer.member_id, members=[])

    def _consumer_group(self, group_id: str):
        """The live consumer-protocol group with this id, if the id is not a classic group's."""
        if group_id in self.groups:
            return None
        group = self.consumer.groups.get(group_id)
        return None if group is None or group.dead else group

    # -- online migration (the consumer coordinator's ClassicGroups) -----------------------
    def classic_group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def take_classic(self, group_id: str) -> None:
        group = self.groups.pop(group_id)
        self._write_metadata_later(group_id, None)  # it is a consumer-protocol group now
        group.state = GroupState.DEAD
        for member in group.members.values():
            _fail(member.join_waiter, ErrorCode.rebalance_in_progress)
            _fail(member.sync_waiter, ErrorCode.rebalance_in_progress)
        self._changed()

    def adopt_classic(self, group: ConsumerGroup) -> None:
        self.groups[group.group_id] = group
        self._prepare_rebalance(group, "downgraded from the consumer protocol as its last member left")

    async def _await_join(self, group: ConsumerGroup, member: Member) -> dict:
        waiter = member.join_waiter
        self._maybe_complete_join(group)
        self._changed()
        try:
            return await waiter
        except GroupError as exc:
            return _join_error(exc.code, member.member_id)

    async def _rejoin_static(
        self, group: ConsumerGroup, old_id: str, protocols: list[tuple[str, bytes]],
        session_timeout_ms: int, rebalance_timeout_ms: int, client_id: str, client_host: str,
        can_skip_assignment: bool = False,
    ) -> dict:
        """A static member came back without its member id (it restarted): it takes over its
        old place under a new id, fencing the old id, without a rebalance if nothing changed."""
        old = group.members.pop(old_id)
        _fail(old.join_waiter, ErrorCode.fenced_instance_id)
        _fail(old.sync_waiter, ErrorCode.fenced_instance_id)
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        member = Member(new_id, old.group_instance_id, client_id, client_host, session_timeout_ms,
                        rebalance_timeout_ms, old.protocol_type, protocols, self._clock.monotonic(),
                        assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[old.group_instance_id] = new_id
        previous_leader = group.leader_id
        if group.leader_id == old_id:
            group.leader_id = new_id
        # Kafka (updateStaticMemberAndRebalance): in a Stable group, no rebalance unless the
        # group's protocol would change; the member's metadata bytes may differ (owned
        # partitions of cooperative-sticky), they are simply stored.
        if group.state is GroupState.STABLE and group.select_protocol() == group.protocol_name:
            # Kafka persists the group here, answering once it is stored, so that a restart
            # keeps the new member id (else the restored group fences the live member).
            error = await self._write_metadata(group.group_id, classic_persistence.encode(group), group)
            if error is not ErrorCode.none:
                if group.members.get(new_id) is member and group.static_members.get(old.group_instance_id) == new_id:
                    del group.members[new_id]  # Kafka reverts to the old member on a failed store
                    group.members[old_id] = old
                    group.static_members[old.group_instance_id] = old_id
                    if group.leader_id == new_id:
                        group.leader_id = old_id
                return _join_error(error, "")
            self._changed()
            answer = self._join_answer(group, member)
            if new_id == group.leader_id:
                # A rejoining leader must not run an assignment the Stable group would ignore:
                # v9+ says so (KIP-814); older versions get the previous leader id, no members.
                if can_skip_assignment:
                    answer["skip_assignment"] = True
                else:
                    answer["leader"] = previous_leader or ""
                    answer["members"] = []
            return answer
        if group.state is not GroupState.PREPARING_REBALANCE:
            self._prepare_rebalance(group, f"static member {old.group_instance_id} rejoined")
        member.join_waiter = asyncio.get_running_loop().create_future()
        return await self._await_join(group, member)

    def _join_answer(self, group: ConsumerGroup, member: Member) -> dict:
        is_leader = member.member_id == group.leader_id
        return dict(
            error_code=ErrorCode.none,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=False,
            member_id=member.member_id,
            members=[
                dict(member_id=m.member_id, group_instance_id=m.group_instance_id,
                     metadata=m.metadata_for(group.protocol_name or ""))
                for m in group.members.values()
            ] if is_leader else [],
        )

    def _prepare_rebalance(self, group: ConsumerGroup, reason: str) -> None:
        log.info("group %s: rebalancing (%s)", group.group_id, reason)
        now = self._clock.monotonic()
        if group.state is GroupState.COMPLETING_REBALANCE:
            for member in group.members.values():
                if member.awaiting_rebalance:
                    member.last_seen = now  # its session starts over when its wait ends
                _fail(member.sync_waiter, ErrorCode.rebalance_in_progress)
        if group.state is GroupState.EMPTY:
            group.join_not_before = now + self.settings.initial_rebalance_delay_ms / 1000
        group.state = GroupState.PREPARING_REBALANCE
        group.pending_sync.clear()
        group.rebalance_deadline = now + group.rebalance_timeout_ms() / 1000
        self._changed()

    def _maybe_complete_join(self, group: ConsumerGroup) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.all_rejoined()
            and self._clock.monotonic() >= group.join_not_before
        ):
            self._complete_join(group)

    def _complete_join(self, group: ConsumerGroup) -> None:
        group.generation_id += 1
        for member in group.members.values():
            member.assignment = b""
        if not group.members:
            group.state = GroupState.EMPTY
            group.protocol_name = group.leader_id = None  # the type stays, as Kafka reports it
            log.info("group %s: empty at generation %d", group.group_id, group.generation_id)
            self._write_metadata_later(group.group_id, classic_persistence.encode(group), group)
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.state = GroupState.COMPLETING_REBALANCE
        now = self._clock.monotonic()
        group.pending_sync = set(group.members)
        group.sync_deadline = now + group.rebalance_timeout_ms() / 1000
        log.info(
            "group %s: generation %d with %d member(s), protocol %s",
            group.group_id, group.generation_id, len(group.members), group.protocol_name,
        )
        for member in group.members.values():
            member.last_seen = now
            waiter, member.join_waiter = member.join_waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(self._join_answer(group, member))
        self._changed()

    def _remove_member(
        self, group: ConsumerGroup, member: Member, code: ErrorCode, rebalance: bool = True
    ) -> None:
        del group.members[member.member_id]
        group.pending_sync.discard(member.member_id)
        if member.group_instance_id is not None and group.static_members.get(member.group_instance_id) == member.member_id:
            del group.static_members[member.group_instance_id]
        _fail(member.join_waiter, code)
        _fail(member.sync_waiter, code)
        if not rebalance:
            return
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"member {member.member_id} left")
        self._maybe_complete_join(group)  # at once if every remaining member (or none) waits
        self._changed()

    def _member(
        self, group_id: str, member_id: str, group_instance_id: str | None
    ) -> tuple[ConsumerGroup, Member]:
        group = self.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            raise GroupError(ErrorCode.unknown_member_id)
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                raise GroupError(ErrorCode.fenced_instance_id)
        member = group.members.get(member_id)
        if member is None:
            raise GroupError(ErrorCode.unknown_member_id)
        return group, member

    async def sync(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> tuple[ErrorCode, bytes, str | None, str | None]:
        """A SyncGroup; returns (error, this member's assignment, protocol type, name)."""
        consumer_group = self._consumer_group(group_id)
        if consumer_group is not None:
            return self.consumer.classic_members.sync(consumer_group, generation_id, member_id, group_instance_id,
                                                      protocol_type, protocol_name)
        try:
            group, member = self._member(group_id, member_id, group_instance_id)
        except GroupError as exc:
            return exc.code, b"", None, None
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation, b"", None, None
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol, b"", None, None
        member.last_seen = self._clock.monotonic()
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress, b"", None, None
        group.pending_sync.discard(member_id)
        if group.state is GroupState.STABLE:
            return ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name
        _fail(member.sync_waiter, ErrorCode.rebalance_in_progress)
        member.sync_waiter = asyncio.get_running_loop().create_future()
        waiter = member.sync_waiter
        if member_id == group.leader_id:
            # Kafka's storeGroup: the generation is durable before any member hears of it.
            # A task of its own: the leader's request may be cancelled (its connection
            # closed) during the write, and the other members must still hear of it.
            task = asyncio.get_running_loop().create_task(self._store_generation(group, assignments))
            self._metadata_writes.add(task)
            task.add_done_callback(self._metadata_writes.discard)
        try:
            return await waiter
        except GroupError as exc:
            return exc.code, b"", None, None

    async def _store_generation(self, group: ConsumerGroup, assignments: dict[str, bytes]) -> None:
        """Write the generation the leader's SyncGroup completes, then answer its members."""
        generation = group.generation_id
        error = await self._write_metadata(group.group_id, classic_persistence.encode(group, assignments), group)
        # A member may have joined or left during the write: then the write is moot.
        if group.state is GroupState.COMPLETING_REBALANCE and group.generation_id == generation \
                and self.groups.get(group.group_id) is group:
            if error is ErrorCode.none:
                self._complete_sync(group, assignments)
            else:  # Kafka's resetAndPropagateAssignmentError, then a new rebalance
                for other in group.members.values():
                    other.assignment = b""
                    _fail(other.sync_waiter, error)
                self._prepare_rebalance(group, f"error {error.name} storing the group's assignment")

    def _complete_sync(self, group: ConsumerGroup, assignments: dict[str, bytes]) -> None:
        now = self._clock.monotonic()
        for other in group.members.values():
            other.assignment = assignments.get(other.member_id, b"")
        group.state = GroupState.STABLE
        log.info("group %s: stable at generation %d", group.group_id, group.generation_id)
        for other in group.members.values():
            w, other.sync_waiter = other.sync_waiter, None
            if w is not None:
                other.last_seen = now  # its session starts over when its wait ends
            if w is not None and not w.done():
                w.set_result((ErrorCode.none, other.assignment, group.protocol_type, group.protocol_name))
        self._changed()

    # -- persisted metadata (classic_persistence) ------------------------------------------
    async def _write_metadata(self, group_id: str, entry: dict | None,
                              group: ConsumerGroup | None = None) -> ErrorCode:
        """Write ``group``'s entry (None: its tombstone) after every earlier one; the error
        Kafka's storeGroup maps a failed append to (a storage error: NOT_COORDINATOR)."""
        puts, deletes = ({group_id: entry}, ()) if entry is not None else ({}, (group_id,))
        async with self._metadata_lock:
            if group is not None and self.groups.get(group_id) is not group:
                return ErrorCode.none  # deleted or converted meanwhile: its tombstone stands
            try:
                await asyncio.to_thread(self._metadata.commit, puts, deletes)
            except OSError:
                log.exception("group %s: could not write its metadata", group_id)
                return ErrorCode.not_coordinator
        return ErrorCode.none

    def _write_metadata_later(self, group_id: str, entry: dict | None,
                              group: ConsumerGroup | None = None) -> None:
        """The same, not awaited (Kafka only logs a failure to store an emptied group); the
        entry is taken now, so writes keep the order of the changes they record."""
        if entry is None and group_id not in self._metadata.entries and not self._metadata_writes:
            return  # nothing persisted to tombstone
        task = asyncio.get_running_loop().create_task(self._write_metadata(group_id, entry, group))
        self._metadata_writes.add(task)
        task.add_done_callback(self._metadata_writes.discard)

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        consumer_group = self._consumer_group(group_id)
        if consumer_group is not None:
            return self.consumer.classic_members.heartbeat(consumer_group, generation_id, member_id,
                                                           group_instance_id)
        try:
            group, member = self._member(group_id, member_id, group_instance_id)
        except GroupError as exc:
            return exc.code
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member.last_seen = self._clock.monotonic()
        if group.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group_id: str, member_id: str, group_instance_id: str | None) -> ErrorCode:
        consumer_group = self._consumer_group(group_id)
        if consumer_group is not None:
            return self.consumer.classic_members.leave(consumer_group, member_id, group_instance_id)
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if not member_id and group_instance_id is not None:
            member_id = group.static_members.get(group_instance_id, "")
        try:
            group, member = self._member(group_id, member_id, group_instance_id)
        except GroupError as exc:
            return exc.code
        log.info("group %s: member %s left", group_id, member_id)
        self._remove_member(group, member, ErrorCode.unknown_member_id)
        return ErrorCode.none

    # -- offsets ---------------------------------------------------------------------------
    def check_commit(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
        transactional: bool = False, api_version: int | None = None,
    ) -> ErrorCode:
        """Whether an OffsetCommit (or, ``transactional``, a TxnOffsetCommit) from this member
        and generation may be applied: Kafka's validateOffsetCommit for classic groups.

        A commit naming a generation, a member or an instance must come from a current
        member of that generation. A group unknown here (never joined here, or deleted)
        is an older generation for
        OffsetCommit; TxnOffsetCommit treats it as an empty group, whose members are unknown
        (so a zombie of a forgotten generation is fenced, KIP-447). Without any of the three,
        a "simple" consumer's commit is accepted unless the group has members (OffsetCommit
        only: older TxnOffsetCommit versions carry none of them).
        """
        if not group_id:
            return ErrorCode.invalid_group_id
        if self.share.has_group(group_id):
            return ErrorCode.group_id_not_found  # Kafka's ShareGroup.validateOffsetCommit
        consumer_group = self.consumer.groups.get(group_id)
        if consumer_group is not None:
            return self.consumer.check_commit(consumer_group, member_id, generation_id, transactional,
                                              api_version)
        group = self.groups.get(group_id)
        if group is None and generation_id >= 0 and not transactional:
            return ErrorCode.illegal_generation
        if group is not None and group.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id >= 0 or member_id or group_instance_id is not None:
            try:
                group, member = self._member(group_id, member_id, group_instance_id)
            except GroupError as exc:
                return exc.code
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
            if not transactional and group.state is GroupState.COMPLETING_REBALANCE:
                return ErrorCode.rebalance_in_progress
            member.last_seen = self._clock.monotonic()
            return ErrorCode.none
        if not transactional and group is not None and group.members:
            return ErrorCode.unknown_member_id
        return ErrorCode.none

    async def commit(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        if group_id not in self.groups and group_id not in self.consumer.groups:
            self.groups[group_id] = ConsumerGroup(group_id)
        await self._store.commit_offsets(group_id, offsets)

    def apply_offsets(self, group_id: str, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Commit offsets at once, without waiting for durability (a committed transaction's
        offsets; the caller awaits ``store.wait_offsets_durable`` before answering)."""
        if group_id not in self.groups and group_id not in self.consumer.groups:
            self.groups[group_id] = ConsumerGroup(group_id)
        self._store.offsets.commit(group_id, offsets)

    def committed(self, group_id: str, topic: str, partition: int) -> CommittedOffset | None:
        return self._store.offsets.fetch(group_id, topic, partition)

    def all_committed(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        return self._store.offsets.group_offsets(group_id)

    def expire_offsets(self) -> None:
        live = {g.group_id for g in self.groups.values() if g.members}
        live |= {group_id for group_id in self.consumer.groups if self.consumer.member_count(group_id)}
        emptied = self._store.offsets.expire(
            self._clock.now_ms(), self._store.config.offsets_retention_ms, live
        )
        for group_id in emptied:
            group = self.groups.get(group_id)
            if group is not None and not group.members:
                del self.groups[group_id]
                self._write_metadata_later(group_id, None)
            if self.consumer.member_count(group_id) == 0:
                self.consumer.forget(group_id)
        # Kafka's cleanupGroupMetadata: an Empty classic group without offsets is dropped, and
        # so is its persisted metadata (its tombstone).
        for group_id, group in list(self.groups.items()):
            if group.state is GroupState.EMPTY and not group.members and not group.pending_members \
                    and not self._store.offsets.group_offsets(group_id):
                del self.groups[group_id]
                self._write_metadata_later(group_id, None)

    def check_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """Whether an OffsetFetch of this group may be answered: a share group has no
        committed offsets (Kafka's ShareGroup.validateOffsetFetch: GROUP_ID_NOT_FOUND); a
        consumer-protocol member fetches at its current epoch."""
        if self.share.has_group(group_id):
            return ErrorCode.group_id_not_found
        return self.consumer.check_fetch(group_id, member_id, member_epoch)

    # -- administration --------------------------------------------------------------------
    def known_group_ids(self) -> list[str]:
        return sorted(set(self.groups) | set(self.consumer.groups) | set(self.share.groups)
                      | set(self._store.offsets.groups()))

    def is_classic(self, group_id: str) -> bool:
        return group_id in self.groups

    def group_type(self, group_id: str) -> str:
        """Kafka's GroupType name: "consumer" for a consumer-protocol group, "share" for a
        share group, else "classic" (a group known only by its committed offsets is a
        simple classic group)."""
        if group_id in self.consumer.groups:
            return "consumer"
        return "share" if self.share.has_group(group_id) else "classic"

    def state_of(self, group_id: str) -> GroupState | ConsumerGroupState | ShareGroupState | None:
        share = self.share.state_of(group_id)
        if share is not None:
            return share
        group = self.groups.get(group_id)
        if group is not None:
            return group.state
        state = self.consumer.state_of(group_id)
        if state is not None:
            return state
        return GroupState.EMPTY if group_id in self._store.offsets.groups() else None

    def _classic_member_count(self, group_id: str) -> int | None:
        group = self.groups.get(group_id)
        return None if group is None else len(group.members)

    def _is_share(self, group_id: str) -> bool:
        return self.share.has_group(group_id)

    def _non_share_type(self, group_id: str) -> str | None:
        if self.consumer.member_count(group_id) is not None:
            return "consumer"
        if group_id in self.groups or group_id in self._store.offsets.groups():
            return "classic"
        return None

    def _drop_empty_classic(self, group_id: str) -> None:
        group = self.groups.get(group_id)
        if group is not None and not group.members:
            del self.groups[group_id]
            self._write_metadata_later(group_id, None)

    def delete(self, group_id: str) -> ErrorCode:
        if self.share.has_group(group_id):
            error = self.share.delete(group_id)
            if error is ErrorCode.none:
                self.configs.drop(group_id)
            return error
        group = self.groups.get(group_id)
        if group is not None and group.members or self.consumer.member_count(group_id):
            return ErrorCode.non_empty_group
        if group is None and group_id not in self._store.offsets.groups() and group_id not in self.consumer.groups:
            return ErrorCode.group_id_not_found
        if group_id in self._metadata.entries or self._metadata_writes:
            # The tombstone first, durably: a deleted group never comes back with a restart.
            try:
                self._metadata.commit({}, (group_id,))
            except OSError:
                log.exception("group %s: could not write its tombstone", group_id)
                return ErrorCode.not_coordinator
        self.groups.pop(group_id, None)
        self.consumer.forget(group_id)
        self._store.offsets.delete_group(group_id)
        self.configs.drop(group_id)
        return ErrorCode.none


def _join_error(code: ErrorCode, member_id: str) -> dict:
    return dict(
        error_code=code, generation_id=-1, protocol_type=None, protocol_name=None, leader="",
        skip_assignment=False, member_id=member_id, members=[],
    )


def _fail(waiter: asyncio.Future | None, code: ErrorCode) -> None:
    """Answer a waiting Join/Sync with an error (the shapes differ, so a GroupError)."""
    if waiter is not None and not waiter.done():
        waiter.set_exception(GroupError(code))


class _NoTopics:
    """The catalog of a coordinator built without one (unit tests of classic groups)."""

    def lookup(self, name: str) -> None:
        return None

    def names(self) -> list[str]:
        return []

    def name_of(self, topic_id) -> None:
        return None
