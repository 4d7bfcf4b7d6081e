"""FrameDecoder: any chunking yields the same frames; bad sizes fail before the body."""

from __future__ import annotations

import struct

import pytest

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from rmqkafka.adapter.codec.errors import FrameError
from rmqkafka.adapter.codec.errors import FrameTooLarge
from rmqkafka.adapter.codec.errors import InvalidFrameSize
from rmqkafka.adapter.codec.framing import FrameDecoder
from rmqkafka.adapter.codec.framing import frame

MAX = 1 << 16


def size_prefix(size: int) -> bytes:
    return struct.pack(">i", size)


def stream_of(payloads: list[bytes]) -> bytes:
    return b"".join(frame([payload]) for payload in payloads)


def feed_in_chunks(decoder: FrameDecoder, data: bytes, cuts: list[int]) -> list[bytes]:
    frames: list[bytes] = []
    start = 0
    for cut in sorted(set(cuts)) + [len(data)]:
        frames += decoder.feed(data[start:cut])
        start = cut
    return frames


PAYLOADS = [b"a", b"hello world", bytes(range(256)) * 3, b"\x00\x00\x00\x00", b"z" * 1000]


def test_frame_prefixes_the_total_size() -> None:
    assert frame([b"ab", bytearray(b"cd"), memoryview(b"e")]) == b"\x00\x00\x00\x05abcde"
    assert frame([]) == b"\x00\x00\x00\x00"


def test_one_byte_at_a_time() -> None:
    decoder = FrameDecoder(MAX)
    data = stream_of(PAYLOADS)
    frames: list[bytes] = []
    for index in range(len(data)):
        frames += decoder.feed(data[index : index + 1])
    assert frames == PAYLOADS
    assert decoder.buffered == 0


def test_many_frames_in_one_chunk() -> None:
    decoder = FrameDecoder(MAX)
    assert decoder.feed(stream_of(PAYLOADS * 50)) == PAYLOADS * 50
    assert decoder.buffered == 0


def test_partial_frame_stays_buffered() -> None:
    decoder = FrameDecoder(MAX)
    data = stream_of([b"first", b"second"])
    assert decoder.feed(data[:-3]) == [b"first"]
    assert decoder.buffered == 4 + len(b"second") - 3
    assert decoder.feed(b"") == []
    assert decoder.feed(data[-3:]) == [b"second"]
    assert decoder.buffered == 0


def test_partial_size_prefix_stays_buffered() -> None:
    decoder = FrameDecoder(MAX)
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.buffered == 2
    assert decoder.feed(b"\x00\x02x") == []
    assert decoder.feed(b"y") == [b"xy"]


def test_accepts_bytearray_and_memoryview_without_aliasing() -> None:
    decoder = FrameDecoder(MAX)
    reused = bytearray(frame([b"abcdef"]))
    assert decoder.feed(memoryview(reused)[:7]) == []
    reused[4:7] = b"XXX"  # the caller may reuse its read buffer after feed returns
    assert decoder.feed(reused[7:]) == [b"abcdef"]


def test_frame_of_exactly_the_maximum_is_accepted() -> None:
    decoder = FrameDecoder(10)
    assert decoder.feed(frame([b"0123456789"])) == [b"0123456789"]


@pytest.mark.parametrize("split", [0, 1, 2, 3])
def test_oversize_is_refused_as_soon_as_the_size_is_known(split: int) -> None:
    decoder = FrameDecoder(MAX)
    prefix = size_prefix(MAX + 1)
    if split:
        assert decoder.feed(prefix[:split]) == []
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(prefix[split:])  # not one body byte has arrived
    assert caught.value.size == MAX + 1
    assert caught.value.max_frame_size == MAX
    assert decoder.buffered <= 4


@pytest.mark.parametrize("size", [0, -1, -(2**31)])
def test_zero_and_negative_sizes_are_refused(size: int) -> None:
    decoder = FrameDecoder(MAX)
    with pytest.raises(InvalidFrameSize) as caught:
        decoder.feed(size_prefix(size) + b"body bytes that never get buffered")
    assert caught.value.size == size
    assert decoder.buffered <= 4


def test_huge_size_allocates_nothing() -> None:
    decoder = FrameDecoder(104857600)
    with pytest.raises(FrameTooLarge):
        decoder.feed(size_prefix(2**31 - 1))
    assert decoder.buffered <= 4


def test_frames_before_a_bad_size_travel_on_the_error() -> None:
    decoder = FrameDecoder(MAX)
    with pytest.raises(FrameTooLarge) as caught:
        decoder.feed(stream_of([b"one", b"two"]) + size_prefix(MAX + 1) + b"junk")
    assert caught.value.frames == (b"one", b"two")


def test_stream_is_dead_after_a_size_error() -> None:
    decoder = FrameDecoder(MAX)
    with pytest.raises(InvalidFrameSize):
        decoder.feed(size_prefix(-5))
    with pytest.raises(InvalidFrameSize) as again:
        decoder.feed(frame([b"valid"]))
    assert again.value.frames == ()
    assert isinstance(again.value, FrameError)


def test_max_frame_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FrameDecoder(0)


def test_big_frame_in_many_chunks_is_joined_once() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    decoder = FrameDecoder(len(payload))
    data = frame([payload])
    frames: list[bytes] = []
    for start in range(0, len(data), 1000):
        frames += decoder.feed(data[start : start + 1000])
    assert frames == [payload]
    # While incomplete, the body is a list of chunks, not one growing buffer.
    decoder.feed(data[:500_000])
    assert decoder.buffered == 500_000
    assert len(decoder._chunks) == 1  # noqa: SLF001


@settings(max_examples=150, deadline=None)
@given(
    payloads=st.lists(st.binary(min_size=1, max_size=300), max_size=12),
    cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40),
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    data = stream_of(payloads)
    decoder = FrameDecoder(MAX)
    assert feed_in_chunks(decoder, data, [cut for cut in cuts if cut <= len(data)]) == payloads
    assert decoder.buffered == 0


@settings(max_examples=100, deadline=None)
@given(
    good=st.lists(st.binary(min_size=1, max_size=50), max_size=5),
    bad=st.one_of(st.integers(-(2**31), 0), st.integers(MAX + 1, 2**31 - 1)),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10),
)
def test_any_chunking_refuses_a_bad_size(good: list[bytes], bad: int, cuts: list[int]) -> None:
    data = stream_of(good) + size_prefix(bad) + b"tail"
    decoder = FrameDecoder(MAX)
    seen: list[bytes] = []
    start = 0
    with pytest.raises(FrameError) as caught:
        for cut in sorted({c for c in cuts if c <= len(data)}) + [len(data)]:
            seen += decoder.feed(data[start:cut])
            start = cut
    assert seen + list(caught.value.frames) == good
    assert caught.value.size == bad
    assert decoder.buffered <= 4
