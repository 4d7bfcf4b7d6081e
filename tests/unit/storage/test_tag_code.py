"""Tag hash codes must equal Java's String.hashCode, bit for bit, in every process."""

from __future__ import annotations

import os
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from rmqkafka.storage.tag_code import java_string_hash, tag_code

INT_MIN = -(2**31)


def _int32(h: int) -> int:
    h &= 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def reference_hash(text: str) -> int:
    """Independent reference: code points split into UTF-16 units by arithmetic."""
    h = 0
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units = (0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))
        else:
            units = (cp,)
        for u in units:
            h = h * 31 + u  # unbounded, reduced once at the end: same result mod 2^32
    return _int32(h)


def test_known_java_values():
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("a") == 97


def test_non_bmp_uses_utf16_surrogate_units():
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, so Java hashes two units.
    assert java_string_hash("\U0001F600") == 0xD83D * 31 + 0xDE00 == 1772899
    # Not the code point itself:
    assert java_string_hash("\U0001F600") != 0x1F600
    # "a😀": ((97*31) + 0xD83D)*31 + 0xDE00
    assert java_string_hash("a\U0001F600") == (97 * 31 + 0xD83D) * 31 + 0xDE00


def test_cjk():
    # 标签 = U+6807 U+7B7E, both in the BMP.
    assert java_string_hash("标签") == 0x6807 * 31 + 0x7B7E == 857175


def test_overflow_wraps_to_negative_int32():
    assert java_string_hash("polygenelubricants") == INT_MIN
    assert java_string_hash("TagA" * 10) == reference_hash("TagA" * 10)
    long = "x" * 1000
    assert -(2**31) <= java_string_hash(long) < 2**31
    assert java_string_hash(long) == reference_hash(long)


@given(st.text())
def test_matches_reference(text):
    assert java_string_hash(text) == reference_hash(text)
    assert -(2**31) <= java_string_hash(text) < 2**31


def test_tag_code_of_header_bytes():
    assert tag_code(None) == 0
    assert tag_code(b"") == 0
    assert tag_code(b"TagA") == 2598919
    assert tag_code("标签".encode()) == 857175
    assert tag_code("\U0001F600".encode()) == 1772899
    # Invalid UTF-8 decodes to U+FFFD, as Java's new String(bytes, UTF_8) does.
    assert tag_code(b"\xff") == 0xFFFD


def test_stable_across_processes():
    """Unlike hash(), the code must not depend on the per-process hash seed."""
    code = "from rmqkafka.storage.tag_code import java_string_hash; print(java_string_hash('TagA|x'))"
    outs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {str(java_string_hash("TagA|x"))}
