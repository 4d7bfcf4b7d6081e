"""A damaged checkpoint.json (storage.checkpoint_file): detected at open by its CRC32C and
length, logged in one line, and treated as absent, so the store recovers from the
commitlog to exactly the state an undamaged checkpoint gives. A checkpoint of the previous
format (JSON without a header) is still read as before: no full recovery, no error.
"""

from __future__ import annotations

import json
import logging
import shutil

import pytest

from batches import idempotent, make_batch, values_of
from rmqkafka.storage.checkpoint_file import (
    DamagedCheckpointError,
    decode_checkpoint,
    encode_checkpoint,
    read_checkpoint,
)
from storage_helpers import StoreFactory, append, read_all, sync_checkpoint

HW = 1 << 62
CHECKPOINT = "checkpoint.json"


def _fill(store) -> None:
    store.create_topic("t", 2, {})
    store.create_topic("u", 1, {})
    append(store, "t", 0, idempotent([b"a", b"b"], 7, 0, 0), make_batch(3))
    append(store, "t", 1, idempotent([b"c"], 8, 1, 0))
    append(store, "u", 0, make_batch([b"u%d" % i for i in range(5)]))
    append(store, "t", 0, idempotent([b"d"], 7, 0, 2))


def _state(store) -> dict:
    """Everything a checkpoint summarises, per partition: records, ends, producer state,
    LSO and aborted transactions."""
    out = {}
    for (name, p), plog in sorted(store.partitions().items()):
        out[name, p] = (values_of(read_all(store, name, p)), plog.log_start_offset, plog.next_offset,
                        plog.producers.snapshot(), plog.last_stable_offset, plog.aborted_transactions(0, HW))
    return out


@pytest.fixture(params=["clean stop", "crash after a checkpoint"])
def stopped(request, stores):
    """A stopped store's data directory whose checkpoint is version 2; a crash leaves a
    tail after it."""
    store = stores.open(flush_interval_ms=3_600_000)
    _fill(store)
    if request.param == "clean stop":
        stores.close(store)
    else:
        sync_checkpoint(store)
        append(store, "u", 0, make_batch([b"after the checkpoint"]))
        stores.crash(store)
    assert (stores.data_dir / CHECKPOINT).read_bytes().startswith(b"rmqkafka-checkpoint 2 ")
    return stores


def _undamaged_state(stores, tmp_path) -> dict:
    copy = tmp_path / "undamaged"
    shutil.copytree(stores.data_dir, copy)
    twin = StoreFactory(copy, stores.clock)
    try:
        return _state(twin.open())
    finally:
        twin.close_all()


def _damages(raw: bytes) -> dict[str, bytes]:
    header = raw.index(b"\n") + 1
    out = {}
    for name, at in {"magic": 0, "version": len(b"rmqkafka-checkpoint "), "length": header - 12,
                     "crc": header - 3, "newline": header - 1, "first JSON byte": header,
                     "middle": (header + len(raw)) // 2, "last byte": len(raw) - 1}.items():
        flipped = bytearray(raw)
        flipped[at] ^= 0x01
        out[f"bit flipped: {name}"] = bytes(flipped)
    for name, at in {"empty": 0, "in the header": header // 2, "header only": header,
                     "half": (header + len(raw)) // 2, "last byte": len(raw) - 1}.items():
        out[f"truncated: {name}"] = raw[:at]
    out["zeros"] = bytes(len(raw))
    out["a byte appended"] = raw + b" "
    out["the JSON's first byte made the file's"] = b"{" + raw[1:]
    return out


DAMAGES = list(_damages(encode_checkpoint({"position": 123, "derived": {"x/0": [1, 2, 3]}})))


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_checkpoint_recovers_the_undamaged_state(stopped, tmp_path, caplog, damage):
    expected = _undamaged_state(stopped, tmp_path)
    path = stopped.data_dir / CHECKPOINT
    path.write_bytes(_damages(path.read_bytes())[damage])
    with caplog.at_level(logging.WARNING, logger="rmqkafka.storage.store"):
        store = stopped.open()
    assert not store.clean_start
    assert _state(store) == expected
    damaged = [r for r in caplog.records if CHECKPOINT in r.getMessage() and "damaged" in r.getMessage()]
    assert len(damaged) == 1 and damaged[0].levelno == logging.ERROR
    assert "\n" not in damaged[0].getMessage()
    # the store wrote a whole checkpoint again: the next start is a clean one
    end = store.commitlog.end_position
    stopped.close(store)
    assert read_checkpoint(path)["position"] == end
    assert stopped.open().clean_start


def test_a_checkpoint_of_the_previous_format_is_read_without_a_recovery(stores, caplog):
    store = stores.open()
    _fill(store)
    stores.close(store)
    expected_store = stores.open()
    expected = _state(expected_store)
    stores.close(expected_store)
    path = stores.data_dir / CHECKPOINT
    path.write_text(json.dumps(read_checkpoint(path)))  # version 1: the JSON alone
    with caplog.at_level(logging.WARNING, logger="rmqkafka.storage.store"):
        store = stores.open()
    assert store.clean_start  # nothing re-read from the commitlog
    assert _state(store) == expected
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    stores.close(store)
    assert path.read_bytes().startswith(b"rmqkafka-checkpoint 2 ")  # rewritten in the new format


def test_every_single_byte_change_of_a_checkpoint_is_detected():
    raw = encode_checkpoint({"position": 4096, "log_start": {"a/0": 5}, "state": {"s": {"x": "QUJD"}}})
    assert decode_checkpoint(raw) == {"position": 4096, "log_start": {"a/0": 5}, "state": {"s": {"x": "QUJD"}}}
    for at in range(len(raw)):
        for mask in (0x01, 0x20, 0x80, 0xFF):
            damaged = bytearray(raw)
            damaged[at] ^= mask
            with pytest.raises(DamagedCheckpointError):
                decode_checkpoint(bytes(damaged))
    for at in range(len(raw)):
        with pytest.raises(DamagedCheckpointError):
            decode_checkpoint(raw[:at])


@pytest.mark.parametrize("raw", [b"{}", b'{"position": 7}', b'{"position":7,"derived":null}'])
def test_previous_format_checkpoints_decode_unchecked(raw):
    assert decode_checkpoint(raw) == json.loads(raw)


@pytest.mark.parametrize("raw", [b"", b"{not json", b"[1, 2]", b"\x00" * 40, b"{\xff}"])
def test_what_is_neither_format_is_damage(raw):
    with pytest.raises(DamagedCheckpointError):
        decode_checkpoint(raw)


def test_a_missing_checkpoint_is_none(tmp_path):
    assert read_checkpoint(tmp_path / CHECKPOINT) is None


@pytest.mark.parametrize("cut", [0, 1, 0.5, -1])
def test_a_previous_format_checkpoint_cut_short_recovers_the_undamaged_state(stopped, tmp_path, caplog, cut):
    """Version 1 has no checksum; cut short it does not parse, and is treated the same way."""
    path = stopped.data_dir / CHECKPOINT
    path.write_text(json.dumps(read_checkpoint(path)))
    expected = _undamaged_state(stopped, tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[: int(len(raw) * cut) if isinstance(cut, float) else cut % len(raw)])
    with caplog.at_level(logging.WARNING, logger="rmqkafka.storage.store"):
        store = stopped.open()
    assert not store.clean_start
    assert _state(store) == expected
    assert len([r for r in caplog.records if CHECKPOINT in r.getMessage() and "damaged" in r.getMessage()]) == 1
