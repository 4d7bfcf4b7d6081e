"""Subscription views through CreateTopics: the ``rmq.view.*`` topic configs.

Any Kafka admin tool creates a view as a topic with these configs (``kafka-topics --create
--topic orders-tagA --config rmq.view.source=orders --config rmq.view.tags='TagA || TagB'``):

``rmq.view.source``  the topic the view reads (required)
``rmq.view.tags``    a RocketMQ tag expression (``*``, ``TagA || TagB``), or
``rmq.view.sql``     a RocketMQ SQL92 expression over record headers; exactly one of the two

A view takes no other configs, and its partitions are its source's: the partition count must
be left to the broker (-1) or equal the source's, the replication factor -1 or 1.

DescribeConfigs on a view answers its definition, every entry read-only (a view is immutable:
AlterConfigs, IncrementalAlterConfigs and CreatePartitions refuse it; delete and re-create):

``rmq.view.source`` and ``rmq.view.tags`` | ``rmq.view.sql``  as given at creation, source
                     DYNAMIC_TOPIC_CONFIG (what a tool copying a topic's overrides copies);
``rmq.view.filter``  derived: the expression in the canonical form the broker evaluates
                     (``TagA || TagB``, SQL with normalised keywords, spacing and
                     parentheses), source DEFAULT_CONFIG, so that tools showing only
                     overrides leave it out and copying the overrides re-creates the view.

A view has no other topic configs: retention, compaction, compression and the like are its
source's (describe the source for them).
"""

from __future__ import annotations

from rmqkafka.rmqsemantics.views import View
from rmqkafka.storage.errors import InvalidPartitionCountError

from .errors import InvalidReplication
from .topic_configs import InvalidConfig

SOURCE, TAGS, SQL = "rmq.view.source", "rmq.view.tags", "rmq.view.sql"
FILTER = "rmq.view.filter"  # read-only, derived (DescribeConfigs only)
VIEW_CONFIGS = (SOURCE, TAGS, SQL)

_DOCS = {
    SOURCE: "The topic this subscription view reads (its records, partitions and offsets).",
    TAGS: "The view's RocketMQ tag expression ('*', 'TagA || TagB'): records whose TAGS header matches.",
    SQL: "The view's RocketMQ SQL92 expression over record headers: records for which it is TRUE.",
    FILTER: "Derived, read-only: the view's expression in the canonical form the broker evaluates.",
}


def is_view_request(configs: dict[str, str | None]) -> bool:
    return any(name in configs for name in VIEW_CONFIGS)


def view_definition(
    configs: dict[str, str | None], num_partitions: int, replication_factor: int, source_partitions: int | None
) -> tuple[str, str, str]:
    """(source, kind, expression) of a CreateTopics request for a view, or InvalidConfig."""
    others = sorted(name for name in configs if name not in VIEW_CONFIGS)
    if others:
        raise InvalidConfig(f"a view takes only {', '.join(VIEW_CONFIGS)} configs, not {', '.join(others)}")
    source = configs.get(SOURCE)
    if not source:
        raise InvalidConfig(f"a view needs {SOURCE}, the topic it reads")
    given = [(kind, configs[name]) for kind, name in (("tags", TAGS), ("sql", SQL)) if configs.get(name) is not None]
    if len(given) != 1:
        raise InvalidConfig(f"a view needs exactly one of {TAGS} and {SQL}")
    if source_partitions is not None and num_partitions not in (-1, source_partitions):
        raise InvalidPartitionCountError(
            f"a view has the partitions of its source {source!r} ({source_partitions}); "
            f"leave the partition count unset (-1) instead of {num_partitions}"
        )
    if replication_factor not in (-1, 1):
        raise InvalidReplication(f"replication factor {replication_factor}: a view has its source's replicas")
    kind, expression = given[0]
    return source, kind, expression


def view_configs(view: View) -> list[tuple[str, str, bool, str]]:
    """(name, value, derived, documentation) of a view's DescribeConfigs entries; ``derived``
    entries are reported as defaults, the others as the view's own (dynamic topic) configs."""
    defining = TAGS if view.kind == "tags" else SQL
    return [
        (SOURCE, view.source, False, _DOCS[SOURCE]),
        (defining, view.expression, False, _DOCS[defining]),
        (FILTER, view.filter.text, True, _DOCS[FILTER]),
    ]
