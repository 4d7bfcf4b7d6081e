"""Topic metadata: names, stable topic ids, partition counts and per-topic configs.

On-disk format: a JournaledMap (storage.journaled_map) at ``topics.json``: the snapshot
``{"#seq": N, "<name>": {"id": "<uuid>", "partitions": N, "configs": {"key": "value"}}}``
and the journal ``topics.journal`` of every change since its base (always current; the
snapshot follows within ``snapshot_interval_ms``), so a damaged ``topics.json`` (and its ``.prev``) costs no topic: the journal rebuilds it, with the
same ids, partition counts and configs, and deleted topics stay deleted. The topic id is
what the commitlog records, so a deleted-and-recreated topic never sees its predecessor's
batches, and a topic rebuilt from the journal finds its records at their offsets.

Changes happen in three steps so that the write can run off the event loop: ``reserve`` /
``withdraw`` / ``prepare_change`` on the loop (the name is taken, or the topic is no longer
served, or the new state is staged), ``commit`` in any thread (one journal record and one
snapshot for any number of topics: durable when it returns), ``announce`` on the loop (the
new state is served). A topic is served only once it is durable: a record acknowledged for
it can never outlive its metadata. ``release`` undoes a reservation whose commit failed.
The synchronous ``create`` / ``delete`` / ``set_partitions`` / ``set_configs`` do all three
at once (the broker's own topics, tests).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import InvalidPartitionCountError, TopicExistsError, UnknownTopicError
from .files import write_json_atomically
from .journaled_map import JournaledMap

__all__ = ["TopicMeta", "TopicRegistry", "folded", "write_json_atomically"]


@dataclass(frozen=True, slots=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


class TopicRegistry:
    def __init__(self, path: Path, *, snapshot_interval_ms: int = 0,
                 now_ms: Callable[[], int] | None = None) -> None:
        self._map = JournaledMap(path, _parse, snapshot_interval_ms=snapshot_interval_ms, now_ms=now_ms)
        self._by_name: dict[str, TopicMeta] = {}
        self._by_id: dict[uuid.UUID, TopicMeta] = {}
        self._pending: dict[str, TopicMeta | None] = {}  # staged, not yet durable (None: deleting)
        self._total = 0  # partitions of every topic served or staged
        self.created = 0  # topics created since start: a consumer group's regexes may match them
        # changes to what is served (created, changed, deleted, a deletion undone) since start:
        # who caches a decision made on topics' configs (retention's idle plan) compares it
        self.changes = 0
        # Names with '.' folded into '_' -> the taken names that fold to it (Kafka refuses a
        # name that collides with another this way: metric names cannot tell them apart).
        self._by_folded: dict[str, set[str]] = {}
        for name, raw in self._map.entries.items():
            meta = _parse(name, raw)
            self._by_name[name] = meta
            self._by_id[meta.topic_id] = meta
            self._total += meta.partitions
            self._fold(name, True)

    def _fold(self, name: str, taken: bool) -> None:
        same = self._by_folded.setdefault(folded(name), set())
        if taken:
            same.add(name)
        else:
            same.discard(name)
            if not same:
                del self._by_folded[folded(name)]

    # -- reading ---------------------------------------------------------------------------
    def get(self, name: str) -> TopicMeta | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return self._by_id.get(topic_id)

    def all(self) -> list[TopicMeta]:
        return list(self._by_name.values())

    def latest(self, name: str) -> TopicMeta | None:
        """The topic as it will be once the changes under way are durable."""
        return self._pending[name] if name in self._pending else self._by_name.get(name)

    def taken(self, name: str) -> bool:
        """Whether ``name`` is served or has a change under way (a creation, a deletion)."""
        return name in self._by_name or name in self._pending

    def colliding(self, name: str) -> str | None:
        """Another taken name (served, or being created) that equals ``name`` once every '.'
        is read as '_' (the least, so answers are stable), or None."""
        others = self._by_folded.get(folded(name), set()) - {name}
        return min(others) if others else None

    @property
    def total_partitions(self) -> int:
        return self._total

    # -- staged changes ----------------------------------------------------------------------
    def reserve(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        if self.taken(name):
            raise TopicExistsError(f"topic {name!r} already exists")
        if partitions < 1:
            raise InvalidPartitionCountError(f"partition count must be >= 1, got {partitions}")
        meta = TopicMeta(name, uuid.uuid4(), partitions, dict(configs))
        self._pending[name] = meta
        self._total += partitions
        self._fold(name, True)
        return meta

    def prepare_change(self, name: str, *, partitions: int | None = None,
                       configs: dict[str, str] | None = None) -> TopicMeta:
        """Stage a new partition count (larger) or config map for a served topic."""
        meta = self._by_name.get(name)
        if meta is None or name in self._pending:
            raise UnknownTopicError(name) if meta is None else TopicExistsError(
                f"topic {name!r} has a change under way; retry")
        if partitions is not None and partitions <= meta.partitions:
            raise InvalidPartitionCountError(
                f"topic {name!r} has {meta.partitions} partitions; the new count must be larger")
        new = dataclasses.replace(meta, partitions=meta.partitions if partitions is None else partitions,
                                  configs=dict(meta.configs if configs is None else configs))
        self._pending[name] = new
        self._total += new.partitions - meta.partitions
        return new

    def withdraw(self, name: str) -> TopicMeta:
        """Stop serving topic ``name`` (a deletion under way); ``commit(deleted=...)`` next."""
        meta = self._by_name.get(name)
        if meta is None or name in self._pending:
            raise UnknownTopicError(name)
        del self._by_name[name]
        del self._by_id[meta.topic_id]
        self._pending[name] = None
        self.changes += 1
        return meta

    def commit(self, changed: Iterable[TopicMeta] = (), deleted: Iterable[TopicMeta] = ()) -> None:
        """Make staged topics (created or changed) and deletions durable: one journal record
        and one snapshot. Any thread; OSError when a write fails (nothing is served then)."""
        self._map.commit({m.name: _serialise(m) for m in changed}, [m.name for m in deleted])

    def write_snapshot_if_stale(self) -> None:
        """Bring ``topics.json`` up to the journal (any thread; see JournaledMap)."""
        self._map.write_snapshot_if_stale()

    def announce(self, changed: Iterable[TopicMeta] = (), deleted: Iterable[TopicMeta] = ()) -> None:
        """Serve what ``commit`` made durable."""
        self.changes += 1
        for meta in changed:
            self._pending.pop(meta.name, None)
            self.created += meta.topic_id not in self._by_id
            self._by_name[meta.name] = meta
            self._by_id[meta.topic_id] = meta
        for meta in deleted:
            if self._pending.get(meta.name, meta) is None:
                del self._pending[meta.name]
            self._total -= meta.partitions
            self._fold(meta.name, False)

    def release(self, changed: Iterable[TopicMeta] = (), deleted: Iterable[TopicMeta] = ()) -> None:
        """Undo staged changes whose ``commit`` failed: as before, served again."""
        self.changes += 1
        for meta in changed:
            self._pending.pop(meta.name, None)
            served = self._by_name.get(meta.name)
            self._total -= meta.partitions - (served.partitions if served is not None else 0)
            if served is None:  # a creation
                self._fold(meta.name, False)
        for meta in deleted:
            self._pending.pop(meta.name, None)
            self._by_name[meta.name] = meta
            self._by_id[meta.topic_id] = meta

    # -- all at once (synchronous) -------------------------------------------------------------
    def create(self, name: str, partitions: int, configs: dict[str, str]) -> TopicMeta:
        return self._apply(self.reserve(name, partitions, configs))

    def set_partitions(self, name: str, partitions: int) -> TopicMeta:
        return self._apply(self.prepare_change(name, partitions=partitions))

    def set_configs(self, name: str, configs: dict[str, str]) -> TopicMeta:
        return self._apply(self.prepare_change(name, configs=configs))

    def delete(self, name: str) -> TopicMeta:
        meta = self.withdraw(name)
        try:
            self.commit(deleted=[meta])
        except BaseException:
            self.release(deleted=[meta])
            raise
        self.announce(deleted=[meta])
        return meta

    def _apply(self, meta: TopicMeta) -> TopicMeta:
        try:
            self.commit([meta])
        except BaseException:
            self.release([meta])
            raise
        self.announce([meta])
        return meta


def folded(name: str) -> str:
    return name.replace(".", "_")


def _serialise(meta: TopicMeta) -> dict:
    return {"id": str(meta.topic_id), "partitions": meta.partitions, "configs": meta.configs}


def _parse(name: str, raw: dict) -> TopicMeta:
    return TopicMeta(name, uuid.UUID(raw["id"]), int(raw["partitions"]), dict(raw["configs"]))
