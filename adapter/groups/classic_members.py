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
  its epoch (unless it is still revoking: it rejoins by itself once it has), or partitions it
  waits for have been released by their previous owners.
- Generations are member epochs (ILLEGAL_GENERATION on mismatch); each member keeps its own
  session timeout from its JoinGroup.
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
        c = self._coordinator
        names = [name for name, _ in request.protocols]
        common = group.classic_protocol_names()
        if request.protocol_type != PROTOCOL_TYPE or not names or (common is not None and not common & set(names)):
            # Kafka: "Member <id>'s protocols are not supported." (JoinGroup has no message)
            return JoinAnswer(ErrorCode.inconsistent_group_protocol, request.member_id)
        try:
            subscription = decode_subscription(request.protocols[0][1])
        except MalformedProtocol:
            return JoinAnswer(ErrorCode.inconsistent_group_protocol, request.member_id)
        member_or_error = self._member_for_join(group, request)
        if isinstance(member_or_error, JoinAnswer):
            return member_or_error
        member = member_or_error
        new = member.member_id not in group.members
        if new and len(group.members) >= c.settings.max_size:
            return JoinAnswer(ErrorCode.group_max_size_reached, request.member_id)
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
        chosen = next(n for n in names if common is None or n in common)
        return JoinAnswer(ErrorCode.none, member.member_id, member.epoch, chosen)

    def _member_for_join(self, group: ConsumerProtocolGroup, request: ClassicJoin) -> ConsumerMember | JoinAnswer:
        member_id = request.member_id
        if request.instance_id is None:
            if not member_id:
                member_id = _new_member_id(request.client_id)
                if request.require_known_member_id:
                    return JoinAnswer(ErrorCode.member_id_required, member_id)
            member = group.members.get(member_id)
            if member is not None and member.classic is None:
                return JoinAnswer(ErrorCode.unknown_member_id, request.member_id)
            return member or self._new_member(member_id, None, request)
        holder_id = group.static_members.get(request.instance_id)
        holder = group.members.get(holder_id) if holder_id is not None else None
        if holder is None:
            return self._new_member(member_id or _new_member_id(request.client_id), request.instance_id, request)
        if member_id and member_id != holder.member_id:
            return JoinAnswer(ErrorCode.fenced_instance_id, member_id)
        if member_id:
            return holder
        # A static member back under a new id takes its predecessor's place and assignment.
        replacement = self._new_member(_new_member_id(request.client_id), request.instance_id, request)
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
        member, error = self._known(group, member_id, instance_id)
        if member is None:
            return error, b"", None, None
        if generation_id != member.epoch:
            return ErrorCode.illegal_generation, b"", None, None
        names = member.classic.names()
        if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name not in names):
            return ErrorCode.inconsistent_group_protocol, b"", None, None
        if self._must_rejoin(group, member):
            return ErrorCode.rebalance_in_progress, b"", None, None
        self._coordinator.touch(member, member.classic.session_timeout_ms)
        common = group.classic_protocol_names() or set(names)
        name = protocol_name or next((n for n in names if n in common), names[0])
        assignment = encode_assignment(to_topic_names(member.assigned, self._coordinator.topic_name))
        return ErrorCode.none, assignment, PROTOCOL_TYPE, name

    def heartbeat(self, group: ConsumerProtocolGroup, generation_id: int, member_id: str,
                  instance_id: str | None) -> ErrorCode:
        member, error = self._known(group, member_id, instance_id)
        if member is None:
            return error
        if generation_id != member.epoch:
            return ErrorCode.illegal_generation
        self._coordinator.touch(member, member.classic.session_timeout_ms)
        if self._must_rejoin(group, member):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    def leave(self, group: ConsumerProtocolGroup, member_id: str, instance_id: str | None) -> ErrorCode:
        if not member_id and instance_id is not None:
            member_id = group.static_members.get(instance_id, "")
        member, error = self._known(group, member_id, instance_id)
        if member is None:
            return error
        self._coordinator.remove(group, member, reason="left")
        return ErrorCode.none

    @staticmethod
    def _known(group: ConsumerProtocolGroup, member_id: str,
               instance_id: str | None) -> tuple[ConsumerMember | None, ErrorCode]:
        if instance_id is not None:
            holder = group.static_members.get(instance_id)
            if holder is not None and holder != member_id:
                return None, ErrorCode.fenced_instance_id
        member = group.members.get(member_id)
        if member is None or member.classic is None:
            return None, ErrorCode.unknown_member_id
        return member, ErrorCode.none

    def _must_rejoin(self, group: ConsumerProtocolGroup, member: ConsumerMember) -> bool:
        """Kafka's throwIfRebalanceInProgress, and a member waiting for partitions that have
        been released since (a rejoin is the only way a classic member learns of them)."""
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            return False
        if group.epoch > member.epoch:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            target = group.target.get(member.member_id, {})
            owner_epoch = self._coordinator.partition_owner(group)
            return any(owner_epoch(topic_id, p) == -1
                       for topic_id, ps in target.items() for p in ps - member.assigned.get(topic_id, frozenset()))
        return False


def _new_member_id(client_id: str) -> str:
    return f"{client_id or 'member'}-{uuid.uuid4()}"
