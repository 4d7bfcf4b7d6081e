"""Topic metadata: names, stable topic ids, partition counts and per-topic configs.

On-disk format: ``topics.json`` = ``{"<name>": {"id": "<uuid>", "partitions": N,
"configs": {"key": "value"}}}``, replaced atomically (write temp, fsync, rename, fsync dir),
so a crash leaves either the old or the new file. The version it replaced stays as
``topics.json.prev``: a damaged file (edited, truncated) falls back to it, with an error in
the log, rather than keeping the broker from starting. The topic id is what the commitlog
records, so a deleted-and-recreated topic never sees its predecessor's batches.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidPartitionCountError, TopicExistsError, UnknownTopicError
from .files import read_json_with_fallback, write_json_atomically


@dataclass(slots=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicRegistry:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._by_name: dict[str, TopicMeta] = {}
        self._by_id: dict[uuid.UUID, TopicMeta] = {}
        # Names with '.' folded into '_' -> the names that fold to it (Kafka refuses a name
        # that collides with another this way: metric names cannot tell them apart).
        self._by_folded: dict[str, set[str]] = {}
        for meta in read_json_with_fallback(path, _parse) or ():
            self._add(meta)

    def _add(self, meta: TopicMeta) -> None:
        self._by_name[meta.name] = meta
        self._by_id[meta.topic_id] = meta
        self._by_folded.setdefault(folded(meta.name), set()).add(meta.name)

    def _save(self) -> None:
        write_json_atomically(
            self._path,
            {
                m.name: {"id": str(m.topic_id), "partitions": m.partitions, "configs": m.configs}
                for m in self._by_name.values()
            },
            keep_previous=True,
        )

    def get(self, name: str) -> TopicMeta | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def colliding(self, name: str) -> str | None:
        """Another topic's name that equals ``name`` once every '.' is read as '_' (the
        least, so answers are stable), or None."""
        others = self._by_folded.get(folded(name), set()) - {name}
        return min(others) if others else None

    def all(self) -> list[TopicMeta]:
        return list(self._by_name.values())

    def create(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        if name in self._by_name:
            raise TopicExistsError(f"topic {name!r} already exists")
        if partitions < 1:
            raise InvalidPartitionCountError(f"partition count must be >= 1, got {partitions}")
        meta = TopicMeta(name, uuid.uuid4(), partitions, dict(configs))
        self._add(meta)
        self._save()
        return meta

    def delete(self, name: str) -> TopicMeta:
        meta = self._by_name.pop(name, None)
        if meta is None:
            raise UnknownTopicError(name)
        del self._by_id[meta.topic_id]
        same = self._by_folded[folded(name)]
        same.discard(name)
        if not same:
            del self._by_folded[folded(name)]
        self._save()
        return meta

    def set_partitions(self, name: str, partitions: int) -> TopicMeta:
        meta = self._require(name)
        if partitions <= meta.partitions:
            raise InvalidPartitionCountError(
                f"topic {name!r} has {meta.partitions} partitions; the new count must be larger"
            )
        meta.partitions = partitions
        self._save()
        return meta

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicMeta:
        meta = self._require(name)
        meta.configs = dict(configs)
        self._save()
        return meta

    def _require(self, name: str) -> TopicMeta:
        meta = self._by_name.get(name)
        if meta is None:
            raise UnknownTopicError(name)
        return meta


def folded(name: str) -> str:
    return name.replace(".", "_")


def _parse(raw: dict) -> list[TopicMeta]:
    return [TopicMeta(name, uuid.UUID(t["id"]), int(t["partitions"]), dict(t["configs"])) for name, t in raw.items()]
