from __future__ import annotations

import json

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


def test_a_damaged_topics_json_falls_back_to_its_previous_copy(tmp_path, caplog):
    """A truncated topics.json stopped the broker from starting. The version each save
    replaced stays as topics.json.prev; a damaged file falls back to it, loudly."""
    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    a = reg.create("a", 2, {})
    reg.create("b", 1, {})
    text = path.read_text()
    path.write_text(text[: len(text) // 2])  # truncated while the broker was stopped
    again = TopicRegistry(path)
    assert [(m.name, m.topic_id, m.partitions) for m in again.all()] == [("a", a.topic_id, 2)]
    assert "the last change it recorded is lost" in caplog.text
    again.create("c", 1, {})  # the next save replaces the damaged file
    assert sorted(m.name for m in TopicRegistry(path).all()) == ["a", "c"]


@pytest.mark.parametrize("previous", ["missing", "damaged"])
def test_damaged_topics_json_without_a_usable_copy_is_an_error(tmp_path, previous):
    from rmqkafka.storage.files import DamagedFileError

    path = tmp_path / "topics.json"
    reg = TopicRegistry(path)
    reg.create("a", 1, {})
    reg.create("b", 1, {})
    path.write_text('{"a": {"id": ')
    prev = tmp_path / "topics.json.prev"
    if previous == "missing":
        prev.unlink()
    else:
        prev.write_text(json.dumps({"a": {"partitions": 1}}))  # JSON, but not a registry
    with pytest.raises(DamagedFileError, match="topics.json is damaged"):
        TopicRegistry(path)
