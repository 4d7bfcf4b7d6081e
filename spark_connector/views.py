"""The ``tags`` and ``filter`` options: reads through subscription views the broker evaluates.

Records are never filtered on the executors (that would fetch and ship every record). For each
topic a filtered query reads, the driver makes sure a view exists on the broker — a read-only
topic over that topic and the expression (CreateTopics with ``rmq.view.*`` configs) — and the
executors fetch from the view instead of the topic. A view has its source's partitions and
offsets, so everything else stays as for a plain read: offsets are planned on the source topic
with ListOffsets, checkpoints name the source topic, and rows carry the source topic's name;
the records a view leaves out are gaps in the offsets, which the executors step over.

View names are deterministic (``rmqview-`` + a digest of topic, kind and expression), so every
query with the same filter on the same topic shares one view, and a restarted streaming query
finds its view again. Views stay on the broker after the query; ``rmqk views delete`` removes
them. A ``subscribePattern`` with a filter never matches these views themselves.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .errors import KafkaOptionError

VIEW_PREFIX = "rmqview-"
SOURCE, TAGS, SQL = "rmq.view.source", "rmq.view.tags", "rmq.view.sql"


@dataclass(frozen=True)
class ViewSpec:
    """A filter option: ``kind`` "tags" (option ``tags``) or "sql" (option ``filter``)."""

    kind: str
    expression: str

    @property
    def option(self) -> str:
        return "tags" if self.kind == "tags" else "filter"


def view_name(topic: str, spec: ViewSpec) -> str:
    digest = hashlib.sha256(f"{topic}\0{spec.kind}\0{spec.expression}".encode()).hexdigest()
    return VIEW_PREFIX + digest[:32]


def is_view_name(topic: str) -> bool:
    return topic.startswith(VIEW_PREFIX)


def ensure_views(admin: Any, topics: Iterable[str], spec: ViewSpec, timeout: float) -> dict[str, str]:
    """topic -> the view that filters it, creating the views that do not exist yet.

    A bad expression is the broker's INVALID_CONFIG, raised as KafkaOptionError with the
    broker's message (it names the column of the error).
    """
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    names = {topic: view_name(topic, spec) for topic in sorted(set(topics))}
    if not names:
        return names
    wanted = [
        NewTopic(view, -1, config={SOURCE: topic, TAGS if spec.kind == "tags" else SQL: spec.expression})
        for topic, view in names.items()
    ]
    for view, future in admin.create_topics(wanted, request_timeout=timeout).items():
        try:
            future.result(timeout)
        except Exception as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is not None and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue  # made by an earlier query with the same filter (the name says so)
            message = error.str() if error is not None else str(exc)
            raise KafkaOptionError(
                f"option '{spec.option}' ({spec.expression!r}): the broker refused the view "
                f"{view}: {message}"
            ) from None
    return names
