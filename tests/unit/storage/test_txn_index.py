"""The transaction index alone (storage.txn_index): aborted transactions on disk, open ones
in memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqkafka.storage.txn_index import MAGIC, SLOT, SLOT_SIZE, VERSION, OngoingTxns, TxnIndex

# (producer id, first offset, last offset, LSO after the marker), in marker order:
# producer 1 aborts 0..4 while producer 2 is open from 3, which aborts 3..9 alone; then
# producer 3 aborts 12..15 alone and producer 4 aborts 20..30 while producer 5 is open from 25.
ENTRIES = [(1, 0, 4, 3), (2, 3, 9, 10), (3, 12, 15, 16), (4, 20, 30, 25)]


def build(path: Path, entries=ENTRIES) -> TxnIndex:
    index = TxnIndex(path)
    for entry in entries:
        index.append(*entry)
    return index


def slots(path: Path) -> list[tuple[int, int, int, int]]:
    return list(SLOT.iter_unpack(path.read_bytes()))


def test_no_file_until_the_first_entry(tmp_path):
    """A partition never written to costs no file and no descriptor (issue 12: 100,000
    partitions made the broker unstartable); the first entry creates the file with its
    header."""
    index = TxnIndex(tmp_path / "p" / "txnindex")
    assert index.entry_count == 0 and index.start_offset == 0
    assert index.aborted_between(0, 1 << 62) == []
    index.truncate_entries(0)
    index.truncate_to_offset(0)
    index.drop_before(10)
    assert index.take_dirty_fds() == []
    assert not (tmp_path / "p").exists()
    index.append(*ENTRIES[0])
    assert slots(tmp_path / "p" / "txnindex") == [(MAGIC, VERSION, 0, 0), ENTRIES[0]]
    index.close()


def test_append_and_file_layout(tmp_path):
    index = build(tmp_path / "txnindex")
    assert index.entry_count == 4
    assert slots(tmp_path / "txnindex") == [(MAGIC, VERSION, 0, 0), *ENTRIES]
    index.close()


@pytest.mark.parametrize(
    ("start", "upper", "expected"),
    [
        (0, 100, [(1, 0), (2, 3), (3, 12), (4, 20)]),
        (0, 1, [(1, 0)]),  # upper is exclusive: producer 2 starts at 3
        (0, 3, [(1, 0)]),
        (0, 4, [(1, 0), (2, 3)]),
        (4, 5, [(1, 0), (2, 3)]),  # start == a last offset: that transaction counts
        (5, 10, [(2, 3)]),  # start past producer 1's marker
        (9, 10, [(2, 3)]),
        (10, 12, []),  # between transactions
        (10, 13, [(3, 12)]),
        (16, 20, []),
        (16, 21, [(4, 20)]),
        (30, 31, [(4, 20)]),
        (31, 100, []),  # past every marker
        (0, 0, []),
    ],
)
def test_aborted_between(tmp_path, start, upper, expected):
    index = build(tmp_path / "txnindex")
    assert index.aborted_between(start, upper) == expected
    index.close()


def test_scan_stops_at_an_entry_whose_lso_reaches_upper(tmp_path):
    """Kafka's early stop: once an entry's LSO is >= upper, no later transaction can start
    below upper. A later entry that breaks that rule (impossible in a real log) shows the
    scan did stop there instead of reading on."""
    index = build(tmp_path / "txnindex", [(1, 0, 4, 5), (2, 1, 9, 10)])
    assert index.aborted_between(0, 5) == [(1, 0)]
    assert index.aborted_between(0, 6) == [(1, 0), (2, 1)]
    index.close()


def test_many_entries_scanned_in_chunks(tmp_path):
    # 1000 transactions of two offsets each (data, ABORT marker), none overlapping
    index = build(tmp_path / "txnindex", [(i, 2 * i, 2 * i + 1, 2 * i + 2) for i in range(1000)])
    assert index.aborted_between(0, 2000) == [(i, 2 * i) for i in range(1000)]
    assert index.aborted_between(701, 1101) == [(i, 2 * i) for i in range(350, 551)]
    assert index.aborted_between(1999, 5000) == [(999, 1998)]
    index.close()


def test_reopen_keeps_the_entries(tmp_path):
    build(tmp_path / "txnindex").close()
    index = TxnIndex(tmp_path / "txnindex")
    assert index.entry_count == 4
    assert index.aborted_between(5, 21) == [(2, 3), (3, 12), (4, 20)]
    index.append(6, 31, 40, 41)
    assert index.aborted_between(31, 41) == [(6, 31)]
    index.close()


def test_truncate_entries(tmp_path):
    index = build(tmp_path / "txnindex")
    index.truncate_entries(9)  # more than there are: nothing changes
    assert index.entry_count == 4
    index.truncate_entries(2)
    assert index.entry_count == 2
    assert index.aborted_between(0, 100) == [(1, 0), (2, 3)]
    assert (tmp_path / "txnindex").stat().st_size == 3 * SLOT_SIZE
    index.append(3, 12, 15, 16)
    assert index.aborted_between(10, 100) == [(3, 12)]
    index.truncate_entries(0)
    assert index.entry_count == 0 and index.aborted_between(0, 100) == []
    index.close()


@pytest.mark.parametrize(
    ("offset", "kept"),
    [(0, 0), (4, 0), (5, 1), (9, 1), (10, 2), (30, 3), (31, 4), (1000, 4)],
)
def test_truncate_to_offset_drops_markers_at_or_after_it(tmp_path, offset, kept):
    index = build(tmp_path / "txnindex")
    index.truncate_to_offset(offset)
    assert index.entry_count == kept
    assert slots(tmp_path / "txnindex")[1:] == ENTRIES[:kept]
    index.close()


@pytest.mark.parametrize("tail", [1, 17, SLOT_SIZE - 1])
def test_torn_trailing_entry_dropped_on_open(tmp_path, tail):
    build(tmp_path / "txnindex").close()
    with open(tmp_path / "txnindex", "ab") as f:
        f.write(b"\x7f" * tail)
    index = TxnIndex(tmp_path / "txnindex")
    assert index.entry_count == 4
    assert (tmp_path / "txnindex").stat().st_size == 5 * SLOT_SIZE
    index.append(6, 31, 40, 41)
    assert index.aborted_between(31, 41) == [(6, 31)]
    index.close()


@pytest.mark.parametrize("damage", ["zeros", "short", "version", "negative"])
def test_file_without_a_valid_header_is_emptied(tmp_path, damage, caplog):
    path = tmp_path / "txnindex"
    build(path).close()
    if damage == "zeros":  # an OS crash before the header reached the disk
        path.write_bytes(bytes(5 * SLOT_SIZE))
    elif damage == "short":
        path.write_bytes(path.read_bytes()[:20])
    elif damage == "version":
        path.write_bytes(SLOT.pack(MAGIC, VERSION + 1, 0, 0) + path.read_bytes()[SLOT_SIZE:])
    else:
        path.write_bytes(SLOT.pack(MAGIC, VERSION, 0, -1) + path.read_bytes()[SLOT_SIZE:])
    index = TxnIndex(path)
    assert index.entry_count == 0
    assert slots(path) == [(MAGIC, VERSION, 0, 0)]
    assert "no valid header" in caplog.text
    index.close()


def test_drop_before_keeps_straddling_entries_and_entry_numbers(tmp_path):
    path = tmp_path / "txnindex"
    index = build(path)
    index.drop_before(3)  # nothing ended below 3
    index.drop_before(5)  # 1 of 4 could go: not worth a rewrite yet
    assert slots(path)[1:] == ENTRIES
    index.drop_before(13)  # 2 of 4: (3, 12..15) straddles 13 and stays
    assert slots(path) == [(MAGIC, VERSION, 2, 13), *ENTRIES[2:]]
    assert index.entry_count == 4 and index.start_offset == 13
    assert index.aborted_between(13, 100) == [(3, 12), (4, 20)]
    index.append(6, 31, 40, 41)
    assert index.entry_count == 5
    index.truncate_entries(4)  # numbers count the dropped entries
    assert index.aborted_between(0, 100) == [(3, 12), (4, 20)]
    index.close()

    index = TxnIndex(path)
    assert index.entry_count == 4 and index.start_offset == 13
    index.truncate_entries(1)  # the checkpoint's count is below what was dropped
    assert index.entry_count == 2 and index.aborted_between(0, 100) == []
    index.append(7, 50, 51, 52)
    assert index.entry_count == 3
    index.close()


def test_drop_before_everything(tmp_path):
    path = tmp_path / "txnindex"
    index = build(path)
    index.drop_before(31)
    assert slots(path) == [(MAGIC, VERSION, 4, 31)]
    assert index.entry_count == 4 and index.aborted_between(0, 100) == []
    assert not (tmp_path / "txnindex.tmp").exists()
    assert index.take_dirty_fds() == []  # the rewritten file is fsynced already
    index.append(5, 40, 41, 42)
    assert index.aborted_between(0, 100) == [(5, 40)]
    index.close()
    assert slots(path) == [(MAGIC, VERSION, 4, 31), (5, 40, 41, 42)]


def test_leftover_temporary_file_removed_on_open(tmp_path):
    build(tmp_path / "txnindex").close()
    (tmp_path / "txnindex.tmp").write_bytes(b"half a rewrite")
    index = TxnIndex(tmp_path / "txnindex")
    assert not (tmp_path / "txnindex.tmp").exists()
    assert index.entry_count == 4
    index.close()


def test_dirty_fds(tmp_path):
    index = TxnIndex(tmp_path / "txnindex")
    assert index.take_dirty_fds() == []  # no file yet
    index.append(1, 0, 1, 2)
    assert len(index.take_dirty_fds()) == 1
    index.append(2, 2, 3, 4)
    index.flush()
    assert index.take_dirty_fds() == []
    index.close()
    index = TxnIndex(tmp_path / "txnindex")
    assert index.take_dirty_fds() == []  # an existing file: nothing written
    index.close()


def test_ongoing_transactions():
    txns = OngoingTxns()
    assert txns.first_offset() is None and len(txns) == 0
    txns.begin(7, 10)
    txns.begin(8, 12)
    txns.begin(7, 15)  # already open: keeps its first offset
    assert txns.first_offset() == 10 and len(txns) == 2
    assert txns.end(7) == 10
    assert txns.first_offset() == 12
    assert txns.end(7) is None
    txns.begin(7, 20)
    assert txns.snapshot() == {"8": 12, "7": 20}
    assert txns.end(8) == 12 and txns.first_offset() == 20
    assert txns.end(7) == 20 and txns.first_offset() is None


def test_ongoing_transactions_snapshot_order_does_not_matter():
    txns = OngoingTxns.from_snapshot({"3": 40, "1": 5, "2": 17})
    assert txns.first_offset() == 5
    txns.end(1)
    assert txns.first_offset() == 17
    txns.begin(4, 50)
    txns.end(2)
    assert txns.first_offset() == 40
    assert OngoingTxns.from_snapshot(txns.snapshot()).snapshot() == {"3": 40, "4": 50}
