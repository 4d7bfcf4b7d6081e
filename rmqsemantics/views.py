"""Subscription views: read-only topics over a source topic and a filter expression.

A view has a name in the topic namespace (no topic and no other view may share it), a stable
id (Fetch v13+ and Metadata v10+ address topics by id), its source topic's name and a tag or
SQL92 expression. It has no records and no partitions of its own: its partitions are the
source's, and so are its offsets, which is why consumers of a view can commit, seek and
compare lag as on any topic.

On-disk format: a JournaledMap (storage.journaled_map) at ``views.json`` in the data
directory, ``{"#seq": N, "<name>": {"id": "<uuid>", "source": "<topic>", "kind":
"tags"|"sql", "expression": "<text as given>"}}``, with its journal ``views.journal``: two
current copies, so a damaged ``views.json`` (and its ``.prev``) loses no view, and a deleted
view stays deleted. A view is served only once both are written.
Expressions are compiled when loaded; one that no longer compiles (a grammar change) makes
the broker refuse to start with a message naming the view, rather than serve it wrongly.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from rmqkafka.storage.journaled_map import JournaledMap

from .filters import ExpressionError, FilterKind, RecordFilter, compile_filter

VIEWS_FILE = "views.json"


class ViewError(ValueError):
    """A view that cannot be created or deleted as asked; the message is for users."""


class ViewExistsError(ViewError):
    """The name is taken (by a view or a topic: they share one namespace)."""


class SourceInUseError(ViewError):
    """A topic that views read from cannot be deleted until they are (``views``: their names)."""

    def __init__(self, message: str, views: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.views = views


@dataclass(frozen=True, slots=True)
class View:
    name: str
    view_id: uuid.UUID
    source: str
    filter: RecordFilter

    @property
    def kind(self) -> FilterKind:
        return self.filter.kind

    @property
    def expression(self) -> str:
        return self.filter.expression


class ViewRegistry:
    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / VIEWS_FILE
        self._by_name: dict[str, View] = {}
        self._by_id: dict[uuid.UUID, View] = {}
        self.created = 0  # views created since start: a consumer group's regexes may match them
        self._map = JournaledMap(self._path, _parse)
        for name, raw in self._map.entries.items():
            view_id, source, kind, expression = _parse(name, raw)
            try:
                compiled = compile_filter(kind, expression)
            except ExpressionError as exc:
                raise ViewError(f"view {name!r} in {self._path}: {exc}") from None
            self._add(View(name, view_id, source, compiled))

    def _add(self, view: View) -> None:
        self._by_name[view.name] = view
        self._by_id[view.view_id] = view

    def get(self, name: str) -> View | None:
        return self._by_name.get(name)

    def by_id(self, view_id: uuid.UUID) -> View | None:
        return self._by_id.get(view_id)

    def all(self) -> list[View]:
        return sorted(self._by_name.values(), key=lambda v: v.name)

    def of_source(self, source: str) -> list[View]:
        return [v for v in self.all() if v.source == source]

    def new(self, name: str, source: str, kind: FilterKind, expression: str) -> View:
        """A compiled view not yet registered; ExpressionError for a bad expression,
        ViewExistsError when another view has the name (the caller checks topics)."""
        if name in self._by_name:
            raise ViewExistsError(f"a view named {name!r} already exists")
        return View(name, uuid.uuid4(), source, compile_filter(kind, expression))

    def add(self, view: View) -> None:
        """Register and persist a view made by :meth:`new`."""
        if view.name in self._by_name:
            raise ViewExistsError(f"a view named {view.name!r} already exists")
        self._map.commit({view.name: _serialise(view)})
        self._add(view)
        self.created += 1

    def delete(self, name: str) -> View:
        view = self._by_name.get(name)
        if view is None:
            raise ViewError(f"no view named {name!r}")
        self._map.commit({}, [name])
        del self._by_name[name]
        del self._by_id[view.view_id]
        return view


def _serialise(view: View) -> dict:
    return {"id": str(view.view_id), "source": view.source, "kind": view.kind, "expression": view.expression}


def _parse(name: str, raw: dict) -> tuple[uuid.UUID, str, str, str]:
    return uuid.UUID(raw["id"]), str(raw["source"]), str(raw["kind"]), str(raw["expression"])
