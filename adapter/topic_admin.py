"""Creating topics with Kafka's validation, shared by CreateTopics and Metadata auto-create."""

from __future__ import annotations

from rmqkafka.storage.errors import InvalidPartitionCountError, TopicExistsError
from rmqkafka.rmqsemantics.semantics import CONSUMER_OFFSETS_TOPIC
from rmqkafka.storage.topics import TopicMeta, folded

from .context import BrokerContext
from .errors import InvalidReplicaAssignment, InvalidReplication, InvalidTopicName
from .internal_topics import ensure_consumer_offsets
from .mutation_quota import wait_for_quota
from .topic_configs import validate_topic_configs
from .topic_names import invalid_reason


def check_new_topic(
    ctx: BrokerContext,
    name: str,
    num_partitions: int,
    replication_factor: int,
    assignments: list[tuple[int, list[int]]],
    configs: dict[str, str | None],
    pending: int = 0,
) -> tuple[int, dict[str, str]]:
    """Validate a topic creation; returns (partition count, configs to store). ``pending``:
    partitions the request creates before this topic (they count against max.partitions)."""
    reason = invalid_reason(name)
    if reason:
        raise InvalidTopicName(reason)
    if ctx.store.topics.taken(name):
        raise TopicExistsError(f"topic {name!r} already exists")
    if ctx.semantics.views.get(name) is not None:
        raise TopicExistsError(f"a view named {name!r} already exists")
    colliding = _colliding(ctx, name)
    if colliding is not None:
        raise InvalidTopicName(f"Topic '{name}' collides with existing topic: {colliding}")
    if assignments:
        if num_partitions != -1 or replication_factor != -1:
            raise InvalidReplicaAssignment(
                "give either replica assignments or partition count and replication factor"
            )
        indexes = sorted(index for index, _ in assignments)
        if indexes != list(range(len(indexes))):
            raise InvalidReplicaAssignment("assigned partitions must be numbered 0..n-1")
        for _, brokers in assignments:
            if list(brokers) != [ctx.config.node_id]:
                raise InvalidReplicaAssignment(
                    f"this is a single broker (node {ctx.config.node_id}); got replicas {brokers}"
                )
        num_partitions = len(indexes)
    if num_partitions == -1:
        num_partitions = ctx.config.num_partitions
    if num_partitions < 1:
        raise InvalidPartitionCountError(f"partition count must be >= 1, got {num_partitions}")
    ctx.store.check_partition_limits(name, num_partitions, 0, pending)
    if replication_factor not in (-1, 1):
        raise InvalidReplication(
            f"replication factor {replication_factor} is larger than the 1 available broker"
        )
    return num_partitions, validate_topic_configs(configs, name)


def _colliding(ctx: BrokerContext, name: str) -> str | None:
    """A topic or view whose name equals ``name`` once '.' and '_' are folded (Kafka refuses
    such a name: its metric names could not be told apart)."""
    if "." not in name and "_" not in name:
        return None
    key = folded(name)
    views = [v.name for v in ctx.semantics.views.all() if v.name != name and folded(v.name) == key]
    candidates = [c for c in (ctx.store.topics.colliding(name), *views) if c is not None]
    return min(candidates) if candidates else None


async def auto_create(ctx: BrokerContext, name: str) -> TopicMeta:
    """Metadata's auto-creation: Kafka counts it against the mutation quota permissively
    (the request waits for the quota here), and writes it as CreateTopics does. A topic
    another request is creating is waited for and answered, as clients racing to look up a
    new topic expect (not TOPIC_ALREADY_EXISTS). Asked for by name, ``__consumer_offsets``
    is created as the internal topic."""
    if name == CONSUMER_OFFSETS_TOPIC:
        meta = ensure_consumer_offsets(ctx)
        if meta is None:
            raise InvalidPartitionCountError(f"{name} could not be created (see the broker log)")
        return meta
    if ctx.store.topics.taken(name) and ctx.store.topics.get(name) is None:
        await ctx.store.settled(name)  # another request is creating it: answer with its topic
        meta = ctx.store.topics.get(name)
        if meta is not None:
            return meta
    partitions, configs = check_new_topic(ctx, name, -1, -1, [], {})
    quota = ctx.mutation_quotas()
    await wait_for_quota(quota)
    quota.record(partitions)
    outcome = (await ctx.store.create_topics([(name, partitions, configs)]))[0]
    if isinstance(outcome, TopicExistsError):
        # another request staged it in the same turn of the loop: answer with its topic
        await ctx.store.settled(name)
        meta = ctx.store.topics.get(name)
        if meta is not None:
            return meta
    if isinstance(outcome, Exception):
        raise outcome
    return outcome
