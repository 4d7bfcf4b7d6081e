"""The topics and views a consumer-protocol group may subscribe to, read from the semantics
layer: names, ids and partition counts (a view's are its source's), without the broker's
system topics (a regular expression never matches ``__consumer_offsets`` and the like)."""

from __future__ import annotations

import uuid

from rmqkafka.rmqsemantics.semantics import SYSTEM_TOPICS, Semantics


class SemanticsCatalog:
    def __init__(self, semantics: Semantics) -> None:
        self._semantics = semantics

    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        if name in SYSTEM_TOPICS:
            return None
        entity = self._semantics.resolve(name)
        if entity is None:
            return None
        return self._semantics.id_of(entity), self._semantics.partition_count(entity)

    def names(self) -> list[str]:
        return [e.name for e in self._semantics.listed() if e.name not in SYSTEM_TOPICS]

    def generation(self) -> int:
        """Grows whenever a topic or view is created."""
        return self._semantics.store.topics.created + self._semantics.views.created

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        entity = self._semantics.resolve_id(topic_id)
        return None if entity is None else entity.name
