"""The compiled one-pass scan of a produced batch (storage/_batchscan.c) against the pure-Python
path (aiokafka's reader and record_batch's checks) on the same inputs: the same records, tag
codes, timestamps and key checks for every batch the Python path accepts, and the same error
(type and message) for every batch it refuses, including malformed and hostile ones."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rmqkafka.storage import batch_scan, consume_queue
from rmqkafka.storage import record_batch as rb
from rmqkafka.storage.tag_code import tag_code

from batches import CODECS, GZIP, NONE, ZSTD, fix_crc, make_batch, with_field

needs_extension = pytest.mark.skipif(batch_scan.scan is None, reason="the C extension is not built here")
MAX_INFLATED = 1 << 20


@contextmanager
def pure_python(monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(batch_scan, "scan", None)
        m.setattr(batch_scan, "cq_entries", None)
        yield


def outcome(batch: bytes, tag: str = "TAGS"):
    """What the append learns of ``batch`` through whichever path is selected: its records as
    tuples and the facts the store reads from them, or the error raised."""
    try:
        recs = rb.read_produced_records(memoryview(batch), MAX_INFLATED, tag)
    except Exception as exc:  # noqa: BLE001 - the error itself is the result compared
        # word for word: aiokafka's reader reads on past the end of a record cut short, and
        # quoted what the heap held there until record_batch gave it zeros to read instead
        return ("refused", type(exc), str(exc))
    if isinstance(recs, rb.ScannedRecords) and recs.tag == tag:
        codes = recs.tag_codes
    else:
        values = rb.header_values(batch, tag, list(recs))
        codes = None if values is None else [tag_code(v) for v in values]
    stamps = [r.timestamp for r in recs] or [0]
    return ("accepted", len(recs), rb.has_headers(recs),
            not any(r.key is None for r in recs) if recs else True,
            rb.timestamp_errors(recs, min(stamps), max(stamps)),
            rb.timestamp_errors(recs, min(stamps) + 1, max(stamps)),
            codes,
            [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs])


def both(monkeypatch, batch: bytes, tag: str = "TAGS"):
    compiled = outcome(batch, tag)
    with pure_python(monkeypatch):
        python = outcome(batch, tag)
    assert compiled == python
    return compiled


headers = st.lists(st.tuples(st.sampled_from(["TAGS", "KEYS", "k", "TAGSX", "标签", ""]),
                             st.one_of(st.none(), st.binary(max_size=8),
                                       st.text(max_size=6).map(str.encode))), max_size=3)
record = st.tuples(st.one_of(st.none(), st.binary(max_size=12)),  # key
                   st.one_of(st.none(), st.binary(max_size=40)),  # value
                   headers,
                   st.integers(-(1 << 40), 1 << 40))  # timestamp delta


def build(recs, codec=NONE) -> bytes:
    base = 1_700_000_000_000
    return make_batch([r[1] for r in recs], keys=[r[0] for r in recs], headers=[r[2] for r in recs],
                      timestamps=[base + r[3] for r in recs], codec=codec)


@needs_extension
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(record, min_size=1, max_size=8), st.sampled_from(CODECS))
def test_accepted_batches_give_the_same_results(monkeypatch, recs, codec):
    batch = build(recs, codec)
    result = both(monkeypatch, batch)
    assert result[0] == "accepted"
    assert isinstance(rb.read_produced_records(batch, MAX_INFLATED), rb.ScannedRecords)  # C read it


@needs_extension
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(record, min_size=1, max_size=5), st.data())
@example(recs=[(None, b"v", [], 0)], data=None)
def test_damaged_batches_give_the_same_errors(monkeypatch, recs, data):
    """Bytes of the records region changed, cut or added, or the count fields changed: both paths
    accept with the same results or refuse with the same error."""
    batch = bytearray(build(recs))
    if data is None:
        batch[rb.HEADER_SIZE] = 0x80  # an unterminated record length
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            what = data.draw(st.sampled_from(["byte", "cut", "add", "count"]))
            if what == "byte" and len(batch) > rb.HEADER_SIZE:
                at = data.draw(st.integers(rb.HEADER_SIZE, len(batch) - 1))
                batch[at] = data.draw(st.integers(0, 255))
            elif what == "cut" and len(batch) > rb.HEADER_SIZE:
                del batch[data.draw(st.integers(rb.HEADER_SIZE, len(batch) - 1)):]
            elif what == "add":
                batch += data.draw(st.binary(min_size=1, max_size=4))
            else:
                count = data.draw(st.integers(0, len(recs) + 2))
                batch = bytearray(with_field(with_field(bytes(batch), 57, ">i", count), 23, ">i", count - 1))
    both(monkeypatch, bytes(batch))


@needs_extension
@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD])
def test_tag_codes_match_java_string_hash(monkeypatch, codec):
    tags = ["TagA", None, "标签", "", "😀x", "a\udcff".encode("utf-8", "surrogatepass"), b"\xff\xfe"]
    batch = make_batch(len(tags), codec=codec, tags=tags, headers=[("KEYS", b"k")])
    result = both(monkeypatch, batch)
    codes = rb.read_produced_records(batch, MAX_INFLATED).tag_codes
    assert codes == result[6]
    assert codes[0] == tag_code(b"TagA") and codes[1] == 0 and codes[3] == 0
    assert codes[4] == tag_code("😀x".encode())  # a surrogate pair in Java's UTF-16


@needs_extension
def test_the_first_tag_header_wins_and_a_null_one_is_code_zero(monkeypatch):
    batch = make_batch(3, headers=[[("TAGS", b"first"), ("TAGS", b"second")], [("TAGS", None)], []])
    scanned = rb.read_produced_records(batch, MAX_INFLATED)
    assert scanned.tag_codes == [tag_code(b"first"), 0, 0]
    both(monkeypatch, batch)
    assert rb.read_produced_records(make_batch(2, headers=[("KEYS", b"TAGS")]), MAX_INFLATED).tag_codes is None
    other = rb.read_produced_records(batch, MAX_INFLATED, "KEYS")
    assert other.tag == "KEYS" and other.tag_codes is None


@needs_extension
def test_a_record_object_is_made_only_when_asked_for(monkeypatch):
    made = []
    real = rb._batch_reader()
    monkeypatch.setattr(rb, "_batch_reader", lambda: lambda plain: made.append(1) or real(plain))
    scanned = rb.read_produced_records(make_batch(1000), MAX_INFLATED)
    assert len(scanned) == 1000 and not rb.has_headers(scanned) and scanned.all_keyed is False
    assert rb.timestamp_errors(scanned, 0, 1 << 62) == []
    assert not made
    assert scanned[999].offset == 999 and len(made) == 1
    assert [r.offset for r in scanned] == list(range(1000)) and len(made) == 1


@needs_extension
def test_batches_the_scan_does_not_vouch_for_take_the_python_path(monkeypatch):
    log_append = with_field(make_batch(2), 21, ">h", rb.TIMESTAMP_TYPE_BIT)
    assert not isinstance(rb.read_produced_records(log_append, MAX_INFLATED), rb.ScannedRecords)
    both(monkeypatch, log_append)
    hostile = with_field(make_batch(2), 57, ">i", 1 << 30)  # a count no body holds
    both(monkeypatch, hostile)


@needs_extension
def test_consume_queue_entries_in_one_call(monkeypatch):
    codes = [0, -1, 2**31 - 1, -(2**31), consume_queue.CONTROL_CODE, consume_queue.PARKED_CODE]
    compiled = batch_scan.cq_entries(1 << 40, 1234, codes)
    assert compiled == b"".join(consume_queue.ENTRY.pack(1 << 40, 1234, c) for c in codes)
    assert batch_scan.cq_entries(0, 0, []) == b""
    with pytest.raises(OverflowError):
        batch_scan.cq_entries(0, 0, [1 << 64])


def test_the_environment_selects_the_python_path():
    code = "from rmqkafka.storage import batch_scan; print(batch_scan.IMPLEMENTATION, batch_scan.describe())"
    env = dict(os.environ, **{batch_scan.ENV_PURE_PYTHON: "1"})
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.startswith("python ") and batch_scan.ENV_PURE_PYTHON in out


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_the_extension_is_built_where_there_is_a_compiler():
    """``pip install`` builds it when it can (an optional extension: an install without a
    compiler still succeeds), and the project's machines have gcc."""
    if os.environ.get(batch_scan.ENV_PURE_PYTHON, "") not in ("", "0"):
        pytest.skip(f"{batch_scan.ENV_PURE_PYTHON} is set")
    assert batch_scan.IMPLEMENTATION == "c", batch_scan.describe()


def test_both_paths_refuse_a_hostile_count_before_reading(monkeypatch):
    batch = with_field(with_field(make_batch(3), 57, ">i", 10_000_000), 23, ">i", 9_999_999)
    errors = set()
    for selected in (False, True):
        with monkeypatch.context() as m:
            if selected:
                m.setattr(batch_scan, "scan", None)
            with pytest.raises(rb.InvalidRecordError) as caught:
                rb.read_produced_records(batch, MAX_INFLATED)
            errors.add(str(caught.value))
    assert len(errors) == 1



@needs_extension
def test_a_large_batch_is_scanned_without_holding_the_gil():
    """A large batch is checked in the store's worker thread: the event loop's thread must run
    while it is scanned (the Python path read it a slice at a time for the same reason). Held
    throughout, the GIL would leave this thread one gap as long as the whole scan; a loaded
    machine can also pause it, so the best of three scans counts."""
    import threading
    import time

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        batch = make_batch([b"v" * 90] * 300_000, headers=[("TAGS", b"TagA")])
        shares = []
        for _ in range(3):
            window: list[float] = []

            def scan() -> None:
                window.append(time.perf_counter())
                assert batch_scan.scan(batch, b"TAGS") is not None
                window.append(time.perf_counter())

            worker = threading.Thread(target=scan)
            ticks: list[float] = []
            worker.start()
            while worker.is_alive():
                ticks.append(time.perf_counter())
            worker.join()
            began, ended = window
            inside = [began, *(t for t in ticks if began < t < ended), ended]
            shares.append(max(b - a for a, b in zip(inside, inside[1:])) / (ended - began))
    finally:
        sys.setswitchinterval(interval)
    assert min(shares) < 0.6, f"longest pause of this thread per scan: {shares}"


# -- differential fuzzing with hand-made records ------------------------------------------------
# The records below are encoded field by field, so that every length, count and varint a
# hostile producer controls can lie: over-long varints (redundant continuation bytes), 10-byte
# ones whose last byte carries bits past 64, unterminated ones, negative zigzag values, lengths
# past the record or the batch, counts the body does not hold. Both paths must agree on each.

_HOSTILE_INTS = [-(1 << 63), -(1 << 31) - 1, -(1 << 31), -2, -1, 0, 1, 2, 3, 7, 100, (1 << 31) - 1, 1 << 31,
                 (1 << 32) + 1, (1 << 63) - 1]
_HEADER_NAMES = [b"TAGS", b"KEYS", b"", b"TAGSX", "标签".encode(), b"\xff\xfe", b"\xed\xa0\x80", b"TAG"]
_TEN_BYTES = b"\xff" * 9  # then a last byte: bits past 64 unless it is 0 or 1


def varint(value: int, pad: int = 0) -> bytes:
    """Kafka's zigzag varint of ``value`` (as int64), with ``pad`` redundant bytes."""
    raw = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    groups = []
    while True:
        groups.append(raw & 0x7F)
        raw >>= 7
        if not raw:
            break
    groups += [0] * pad
    return bytes(g | 0x80 for g in groups[:-1]) + bytes([groups[-1]])


@st.composite
def field(draw, value: int, plain: int) -> bytes:
    """``value`` as a record field: as a producer writes it (``plain`` times in ``plain`` + 4),
    else a lie or an odd encoding."""
    how = draw(st.sampled_from(["plain"] * plain + ["other", "long", "ten", "bytes"]))
    if how == "other":
        return varint(draw(st.one_of(st.sampled_from(_HOSTILE_INTS), st.integers(value - 3, value + 3))))
    if how == "long":
        return varint(value, draw(st.integers(1, 9)))
    if how == "ten":
        return _TEN_BYTES + bytes([draw(st.integers(0, 0xFF))])
    if how == "bytes":
        return draw(st.binary(min_size=0, max_size=11))
    return varint(value)


@st.composite
def sized(draw, data: bytes | None, plain: int) -> bytes:
    return draw(field(-1, plain)) if data is None else draw(field(len(data), plain)) + data


@st.composite
def hostile_record(draw, index: int, plain: int) -> bytes:
    body = draw(field(0, plain))  # attributes, read as a varint by aiokafka
    deltas = [0, 1, -1, -(1 << 40), 1 << 40] + ([(1 << 63) - 1] if plain < 60 else [])
    body += draw(field(draw(st.sampled_from(deltas)), plain))  # timestamp delta
    body += draw(field(index, plain))  # offset delta
    body += draw(sized(draw(st.one_of(st.none(), st.binary(max_size=6))), plain))  # key
    body += draw(sized(draw(st.one_of(st.none(), st.binary(max_size=12))), plain))  # value
    names = _HEADER_NAMES if plain < 60 else [n for n in _HEADER_NAMES if _utf8(n)]
    headers = draw(st.lists(st.tuples(st.sampled_from(names),
                                      st.one_of(st.none(), st.binary(max_size=6),
                                                st.sampled_from(["标签", "😀x"]).map(str.encode))), max_size=3))
    body += draw(field(len(headers), plain))
    for name, value in headers:
        body += draw(sized(name, plain)) + draw(sized(value, plain))
    return draw(field(len(body), plain)) + body


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def raw_batch(records: bytes, count: int, base_offset: int = 0, base_ts: int = 1_700_000_000_000,
              attributes: int = 0) -> bytes:
    """A v2 batch around an already encoded records region (compressed with the codec that
    ``attributes`` names), its CRC right."""
    codec = attributes & rb.COMPRESSION_MASK
    if codec == GZIP:
        records = gzip.compress(records)
    elif codec == ZSTD:
        records = zstandard.ZstdCompressor().compress(records)
    header = rb.HEADER.pack(base_offset, rb.HEADER_SIZE - rb.LOG_OVERHEAD + len(records), -1, 2, 0, attributes,
                            count - 1, base_ts, base_ts, -1, -1, -1, count)
    return fix_crc(header + records)


@needs_extension
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                    HealthCheck.too_slow])
@given(st.data())
@example(data=None)
def test_hand_made_records_with_lying_fields_give_the_same_outcome(monkeypatch, data):
    if data is None:  # the C scan vouches for over-long varints it can read
        record = varint(0) + varint(0, 3) + varint(0, 4) + varint(2, 2) + b"ab" + varint(-1, 1) + varint(1)
        record += varint(4) + b"TAGS" + varint(2) + b"TA"
        batch = raw_batch(varint(len(record)) + record, 1)
        assert isinstance(rb.read_produced_records(batch, MAX_INFLATED), rb.ScannedRecords)
        both(monkeypatch, batch)
        return
    n = data.draw(st.integers(1, 4))
    # how often a field lies: batches from nearly all fields right (one lie among dozens, or a
    # right batch with a hostile header) to nearly all wrong
    plain = data.draw(st.sampled_from([1000, 60, 8, 2]))
    body = b"".join(data.draw(hostile_record(i, plain)) for i in range(n))
    body = body[:data.draw(st.integers(0, len(body)))] if data.draw(st.integers(0, 9)) == 0 else body
    body += data.draw(st.binary(max_size=3)) if data.draw(st.integers(0, 9)) == 0 else b""
    count = n if plain == 1000 else data.draw(st.one_of(st.just(n), st.sampled_from([n - 1, n + 1, 0, -1, 1 << 30])))
    batch = raw_batch(body, count,
                      base_offset=data.draw(st.sampled_from([0, 0, 5, -1, (1 << 63) - 1, (1 << 63) - n,
                                                             (1 << 63) - n - 1, -(1 << 63)])),
                      base_ts=data.draw(st.sampled_from([1_700_000_000_000, 0, 1, -1, (1 << 63) - 1, -(1 << 63)])),
                      attributes=data.draw(st.sampled_from([0, 0, 0, rb.TIMESTAMP_TYPE_BIT, rb.TRANSACTIONAL_BIT,
                                                            GZIP, ZSTD])))
    for tag in data.draw(st.lists(st.sampled_from(["TAGS", "KEYS", "标签", ""]), min_size=1, max_size=2, unique=True)):
        both(monkeypatch, batch, tag)


@needs_extension
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(record, min_size=1, max_size=5), st.data())
def test_valid_batches_damaged_anywhere_give_the_same_outcome(monkeypatch, recs, data):
    """Flips, insertions and cuts anywhere in a valid batch (its header too: base offset,
    timestamps, attributes, count), up to random bytes for the whole records region."""
    batch = bytearray(build(recs))
    for _ in range(data.draw(st.integers(1, 4))):
        what = data.draw(st.sampled_from(["flip", "set", "insert", "delete", "cut", "random"]))
        at = data.draw(st.integers(0, len(batch) - 1))
        if what == "flip":
            batch[at] ^= 1 << data.draw(st.integers(0, 7))
        elif what == "set":
            batch[at] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]))
        elif what == "insert":
            batch[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif what == "delete":
            del batch[at:at + data.draw(st.integers(1, 4))]
        elif what == "cut":
            del batch[max(at, rb.HEADER_SIZE):]
        else:
            batch[rb.HEADER_SIZE:] = data.draw(st.binary(max_size=64))
        if len(batch) < rb.HEADER_SIZE:  # read_produced_records is given whole headers (split_batches)
            batch += bytes(rb.HEADER_SIZE - len(batch))
    both(monkeypatch, fix_crc(batch) if data.draw(st.booleans()) else bytes(batch))


@needs_extension
@pytest.mark.parametrize("base", [(1 << 63) - 3, (1 << 63) - 2, (1 << 63) - 1])
def test_offsets_that_would_pass_int64_are_refused_by_both_paths(monkeypatch, base):
    """aiokafka's offsets wrap past int64; record_batch compares them with Python's: a batch
    whose last offset would wrap is refused (CORRUPT_MESSAGE), and the scan must not vouch
    for it (it did: the scan accepted what the Python path refused)."""
    batch = with_field(make_batch(3), 0, ">q", base)
    outcome_ = both(monkeypatch, batch)
    assert outcome_[0] == ("accepted" if base == (1 << 63) - 3 else "refused")
    if base != (1 << 63) - 3:
        assert outcome_[1] is rb.CorruptRecordError


@needs_extension
def test_consume_queue_entries_take_only_ints():
    class Sneaky:
        def __index__(self) -> int:
            codes.clear()  # what a conversion could do to the list under the C loop
            return 1

    codes = [1, Sneaky(), 3]
    with pytest.raises(TypeError):
        batch_scan.cq_entries(0, 0, codes)
    assert batch_scan.cq_entries(0, 0, [True, 2]) == b"".join(consume_queue.ENTRY.pack(0, 0, c) for c in (1, 2))


def _build_in(tmp_path, **env) -> tuple[subprocess.CompletedProcess, list]:
    """``setup.py build_ext`` (the optional extension alone) in a copy of its sources."""
    pytest.importorskip("setuptools")
    root = Path(__file__).resolve().parents[3]
    (tmp_path / "storage").mkdir()
    shutil.copy(root / "setup.py", tmp_path / "setup.py")
    shutil.copy(root / "storage" / "_batchscan.c", tmp_path / "storage" / "_batchscan.c")
    done = subprocess.run([sys.executable, "setup.py", "build_ext", "--build-lib", "out"], cwd=tmp_path,
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=300)
    return done, sorted(tmp_path.rglob("_batchscan*.so"))


def test_the_build_goes_on_without_a_compiler(tmp_path):
    """No C compiler: the build warns and succeeds without the extension (``optional=True``),
    so ``pip install`` does too; the broker then runs the Python path (next test)."""
    done, built = _build_in(tmp_path, CC=str(tmp_path / "no-such-cc"))
    assert done.returncode == 0, done.stderr
    assert "building extension" in done.stderr + done.stdout and "failed" in done.stderr + done.stdout
    assert built == []


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_the_same_build_with_a_compiler_makes_the_extension(tmp_path):
    """The other half of the test above: what it copies does build where there is a compiler
    (without this, a build that never compiled anything would pass it)."""
    done, built = _build_in(tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(built) == 1


def test_without_the_extension_the_python_path_is_used():
    code = ("import sys; sys.modules['rmqkafka.storage._batchscan'] = None\n"  # an import of it fails
            "from rmqkafka.storage import batch_scan, record_batch\n"
            "print(batch_scan.IMPLEMENTATION, batch_scan.scan, batch_scan.cq_entries)\n"
            "print(batch_scan.describe())\n"
            "import batches\n"
            "print(type(record_batch.read_produced_records(batches.make_batch(3), 1 << 20)).__name__)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    env.pop(batch_scan.ENV_PURE_PYTHON, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["python None None", "record batches are scanned in Python (the compiled extension "
                                "is not built)", "list"]


def test_a_record_cut_short_is_refused_with_the_same_words_whatever_the_heap_holds(monkeypatch):
    """A header value length cut short at the end of the batch (a varint whose last byte says
    more follows): aiokafka's reader reads on past the buffer, and its error, which the
    producer gets back, quoted heap bytes ("Invalid negative header key size -480274"). Both
    paths must refuse it with the same words whatever lies behind the buffer."""
    from rmqkafka.storage.batch_builder import zigzag_varint as v

    for path in ("python", "compiled"):
        seen = set()
        with monkeypatch.context() as m:
            if path == "python":
                m.setattr(batch_scan, "scan", None)
            for pad in range(24):
                body = v(0) + v(0) + v(0) + v(pad) + b"k" * pad + v(-1) + v(2) + v(1) + b"a" + b"\x81"
                record = v(len(body) + 2) + body
                batch = raw_batch(record, 1)
                words = set()
                noise = []
                for _ in range(200):
                    noise.append(os.urandom(len(batch)))  # what a heap behind the buffer may hold
                    with pytest.raises(rb.CorruptRecordError) as caught:
                        rb.read_produced_records(bytes(bytearray(batch)), MAX_INFLATED)
                    noise.append(os.urandom(len(batch) + 8))
                    words.add(str(caught.value))
                assert len(words) == 1, sorted(words)[:5]
                seen |= words
        assert all("Can't read 0 bytes" in why for why in seen), sorted(seen)[:3]


@needs_extension
def test_the_scan_and_the_entries_leak_nothing_on_any_outcome():
    """Accepted, not vouched for, non-ASCII tags (the decoder's objects), refused arguments:
    no reference to an argument is kept and no memory stays allocated after many calls."""
    import gc
    import tracemalloc

    accepted = make_batch(5, headers=[("TAGS", "标签".encode()), ("KEYS", b"k")])
    refused = with_field(make_batch(3), 0, ">q", (1 << 63) - 1)
    cut = accepted[:-3]
    tag = bytes(bytearray(b"TAGS"))  # a private object: b"TAGS" the constant is shared process-wide, its count moves with other code
    inputs = [accepted, refused, cut, bytearray(accepted), memoryview(accepted)]
    codes = [1, 2, 3]

    def calls() -> None:
        for data in inputs:
            batch_scan.scan(data, tag)
        batch_scan.cq_entries(7, 8, codes)
        for bad in ((7, 8, [1 << 64]), (7, 8, [1, "x"]), (7, 8, (1,))):
            with pytest.raises((OverflowError, TypeError)):
                batch_scan.cq_entries(*bad)
        with pytest.raises(TypeError):
            batch_scan.scan("text", tag)

    calls()  # warm: caches the first calls fill
    before_refs = [sys.getrefcount(x) for x in (*inputs, tag, codes)]
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(3000):
            calls()
        gc.collect()
        # Only what this file's calls allocated (the extension's allocations are traced to
        # the Python line that called it): tracemalloc sees every thread, and threads other
        # tests left running allocate meanwhile.
        snapshot = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(True, __file__)])
        grown = sum(stat.size for stat in snapshot.statistics("filename"))
    finally:
        tracemalloc.stop()
    assert [sys.getrefcount(x) for x in (*inputs, tag, codes)] == before_refs
    assert grown < 64 << 10, f"{grown} bytes still allocated after 3,000 rounds"
