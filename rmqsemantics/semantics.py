"""The semantics layer's one entry point for the Kafka handlers: names, appends and reads.

The handlers resolve every topic name here, append through :meth:`Semantics.append` and read
through :meth:`Semantics.read`, so RocketMQ's rules apply whatever Kafka API carries the
records: a name may be a topic (stored in the commitlog) or a subscription view (a filtered,
read-only window on a topic, :mod:`.views`). ``storage`` below knows neither views nor tags;
it appends and reads batches.
"""

from __future__ import annotations

from pathlib import Path

from rmqkafka.storage.store import MessageStore
from rmqkafka.storage.topics import TopicMeta

from .config import SemanticsConfig
from .filters import ExpressionError, FilterKind
from .views import View, ViewError, ViewExistsError, ViewRegistry


class ViewReadOnlyError(ViewError):
    """An append to a view: views have no records of their own."""


class Semantics:
    def __init__(self, config: SemanticsConfig, store: MessageStore, data_dir: Path) -> None:
        self.config = config
        self.store = store
        self.views = ViewRegistry(data_dir)

    # -- names -----------------------------------------------------------------------------
    def resolve(self, name: str) -> TopicMeta | View | None:
        return self.store.topics.get(name) or self.views.get(name)

    def source_of(self, view: View) -> TopicMeta:
        meta = self.store.topics.get(view.source)
        if meta is None:  # deleting a source with views is refused, so only a bug gets here
            raise ViewError(f"the source topic {view.source!r} of view {view.name!r} does not exist")
        return meta

    def partition_count(self, entity: TopicMeta | View) -> int:
        return entity.partitions if isinstance(entity, TopicMeta) else self.source_of(entity).partitions

    # -- views -----------------------------------------------------------------------------
    def create_view(self, name: str, source: str, kind: FilterKind, expression: str) -> View:
        """Register a view; raises what :meth:`check_view` raises."""
        view = self.check_view(name, source, kind, expression)
        self.views.add(view)
        return view

    def check_view(self, name: str, source: str, kind: FilterKind, expression: str) -> View:
        """The view these arguments define, not registered. Raises ExpressionError (bad
        expression) or ViewError (name taken, no such source, a view as source, SQL off)."""
        if self.store.topics.get(name) is not None:
            raise ViewExistsError(f"a topic named {name!r} already exists")
        meta = self.store.topics.get(source)
        if meta is None:
            if self.views.get(source) is not None:
                raise ViewError(f"the source {source!r} is a view; a view's source must be a topic")
            raise ViewError(f"the source topic {source!r} does not exist")
        if kind == "sql" and not self.config.enable_property_filter:
            raise ExpressionError("SQL92 views are disabled on this broker (enablePropertyFilter=false)")
        return self.views.new(name, source, kind, expression)

    def check_topic_deletable(self, name: str) -> None:
        """Raise ViewError if views read from topic ``name`` (they must be deleted first)."""
        dependents = [v.name for v in self.views.of_source(name)]
        if dependents:
            raise ViewError(
                f"topic {name!r} is the source of view(s) {', '.join(dependents)}; delete them first"
            )
