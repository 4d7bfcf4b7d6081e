"""Classic members inside a consumer group (KIP-848 online migration): JoinGroup, SyncGroup,
Heartbeat and LeaveGroup served from the consumer group's state, as Kafka 4's
GroupMetadataManager does (``classicGroupJoinToConsumerGroup`` and its Sync, Heartbeat and
Leave counterparts).

- JoinGroup: the member's subscription (topics, and from ConsumerProtocolSubscription v1 the
  partitions it owns) comes from its protocol metadata; a new member or a changed
  subscription bumps the group epoch, the server assignor computes the target assignment,
  and the member reconciles one step towards it exactly as a consumer-protocol member does
  (it gives up revoked partitions before it gets any new one). The answer comes at once:
  generation id = the member's epoch, no leader (every classic member is a follower), so
  the member sends SyncGroup without assignments.
- SyncGroup: the member's current assignment as a ConsumerProtocolAssignment.
- Heartbeat: REBALANCE_IN_PROGRESS when the member must rejoin: the group epoch moved past
  its epoch, it must revoke partitions, or every partition it waits for has been released.
- Generations are member epochs (ILLEGAL_GENERATION on mismatch); each member keeps its own
  session timeout from its JoinGroup; it must send SyncGroup within its rebalance timeout of
  a JoinGroup, and rejoin within it once told to, or it is removed (Kafka's sync and join
  timeouts).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from .consumer_group import ClassicProtocol, ConsumerMember, ConsumerProtocolGroup
from .migration import to_topic_ids, to_topic_names
from .reconciliation import MemberState
from .subscription import PROTOCOL_TYPE, MalformedProtocol, decode_subscription, encode_assignment

if TYPE_CHECKING:
    from .consumer_coordinator import ConsumerGroupCoordinator


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    group_id: str
    member_id: str
    instance_id: str | None
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str
    require_known_member_id: bool


@dataclass(frozen=True, slots=True)
class JoinAnswer:
    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_name: str | None = None


class ClassicMembers:
    """The classic-protocol requests of members of one coordinator's consumer groups."""

    def __init__(self, coordinator: ConsumerGroupCoordinator) -> None:
        self._coordinator = coordinator

    # -- JoinGroup -------------------------------------------------------------------------
    def join(self, group: ConsumerProtocolGroup, request: ClassicJoin) -> JoinAnswer:
        """Kafka's classicGroupJoinToConsumerGroup, its checks in Kafka's order."""
        c = self._coordinator
        unknown = not request.member_id
        member_id = request.member_id or str(uuid.uuid4())
        if member_id not in group.members and len(group.members) >= c.settings.max_size:
            return JoinAnswer(ErrorCode.group_max_size_reached, member_id)
        names = [name for name, _ in request.protocols]
        common = group.classic_protocol_names()
        if request.protocol_type != PROTOCOL_TYPE or not names or (common is not None and not common & set(names)):
            # Kafka: "Member <id>'s protocols are not supported." (JoinGroup has no message)
            return JoinAnswer(ErrorCode.inconsistent_group_protocol, member_id)
        if unknown and request.instance_id is None and request.require_known_member_id:
            return JoinAnswer(ErrorCode.member_id_required, member_id)
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except MalformedProtocol:
            # Kafka throws IllegalStateException ("Malformed embedded consumer protocol in
            # subscription deserialization."), which reaches the client as this.
            return JoinAnswer(ErrorCode.unknown_server_error, member_id)
        member_or_error = self._member_for_join(group, member_id, unknown, request)
        if isinstance(member_or_error, JoinAnswer):
            return member_or_error
        member = member_or_error
        new = member.member_id not in group.members
        if new:
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        member.client_id, member.client_host = request.client_id, request.client_host
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.classic = ClassicProtocol(request.session_timeout_ms, request.protocols)
        topics = tuple(sorted(set(subscription.topics)))
        changed = new or topics != member.subscribed_names or member.subscribed_regex is not None
        member.subscribed_names, member.subscribed_regex = topics, None
        # A v0 subscription cannot list owned partitions: Kafka reads that as owning none.
        owned = to_topic_ids(subscription.owned or frozenset(), c.lookup_topic)
        c.advance(group, member, owned, changed)
        c.touch(member, request.session_timeout_ms)
        # It rejoined; now it must send SyncGroup within its rebalance timeout.
        member.join_deadline = None
        member.sync_deadline = c.now() + member.rebalance_timeout_ms / 1000
        c.deadline_set(member.sync_deadline)
        return JoinAnswer(ErrorCode.none, member.member_id, member.epoch, names[0])

    def _member_for_join(self, group: ConsumerProtocolGroup, member_id: str, unknown: bool,
                         request: ClassicJoin) -> ConsumerMember | JoinAnswer:
        if request.instance_id is None:
            member = group.members.get(member_id)
            if member is not None and member.classic is None:
                return JoinAnswer(ErrorCode.unknown_member_id, member_id)
            return member or self._new_member(member_id, None, request)
        holder_id = group.static_members.get(request.instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if holder is None:
            return self._new_member(member_id, request.instance_id, request)
        if not unknown and member_id != holder.member_id:
            return JoinAnswer(ErrorCode.fenced_instance_id, member_id)
        if not unknown:
            return holder
        # A static member back under a new id takes its predecessor's place and assignment.
        replacement = self._new_member(member_id, request.instance_id, request)
        replacement.subscribed_names = holder.subscribed_names
        replacement.epoch, replacement.previous_epoch = holder.epoch, holder.previous_epoch
        replacement.state, replacement.assigned = holder.state, holder.assigned
        replacement.pending_revocation = holder.pending_revocation
        del group.members[holder.member_id]
        if holder.member_id in group.target:
            group.target[replacement.member_id] = group.target.pop(holder.member_id)
        group.members[replacement.member_id] = replacement
        group.static_members[request.instance_id] = replacement.member_id
        group.release(holder)
        group.claim(replacement)
        return replacement

    @staticmethod
    def _new_member(member_id: str, instance_id: str | None, request: ClassicJoin) -> ConsumerMember:
        return ConsumerMember(member_id, instance_id, None, request.client_id, request.client_host,
                              request.rebalance_timeout_ms,
                              classic=ClassicProtocol(request.session_timeout_ms, request.protocols))

    # -- SyncGroup, Heartbeat, LeaveGroup --------------------------------------------------
    def sync(self, group: ConsumerProtocolGroup, generation_id: int, member_id: str, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> tuple[ErrorCode, bytes, str | None, str | None]:
        """Kafka's classicGroupSyncToConsumerGroup; the answer echoes the request's protocol
        type and name, as Kafka's does."""
        member, error = self._known(group, member_id, instance_id)
        if member is None:
            return error, b"", None, None
        if member.classic is None:
            return ErrorCode.unknown_member_id, b"", None, None
        if generation_id != member.epoch:
            return ErrorCode.illegal_generation, b"", None, None
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != member.classic.names()[0]):
            return ErrorCode.inconsistent_group_protocol, b"", None, None
        if group.epoch > member.epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            self._expect_rejoin(member)
            return ErrorCode.rebalance_in_progress, b"", None, None
        member.sync_deadline = None
        self._coordinator.touch(member, member.classic.session_timeout_ms)
        assigned = to_topic_names(member.assigned, self._coordinator.topic_name)
        return ErrorCode.none, encode_assignment(assigned, member.classic.version()), protocol_type, protocol_name

    def heartbeat(self, group: ConsumerProtocolGroup, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        """Kafka's classicGroupHeartbeatToConsumerGroup: REBALANCE_IN_PROGRESS when the group
        epoch moved past the member's, when it must revoke partitions, or when every
        partition it waits for has been released."""
        member, error = self._known(group, member_id, instance_id)
        if member is None:
            return error
        if member.classic is None:
            return ErrorCode.unknown_member_id
        if generation_id != member.epoch:
            return ErrorCode.illegal_generation
        self._coordinator.touch(member, member.classic.session_timeout_ms)
        if (member.epoch < group.epoch or member.state is MemberState.UNREVOKED_PARTITIONS
                or (member.state is MemberState.UNRELEASED_PARTITIONS and not self._waits_for_others(group, member))):
            self._expect_rejoin(member)
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group: ConsumerProtocolGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        """Kafka's classicGroupLeaveToConsumerGroup: any member (classic or not) may be removed
        this way; by instance id alone too (administrative removal)."""
        if instance_id is not None and not member_id:
            member_id = group.static_members.get(instance_id, "")
            if not member_id:
                return ErrorCode.unknown_member_id
        member, error = self._known(group, member_id, instance_id)
        if member is None:
            return error
        self._coordinator.remove(group, member, reason="left")
        return ErrorCode.none

    @staticmethod
    def _known(group: ConsumerProtocolGroup, member_id: str,
               instance_id: str | None) -> tuple[ConsumerMember | None, ErrorCode]:
        """Kafka's validateConsumerGroupMember."""
        if instance_id is None:
            member = group.members.get(member_id)
            return (member, ErrorCode.none) if member is not None else (None, ErrorCode.unknown_member_id)
        holder = group.static_members.get(instance_id)
        if holder is None or holder not in group.members:
            return None, ErrorCode.unknown_member_id
        if holder != member_id:
            return None, ErrorCode.fenced_instance_id
        return group.members[holder], ErrorCode.none

    def _expect_rejoin(self, member: ConsumerMember) -> None:
        """It was told to rejoin: it must within its rebalance timeout (Kafka's join timeout)."""
        if member.join_deadline is None:
            member.join_deadline = self._coordinator.now() + member.rebalance_timeout_ms / 1000
            self._coordinator.deadline_set(member.join_deadline)

    def _waits_for_others(self, group: ConsumerProtocolGroup, member: ConsumerMember) -> bool:
        """Kafka's waitingOnUnreleasedPartition: a partition of its target is still owned by
        another member."""
        owner_epoch = self._coordinator.partition_owner(group)
        target = group.target.get(member.member_id, {})
        return any(owner_epoch(topic_id, p) != -1
                   for topic_id, ps in target.items() for p in ps - member.assigned.get(topic_id, frozenset()))
