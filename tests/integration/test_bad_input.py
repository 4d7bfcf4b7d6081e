"""Issue #2 — bad input: every malformed request gets the Kafka error where the protocol has
one, otherwise its connection is closed; the broker keeps serving everyone else and loses
nothing it stored.

Every test runs against a real broker process with records already stored and a second,
healthy connection open. It sends the bad input on its own connection, asserts the outcome,
then asserts that the healthy connection still works and that every stored record reads
back unchanged. Starting a broker costs about a second, so the module shares one: bad
produces go to a per-test scratch topic (seeded before the bad input), and the last tests
restart the broker (cleanly, then with kill -9) and read back everything every test stored.
"""

from __future__ import annotations

import datetime
import os
import random
import struct
import time
import uuid

import psutil
import pytest
from crc32c import crc32c
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader
from rawkafka import (
    GZIP,
    LATEST,
    ZSTD,
    ApiKey,
    ErrorCode,
    KafkaRaw,
    broker_pid,
    build,
    encode_request,
    legacy_message,
    make_batch,
    patch_batch,
    start_broker,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]

STORED = "stored"  # the topic with records that must survive every test
SOCKET_REQUEST_MAX_BYTES = 104857600  # the broker's default socket.request.max.bytes
CLOSE_TIMEOUT = 5.0


class World:
    """One broker for the module: records stored before any bad input, a healthy connection
    kept open throughout, and every record that must still be there."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.healthy = self.connect()
        self.expected: dict[tuple[str, int], list[bytes]] = {}
        self._scratch = 0
        self.expected.update(self.seed(STORED))

    def connect(self, **kw) -> KafkaRaw:
        return KafkaRaw(self.broker.host, self.broker.port, **kw)

    def seed(self, topic: str, **create) -> dict[tuple[str, int], list[bytes]]:
        """Create ``topic`` (2 partitions) and store a few batches, mixed codecs and headers."""
        c = self.healthy
        c.create_topic(topic, partitions=2, **create)
        expected: dict[tuple[str, int], list[bytes]] = {}
        groups = {
            0: [
                [b"p0-a%d" % i for i in range(5)],
                [b"p0-b%d" % i for i in range(4)],
                [b"p0-c%d" % i for i in range(3)],
            ],
            1: [[b"p1-a%d" % i for i in range(2)], [b"p1-b%d" % i for i in range(6)]],
        }
        codecs = [0, GZIP, ZSTD]
        for p, batches in groups.items():
            for i, values in enumerate(batches):
                batch = make_batch(
                    values,
                    compression=codecs[i % 3],
                    keys=[b"k"] * len(values),
                    headers=[[("h", b"v%d" % j)] for j in range(len(values))],
                )
                assert c.produce_ok(topic, p, batch) == len(expected.get((topic, p), []))
                expected.setdefault((topic, p), []).extend(values)
        return expected

    def scratch(self, **create) -> Scratch:
        """A fresh topic with records already stored, for one test's bad produces."""
        self._scratch += 1
        name = f"scratch-{self._scratch}"
        return Scratch(name, self.seed(name, **create))

    def check(
        self,
        expected: dict[tuple[str, int], list[bytes]] | None = None,
        conn: KafkaRaw | None = None,
    ) -> None:
        """The connection works and every stored record reads back, offsets 0..n-1
        (by default the records of the topic stored before any test ran)."""
        conn = conn or self.healthy
        if expected is None:
            expected = {k: v for k, v in self.expected.items() if k[0] == STORED}
        assert conn.api_versions().error_code == ErrorCode.none
        for (topic, p), values in expected.items():
            records = conn.fetch_all(topic, p)
            assert [r.value for r in records] == values, f"{topic}-{p} changed"
            assert [r.offset for r in records] == list(range(len(values)))
            assert conn.high_watermark(topic, p) == len(values)

    def verify(self, scratch: Scratch | None = None) -> None:
        """After a test's bad input: the healthy connection still reads everything back and
        still stores; the test's scratch topic joins what the final restart checks."""
        mine = {k: v for k, v in self.expected.items() if k[0] == STORED}
        if scratch is not None:
            mine.update(scratch.expected)
        self.check(mine)
        for (topic, p), values in mine.items():
            value = b"after-%d" % len(values)
            assert self.healthy.produce_ok(topic, p, make_batch([value])) == len(values)
            values.append(value)
        self.check(mine)
        self.expected.update(mine)

    def restart(self, kill: bool) -> None:
        self.healthy.close()
        if kill:
            self.broker.kill()
        self.broker.restart()
        self.healthy = self.connect()


class Scratch:
    def __init__(self, name: str, expected: dict[tuple[str, int], list[bytes]]) -> None:
        self.name = name
        self.expected = expected

    def hw(self, conn: KafkaRaw, p: int) -> int:
        return conn.high_watermark(self.name, p)

    def unchanged(self, conn: KafkaRaw) -> None:
        for (topic, p), values in self.expected.items():
            assert conn.high_watermark(topic, p) == len(values), f"{topic}-{p} grew"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    with start_broker(tmp_path_factory.mktemp("bad-input") / "data") as broker:
        w = World(broker)
        try:
            yield w
        finally:
            w.healthy.close()


@pytest.fixture
def scratch(world) -> Scratch:
    return world.scratch()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def header_v1(
    api_key: int, version: int, correlation_id: int = 1, client_id: bytes = b"bad"
) -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def header_v2(
    api_key: int, version: int, correlation_id: int = 1, client_id: bytes = b"bad"
) -> bytes:
    return header_v1(api_key, version, correlation_id, client_id) + b"\x00"


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def assert_closed(conn: KafkaRaw, timeout: float = CLOSE_TIMEOUT) -> None:
    assert conn.wait_closed(timeout), "the broker did not close the connection"


# --- framing


def test_truncated_frame_then_close(world):
    """A frame announcing 100 bytes, 20 sent, then the client goes away."""
    bad = world.connect()
    bad.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x0c" + os.urandom(16))
    bad.close()
    world.verify()


def test_truncated_size_prefix_then_close(world):
    bad = world.connect()
    bad.send_raw(b"\x00\x00")
    bad.close()
    world.verify()


def test_truncated_request_inside_a_complete_frame(world):
    """The frame is complete but the request in it stops halfway: closed, nothing stored."""
    request = encode_request(
        ApiKey.METADATA,
        12,
        7,
        _metadata_body(12, ["some-topic", "another-topic"]),
    )
    payload = request[4:]
    bad = world.connect()
    bad.send_raw(frame(payload[: len(payload) // 2]))
    assert_closed(bad)
    world.verify()


def _metadata_body(version: int, topics: list[str]):
    return build(
        load_request_schema(ApiKey.METADATA, version),
        topics=[dict(name=t, topic_id=None) for t in topics],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
        include_cluster_authorized_operations=False,
    )


def test_trailing_bytes_after_a_complete_request_are_ignored(world):
    """Apache Kafka ignores bytes after a fully parsed request (librdkafka 2.x sends three
    stale bytes after an all-topics Metadata v13 body, librdkafka #5049): answered, and
    the connection stays usable."""
    request = encode_request(ApiKey.METADATA, 12, 3, _metadata_body(12, [STORED]))
    conn = world.connect()
    conn.send_raw(frame(request[4:] + b"\x00\x00\x00"))
    response = conn.receive(ApiKey.METADATA, 12, 3)
    assert [(t.name, t.error_code) for t in response.topics] == [(STORED, ErrorCode.none)]
    assert conn.api_versions().error_code == ErrorCode.none
    conn.close()
    world.verify()


@pytest.mark.parametrize("size", [-1, -(2**31), 0])
def test_negative_or_zero_frame_size(world, size):
    bad = world.connect()
    bad.send_raw(struct.pack(">i", size) + b"\x00" * 16)
    assert_closed(bad)
    world.verify()


def test_frame_size_int_max_closed_before_the_body(world):
    """2**31-1 > socket.request.max.bytes: closed on the size prefix alone."""
    bad = world.connect()
    bad.send_raw(struct.pack(">i", 2**31 - 1))
    assert_closed(bad)
    world.verify()


def test_frame_just_over_the_limit_closed(world):
    bad = world.connect()
    bad.send_raw(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES + 1) + b"\x00\x12\x00\x00")
    assert_closed(bad)
    world.verify()


def test_good_request_before_a_bad_size_is_still_answered(world):
    """Pipelined: a complete ApiVersions, then a negative size in the same packet."""
    bad = world.connect()
    good = encode_request(ApiKey.API_VERSIONS, 3, 41, _api_versions_body(3))
    bad.send_raw(good + struct.pack(">i", -5))
    response = bad.receive(ApiKey.API_VERSIONS, 3, 41)
    assert response.error_code == ErrorCode.none
    assert_closed(bad)
    world.verify()


def _api_versions_body(version: int):
    return build(
        load_request_schema(ApiKey.API_VERSIONS, version),
        client_software_name="rawkafka",
        client_software_version="1.0",
    )


def test_random_garbage_64k_framed(world):
    """64 KiB of random bytes inside a well-formed frame: not a request, closed."""
    rng = random.Random(20240601)
    payload = bytes(rng.getrandbits(8) for _ in range(65536 - 4))
    # Make sure the api key is not one the broker serves (else the walk decides).
    payload = struct.pack(">h", 0x7A7A) + payload[2:]
    bad = world.connect()
    bad.send_raw(frame(payload))
    assert_closed(bad)
    world.verify()


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_garbage_64k_unframed(world, seed):
    """64 KiB straight from a random source. Whatever the first 4 bytes claim, the broker
    either closes the connection (bad size, or a frame that is not a request) or waits
    for a frame it cannot know is garbage; either way everyone else is unaffected."""
    rng = random.Random(seed)
    garbage = bytes(rng.getrandbits(8) for _ in range(65536))
    (size,) = struct.unpack_from(">i", garbage)
    bad = world.connect()
    try:
        bad.send_raw(garbage)
    except (BrokenPipeError, ConnectionResetError):
        pass  # closed while we were still sending: fine
    if size <= 0 or size > SOCKET_REQUEST_MAX_BYTES or size <= len(garbage) - 4:
        assert_closed(bad)
    bad.close()
    world.verify()


def test_frame_over_the_limit_is_never_allocated(world):
    """A header announcing a frame over the limit (~100 MiB) while the body never comes:
    the connection is closed and the broker's memory does not grow by the announced size.
    A frame exactly at the limit whose body is withheld is legal: the broker waits, and
    still does not reserve the announced 100 MiB."""
    process = psutil.Process(broker_pid(world.broker))
    baseline = process.memory_info().rss

    over = world.connect()
    over.send_raw(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES + 1))
    assert_closed(over)
    grown = process.memory_info().rss - baseline
    assert grown < 20 << 20, f"RSS grew by {grown >> 20} MiB on an over-limit header"

    at_limit = world.connect()
    at_limit.send_raw(struct.pack(">i", SOCKET_REQUEST_MAX_BYTES) + struct.pack(">hhi", 0, 9, 1))
    at_limit.send_raw(b"\x00" * (256 << 10))  # a little of the body, then nothing
    time.sleep(1.0)
    assert at_limit.is_open(), "a frame at the limit is legal and must not be refused"
    grown = process.memory_info().rss - baseline
    assert grown < 40 << 20, f"RSS grew by {grown >> 20} MiB while a 100 MiB frame was pending"
    world.check()
    at_limit.close()
    world.verify()


# --- headers, keys, versions


def test_unknown_api_key_closes(world):
    bad = world.connect()
    bad.send_raw(frame(header_v1(9999, 0, 5) + b"\x00" * 8))
    assert_closed(bad)
    world.verify()


def test_unknown_api_key_after_a_good_request(world):
    """Requests before the bad one are answered in order, then the connection closes."""
    bad = world.connect()
    good = encode_request(ApiKey.API_VERSIONS, 3, 11, _api_versions_body(3))
    bad.send_raw(good + frame(header_v1(9999, 0, 12)))
    assert bad.receive(ApiKey.API_VERSIONS, 3, 11).error_code == ErrorCode.none
    assert_closed(bad)
    world.verify()


def test_fetch_v99_closes(world):
    bad = world.connect()
    bad.send_raw(frame(header_v2(ApiKey.FETCH, 99, 5) + b"\x00" * 32))
    assert_closed(bad)
    world.verify()


def test_negative_api_version_closes(world):
    bad = world.connect()
    bad.send_raw(frame(header_v1(ApiKey.METADATA, -1, 5) + b"\x00" * 8))
    assert_closed(bad)
    world.verify()


def test_api_versions_v99_answered_in_v0_with_error_35(world):
    """Like Kafka: a v0 response (header and body) with UNSUPPORTED_VERSION and the full
    version table, so the client can retry with a version it and the broker share."""
    conn = world.connect()
    body = uvarint(len(b"x") + 1) + b"x" + uvarint(len(b"1") + 1) + b"1" + b"\x00"
    conn.send_raw(frame(header_v2(ApiKey.API_VERSIONS, 99, 77) + body))
    payload = conn.recv_frame()
    (correlation_id,) = struct.unpack_from(">i", payload)
    assert correlation_id == 77
    schema = load_response_schema(ApiKey.API_VERSIONS, 0)
    response, size = entity_reader(schema)(payload, 4)
    assert 4 + size == len(payload)
    assert response.error_code == ErrorCode.unsupported_version == 35
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.API_VERSIONS][0] == 0 and ranges[ApiKey.API_VERSIONS][1] >= 3
    assert ranges[ApiKey.PRODUCE][0] <= 3 <= ranges[ApiKey.PRODUCE][1]
    assert ApiKey.FETCH in ranges and ApiKey.METADATA in ranges
    # The connection is still usable: the client retries at v0 (and v3).
    assert conn.api_versions(version=0).error_code == ErrorCode.none
    assert conn.api_versions(version=3).error_code == ErrorCode.none
    conn.close()
    world.verify()


# --- Produce v0/v1/v2 (advertised for librdkafka, answered with UNSUPPORTED_VERSION)


def _legacy_produce(version: int, acks: int, topic: str, partitions: dict[int, bytes]) -> bytes:
    name = topic.encode()
    body = struct.pack(">hii", acks, 5000, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">i", len(partitions))
    for p, records in partitions.items():
        body += struct.pack(">ii", p, len(records)) + records
    return body


def _read_legacy_produce_response(version: int, payload: bytes) -> list[tuple[str, int, int, int]]:
    pos = 4
    (topics,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    out = []
    for _ in range(topics):
        (n,) = struct.unpack_from(">h", payload, pos)
        pos += 2
        name = payload[pos : pos + n].decode()
        pos += n
        (count,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        for _ in range(count):
            p, code, base = struct.unpack_from(">ihq", payload, pos)
            pos += 14
            if version >= 2:
                pos += 8  # log_append_time
            out.append((name, p, code, base))
    if version >= 1:
        pos += 4  # throttle_time_ms
    assert pos == len(payload), "response has unexpected trailing bytes"
    return out


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_v1_v2_answered_unsupported_version(world, scratch, version):
    conn = world.connect()
    magic = 0 if version < 2 else 1
    body = _legacy_produce(
        version, 1, scratch.name, {0: legacy_message(magic), 1: legacy_message(magic)}
    )
    conn.send_raw(frame(header_v1(ApiKey.PRODUCE, version, 55) + body))
    payload = conn.recv_frame()
    assert struct.unpack_from(">i", payload)[0] == 55
    answers = _read_legacy_produce_response(version, payload)
    assert sorted(answers) == [
        (scratch.name, 0, ErrorCode.unsupported_version, -1),
        (scratch.name, 1, ErrorCode.unsupported_version, -1),
    ]
    # The connection stays usable and nothing was appended.
    assert conn.api_versions().error_code == ErrorCode.none
    scratch.unchanged(conn)
    conn.close()
    world.verify(scratch)


def test_produce_v0_with_acks_0_closes_the_connection(world, scratch):
    """A rejected acks=0 produce cannot be answered: like Kafka, close the connection."""
    conn = world.connect()
    body = _legacy_produce(0, 0, scratch.name, {0: legacy_message(0)})
    conn.send_raw(frame(header_v1(ApiKey.PRODUCE, 0, 56) + body))
    assert_closed(conn)
    scratch.unchanged(world.healthy)
    world.verify(scratch)


def test_produce_acks_0_with_a_corrupt_batch_closes_the_connection(world, scratch):
    """Kafka closes the connection of an acks=0 produce that failed (KafkaApis.
    handleProduceRequest: "the server will close socket server so that the producer client
    will know that some error has happened"): it is the only error signal such a producer
    gets. Produce v9, acks=0, one batch with a flipped byte."""
    conn = world.connect()
    batch = bytearray(make_batch([b"x", b"y"]))
    batch[-1] ^= 0xFF
    conn.produce_request({(scratch.name, 0): bytes(batch)}, acks=0)
    assert_closed(conn)
    scratch.unchanged(world.healthy)
    world.verify(scratch)


def test_produce_acks_0_that_succeeds_keeps_the_connection(world, scratch):
    conn = world.connect()
    conn.produce_request({(scratch.name, 1): make_batch([b"fire-and-forget"])}, acks=0)
    assert conn.api_versions().error_code == ErrorCode.none  # still open, answered in order
    scratch.expected[(scratch.name, 1)].append(b"fire-and-forget")
    conn.close()
    world.verify(scratch)


# --- lengths inside requests


def test_huge_array_count_in_a_legacy_request(world):
    """Metadata v4 topics array claiming 2**31-1 elements in a few bytes: closed."""
    bad = world.connect()
    bad.send_raw(frame(header_v1(ApiKey.METADATA, 4, 9) + struct.pack(">i", 2**31 - 1) + b"\x00"))
    assert_closed(bad)
    world.verify()


def test_huge_compact_array_count_in_a_flexible_request(world):
    """Metadata v12 compact array claiming 2**32 elements (kio would reserve 32 GiB and
    abort the process if the broker let it): closed, broker alive."""
    bad = world.connect()
    bad.send_raw(frame(header_v2(ApiKey.METADATA, 12, 9) + uvarint(2**32 + 1) + b"\x00\x00\x00"))
    assert_closed(bad)
    world.verify()


def test_negative_string_length(world):
    """CreateTopics v4 with a topic name length of -7."""
    bad = world.connect()
    body = struct.pack(">i", 1) + struct.pack(">h", -7) + b"\x00" * 40
    bad.send_raw(frame(header_v1(ApiKey.CREATE_TOPICS, 4, 9) + body))
    assert_closed(bad)
    world.verify()


def test_client_id_longer_than_the_frame(world):
    bad = world.connect()
    bad.send_raw(frame(struct.pack(">hhih", ApiKey.METADATA, 4, 9, 30000) + b"abc"))
    assert_closed(bad)
    world.verify()


def test_records_length_beyond_the_frame(world, scratch):
    """Produce v3 whose records field claims 1 GiB: closed, nothing appended."""
    bad = world.connect()
    name = scratch.name.encode()
    body = struct.pack(">hhi", -1, -1, 5000) + struct.pack(">i", 1)
    body += struct.pack(">h", len(name)) + name + struct.pack(">i", 1)
    body += struct.pack(">ii", 0, 1 << 30) + make_batch([b"x"])
    bad.send_raw(frame(header_v1(ApiKey.PRODUCE, 3, 9) + body))
    assert_closed(bad)
    scratch.unchanged(world.healthy)
    world.verify(scratch)


# --- record batches


def _refused(world, scratch, partition: int, records: bytes | None, *codes: ErrorCode) -> None:
    """Produce ``records`` on a fresh connection: refused with one of ``codes``, nothing
    appended, the connection still open."""
    conn = world.connect()
    entry = conn.produce(scratch.name, partition, records)
    assert entry.error_code in codes, entry
    assert entry.base_offset == -1
    scratch.unchanged(world.healthy)
    assert conn.api_versions().error_code == ErrorCode.none  # still open
    conn.close()


def test_flipped_byte_in_the_records_is_corrupt_message(world, scratch):
    batch = bytearray(make_batch([b"a", b"b", b"c"]))
    batch[-2] ^= 0x01
    _refused(world, scratch, 0, bytes(batch), ErrorCode.corrupt_message)
    world.verify(scratch)


def test_flipped_crc_byte_is_corrupt_message(world, scratch):
    batch = bytearray(make_batch([b"a", b"b"], compression=GZIP))
    batch[18] ^= 0x80  # inside the CRC field itself
    _refused(world, scratch, 1, bytes(batch), ErrorCode.corrupt_message)
    world.verify(scratch)


@pytest.mark.parametrize("deltas", [(0, 5, 2), (0, 0, 0)], ids=str)
def test_records_with_wrong_offset_deltas_are_corrupt_message(world, scratch, deltas):
    """Offset deltas must be 0..n-1: stored, 0,5,2 made consumers see one offset twice and
    another never."""
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, delta in enumerate(deltas):
        builder.append(delta, timestamp=int(time.time() * 1000), key=None, value=b"d%d" % i, headers=[])
    batch = bytearray(builder.build())
    struct.pack_into(">i", batch, 23, len(deltas) - 1)  # lastOffsetDelta as the count says
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    _refused(world, scratch, 0, bytes(batch), ErrorCode.corrupt_message)
    world.verify(scratch)


def test_corrupt_batch_among_good_ones_rejects_that_partition_only(world, scratch):
    """One request, two partitions: p0 gets a good batch followed by a corrupt one (the
    whole record set is refused), p1 gets a good one (appended)."""
    conn = world.connect()
    bad = bytearray(make_batch([b"z"]))
    bad[-1] ^= 0x55
    response = conn.produce_request(
        {
            (scratch.name, 0): make_batch([b"never"]) + bytes(bad),
            (scratch.name, 1): make_batch([b"p1-ok"]),
        }
    )
    by_partition = {e.index: e for e in response.responses[0].partition_responses}
    assert by_partition[0].error_code == ErrorCode.corrupt_message
    assert by_partition[1].error_code == ErrorCode.none
    assert by_partition[1].base_offset == len(scratch.expected[(scratch.name, 1)])
    scratch.expected[(scratch.name, 1)].append(b"p1-ok")
    scratch.unchanged(conn)
    conn.close()
    world.verify(scratch)


def test_batch_length_beyond_the_record_set_is_corrupt_message(world, scratch):
    batch = make_batch([b"a", b"b"])
    _refused(
        world, scratch, 0, batch[:-5], ErrorCode.corrupt_message
    )  # length promises 5 more bytes
    world.verify(scratch)


def test_trailing_partial_batch_is_corrupt_message(world, scratch):
    good = make_batch([b"a"])
    _refused(world, scratch, 0, good + good[:30], ErrorCode.corrupt_message)
    world.verify(scratch)


def test_magic_1_message_set_is_invalid_record(world, scratch):
    _refused(
        world,
        scratch,
        0,
        legacy_message(magic=1, values=[b"old", b"older"]),
        ErrorCode.invalid_record,
    )
    _refused(world, scratch, 0, legacy_message(magic=0), ErrorCode.invalid_record)
    world.verify(scratch)


def test_record_count_not_matching_the_offset_delta_is_invalid_record(world, scratch):
    batch = patch_batch(make_batch(5), fix_crc=True, records_count=3)
    _refused(world, scratch, 0, batch, ErrorCode.invalid_record)
    world.verify(scratch)


@pytest.mark.parametrize("compression", [0, GZIP])
@pytest.mark.parametrize("declared", [6, 4])
def test_record_count_not_matching_the_records_is_refused(world, scratch, declared, compression):
    """Header fields agree with each other (records count = last offset delta + 1) and the
    CRC is valid, but the batch holds 5 records. Kafka refuses it (LogValidator iterates
    the records: INVALID_RECORD / CORRUPT_MESSAGE); stored, it is a batch consumers cannot
    decode, and the high watermark counts records that do not exist."""
    batch = patch_batch(
        make_batch(5, compression=compression),
        fix_crc=True,
        records_count=declared,
        last_offset_delta=declared - 1,
    )
    _refused(world, scratch, 0, batch, ErrorCode.invalid_record, ErrorCode.corrupt_message)
    world.verify(scratch)


def test_batch_over_topic_max_message_bytes_is_message_too_large(world):
    small = world.scratch(configs={"max.message.bytes": "1024"})
    _refused(world, small, 0, make_batch([b"x" * 2000]), ErrorCode.message_too_large)
    conn = world.connect()
    assert conn.produce_ok(small.name, 0, make_batch([b"x" * 100])) == len(
        small.expected[(small.name, 0)]
    )
    small.expected[(small.name, 0)].append(b"x" * 100)
    conn.close()
    world.verify(small)


def test_batch_over_broker_message_max_bytes_is_message_too_large(world, scratch):
    """Default message.max.bytes is 1048588; a 1.5 MB uncompressed batch is refused."""
    _refused(world, scratch, 1, make_batch([os.urandom(1_500_000)]), ErrorCode.message_too_large)
    world.verify(scratch)


def test_empty_and_null_record_sets(world, scratch):
    for records in (b"", None):
        _refused(world, scratch, 0, records, ErrorCode.invalid_record, ErrorCode.corrupt_message)
    world.verify(scratch)


# --- names and partitions


BAD_NAMES = ["bad name!", "", ".", "..", "x" * 250, "ünïcode", "slash/topic"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_invalid_topic_name_in_create_topics(world, name):
    conn = world.connect()
    fine = f"fine-{len(world.expected)}-{abs(hash(name)) % 10**6}"
    response = conn.create_topics({name: 1, fine: 1})
    codes = {t.name: t.error_code for t in response.topics}
    assert codes[name] == ErrorCode.invalid_topic_exception
    assert codes[fine] == ErrorCode.none
    listed = {t.name for t in conn.metadata(None).topics}
    assert name not in listed and fine in listed
    conn.close()
    world.verify()


@pytest.mark.parametrize("name", ["bad name!", "..", "x" * 250])
def test_invalid_topic_name_in_metadata(world, name):
    conn = world.connect()
    response = conn.metadata([name, STORED], allow_auto_topic_creation=True)
    codes = {t.name: t.error_code for t in response.topics}
    assert codes[name] == ErrorCode.invalid_topic_exception
    assert codes[STORED] == ErrorCode.none
    assert name not in {t.name for t in conn.metadata(None).topics}
    conn.close()
    world.verify()


def test_missing_partition_in_produce(world, scratch):
    conn = world.connect()
    response = conn.produce_request(
        {
            (scratch.name, 2): make_batch([b"nope"]),
            (scratch.name, -1): make_batch([b"nope"]),
            (scratch.name, 1): make_batch([b"p1-yes"]),
        }
    )
    codes = {e.index: e.error_code for e in response.responses[0].partition_responses}
    assert codes == {
        2: ErrorCode.unknown_topic_or_partition,
        -1: ErrorCode.unknown_topic_or_partition,
        1: ErrorCode.none,
    }
    scratch.expected[(scratch.name, 1)].append(b"p1-yes")
    conn.close()
    world.verify(scratch)


def test_missing_partition_in_fetch(world):
    conn = world.connect()
    for version in (4, 12):
        entry = conn.fetch(STORED, 2, 0, version=version)
        assert entry.error_code == ErrorCode.unknown_topic_or_partition
        entry = conn.fetch(STORED, -1, 0, version=version)
        assert entry.error_code == ErrorCode.unknown_topic_or_partition
        entry = conn.fetch("no-such-topic", 0, 0, version=version)
        assert entry.error_code == ErrorCode.unknown_topic_or_partition
    conn.close()
    world.verify()


def test_unknown_topic_id_in_fetch_v13(world):
    conn = world.connect()
    entry = conn.fetch("", 0, 0, version=13, topic_id=uuid.uuid4())
    assert entry.error_code == ErrorCode.unknown_topic_id
    conn.close()
    world.verify()


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_metadata_by_topic_id(world, version):
    """Kafka refuses topic ids in Metadata v10-11 (INVALID_REQUEST: names only there) and
    answers an unknown id with UNKNOWN_TOPIC_ID and a null name from v12; either way the
    connection stays open (a null name used to fail to encode and close it)."""
    conn = world.connect()
    unknown = uuid.uuid4()
    response = conn.request(ApiKey.METADATA, version, topics=[dict(name=None, topic_id=unknown)],
                            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                            include_topic_authorized_operations=False)
    [topic] = response.topics
    if version < 12:
        assert (topic.error_code, topic.name) == (ErrorCode.invalid_request, "")
    else:
        assert (topic.error_code, topic.name, topic.topic_id) == (ErrorCode.unknown_topic_id, None, unknown)
        known = conn.metadata([STORED], version=version).topics[0].topic_id
        by_id = conn.request(ApiKey.METADATA, version, topics=[dict(name=None, topic_id=known)],
                             allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                             include_topic_authorized_operations=False)
        assert (by_id.topics[0].error_code, by_id.topics[0].name) == (ErrorCode.none, STORED)
    assert conn.api_versions().error_code == ErrorCode.none
    conn.close()
    world.verify()


def test_list_offsets_with_an_unknown_negative_timestamp(world):
    """A timestamp below the special values (-1 .. -5) is looked up like any timestamp, as
    Kafka does: the first record stamped at or after it, the earliest. No error, no
    traceback in the log (a client could flood it)."""
    tracebacks = world.broker.stderr.count("Traceback")
    conn = world.connect()
    for version in (1, 10):
        for timestamp in (-10, -(2**63)):
            entry = conn.list_offsets(STORED, 0, timestamp, version=version)
            assert (entry.error_code, entry.offset) == (ErrorCode.none, 0)
    conn.close()
    world.verify()
    assert world.broker.stderr.count("Traceback") == tracebacks


def test_a_decompression_bomb_is_refused_without_inflating_it(world, scratch):
    """A few hundred KB of zstd / gzip inflating to 512 MB took the broker's RSS into the
    gigabytes and blocked everyone for seconds; refused as MESSAGE_TOO_LARGE after at most
    64 x message.max.bytes of it was inflated."""
    import zlib

    import zstandard

    zeros = bytes(512 << 20)
    bodies = {ZSTD: zstandard.ZstdCompressor(level=3).compress(zeros)}
    gzip = zlib.compressobj(9, zlib.DEFLATED, 31)
    bodies[GZIP] = gzip.compress(zeros) + gzip.flush()
    del zeros
    process = psutil.Process(broker_pid(world.broker))
    before = process.memory_info().rss
    for codec, body in bodies.items():
        # one record's worth of header; the body is what the bomb inflates to
        batch = bytearray(make_batch([b"x"], compression=codec))
        batch[61:] = body
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
        began = time.monotonic()
        _refused(world, scratch, 0, bytes(batch), ErrorCode.message_too_large)
        assert time.monotonic() - began < 5
    grown = (process.memory_info().rss - before) >> 20
    assert grown < 300, f"the broker's RSS grew {grown} MB refusing the bombs"
    world.verify(scratch)


CREATE_PARTITIONS = 37


@pytest.mark.parametrize("validate_only", [False, True])
def test_huge_partition_counts_are_invalid_partitions(world, validate_only):
    """CreateTopics / CreatePartitions asking for 100,000 or 2^31-1 partitions opened a file
    per partition, blocked every client and left a topics.json the broker could not start
    with. Refused at once with INVALID_PARTITIONS (max.partitions.per.topic, 1000)."""
    conn = world.connect()
    began = time.monotonic()
    for count in (2**31 - 1, 100_000, 1001):
        response = conn.create_topics({f"huge-{count}": count}, validate_only=validate_only)
        assert response.topics[0].error_code == ErrorCode.invalid_partitions
        assert "max.partitions.per.topic" in response.topics[0].error_message
        grown = conn.request(CREATE_PARTITIONS, 3, topics=[dict(name=STORED, count=count, assignments=None)],
                             timeout=datetime.timedelta(seconds=10), validate_only=validate_only)
        assert grown.results[0].error_code == ErrorCode.invalid_partitions
    assert time.monotonic() - began < 5
    assert [t.name for t in conn.metadata(None).topics if t.name.startswith("huge-")] == []
    conn.close()
    world.verify()


def test_missing_partition_in_list_offsets(world):
    conn = world.connect()
    for version in (1, 10):
        entry = conn.list_offsets(STORED, 2, LATEST, version=version)
        assert entry.error_code == ErrorCode.unknown_topic_or_partition
        entry = conn.list_offsets("no-such-topic", 0, LATEST, version=version)
        assert entry.error_code == ErrorCode.unknown_topic_or_partition
    conn.close()
    world.verify()


def test_produce_to_unknown_topic(world):
    conn = world.connect()
    entry = conn.produce("never-created", 0, make_batch([b"x"]))
    assert entry.error_code == ErrorCode.unknown_topic_or_partition
    assert "never-created" not in {t.name for t in conn.metadata(None).topics}
    conn.close()
    world.verify()


# --- many bad clients at once


def test_many_bad_connections_while_a_client_keeps_producing(world, scratch):
    """Twenty connections each misbehaving differently, interleaved with good produces."""
    rng = random.Random(7)
    bads = []
    for i in range(20):
        conn = world.connect()
        kind = i % 4
        if kind == 0:
            conn.send_raw(struct.pack(">i", -1))
        elif kind == 1:
            conn.send_raw(frame(header_v1(9999, 0, i)))
        elif kind == 2:
            conn.send_raw(struct.pack(">i", 1000) + bytes(rng.getrandbits(8) for _ in range(100)))
        else:
            conn.send_raw(
                frame(struct.pack(">h", 0x7A7A) + bytes(rng.getrandbits(8) for _ in range(500)))
            )
        bads.append((kind, conn))
        value = b"interleaved-%d" % i
        key = (scratch.name, 1)
        assert world.healthy.produce_ok(scratch.name, 1, make_batch([value])) == len(
            scratch.expected[key]
        )
        scratch.expected[key].append(value)
    for kind, conn in bads:
        if kind != 2:
            assert_closed(conn)
        conn.close()
    world.verify(scratch)


# --- and after a restart
# These run last (pytest keeps file order): everything every earlier test stored, and
# checked right after its bad input, must also survive a clean restart and a kill -9.


def test_everything_stored_survives_a_clean_restart(world):
    world.restart(kill=False)
    world.check(world.expected)
    world.verify()


def test_everything_stored_survives_kill_9(world):
    world.restart(kill=True)
    world.check(world.expected)
    world.verify()
