"""One consumer-protocol group (KIP-848): its members, epochs and target assignment.

The group epoch moves on every change that may change the assignment (a member joins,
leaves or changes its subscription; a subscribed topic appears, disappears or grows). The
target assignment is computed for a group epoch (the assignment epoch); members reconcile
towards it one heartbeat at a time (``reconciliation.py``), each with its own member epoch.

States, as Kafka names them: Empty (no members), Assigning (the group epoch is ahead of the
assignment epoch), Reconciling (a member is not yet at the assignment epoch or still waits
for partitions), Stable, Dead (deleted).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from .reconciliation import MemberState, TopicPartitions
from .subscription import subscription_version


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2  # a static member leaving that will come back


@dataclass(frozen=True, slots=True)
class ClassicProtocol:
    """What a member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) inside a
    consumer group keeps of it: its own session timeout and its JoinGroup protocols."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    def names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def version(self) -> int:
        """The ConsumerProtocol version of its first protocol's metadata (0-3): its
        assignment is sent in that version, as Kafka does."""
        return subscription_version(self.protocols[0][1]) if self.protocols else 0


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    epoch: int = 0
    previous_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TopicPartitions = field(default_factory=dict)
    pending_revocation: TopicPartitions = field(default_factory=dict)
    session_deadline: float = 0.0  # clock.monotonic() after which it is removed
    revocation_deadline: float | None = None  # set while it must revoke partitions
    # Whether the member's principal may DESCRIBE a topic (or view): what its regular
    # expression may match, decided whenever the group resolves it.
    may_describe: Callable[[str], bool] = lambda name: True
    # Set for a member using the classic protocol (online migration, KIP-848), with the
    # deadlines of its next SyncGroup (after a JoinGroup) and JoinGroup (after it was told
    # to rejoin): Kafka's sync and join timeouts, its rebalance timeout.
    classic: ClassicProtocol | None = None
    sync_deadline: float | None = None
    join_deadline: float | None = None

    def owns(self) -> TopicPartitions:
        """Assigned and pending revocation: what nobody else may be given."""
        merged = dict(self.assigned)
        for topic_id, partitions in self.pending_revocation.items():
            merged[topic_id] = merged.get(topic_id, frozenset()) | partitions
        return merged


@dataclass(slots=True)
class ConsumerProtocolGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, TopicPartitions] = field(default_factory=dict)  # member id -> target
    # Topic name -> (id, partition count) of every subscribed topic when the epoch was last
    # bumped: a difference on a later heartbeat (created, deleted, grown) bumps it again.
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    # Member id -> what its regular expression resolved to (topics and the member's rights
    # may change it while the group's topics stay the same), for the regular expression in
    # resolved_regexes; resolved again as regex_resolution.py decides.
    regex_matches: dict[str, frozenset[str]] = field(default_factory=dict)
    resolved_regexes: dict[str, str] = field(default_factory=dict)
    regex_resolved_at: float | None = None  # clock.monotonic() of the last full resolution
    regex_generation: int = -1  # the topic catalog's generation then
    # (topic id, partition) -> epoch of the member owning it (assigned or being revoked).
    partition_epochs: dict[tuple[uuid.UUID, int], int] = field(default_factory=dict)
    assignor_name: str = ""
    # Topic name -> how many members subscribe to it (regular expressions resolved), as of
    # ``subscription_metadata``: a heartbeat that changes no subscription (or a join, or a
    # leave that changes no target) updates these instead of reading every member. None:
    # not known. ``topics_generation``: the catalog's generation when every name was last
    # looked up; a name that did not exist is looked up again only after a creation.
    subscribed_topics: dict[str, int] | None = None
    topics_generation: int = -1
    # Set by the last full target assignment when a member joining with these topics (its
    # names resolve to these ids; no regular expression) cannot change anyone's target, nor
    # one leaving with an empty target: every member subscribes to these topics and the
    # assignor's target cannot move (consumer_coordinator._shared_subscription says when).
    # Such a join or leave still bumps the group epoch; its target assignment is the
    # previous one plus (minus) the member's empty target, found without running the
    # assignor on every member (consumer_coordinator.py). None otherwise.
    shared_subscription: frozenset[uuid.UUID] | None = None
    # With the range assignor: the (sort key, member id) a joining member must sort after.
    join_cutoff: tuple[str, str] | None = None
    # The group epoch for which ``target`` is what the assignor would compute: set when it
    # runs and moved on by such a join or leave. A leave bumps the epoch and, as in Kafka,
    # the new target is only computed at the next heartbeat (the group is Assigning until
    # then); this tells that heartbeat it has nothing to compute.
    target_holds_for: int = -1
    dead: bool = False

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), -1)

    def release(self, member: ConsumerMember) -> None:
        """Forget which partitions ``member`` owns (before it changes, or leaves)."""
        for topic_id, partitions in member.owns().items():
            for p in partitions:
                if self.partition_epochs.get((topic_id, p)) == member.epoch:
                    del self.partition_epochs[(topic_id, p)]

    def claim(self, member: ConsumerMember) -> None:
        for topic_id, partitions in member.owns().items():
            for p in partitions:
                self.partition_epochs[(topic_id, p)] = member.epoch

    def subscribed_names(self) -> set[str]:
        names: set[str] = set()
        for member in self.members.values():
            names.update(member.subscribed_names)
        return names

    def classic_protocol_names(self) -> set[str] | None:
        """Protocol names every classic member supports (None: there is no classic member)."""
        sets = [set(m.classic.names()) for m in self.members.values() if m.classic is not None]
        return set.intersection(*sets) if sets else None

    def only_classic_members_besides(self, leaving: ConsumerMember) -> bool:
        """Whether every other member uses the classic protocol (and there is one): Kafka's
        allMembersUseClassicProtocolExcept."""
        # Both stop early (at a second member; at one using the consumer protocol), so a
        # member leaving a large group costs no scan of it.
        if not any(m is not leaving for m in self.members.values()):
            return False
        return all(m.classic is not None for m in self.members.values() if m is not leaving)
