"""Issue 24: a SQL view settles a batch per distinct header value (header_code_match) and
answers exactly as testing every record's decoded headers does, including when tag codes
collide, when the name's bytes occur outside headers, and when the compiled scan is absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))

from batches import GZIP, make_batch
from rmqkafka.rmqsemantics import header_code_match
from rmqkafka.rmqsemantics.filters import compile_filter
from rmqkafka.rmqsemantics.header_code_match import kept_records
from rmqkafka.rmqsemantics.view_reader import read_view
from rmqkafka.storage import batch_scan, record_batch

from test_view_reader import decoded, expected  # noqa: E402  (same directory)

BIG = 1 << 30
needs_scan = pytest.mark.skipif(batch_scan.scan is None, reason="the compiled scan is not built")


def by_decoding(flt, batch: bytes, first: int = 0) -> list[int]:
    """The reference: every record's decoded headers tested."""
    return [i for i, r in enumerate(record_batch.read_records(batch))
            if i >= first and flt.matches_headers(r.headers)]


def settle(flt, batch: bytes, first: int = 0) -> list[int] | None:
    (count,) = record_batch._LENGTH.unpack_from(batch, 57)
    return kept_records(flt, batch, batch[record_batch.HEADER_SIZE:], count, first)


REGIONS = [[("TAGS", b"T%d" % (i % 3)), ("region", b"r%d" % (i % 4))] for i in range(40)]


@needs_scan
@pytest.mark.parametrize("expression", [
    "region = 'r3'", "region <> 'r3'", "region IN ('r1', 'r2')", "region IS NULL",
    "region IS NOT NULL", "region = 'r3' AND TAGS = 'T1'", "region = 'r3' OR TAGS = 'T1'",
    "TRUE", "nothere = 'x'", "nothere IS NULL",
])
def test_settled_per_value_as_decoding_would(expression):
    flt = compile_filter("sql", expression)
    batch = make_batch(40, headers=REGIONS)
    for first in (0, 1, 17, 39):
        assert settle(flt, batch, first) == by_decoding(flt, batch, first), first


@needs_scan
@pytest.mark.parametrize("share", [1, 5, 9])
def test_a_common_or_rare_kept_value(share):
    rows = [[("region", b"r1" if i % 10 < share else b"r2")] for i in range(50)]
    batch = make_batch(50, headers=rows)
    for expression in ("region = 'r1'", "region = 'r2'"):
        flt = compile_filter("sql", expression)
        for first in (0, 3, 49):
            assert settle(flt, batch, first) == by_decoding(flt, batch, first)


@needs_scan
def test_some_records_without_the_header():
    rows = [[("region", b"r3")] if i % 3 == 0 else [("other", b"r3")] for i in range(12)]
    batch = make_batch(12, headers=rows)
    for expression in ("region = 'r3'", "region IS NULL", "other = 'r3' OR region = 'r3'"):
        flt = compile_filter("sql", expression)
        assert settle(flt, batch) == by_decoding(flt, batch)


@needs_scan
def test_colliding_codes_are_not_trusted():
    # "Aa" and "BB" have the same Java hash code: the bytes tell them apart
    rows = [[("region", b"Aa" if i % 2 else b"BB")] for i in range(10)]
    batch = make_batch(10, headers=rows)
    flt = compile_filter("sql", "region = 'Aa'")
    assert settle(flt, batch) == by_decoding(flt, batch) == [1, 3, 5, 7, 9]  # by the value bytes
    # a third width: the codes are the keys, and a code with two values is not settled
    rows.append([("region", b"ccc")])
    batch = make_batch(11, headers=rows)
    assert settle(flt, batch) is None
    assert by_decoding(flt, batch) == [1, 3, 5, 7, 9]


@needs_scan
def test_values_of_different_widths():
    rows = [[("region", b"r" * (1 + i % 3))] for i in range(9)]
    batch = make_batch(9, headers=rows)
    flt = compile_filter("sql", "region = 'rr'")
    assert settle(flt, batch) == by_decoding(flt, batch) == [1, 4, 7]
    # "a" and "\0a" have the same Java hash code, with different widths
    rows = [[("region", b"a" if i % 2 else b"\x00a")] for i in range(6)] + [[("region", b"abc")]]
    batch = make_batch(7, headers=rows)
    for expression in ("region = 'a'", "region <> 'a'"):
        flt = compile_filter("sql", expression)
        got = settle(flt, batch)
        assert got is None or got == by_decoding(flt, batch)


@needs_scan
@pytest.mark.parametrize("rows", [
    [[("region", b"r3"), ("x", b"\x0cregion\x04r3")]] * 3,  # the name's bytes in a value
    [[("x", b"\x0cregion\x04r1"), ("region", b"r3")]],  # ... ahead of the header itself
    [[("region", b"r1"), ("region", b"r3")]] * 3,  # a name twice: the first one counts
    [[("region", b"")], [("region", b"r3")], [("region", None)]],  # empty and null values
], ids=["name-in-value", "name-in-an-earlier-value", "twice", "empty-and-null"])
def test_batches_it_cannot_prove_fall_back(rows):
    batch = make_batch(len(rows), headers=rows)
    for expression in ("region = 'r3'", "region = 'r1'", "region IS NULL", "region = ''"):
        flt = compile_filter("sql", expression)
        got = settle(flt, batch)
        assert got is None or got == by_decoding(flt, batch)


def test_a_batch_without_the_names_needs_no_scan(monkeypatch):
    def refuse(*_):
        raise AssertionError("scanned a batch that cannot hold the property")

    monkeypatch.setattr(batch_scan, "scan", refuse)
    batch = make_batch(5, headers=[("TAGS", b"A")])
    assert settle(compile_filter("sql", "region = 'r3'"), batch) == []
    assert settle(compile_filter("sql", "region IS NULL"), batch, 2) == [2, 3, 4]


def test_more_names_than_the_bound_are_decoded():
    names = [f"p{i}" for i in range(header_code_match.MAX_NAMES + 1)]
    flt = compile_filter("sql", " AND ".join(f"{n} = 'v'" for n in names))
    batch = make_batch(3, headers=[(n, b"v") for n in names])
    assert settle(flt, batch) is None


# -- through read_view, against the client-side filter -----------------------------------------


@pytest.mark.parametrize("compiled", [True, False], ids=["c-scan", "no-c-scan"])
def test_read_view_matches_the_client_filter(store, monkeypatch, compiled):
    if not compiled:
        monkeypatch.setattr(batch_scan, "scan", None)
    elif batch_scan.scan is None:
        pytest.skip("the compiled scan is not built")
    for batch in (make_batch(40, headers=REGIONS), make_batch(40, headers=REGIONS, codec=GZIP),
                  make_batch(4, headers=[("region", b"Aa")]), make_batch(4, headers=[("region", b"BB")]),
                  make_batch(6, headers=[[("region", b"Aa" if i % 2 else b"BB")] for i in range(6)]),
                  make_batch(3, headers=[("other", b"x")])):
        store.append("src", 0, batch, max_batch_bytes=BIG)
    plog = store.partition("src", 0)
    for expression in ("region = 'r3'", "region = 'Aa'", "region IS NULL", "region = 'r1' AND TAGS = 'T1'"):
        flt = compile_filter("sql", expression)
        for since in (0, 5, 41, 85):
            out = read_view(plog, flt, since, BIG, True).batches
            seen = [r for r in decoded(out) if r[0] >= since]
            assert seen == expected(store, flt, since), (expression, since)
