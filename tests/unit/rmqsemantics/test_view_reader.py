"""Issue #8: reading a view against a real MessageStore (tmp dir, injected clock).

Every answer is checked the way a client reads it: batches decoded with aiokafka (as
consumers do), CRCs verified, and each record's offset, key, value, headers and timestamp
compared with what a client-side filter over the source yields.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
from aiokafka.record.memory_records import MemoryRecords

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))

from batches import BASE_TS, CODEC_NAMES, CODECS, GZIP, NONE, make_batch
from rmqkafka.rmqsemantics import view_reader
from rmqkafka.rmqsemantics.filters import compile_filter
from rmqkafka.rmqsemantics.view_arrivals import arrival_test
from rmqkafka.rmqsemantics.view_reader import first_match_at_or_after, read_view
from rmqkafka.storage import record_batch
from rmqkafka.storage.batch_builder import covering_batch
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.errors import OffsetOutOfRangeError
from rmqkafka.storage.store import Appended, MessageStore

BIG = 1 << 30


def put(store: MessageStore, *batches: bytes) -> None:
    for batch in batches:
        store.append("src", 0, batch, max_batch_bytes=BIG)


def tags_filter(expression: str):
    return compile_filter("tags", expression)


def decoded(batches: list[bytes]) -> list[tuple]:
    """What a consumer sees: (offset, timestamp, key, value, headers) of every data record,
    control batches skipped, CRCs checked."""
    out = []
    records = MemoryRecords(b"".join(batches))
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        if batch.is_control_batch:
            continue
        out.extend((r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch)
    return out


def expected(store: MessageStore, flt, since: int = 0) -> list[tuple]:
    """The client-side filter over the source: what the view must yield."""
    plog = store.partition("src", 0)
    source = plog.read(plog.log_start_offset, BIG, True).batches
    return [r for r in decoded(source) if r[0] >= since and flt.matches_headers(r[4])]


def coverage(batches: list[bytes]) -> list[tuple[int, int]]:
    return [(record_batch.base_offset_of(b), record_batch.next_offset_of(b)) for b in batches]


def read_all(store: MessageStore, flt, offset: int = 0, **kw) -> list[bytes]:
    return read_view(store.partition("src", 0), flt, offset, BIG, True, **kw).batches


def seen(batches: list[bytes], since: int) -> list[tuple]:
    return [r for r in decoded(batches) if r[0] >= since]


# -- batches as stored, rebuilt, covering -------------------------------------------------------


def test_batches_whose_records_all_match_go_out_as_stored(store):
    a = make_batch(3, tags=["A"] * 3, keys=[b"k0", b"k1", b"k2"])
    b = make_batch(2, tags=["B"] * 2)
    put(store, a, b, make_batch(4, tags=["A"] * 4))
    plog = store.partition("src", 0)
    out = read_all(store, tags_filter("A"))
    stored = plog.read(0, BIG, True).batches
    assert out[0] == stored[0] and out[2] == stored[2]  # byte for byte
    assert coverage(out) == [(0, 3), (3, 5), (5, 9)]
    assert seen(out, 0) == expected(store, tags_filter("A"))


def test_a_partly_matching_batch_keeps_its_header_and_only_matching_records(store):
    headers = [[("h", b"x%d" % i), ("TAGS", tag.encode())] for i, tag in enumerate("ABACA")]
    batch = make_batch(
        [b"v0", None, b"v2", b"v3", b""], keys=[None, b"k1", b"k2", b"k3", b"k4"],
        headers=headers, producer_id=7, producer_epoch=3, base_sequence=0,
        timestamps=[BASE_TS + 50, BASE_TS + 10, BASE_TS + 90, BASE_TS + 20, BASE_TS + 30],
    )
    put(store, make_batch(2, tags=["C", "C"]), batch)
    flt = tags_filter("A")
    (_, got) = read_all(store, flt)  # the first batch is a gap
    source = store.partition("src", 0).read(2, BIG, True).batches[0]
    src, new = record_batch.read_info(source), record_batch.read_info(got)
    assert record_batch.crc_ok(got)
    assert record_batch.base_offset_of(got) == 2 and record_batch.next_offset_of(got) == 7
    assert (new.last_offset_delta, new.producer_id, new.producer_epoch, new.base_sequence) == (4, 7, 3, 0)
    assert new.attributes == src.attributes and new.base_timestamp == src.base_timestamp
    assert new.records_count == 3
    assert new.max_timestamp == BASE_TS + 90  # the largest kept record's, as Kafka's cleaner
    assert seen([got], 0) == expected(store, flt) == [
        (2, BASE_TS + 50, None, b"v0", (("h", b"x0"), ("TAGS", b"A"))),
        (4, BASE_TS + 90, b"k2", b"v2", (("h", b"x2"), ("TAGS", b"A"))),
        (6, BASE_TS + 30, b"k4", b"", (("h", b"x4"), ("TAGS", b"A"))),
    ]


def test_transactional_bit_and_log_append_time_are_kept(store, tmp_path):
    batch = make_batch(3, tags=["A", "B", "A"], producer_id=9, producer_epoch=0, base_sequence=0,
                       transactional=True)
    store.append("src", 0, batch, max_batch_bytes=BIG, log_append_time=True)
    (got,) = read_all(store, tags_filter("A"))
    info = record_batch.read_info(got)
    stored = record_batch.read_info(store.partition("src", 0).batch_at(0))
    assert info.attributes & record_batch.TRANSACTIONAL_BIT
    assert info.attributes & record_batch.TIMESTAMP_TYPE_BIT
    assert info.max_timestamp == stored.max_timestamp  # every record's timestamp under LogAppendTime
    assert [r.offset for r in DefaultRecordBatch(got)] == [0, 2]


def test_runs_without_a_match_become_one_covering_batch(store):
    put(store, make_batch(2, tags=["A", "A"]))
    put(store, *[make_batch(3, tags=["B"] * 3) for _ in range(5)])
    put(store, make_batch(1, tags=["A"]), make_batch(2, tags=["B", "B"]))
    out = read_all(store, tags_filter("A"))
    assert coverage(out) == [(0, 2), (2, 17), (17, 18), (18, 20)]
    gap = record_batch.read_info(out[1])
    assert gap.is_control and gap.producer_id == -1 and not gap.attributes & record_batch.TRANSACTIONAL_BIT
    assert record_batch.crc_ok(out[1]) and gap.records_count == 1
    (marker,) = list(DefaultRecordBatch(out[1]))
    assert marker.offset == 16 and marker.key == struct.pack(">hh", 0, 1)  # a COMMIT marker at the end
    assert seen(out, 0) == expected(store, tags_filter("A"))


def test_a_long_run_is_covered_without_reading_the_commitlog(store, monkeypatch):
    put(store, *[make_batch(10, tags=["B"] * 10) for _ in range(300)])
    put(store, make_batch(1, tags=["A"]))
    plog = store.partition("src", 0)
    reads = []
    real = plog.read_at
    monkeypatch.setattr(plog, "read_at", lambda pos, size: reads.append(pos) or real(pos, size))
    out = read_all(store, tags_filter("A"))
    assert coverage(out) == [(0, 3000), (3000, 3001)]
    assert len(reads) == 1  # only the batch with a matching code


def test_control_batches_pass_through(store):
    marker = covering_batch(0, 0)  # any control batch: a COMMIT marker
    put(store, make_batch(2, tags=["B", "B"]), marker, make_batch(1, tags=["A"]))
    for flt in (tags_filter("A"), compile_filter("sql", "TAGS = 'A'")):
        out = read_all(store, flt)
        assert coverage(out) == [(0, 2), (2, 3), (3, 4)]
        assert out[1] == store.partition("src", 0).batch_at(2)


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_compressed_sources(store, codec):
    mixed = make_batch([b"value %d " % i * 5 for i in range(6)], codec=codec,
                       tags=["A", "B", "A", "B", "B", "A"], keys=[b"k%d" % i for i in range(6)])
    whole = make_batch(3, codec=codec, tags=["A"] * 3)
    put(store, mixed, whole)
    flt = tags_filter("A")
    out = read_all(store, flt)
    assert out[1] == store.partition("src", 0).batch_at(6)  # all match: stored, still compressed
    rebuilt = record_batch.read_info(out[0])
    assert rebuilt.compression == codec and rebuilt.records_count == 3  # the source's codec
    assert seen(out, 0) == expected(store, flt)
    sql = compile_filter("sql", "TAGS = 'B'")
    assert seen(read_all(store, sql), 0) == expected(store, sql)


def test_hash_collisions_are_settled_by_the_exact_tag(store):
    assert tags_filter("Aa").codes == tags_filter("BB").codes  # Java: "Aa".hashCode() == "BB".hashCode()
    put(store,
        make_batch(3, tags=["Aa", "BB", "Aa"]),
        make_batch(2, tags=["BB", "BB"]),
        make_batch(2, tags=["Aa", "Aa"]),
        # a BB record whose value holds the bytes of an "Aa" TAGS header
        make_batch([b"\x08TAGS\x04Aa", b"x"], tags=["BB", "Aa"]))
    out = read_all(store, tags_filter("Aa"))
    assert [(r[0], dict(r[4])["TAGS"]) for r in seen(out, 0)] == [
        (0, b"Aa"), (2, b"Aa"), (5, b"Aa"), (6, b"Aa"), (8, b"Aa")]
    assert coverage(out) == [(0, 3), (3, 5), (5, 7), (7, 9)]
    assert [r[0] for r in seen(read_all(store, tags_filter("BB")), 0)] == [1, 3, 4, 7]


def test_untagged_records_and_several_tags(store):
    put(store, make_batch(4, tags=[None, "A", "C", "B"]), make_batch(2))
    flt = tags_filter("B || A")
    out = read_all(store, flt)
    assert [r[0] for r in seen(out, 0)] == [1, 3]
    assert coverage(out) == [(0, 4), (4, 6)]


# -- limits and positions ---------------------------------------------------------------------


def test_max_bytes_and_min_one(store):
    put(store, *[make_batch(3, tags=["A", "B", "A"]) for _ in range(4)])
    plog = store.partition("src", 0)
    flt = tags_filter("A")
    every = read_view(plog, flt, 0, BIG, True).batches
    one = len(every[0])
    assert read_view(plog, flt, 0, 1, True).batches == every[:1]  # KIP-74: the first batch anyway
    assert read_view(plog, flt, 0, 1, False).batches == []
    assert read_view(plog, flt, 0, 2 * one, False).batches == every[:2]
    result = read_view(plog, flt, 0, 2 * one + 1, True)
    assert result.size == 2 * one == result.record_bytes and not result.more


def test_a_gap_counts_toward_max_bytes_but_not_record_bytes(store):
    put(store, make_batch(2, tags=["B", "B"]), make_batch(2, tags=["A", "A"]))
    plog = store.partition("src", 0)
    result = read_view(plog, tags_filter("A"), 0, 100, False)  # room for the gap only
    assert coverage(result.batches) == [(0, 2)] and result.record_bytes == 0
    result = read_view(plog, tags_filter("A"), 0, BIG, False)
    assert result.record_bytes == len(result.batches[1])


def test_reading_from_the_middle_of_a_batch(store):
    put(store, make_batch(6, tags=["A", "B", "A", "A", "B", "A"]), make_batch(4, tags=["A"] * 4))
    flt = tags_filter("A")
    out = read_all(store, flt, 3)
    assert coverage(out)[0] == (0, 6)  # the batch holding offset 3, from its base offset
    assert [r[0] for r in decoded(out)] == [3, 5, 6, 7, 8, 9]
    out = read_all(store, flt, 8)  # inside a batch whose records all match
    assert [r[0] for r in seen(out, 8)] == [8, 9]
    out = read_all(store, flt, 4)  # inside a run of no match: the gap starts at the offset
    assert seen(out, 4) == expected(store, flt, 4)


def test_offsets_out_of_range_are_the_sources(store):
    put(store, make_batch(3, tags=["A"] * 3), make_batch(3, tags=["B"] * 3))
    plog = store.partition("src", 0)
    plog.advance_log_start(3)
    flt = tags_filter("A")
    with pytest.raises(OffsetOutOfRangeError):
        read_view(plog, flt, 2, BIG, True)
    with pytest.raises(OffsetOutOfRangeError):
        read_view(plog, flt, 7, BIG, True)
    assert coverage(read_view(plog, flt, 3, BIG, True).batches) == [(3, 6)]  # from log start
    at_end = read_view(plog, flt, 6, BIG, True)
    assert at_end.batches == [] and (at_end.log_start_offset, at_end.high_watermark) == (3, 6)


def test_a_read_stops_on_its_work_limit_and_covers_what_it_examined(store):
    put(store, *[make_batch(100, tags=["B"] * 100) for _ in range(50)], make_batch(1, tags=["A"]))
    plog = store.partition("src", 0)
    flt = tags_filter("A")
    result = read_view(plog, flt, 0, BIG, True, scan_entries=1000)
    assert result.more and coverage(result.batches) == [(0, view_reader.CHUNK)]
    offset, got = 0, []
    while offset < plog.next_offset:  # a consumer's fetches make progress every time
        batches = read_view(plog, flt, offset, BIG, True, scan_entries=1000).batches
        got.extend(seen(batches, offset))
        offset = record_batch.next_offset_of(batches[-1])
    assert got == expected(store, flt)
    sql = compile_filter("sql", "TAGS = 'A'")
    limited = read_view(plog, sql, 0, BIG, True, scan_bytes=1)
    assert limited.more and coverage(limited.batches) == [(0, 100)]


def test_star_reads_the_source_as_stored(store):
    put(store, make_batch(2, tags=["A", "B"]), make_batch(1))
    plog = store.partition("src", 0)
    assert read_all(store, tags_filter("*")) == plog.read(0, BIG, True).batches


# -- SQL92 views ------------------------------------------------------------------------------


def test_sql_views(store):
    rows = [[("region", b"eu"), ("price", b"%d" % p)] for p in (5, 50, 500, 7)]
    put(store, make_batch(4, headers=rows), make_batch(2, headers=[("region", b"us")]),
        make_batch(2, headers=[("region", b"eu"), ("price", b"60")]))
    flt = compile_filter("sql", "region = 'eu' AND price > 10")
    out = read_all(store, flt)
    assert seen(out, 0) == expected(store, flt)
    assert [r[0] for r in seen(out, 0)] == [1, 2, 6, 7]
    assert coverage(out) == [(0, 4), (4, 6), (6, 8)]
    assert out[2] == store.partition("src", 0).batch_at(6)


# -- ListOffsets by timestamp, wake-ups ---------------------------------------------------------


def test_first_match_at_or_after_a_timestamp(store):
    put(store,
        make_batch(3, tags=["A", "B", "B"], timestamps=[BASE_TS, BASE_TS + 10, BASE_TS + 20]),
        make_batch(3, tags=["B", "A", "A"], timestamps=[BASE_TS + 30, BASE_TS + 40, BASE_TS + 50]))
    plog = store.partition("src", 0)
    flt = tags_filter("A")
    assert first_match_at_or_after(plog, flt, BASE_TS) == (0, BASE_TS)
    assert first_match_at_or_after(plog, flt, BASE_TS + 1) == (4, BASE_TS + 40)
    assert first_match_at_or_after(plog, flt, BASE_TS + 45) == (5, BASE_TS + 50)
    assert first_match_at_or_after(plog, flt, BASE_TS + 51) is None
    assert first_match_at_or_after(plog, tags_filter("C"), BASE_TS) is None


def test_arrival_tests(store):
    def appended(*batches: bytes) -> Appended:
        plog = store.partition("src", 0)
        records = [record_batch.read_records(b) for b in batches]
        return Appended(records, [plog.tag_codes(b, r) for b, r in zip(batches, records)])

    aa = arrival_test(tags_filter("Aa"))
    assert not aa(appended(make_batch(2, tags=["BB", "C"]), make_batch(1)))  # BB: same code
    assert aa(appended(make_batch(1, tags=["C"]), make_batch(2, tags=["BB", "Aa"])))
    assert aa(appended(covering_batch(0, 0)))  # control batches pass through
    assert arrival_test(tags_filter("*")) is None
    sql = arrival_test(compile_filter("sql", "a > 1"))
    assert not sql(appended(make_batch(2, headers=[("a", b"1")])))
    assert sql(appended(make_batch(1, headers=[("a", b"2")])))


def test_gzip_source_read_back_whole_by_kafka_python(store):
    """kafka-python decodes the answer too (its own record reader, not aiokafka's)."""
    from kafka.record.memory_records import MemoryRecords as KafkaPythonRecords

    put(store, make_batch(4, codec=GZIP, tags=["A", "B", "A", "B"]), make_batch(3, tags=["B"] * 3),
        make_batch(1, codec=NONE, tags=["A"]))
    out = read_all(store, tags_filter("A"))
    records = KafkaPythonRecords(b"".join(out))
    offsets, next_offset = [], 0
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        next_offset = batch.next_offset
        if not batch.is_control_batch:
            offsets.extend(r.offset for r in batch)
    assert offsets == [0, 2, 7] and next_offset == 8


def test_batches_spanning_consume_queue_files(tmp_path):
    small = MessageStore(StorageConfig(data_dir=tmp_path / "small", consume_queue_entries_per_file=8),
                         ManualClock())
    small.open()
    small.create_topic("src", 1, {})
    try:
        put(small, *[make_batch(5, tags=["A", "B", "A", "A", "C"]) for _ in range(7)],
            make_batch(12, tags=["A"] * 12))
        flt = tags_filter("A")
        out = read_all(small, flt)
        assert seen(out, 0) == expected(small, flt)
        assert out[-1] == small.partition("src", 0).batch_at(35)  # 12 entries over 2 files
    finally:
        small.close_sync()


def test_code_bytes_found_across_fields_are_not_hits():
    from rmqkafka.rmqsemantics.view_reader import _aligned, _find_aligned
    from rmqkafka.storage.consume_queue import ENTRY

    code = struct.pack(">q", 2112)  # "Aa"
    # the position field of entry 0 ends with the code's first bytes, its size field holds
    # the rest: the bytes occur straddling two fields before the real hit in entry 1
    straddling = ENTRY.pack(0, 2112, 7) + ENTRY.pack(5, 1, 2112) + ENTRY.pack(5, 1, 3)
    assert straddling.find(code) < 12
    assert _find_aligned(straddling, code, 0) == 1 and _aligned(straddling, [code]) == [1]
    assert _find_aligned(straddling, code, 2) == -1


def test_a_gap_that_does_not_fit_ends_the_answer(store):
    put(store, make_batch(1, tags=["A"]), make_batch(2, tags=["B", "B"]), make_batch(1, tags=["A"]))
    plog = store.partition("src", 0)
    first = len(plog.batch_at(0))
    result = read_view(plog, tags_filter("A"), 0, first + 10, False)
    assert coverage(result.batches) == [(0, 1)]
    result = read_view(plog, tags_filter("B"), 0, 10, False)
    assert result.batches == []


def test_semantics_reads_topics_as_stored_and_views_filtered(store, tmp_path):
    from rmqkafka.rmqsemantics.config import SemanticsConfig
    from rmqkafka.rmqsemantics.semantics import Semantics
    from rmqkafka.storage.errors import UnknownTopicError

    put(store, make_batch(3, tags=["A", "B", "A"], timestamps=[BASE_TS, BASE_TS + 1, BASE_TS + 2]),
        make_batch(2, tags=["B", "B"]))
    semantics = Semantics(SemanticsConfig(), store, tmp_path / "data")
    view = semantics.create_view("v", "src", "tags", "A")
    topic = semantics.read("src", 0, 0, BIG, True)
    assert topic.batches == store.partition("src", 0).read(0, BIG, True).batches
    assert topic.record_bytes == topic.size
    filtered = semantics.read("v", 0, 1, BIG, True)
    assert [r[0] for r in seen(filtered.batches, 1)] == [2]
    assert (filtered.log_start_offset, filtered.high_watermark) == (0, 5)
    assert semantics.read(view, 0, 0, BIG, True).batches == read_all(store, view.filter)
    assert semantics.source_partition("v", 0) is store.partition("src", 0)
    assert semantics.offset_for_timestamp("v", 0, BASE_TS + 1) == (2, BASE_TS + 2)
    assert semantics.offset_for_timestamp("src", 0, BASE_TS + 1) == (1, BASE_TS + 1)
    assert semantics.arrivals("src", 0) == ("src", 0, None)
    source, partition, test = semantics.arrivals("v", 0)
    assert (source, partition) == ("src", 0) and callable(test)
    with pytest.raises(UnknownTopicError):
        semantics.read("nothing", 0, 0, BIG, True)


def test_a_batch_across_two_consume_queue_chunks(store):
    chunk = view_reader.CHUNK
    put(store, *[make_batch(100, tags=["B"] * 100) for _ in range(chunk // 100 - 1)])  # up to chunk - 96
    base = store.partition("src", 0).next_offset
    # a batch over the chunk boundary whose only match is after it, then one matching on both sides
    put(store, make_batch(200, tags=["B"] * 199 + ["A"]), make_batch(200, tags=["A"] + ["B"] * 198 + ["A"]))
    flt = tags_filter("A")
    out = read_all(store, flt)
    assert coverage(out) == [(0, base), (base, base + 200), (base + 200, base + 400)]
    assert [r[0] for r in seen(out, 0)] == [base + 199, base + 200, base + 399] == [
        r[0] for r in expected(store, flt)]


# -- read_committed: the source's last stable offset bounds a view ------------------------------


@pytest.mark.parametrize("expression", ["A", "*"])
@pytest.mark.parametrize("sql", [False, True])
def test_max_offset_stops_the_view_at_the_lso(store, expression, sql):
    """Nothing at or past ``max_offset`` (a read_committed fetch's LSO) is returned, gaps
    included; the high watermark stays the source's end."""
    from rmqkafka.storage.batch_builder import marker_batch

    put(store, make_batch(2, tags=["A", "B"]), make_batch(2, tags=["B", "B"]))
    store.append("src", 0, make_batch(2, tags=["A", "A"], producer_id=7, producer_epoch=0, base_sequence=0,
                                      transactional=True), max_batch_bytes=BIG)
    put(store, make_batch(1, tags=["A"]))
    plog = store.partition("src", 0)
    assert (plog.last_stable_offset, plog.next_offset) == (4, 7)
    flt = compile_filter("sql", "TAGS = 'A'") if sql and expression == "A" else tags_filter(expression)
    result = read_view(plog, flt, 0, BIG, True, max_offset=plog.last_stable_offset)
    assert result.high_watermark == 7
    assert max(record_batch.next_offset_of(b) for b in result.batches) <= 4
    assert all(r[0] < 4 for r in decoded(result.batches))
    assert read_view(plog, flt, 5, BIG, True, max_offset=4).batches == []
    store.append_built("src", 0, marker_batch(7, 0, False, BASE_TS))  # ABORT at 7
    assert plog.last_stable_offset == 8
    result = read_view(plog, flt, 0, BIG, True, max_offset=8)
    assert max(record_batch.next_offset_of(b) for b in result.batches) == 8
    assert plog.aborted_transactions(0, 8) == [(7, 4)]
