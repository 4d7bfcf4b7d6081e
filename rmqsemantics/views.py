"""Subscription views: read-only topics over a source topic and a filter expression.

A view has a name in the topic namespace (no topic and no other view may share it), a stable
id (Fetch v13+ and Metadata v10+ address topics by id), its source topic's name and a tag or
SQL92 expression. It has no records and no partitions of its own: its partitions are the
source's, and so are its offsets, which is why consumers of a view can commit, seek and
compare lag as on any topic.

On-disk format: ``views.json`` in the data directory, ``{"<name>": {"id": "<uuid>",
"source": "<topic>", "kind": "tags"|"sql", "expression": "<text as given>"}}``, replaced
atomically (storage's write_json_atomically), so a crash leaves the old or the new file.
Expressions are compiled when loaded; one that no longer compiles (a grammar change) makes
the broker refuse to start with a message naming the view, rather than serve it wrongly.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from rmqkafka.storage.files import read_json_with_fallback, write_json_atomically

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
        stored = read_json_with_fallback(self._path, lambda raw: [
            (name, uuid.UUID(v["id"]), str(v["source"]), str(v["kind"]), str(v["expression"])) for name, v in raw.items()])
        for name, view_id, source, kind, expression in stored or ():
            try:
                compiled = compile_filter(kind, expression)
            except ExpressionError as exc:
                raise ViewError(f"view {name!r} in {self._path}: {exc}") from None
            self._add(View(name, view_id, source, compiled))

    def _add(self, view: View) -> None:
        self._by_name[view.name] = view
        self._by_id[view.view_id] = view

    def _save(self) -> None:
        write_json_atomically(
            self._path,
            {
                v.name: {"id": str(v.view_id), "source": v.source, "kind": v.kind, "expression": v.expression}
                for v in self._by_name.values()
            },
            keep_previous=True,
        )

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
        self._add(view)
        self._save()

    def delete(self, name: str) -> View:
        view = self._by_name.pop(name, None)
        if view is None:
            raise ViewError(f"no view named {name!r}")
        del self._by_id[view.view_id]
        self._save()
        return view
