from __future__ import annotations

import json
import os

import pytest

from rmqkafka.storage.errors import InvalidPartitionCountError, TopicExistsError, UnknownTopicError
from rmqkafka.storage.topics import TopicRegistry, write_json_atomically


def test_create_get_and_persist(tmp_path):
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    a = reg.create("a", 3, {"retention.ms": "1000"})
    b = reg.create("b", 1, {})
    assert reg.get("a") is a and reg.by_id(a.topic_id) is a
    assert a.topic_id != b.topic_id
    assert {m.name for m in reg.all()} == {"a", "b"}
    reopened = TopicRegistry(path)
    ra = reopened.get("a")
    assert (ra.topic_id, ra.partitions, ra.configs) == (a.topic_id, 3, {"retention.ms": "1000"})
    assert reopened.by_id(b.topic_id).name == "b"


def test_configs_are_copied(tmp_path):
    reg = TopicRegistry(tmp_path / "topics.json")
    configs = {"k": "v"}
    meta = reg.create("a", 1, configs)
    configs["k"] = "changed"
    assert meta.configs == {"k": "v"}


def test_errors(tmp_path):
    reg = TopicRegistry(tmp_path / "topics.json")
    reg.create("a", 2, {})
    with pytest.raises(TopicExistsError):
        reg.create("a", 2, {})
    with pytest.raises(InvalidPartitionCountError):
        reg.create("z", 0, {})
    with pytest.raises(UnknownTopicError):
        reg.delete("nope")
    with pytest.raises(UnknownTopicError):
        reg.set_partitions("nope", 3)
    with pytest.raises(UnknownTopicError):
        reg.set_configs("nope", {})
    with pytest.raises(InvalidPartitionCountError):
        reg.set_partitions("a", 2)
    with pytest.raises(InvalidPartitionCountError):
        reg.set_partitions("a", 1)
    assert reg.get("z") is None


def test_delete_and_recreate_gives_a_new_id(tmp_path):
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    old = reg.create("a", 1, {})
    assert reg.delete("a") is old
    assert reg.get("a") is None and reg.by_id(old.topic_id) is None
    new = reg.create("a", 1, {})
    assert new.topic_id != old.topic_id
    reopened = TopicRegistry(path)
    assert reopened.get("a").topic_id == new.topic_id
    assert reopened.by_id(old.topic_id) is None


def test_set_partitions_and_configs_persist(tmp_path):
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    reg.create("a", 1, {"x": "1"})
    reg.set_partitions("a", 4)
    reg.set_configs("a", {"y": "2"})
    meta = TopicRegistry(path).get("a")
    assert (meta.partitions, meta.configs) == (4, {"y": "2"})


def test_atomic_write_leaves_no_temp_file(tmp_path):
    path = tmp_path / "f.json"
    write_json_atomically(path, {"a": 1})
    write_json_atomically(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.json"]


def _damage(path, how: str) -> None:
    if how == "truncated":
        text = path.read_bytes()
        path.write_bytes(text[: len(text) // 2])
    elif how == "random bytes":
        path.write_bytes(os.urandom(max(64, path.stat().st_size)))
    elif how == "deleted":
        path.unlink()
    elif how == "empty":
        path.write_bytes(b"")


def _made(tmp_path):
    """a (2 partitions, a config), b deleted, c created last, a's partitions and configs
    changed after: every kind of change the journal records."""
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    reg.create("a", 2, {"retention.ms": "1000"})
    reg.create("b", 1, {})
    reg.delete("b")
    reg.set_partitions("a", 3)
    reg.set_configs("a", {"retention.ms": "2000"})
    reg.create("c", 4, {"x": "y"})
    return path, {(m.name, m.topic_id, m.partitions, tuple(m.configs.items())) for m in reg.all()}


def _state(reg):
    return {(m.name, m.topic_id, m.partitions, tuple(m.configs.items())) for m in reg.all()}


@pytest.mark.parametrize("how", ["truncated", "random bytes", "deleted", "empty"])
@pytest.mark.parametrize("prev_too", [False, True])
def test_a_damaged_topics_json_loses_no_topic(tmp_path, caplog, how, prev_too):
    """Issue 20: falling back to topics.json.prev lost the topic created last (and its acked
    records with it). The journal is a second current copy: whatever happened to
    topics.json and its .prev, every topic is back with its id, partitions and configs, and
    the deleted one stays deleted."""
    path, before = _made(tmp_path)
    _damage(path, how)
    if prev_too:
        _damage(tmp_path / "topics.json.prev", how if how != "deleted" else "random bytes")
    again = TopicRegistry(path)
    assert _state(again) == before
    assert again.get("b") is None
    if how != "deleted":
        assert "rebuilt from" in caplog.text and "nothing lost" in caplog.text
    # both copies are whole again: each alone restores everything
    assert _state(TopicRegistry(path)) == before
    (tmp_path / "topics.journal").unlink()
    assert _state(TopicRegistry(path)) == before


@pytest.mark.parametrize("how", ["truncated", "random bytes", "deleted"])
def test_a_damaged_journal_is_rebuilt_from_topics_json(tmp_path, how):
    path, before = _made(tmp_path)
    _damage(tmp_path / "topics.journal", how)
    assert _state(TopicRegistry(path)) == before
    path.unlink()  # the journal was written again from topics.json
    assert _state(TopicRegistry(path)) == before


def test_a_torn_journal_record_is_an_unacknowledged_change(tmp_path):
    """A crash while appending: the torn last line fails its CRC and is dropped; the next
    start rewrites the journal so later records are not glued to it."""
    path, before = _made(tmp_path)
    journal = tmp_path / "topics.journal"
    with open(journal, "ab") as f:
        f.write(b'0badc0de {"seq": 99, "put": {"zz"')
    path.unlink()
    reg = TopicRegistry(path)
    assert _state(reg) == before
    reg.create("d", 1, {})
    path.unlink()
    assert {m.name for m in TopicRegistry(path).all()} == {"a", "c", "d"}


def test_a_crash_between_journal_and_snapshot_keeps_the_change(tmp_path):
    """The journal is written first: a snapshot one change behind is brought up to date."""
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    reg.create("a", 1, {})
    old = path.read_bytes()
    c = reg.create("c", 2, {})
    path.write_bytes(old)  # as if the process died before replacing the snapshot
    again = TopicRegistry(path)
    assert again.get("c").topic_id == c.topic_id and again.get("c").partitions == 2


def test_an_older_topics_json_without_a_journal_is_taken_as_it_is(tmp_path):
    """A data directory of an older version (or a hand-written topics.json)."""
    path = tmp_path / "topics.json"
    path.write_text(json.dumps({"old": {"id": "6f1b1d3c-5b0e-4a43-9d53-1a0f3c9e7f10", "partitions": 2,
                                        "configs": {}}}))
    reg = TopicRegistry(path)
    assert [(m.name, m.partitions) for m in reg.all()] == [("old", 2)]
    path.unlink()
    assert [(m.name, m.partitions) for m in TopicRegistry(path).all()] == [("old", 2)]


@pytest.mark.parametrize("previous", ["missing", "damaged"])
def test_damaged_topics_json_without_a_usable_copy_is_an_error(tmp_path, previous):
    from rmqkafka.storage.files import DamagedFileError

    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    reg.create("a", 1, {})
    reg.create("b", 1, {})
    path.write_text('{"a": {"id": ')
    (tmp_path / "topics.journal").write_bytes(os.urandom(100))
    prev = tmp_path / "topics.json.prev"
    if previous == "missing":
        prev.unlink()
    else:
        prev.write_text(json.dumps({"a": {"partitions": 1}}))  # JSON, but not a registry
    with pytest.raises(DamagedFileError, match="topics.json is damaged"):
        TopicRegistry(path)


def test_with_the_journal_base_damaged_prev_and_later_records_are_used(tmp_path, caplog):
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    a = reg.create("a", 2, {})
    reg.create("b", 1, {})
    path.write_text("{")
    journal = tmp_path / "topics.journal"
    lines = journal.read_bytes().split(b"\n")
    journal.write_bytes(b"\n".join([b"garbage"] + lines[1:]))  # a's record (the base) lost
    again = TopicRegistry(path)  # .prev holds a; the journal's record of b is after it
    assert sorted((m.name, m.partitions) for m in again.all()) == [("a", 2), ("b", 1)]
    assert again.get("a").topic_id == a.topic_id
    assert "are damaged: using" in caplog.text


@pytest.mark.parametrize("damaged", ["topics.json", "topics.journal"])
def test_a_start_on_a_full_disk_repairs_later(small_fs, damaged):
    """A start must not need to write: with the disk full, a damaged copy is repaired by the
    next change (or snapshot) once there is room, and nothing is lost meanwhile."""
    path = small_fs.path / "topics.json"
    reg = TopicRegistry(path)
    a = reg.create("a", 2, {})
    reg.create("b", 1, {})
    if damaged == "topics.json":
        path.write_bytes(b"{")
    else:
        with open(small_fs.path / "topics.journal", "ab") as f:
            f.write(b"torn")
    small_fs.fill()
    again = TopicRegistry(path)
    assert sorted((m.name, m.partitions) for m in again.all()) == [("a", 2), ("b", 1)]
    small_fs.free()
    again.write_snapshot_if_stale()
    again.create("c", 1, {})
    for copy in ("topics.journal", "topics.json"):  # each copy alone holds everything
        (small_fs.path / copy).rename(small_fs.path / (copy + ".away"))
        assert {(m.name, m.topic_id) for m in TopicRegistry(path).all()} >= {("a", a.topic_id)}
        assert sorted(m.name for m in TopicRegistry(path).all()) == ["a", "b", "c"]
        (small_fs.path / (copy + ".away")).rename(small_fs.path / copy)
