"""Online migration between the classic and the consumer group protocol (KIP-848), as Kafka 4's
GroupMetadataManager does it (``validateOnlineUpgrade``, ``convertToConsumerGroup``,
``convertToClassicGroup``; ``ConsumerGroup.fromClassicGroup``, ``ClassicGroup.fromConsumerGroup``).

- Upgrade: a ConsumerGroupHeartbeat joining a classic group with members turns it into a
  consumer group, if ``group.consumer.migration.policy`` allows it. Every classic member
  becomes a member of the consumer group that still speaks the classic protocol: its
  subscription is read from its ConsumerProtocol metadata, it keeps its current assignment
  (which is also its target), its epoch is the generation id, and so are the group epoch
  and the assignment epoch; the joining member then bumps the epoch as any new member does.
- Downgrade: when the last member using the consumer protocol leaves (or is fenced) and
  only classic members remain, the group becomes a classic group again, if the policy allows
  it: generation id = group epoch, each member's assignment its target, and a rebalance
  starts at once (Kafka: PreparingRebalance).

The functions here are pure conversions; the coordinators decide when they run. Committed
offsets live in the offset store, keyed by group id only, so no conversion touches them.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable

from .consumer_group import ClassicProtocol, ConsumerMember, ConsumerProtocolGroup
from .group import ConsumerGroup, GroupState, Member
from .reconciliation import MemberState, TopicPartitions
from .subscription import PROTOCOL_TYPE, MalformedProtocol, decode_assignment, decode_subscription, encode_assignment


class MigrationPolicy(enum.Enum):
    """Kafka's ConsumerGroupMigrationPolicy (``group.consumer.migration.policy``)."""

    BIDIRECTIONAL = "bidirectional"
    UPGRADE = "upgrade"
    DOWNGRADE = "downgrade"
    DISABLED = "disabled"

    @classmethod
    def parse(cls, text: str) -> MigrationPolicy:
        """Case-insensitive, as Kafka's ``ConsumerGroupMigrationPolicy.parse``; ValueError if unknown."""
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"must be one of {', '.join(p.value for p in cls)}") from None

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.UPGRADE)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.BIDIRECTIONAL, MigrationPolicy.DOWNGRADE)


class UpgradeRefused(Exception):
    """The classic group stays classic; the message is Kafka's GROUP_ID_NOT_FOUND message."""


def check_upgrade(classic: ConsumerGroup, policy: MigrationPolicy, max_size: int) -> None:
    """Kafka's validateOnlineUpgrade for a classic group with members."""
    group_id = classic.group_id
    prefix = f"Cannot upgrade classic group {group_id} to consumer group because"
    if not policy.upgrade_enabled:
        raise UpgradeRefused(f"{prefix} online upgrade is disabled.")
    if classic.protocol_type != PROTOCOL_TYPE:
        raise UpgradeRefused(f"{prefix} the group does not use the consumer embedded protocol.")
    if len(classic.members) > max_size:
        raise UpgradeRefused(f"{prefix} the group size exceeds the consumer group maximum size.")


def consumer_group_from_classic(
    classic: ConsumerGroup, lookup: Callable[[str], tuple[uuid.UUID, int] | None], now: float,
) -> ConsumerProtocolGroup:
    """The consumer group a classic group becomes; ``lookup(topic name)`` is (id, partition
    count) or None; ``now`` (clock.monotonic()) starts each member's own session timeout.
    Raises UpgradeRefused if a member's metadata or assignment is not ConsumerProtocol."""
    generation = classic.generation_id
    group = ConsumerProtocolGroup(classic.group_id, epoch=generation, assignment_epoch=generation)
    for old in classic.members.values():
        metadata = old.metadata_for(classic.protocol_name) if classic.protocol_name else old.protocols[0][1]
        try:
            subscription = decode_subscription(metadata)
            assigned = to_topic_ids(decode_assignment(old.assignment), lookup)
        except MalformedProtocol:
            raise UpgradeRefused(
                f"Cannot upgrade classic group {classic.group_id} to consumer group because the embedded "
                f"consumer protocol is malformed.") from None
        member = ConsumerMember(
            old.member_id, old.group_instance_id, None, old.client_id, old.client_host,
            old.rebalance_timeout_ms, subscribed_names=tuple(sorted(set(subscription.topics))),
            epoch=generation, previous_epoch=generation, state=MemberState.STABLE, assigned=assigned,
            session_deadline=now + old.session_timeout_ms / 1000,
            classic=ClassicProtocol(old.session_timeout_ms, tuple(old.protocols)),
        )
        group.members[member.member_id] = member
        if member.instance_id is not None:
            group.static_members[member.instance_id] = member.member_id
        group.target[member.member_id] = dict(assigned)
        group.claim(member)
    return group


def classic_group_from_consumer(
    group: ConsumerProtocolGroup, leaving: ConsumerMember, name_of: Callable[[uuid.UUID], str | None], now: float,
) -> ConsumerGroup:
    """The classic group a consumer group of classic members (once ``leaving`` is gone)
    becomes, Stable at generation = group epoch; the caller starts its rebalance."""
    classic = ConsumerGroup(group.group_id, state=GroupState.STABLE, generation_id=group.epoch,
                            protocol_type=PROTOCOL_TYPE, was_consumer_group=True)
    for m in group.members.values():
        if m is leaving or m.classic is None:
            continue
        classic.members[m.member_id] = Member(
            m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
            m.rebalance_timeout_ms, PROTOCOL_TYPE, list(m.classic.protocols), now,
            assignment=encode_assignment(to_topic_names(group.target.get(m.member_id, {}), name_of)),
        )
        if m.instance_id is not None:
            classic.static_members[m.instance_id] = m.member_id
    classic.protocol_name = classic.select_protocol()
    classic.leader_id = next(iter(classic.members))
    return classic


def to_topic_ids(partitions: set[tuple[str, int]],
                 lookup: Callable[[str], tuple[uuid.UUID, int] | None]) -> TopicPartitions:
    """Partitions of topics that exist (a deleted topic's are dropped, as Kafka does)."""
    out: dict[uuid.UUID, set[int]] = {}
    for topic, p in partitions:
        found = lookup(topic)
        if found is not None and 0 <= p < found[1]:
            out.setdefault(found[0], set()).add(p)
    return {topic_id: frozenset(ps) for topic_id, ps in out.items()}


def to_topic_names(partitions: TopicPartitions,
                   name_of: Callable[[uuid.UUID], str | None]) -> dict[str, frozenset[int]]:
    """An assignment by topic id as the {name: partitions} a ConsumerProtocolAssignment carries."""
    out = {}
    for topic_id, ps in partitions.items():
        name = name_of(topic_id)
        if name is not None and ps:
            out[name] = ps
    return out
