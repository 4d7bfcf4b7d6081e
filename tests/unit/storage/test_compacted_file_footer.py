"""A compacted file's footer (storage.compaction_store, version 2): opening reads the sparse
index from it instead of walking every batch, and still finds damage anywhere in the file
(header, batches, index, trailer, a truncation or bytes appended); a version 1 file (no
footer) still opens the old way, to the same index; and on a real store a file damaged in
its batches or its footer is set aside while the commitlog serves."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from batches import make_batch
from compaction_helpers import EAGER, T, clean, write
from rmqkafka.storage import compaction_store as cs
from rmqkafka.storage.compaction_store import CompactedLog, CompactedWriter, encode_header
from test_log_cleaner import fill, latest, records


def _batch(offset: int, value: bytes) -> bytes:
    data = bytearray(make_batch([value], keys=[b"k%d" % offset]))
    struct.pack_into(">q", data, 0, offset)  # the base offset is outside the batch CRC
    return bytes(data)


def _written(directory: Path, count: int, value_bytes: int = 300) -> Path:
    writer = CompactedWriter(directory, 2 * count, [(count, 123), (2 * count, 456)])
    for i in range(count):
        writer.add(_batch(2 * i, b"v" * value_bytes))  # every other offset: gaps, as after cleaning
    writer.finish()
    writer.commit()
    return writer.final


def _index(log: CompactedLog) -> tuple:
    index = log.index
    return list(index.bases), list(index.positions), index.count, index.end_position


def _as_version_1(raw: bytes, end_offset: int, epochs: list[tuple[int, int]]) -> bytes:
    """The same file as version 1 wrote it: its header's version 1, no footer."""
    header = encode_header(end_offset, epochs)
    (count,) = struct.unpack_from("<q", raw, len(raw) - cs._TRAILER.size)
    (data_end,) = struct.unpack_from("<q", raw, len(raw) - cs._TRAILER.size + 8)
    assert count
    return encode_header(end_offset, epochs, version=1) + raw[len(header):data_end]


def test_the_footer_gives_the_index_a_walk_would(tmp_path):
    path = _written(tmp_path / "c", 100)  # ~40 KB of batches: several sparse entries
    log = CompactedLog.open(path.parent)
    assert log is not None and log.batch_count == 100 and log.end_offset == 200
    assert log.epochs == [(100, 123), (200, 456)]
    assert len(log.index.bases) > 3
    footered = _index(log)
    log.close()
    old = _as_version_1(path.read_bytes(), 200, [(100, 123), (200, 456)])
    path.write_bytes(old)
    log = CompactedLog.open(path.parent)
    assert log is not None and _index(log) == footered
    assert [struct.unpack_from(">q", b)[0] for b in log.batches_from(51)] == list(range(52, 200, 2))
    log.close()


def test_every_changed_byte_of_a_file_is_found_at_open(tmp_path):
    path = _written(tmp_path / "c", 6, value_bytes=10)
    raw = path.read_bytes()
    for at in range(len(raw)):
        damaged = bytearray(raw)
        damaged[at] ^= 0x10
        path.write_bytes(bytes(damaged))
        assert cs._load(path) is None, f"a change at byte {at} of {len(raw)} was not found"
    for cut in range(len(raw)):
        path.write_bytes(raw[:cut])
        assert cs._load(path) is None, f"the file cut at byte {cut} of {len(raw)} was not found"
    path.write_bytes(raw + b"\x00")
    assert cs._load(path) is None
    path.write_bytes(raw)
    assert cs._load(path) is not None


@pytest.mark.parametrize("where", ["header", "first batch", "middle batch", "index bases", "index positions",
                                   "trailer", "zeros over the footer"])
def test_a_damaged_file_is_set_aside(tmp_path, where):
    path = _written(tmp_path / "c", 200)
    raw = bytearray(path.read_bytes())
    trailer = len(raw) - cs._TRAILER.size
    (data_end,) = struct.unpack_from("<q", raw, trailer + 8)
    (n,) = struct.unpack_from("<i", raw, trailer + 16)
    start = len(encode_header(400, [(200, 123), (400, 456)]))
    at = {"header": 7, "first batch": start + 30, "middle batch": (start + data_end) // 2,
          "index bases": data_end + 8 * (n // 2), "index positions": data_end + 8 * n + 8 * (n // 2),
          "trailer": trailer + 3}.get(where)
    if at is None:
        raw[data_end:] = bytes(len(raw) - data_end)
    else:
        raw[at] ^= 0x01
    path.write_bytes(bytes(raw))
    assert CompactedLog.open(path.parent) is None
    assert os.listdir(path.parent) == [path.name + ".damaged"]


def test_a_damaged_version_1_file_is_still_found(tmp_path):
    path = _written(tmp_path / "c", 50)
    old = bytearray(_as_version_1(path.read_bytes(), 100, [(50, 123), (100, 456)]))
    old[len(old) // 2] ^= 0x01
    path.write_bytes(bytes(old))
    assert CompactedLog.open(path.parent) is None


@pytest.fixture
def cleaned(stores, clock):
    store = stores.open()
    store.create_topic(T, 1, {"cleanup.policy": "compact"})
    store.cleaner.settings_for = lambda name: EAGER if name == T else None
    fill(store, clock)
    assert clean(store)
    return store


@pytest.mark.parametrize("where", ["batches", "footer"])
def test_a_store_sets_aside_a_file_damaged_in_its_batches_or_footer(stores, cleaned, where):
    directory = cleaned.compaction_dir(cleaned.partition(T, 0))
    (name,) = os.listdir(directory)
    path = directory / name
    raw = bytearray(path.read_bytes())
    (data_end,) = struct.unpack_from("<q", raw, len(raw) - cs._TRAILER.size + 8)
    raw[data_end - 20 if where == "batches" else data_end + 2] ^= 0x40
    path.write_bytes(bytes(raw))
    stores.crash(cleaned)
    again = stores.open()
    assert os.listdir(directory) == [name + ".damaged"]
    assert again.partition(T, 0).compacted is None
    assert latest(again)[b"k4"] == b"v4-2" and len(records(again)) == 16  # the commitlog had it all


def test_a_store_opens_a_version_1_file_and_serves_from_it(stores, cleaned, clock):
    want = records(cleaned)
    plog = cleaned.partition(T, 0)
    directory = cleaned.compaction_dir(plog)
    (name,) = os.listdir(directory)
    compacted = plog.compacted
    old = _as_version_1((directory / name).read_bytes(), compacted.end_offset, compacted.epochs)
    stores.close(cleaned)
    (directory / name).write_bytes(old)
    again = stores.open()
    assert again.partition(T, 0).compacted is not None
    assert records(again) == want
    # the next cleaning writes version 2
    again.cleaner.settings_for = cleaned.cleaner.settings_for
    write(again, clock, [(b"k0", b"new")], [(b"sentinel", b"s2")])
    assert clean(again)
    (name,) = os.listdir(directory)
    assert struct.unpack_from(">h", (directory / name).read_bytes(), 4)[0] == cs.VERSION == 2
