"""Subscription views in the semantics layer: the registry (views.json), Semantics' rules for
creating, resolving and deleting them, and what they do to committed offsets.

Runs on a real MessageStore in tmp_path; no broker, no Kafka protocol.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest

from rmqkafka.rmqsemantics.config import SemanticsConfig
from rmqkafka.rmqsemantics.filters import ExpressionError
from rmqkafka.rmqsemantics.semantics import Semantics, ViewReadOnlyError
from rmqkafka.rmqsemantics.views import (
    VIEWS_FILE,
    SourceInUseError,
    View,
    ViewError,
    ViewExistsError,
    ViewRegistry,
)
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.errors import UnknownTopicError
from rmqkafka.storage.offset_store import CommittedOffset
from rmqkafka.storage.store import MessageStore
from rmqkafka.storage.topics import TopicMeta


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def store(data_dir: Path):
    s = MessageStore(StorageConfig(data_dir=data_dir))
    s.open()
    yield s
    s.close_sync()


@pytest.fixture
def semantics(store: MessageStore, data_dir: Path) -> Semantics:
    store.create_topic("orders", 3, {})
    return Semantics(SemanticsConfig(), store, data_dir)


def committed(offset: int) -> CommittedOffset:
    return CommittedOffset(offset=offset, leader_epoch=-1, metadata="", commit_timestamp_ms=1)


# --- creation rules ---------------------------------------------------------------------------


def test_create_view_registers_and_resolves(semantics: Semantics) -> None:
    view = semantics.create_view("orders-a", "orders", "tags", "TagA ||TagB")
    assert isinstance(view, View)
    assert (view.name, view.source, view.kind, view.expression) == ("orders-a", "orders", "tags", "TagA ||TagB")
    assert view.filter.text == "TagA || TagB"
    assert semantics.resolve("orders-a") is view
    assert semantics.resolve_id(view.view_id) is view
    assert semantics.id_of(view) == view.view_id
    meta = semantics.resolve("orders")
    assert isinstance(meta, TopicMeta) and semantics.resolve_id(meta.topic_id) is meta
    assert semantics.resolve("nope") is None and semantics.resolve_id(uuid.uuid4()) is None
    assert [e.name for e in semantics.listed()] == ["orders", "orders-a"]


def test_check_view_validates_without_registering(semantics: Semantics) -> None:
    view = semantics.check_view("orders-a", "orders", "sql", "a > 1")
    assert view.kind == "sql"
    assert semantics.resolve("orders-a") is None
    assert not (Path(semantics.store.config.data_dir) / VIEWS_FILE).exists()


def test_name_taken_by_a_topic_or_a_view(semantics: Semantics) -> None:
    with pytest.raises(ViewExistsError, match="a topic named 'orders' already exists"):
        semantics.check_view("orders", "orders", "tags", "*")
    semantics.create_view("orders-a", "orders", "tags", "A")
    with pytest.raises(ViewExistsError, match="a view named 'orders-a' already exists"):
        semantics.create_view("orders-a", "orders", "tags", "B")
    assert semantics.resolve("orders-a").expression == "A"  # type: ignore[union-attr]


def test_source_must_be_an_existing_topic(semantics: Semantics) -> None:
    with pytest.raises(ViewError, match="the source topic 'missing' does not exist"):
        semantics.check_view("v", "missing", "tags", "*")
    semantics.create_view("orders-a", "orders", "tags", "A")
    with pytest.raises(ViewError, match="the source 'orders-a' is a view; a view's source must be a topic"):
        semantics.check_view("v", "orders-a", "tags", "*")


@pytest.mark.parametrize(
    "kind, expression, column",
    [("tags", "||", None), ("tags", "  ", None), ("sql", "a = = 1", 5), ("sql", "a > 1 AND", 10), ("sql", "'open", 1)],
)
def test_bad_expression_is_refused_with_its_position(semantics: Semantics, kind, expression, column) -> None:
    with pytest.raises(ExpressionError) as caught:
        semantics.create_view("v", "orders", kind, expression)
    assert str(caught.value).startswith("invalid SQL92 expression" if kind == "sql" else "invalid tag expression")
    if column is not None:
        assert caught.value.column == column
        assert f"at column {column}" in str(caught.value)
    assert semantics.resolve("v") is None


def test_sql_views_need_enable_property_filter(store: MessageStore, data_dir: Path) -> None:
    store.create_topic("orders", 1, {})
    off = Semantics(SemanticsConfig(enable_property_filter=False), store, data_dir)
    with pytest.raises(ViewError, match="enablePropertyFilter=false"):
        off.create_view("v", "orders", "sql", "a > 1")
    assert off.create_view("t", "orders", "tags", "A").kind == "tags"  # tag views still work


# --- partitions, appends -----------------------------------------------------------------------


def test_partitions_follow_the_source(semantics: Semantics) -> None:
    view = semantics.create_view("orders-a", "orders", "tags", "A")
    assert semantics.partition_count(view) == 3
    semantics.store.add_partitions("orders", 5)
    assert semantics.partition_count(view) == 5
    assert semantics.partition_count(semantics.source_of(view)) == 5


def test_appends_to_a_view_are_refused(semantics: Semantics) -> None:
    semantics.create_view("orders-a", "orders", "tags", "A")
    with pytest.raises(ViewReadOnlyError, match=r"'orders-a' is a view \(read-only\) over topic 'orders'"):
        semantics.topic_for_append("orders-a")
    assert semantics.topic_for_append("orders").name == "orders"  # type: ignore[union-attr]
    assert semantics.topic_for_append("nope") is None


# --- deletion ----------------------------------------------------------------------------------


def test_source_with_views_cannot_be_deleted(semantics: Semantics) -> None:
    semantics.create_view("orders-b", "orders", "tags", "B")
    semantics.create_view("orders-a", "orders", "tags", "A")
    with pytest.raises(SourceInUseError, match="topic 'orders' is the source of view\\(s\\) orders-a, orders-b; delete them first"):
        semantics.delete("orders")
    assert semantics.store.topics.get("orders") is not None
    semantics.delete("orders-a")
    with pytest.raises(SourceInUseError, match="orders-b;"):
        semantics.check_topic_deletable("orders")
    semantics.delete("orders-b")
    assert isinstance(semantics.delete("orders"), TopicMeta)
    with pytest.raises(UnknownTopicError):
        semantics.delete("orders")


def test_deleting_a_view_drops_its_offsets_only(semantics: Semantics) -> None:
    offsets = semantics.store.offsets
    semantics.create_view("orders-a", "orders", "tags", "A")
    offsets.commit("g", {("orders-a", 0): committed(5), ("orders", 0): committed(7)})
    offsets.commit("h", {("orders-a", 2): committed(9)})
    deleted = semantics.delete("orders-a")
    assert isinstance(deleted, View) and deleted.name == "orders-a"
    assert offsets.fetch("g", "orders-a", 0) is None and offsets.fetch("h", "orders-a", 2) is None
    assert offsets.fetch("g", "orders", 0).offset == 7  # type: ignore[union-attr]
    assert semantics.store.topics.get("orders").partitions == 3  # type: ignore[union-attr]
    with pytest.raises(ViewError, match="no view named 'orders-a'"):
        semantics.delete_view("orders-a")
    # the same name can be a view again, starting without offsets
    semantics.create_view("orders-a", "orders", "tags", "B")
    assert offsets.fetch("g", "orders-a", 0) is None


# --- persistence --------------------------------------------------------------------------------


def test_views_survive_a_reload(semantics: Semantics, store: MessageStore, data_dir: Path) -> None:
    a = semantics.create_view("orders-a", "orders", "tags", "TagA || TagB")
    s = semantics.create_view("orders-s", "orders", "sql", "region = 'eu' AND amount > 100")
    semantics.create_view("gone", "orders", "tags", "*")
    semantics.delete("gone")
    raw = json.loads((data_dir / VIEWS_FILE).read_text(encoding="utf-8"))
    assert raw == {
        "#seq": 4,
        "orders-a": {"id": str(a.view_id), "source": "orders", "kind": "tags", "expression": "TagA || TagB"},
        "orders-s": {"id": str(s.view_id), "source": "orders", "kind": "sql",
                     "expression": "region = 'eu' AND amount > 100"},
    }
    again = Semantics(SemanticsConfig(), store, data_dir)
    assert [(v.name, v.view_id, v.source, v.kind, v.expression) for v in again.views.all()] == [
        (v.name, v.view_id, v.source, v.kind, v.expression) for v in (a, s)
    ]
    assert again.resolve("orders-s").filter.matches({"region": "eu", "amount": "150"})  # type: ignore[union-attr]
    assert again.resolve("gone") is None


@pytest.mark.parametrize("prev_too", [False, True])
def test_a_damaged_views_json_loses_no_view(semantics: Semantics, store: MessageStore, data_dir: Path,
                                            prev_too: bool) -> None:
    """Issue 20: views.json fell back to its .prev, losing the view created last; the journal
    (views.journal) is a second current copy."""
    a = semantics.create_view("orders-a", "orders", "tags", "TagA")
    semantics.create_view("gone", "orders", "tags", "*")
    semantics.delete("gone")
    last = semantics.create_view("orders-last", "orders", "sql", "amount > 1")
    (data_dir / VIEWS_FILE).write_bytes(b'{"orders-a": {"id"')
    if prev_too:
        (data_dir / (VIEWS_FILE + ".prev")).write_bytes(os.urandom(200))
    again = Semantics(SemanticsConfig(), store, data_dir)
    assert [(v.name, v.view_id, v.expression) for v in again.views.all()] == [
        (a.name, a.view_id, "TagA"), (last.name, last.view_id, "amount > 1")]
    assert again.resolve("gone") is None


def test_registry_without_a_file_is_empty(tmp_path: Path) -> None:
    registry = ViewRegistry(tmp_path)
    assert registry.all() == [] and registry.get("x") is None
    assert not (tmp_path / VIEWS_FILE).exists()


def test_a_corrupted_expression_refuses_to_load_naming_the_view(tmp_path: Path) -> None:
    (tmp_path / VIEWS_FILE).write_text(
        json.dumps({
            "fine": {"id": str(uuid.uuid4()), "source": "t", "kind": "tags", "expression": "A"},
            "broken": {"id": str(uuid.uuid4()), "source": "t", "kind": "sql", "expression": "a >"},
        }),
        encoding="utf-8",
    )
    with pytest.raises(ViewError) as caught:
        ViewRegistry(tmp_path)
    message = str(caught.value)
    assert "view 'broken'" in message and VIEWS_FILE in message and "invalid SQL92 expression" in message


def test_registry_ids_are_stable_and_unique(tmp_path: Path) -> None:
    registry = ViewRegistry(tmp_path)
    views = [registry.new(f"v{i}", "t", "tags", "*") for i in range(20)]
    for view in views:
        registry.add(view)
    assert len({v.view_id for v in views}) == 20
    reloaded = ViewRegistry(tmp_path)
    assert all(reloaded.by_id(v.view_id).name == v.name for v in views)  # type: ignore[union-attr]
    assert [v.name for v in reloaded.of_source("t")] == sorted(v.name for v in views)
    with pytest.raises(ViewExistsError):
        registry.add(registry.new("fresh", "t", "tags", "*")) or registry.add(views[0])


def test_creations_are_counted_for_regex_subscriptions(semantics: Semantics, store: MessageStore) -> None:
    """A consumer group resolves its regular expressions again when these counters move
    (adapter/groups/regex_resolution.py): creations only, not deletions or config changes."""
    topics, views = store.topics.created, semantics.views.created
    assert topics >= 1  # "orders" (and whatever the store made for itself)
    semantics.create_view("orders-a", "orders", "tags", "TagA")
    store.create_topic("payments", 2, {})
    assert (store.topics.created, semantics.views.created) == (topics + 1, views + 1)
    store.topics.set_configs("payments", {"retention.ms": "1000"})
    store.delete_topic("payments")
    semantics.views.delete("orders-a")
    assert (store.topics.created, semantics.views.created) == (topics + 1, views + 1)
    store.create_topic("payments", 1, {})  # the same name again is another topic
    assert store.topics.created == topics + 2
