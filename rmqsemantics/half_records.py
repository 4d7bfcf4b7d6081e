"""RocketMQ transaction messages as record headers: what producers send, and the records the
broker writes for them.

What a producer sends (any Kafka client; values are ASCII, as RocketMQ's properties are):

``TRAN_MSG=true``  a half message: stored in ``RMQ_SYS_TRANS_HALF_TOPIC``, invisible, until
                   its producer (or a back-check) commits or rolls it back;
``PGROUP``         the producer group (required with ``TRAN_MSG`` and ``TRAN_END``); its
                   check topic ``rmq_trans_check.<group>`` must be a legal Kafka topic
                   name, so letters, digits, ``.``, ``_`` and ``-`` only, at most 233 of them;
``UNIQ_KEY``       the message's id in its group (required; RocketMQ's message id);
``TRAN_END``       an end record: ``COMMIT`` or ``ROLLBACK`` (RocketMQ's ``COMMIT_MESSAGE``
                   and ``ROLLBACK_MESSAGE`` too) for the half message ``PGROUP`` / ``UNIQ_KEY``,
                   produced to the half message's topic (any partition); it is taken out of
                   its batch like a half message (its offset stays a gap), never stored as a
                   record;
``CHECK_IMMUNITY_TIME_IN_SECONDS``  optional: no back-check before this many seconds.

What the broker writes:

* the half message, in ``RMQ_SYS_TRANS_HALF_TOPIC`` partition 0: the produced record (key,
  value, timestamp, headers) plus ``REAL_TOPIC`` / ``REAL_QID`` (its partition),
  ``HALF_STORED_MS`` (when the broker took it) and ``PARKED_FROM`` (the offset it keeps, as
  a gap, in its produced batch; see park_replay.py);
* on commit, the committed message in its partition: the half message without ``TRAN_MSG``,
  ``PARKED_FROM`` and ``HALF_STORED_MS``, with ``PARKED_AT`` =
  ``RMQ_SYS_TRANS_HALF_TOPIC-0@<offset>`` (how a replay after a crash knows it was
  committed). With a ``DELAY`` or ``TIMER_*`` header it is parked for its delay instead,
  as RocketMQ delays a committed transaction message;
* an op record per decision, in ``RMQ_SYS_TRANS_OP_HALF_TOPIC`` partition 0: key
  ``UNIQ_KEY``, value the half offset in decimal (RocketMQ's op body), headers ``TAGS=d``
  (RocketMQ's remove tag), ``PGROUP``, ``UNIQ_KEY``, ``TRAN_END``, ``TRAN_END_BY``
  (``PRODUCER`` or ``CHECK_MAX``) and ``TRAN_HALF`` (the half message's place);
* a check request per back-check, in ``rmq_trans_check.<group>`` (a visible topic the
  group's producers consume as one consumer group): the half message's key, value,
  timestamp and headers without ``TRAN_MSG`` (so copying the topic creates no half
  message) and ``PARKED_FROM``, plus ``TRAN_HALF`` and ``TRANSACTION_CHECK_TIMES`` (which
  check this is, from 1).
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

from .parked_records import (
    PARKED_AT,
    PARKED_FROM,
    REAL_QID,
    REAL_TOPIC,
    TIMER_OUT_MS,
    Header,
    build_batch,
    header,
    marker,
    parse_marker,
)

HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
CHECK_PREFIX = "rmq_trans_check."
CHECK_PARTITIONS = 4  # a check goes to partition crc32(UNIQ_KEY) % 4 of its group's topic

TRAN_MSG = "TRAN_MSG"
PGROUP = "PGROUP"
UNIQ_KEY = "UNIQ_KEY"
TRAN_END = "TRAN_END"
TRAN_END_BY = "TRAN_END_BY"
TRAN_HALF = "TRAN_HALF"
HALF_STORED_MS = "HALF_STORED_MS"
CHECK_IMMUNITY = "CHECK_IMMUNITY_TIME_IN_SECONDS"
CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
COMMIT, ROLLBACK = "COMMIT", "ROLLBACK"
BY_PRODUCER, BY_CHECK_MAX = "PRODUCER", "CHECK_MAX"
_DECISIONS = {b"COMMIT": COMMIT, b"COMMIT_MESSAGE": COMMIT, b"ROLLBACK": ROLLBACK, b"ROLLBACK_MESSAGE": ROLLBACK}
# headers a producer may not set on a half message: the broker's own
_BROKER_HEADERS = frozenset((REAL_TOPIC, REAL_QID, PARKED_AT, PARKED_FROM, TIMER_OUT_MS, HALF_STORED_MS, TRAN_HALF,
                             CHECK_TIMES, TRAN_END_BY))
_DROPPED_ON_COMMIT = frozenset((TRAN_MSG, PARKED_FROM, HALF_STORED_MS))
_DROPPED_ON_CHECK = frozenset((TRAN_MSG, PARKED_FROM, CHECK_TIMES))
_LEGAL_GROUP = re.compile(r"[A-Za-z0-9._-]+")
MAX_GROUP_LENGTH = 249 - len("rmq_trans_check.")  # Kafka's longest topic name


class HalfHeaderError(ValueError):
    """A record whose transaction headers the rules above refuse."""


class Intent(NamedTuple):
    """What a produced record asks: a half message, or an end of one. (A tuple: one is made
    per record of a produced batch.)"""

    group: str
    key: str
    end: str | None = None  # COMMIT / ROLLBACK for an end record, None for a half message
    immunity_ms: int = 0  # a half message's CHECK_IMMUNITY_TIME_IN_SECONDS, in ms


def intent_of(headers: list[Header]) -> Intent | None:
    """The Intent of a record with these headers, None for an ordinary record; raises
    HalfHeaderError for a half message or end record missing what it needs."""
    named = dict(headers)  # in C; a name given twice counts with its last value, as a loop would
    tran, end = named.get(TRAN_MSG), named.get(TRAN_END)
    is_half = tran is not None and tran.strip().lower() == b"true"
    if not is_half and end is None:
        return None
    group, key, immunity = named.get(PGROUP), named.get(UNIQ_KEY), named.get(CHECK_IMMUNITY)
    what = "an end record (TRAN_END)" if end is not None else "a half message (TRAN_MSG=true)"
    if is_half and end is not None:
        raise HalfHeaderError("a record is a half message (TRAN_MSG=true) or an end record (TRAN_END), not both")
    if not group or not key:
        raise HalfHeaderError(f"{what} needs the headers PGROUP and UNIQ_KEY")
    try:
        key_text = key.decode()
    except UnicodeDecodeError:
        raise HalfHeaderError(f"{what}: PGROUP and UNIQ_KEY must be UTF-8") from None
    group_text = _checked_group(group, what)
    if end is None:
        return Intent(group_text, key_text, None, _immunity_ms(immunity))
    decision = _DECISIONS.get(end.strip().upper())
    if decision is None:
        raise HalfHeaderError(f"TRAN_END={end.decode('ascii', 'replace')!r}: COMMIT or ROLLBACK expected")
    return Intent(group_text, key_text, decision)


@functools.lru_cache(maxsize=1024)
def _checked_group(group: bytes, what: str) -> str:
    """PGROUP as text, checked (a producer's records name few groups: checked once each)."""
    try:
        text = group.decode()
    except UnicodeDecodeError:
        raise HalfHeaderError(f"{what}: PGROUP and UNIQ_KEY must be UTF-8") from None
    if len(text) > MAX_GROUP_LENGTH or not _LEGAL_GROUP.fullmatch(text):
        raise HalfHeaderError(
            f"PGROUP={text[:60]!r}: a producer group is letters, digits, '.', '_' and '-', at most "
            f"{MAX_GROUP_LENGTH} of them (its check topic rmq_trans_check.<group> must be a legal topic name)")
    return text


def immunity_ms(headers: list[Header]) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS in ms (0 when absent or not a whole number >= 0)."""
    return _immunity_ms(header_of(headers, CHECK_IMMUNITY))


def _immunity_ms(value: bytes | None) -> int:
    try:
        return max(0, int(value)) * 1000 if value is not None else 0
    except ValueError:
        return 0


def header_of(headers: list[Header], name: str) -> bytes | None:
    for key, value in headers:
        if key == name:
            return value
    return None


def half_batch(records: list, real_topic: str, real_qid: int, source: tuple[str, int], placed: list[int],
               stored_ms: int) -> tuple[bytes, list[tuple[int, bytes | None, bytes | None, list[Header]]]]:
    """The half-topic copy of ``records`` (aiokafka records) produced to ``real_topic`` /
    ``real_qid``, taken from ``placed`` offsets of partition ``source``, and its (timestamp,
    key, value, headers) rows: the records as a parse of the batch would give them."""
    origin = f"{source[0]}-{source[1]}@".encode()
    added = [(REAL_TOPIC, real_topic.encode()), (REAL_QID, b"%d" % real_qid), (HALF_STORED_MS, b"%d" % stored_ms)]
    rows = [(record.timestamp, record.key, record.value,
             [*(h for h in record.headers if h[0] not in _BROKER_HEADERS), *added,
              (PARKED_FROM, b"%s%d" % (origin, offset))])
            for record, offset in zip(records, placed)]
    return build_batch(rows), rows


def committed_headers(record, half_offset: int) -> list[Header]:
    """A committed message's headers (see the module docstring)."""
    headers = [h for h in record.headers if h[0] not in _DROPPED_ON_COMMIT]
    headers.append((PARKED_AT, _half_marker_bytes(half_offset)))
    return headers


def op_batch(ops: list[tuple[int, str, str, str, str]], timestamp: int) -> bytes:
    """Op records for (half offset, group, key, decision, by)."""
    return build_batch(
        (timestamp, key.encode(), b"%d" % offset,
         [("TAGS", b"d"), (PGROUP, group.encode()), (UNIQ_KEY, key.encode()), (TRAN_END, decision.encode()),
          (TRAN_END_BY, by.encode()), (TRAN_HALF, _half_marker_bytes(offset))])
        for offset, group, key, decision, by in ops
    )


def check_batch(checks: list[tuple[object, int, int]]) -> bytes:
    """Check requests for (half record, its offset, check number)."""
    rows = []
    for record, offset, times in checks:
        headers = [(k, v) for k, v in record.headers if k not in _DROPPED_ON_CHECK]
        headers += [(TRAN_HALF, _half_marker_bytes(offset)), (CHECK_TIMES, b"%d" % times)]
        rows.append((record.timestamp, record.key, record.value, headers))
    return build_batch(rows)


def half_marker(offset: int) -> str:
    return marker(HALF_TOPIC, 0, offset)


_HALF_MARKER_PREFIX = half_marker(0)[:-1].encode()


def _half_marker_bytes(offset: int) -> bytes:
    """``half_marker(offset).encode()``, without the text in between (one per end)."""
    return b"%s%d" % (_HALF_MARKER_PREFIX, offset)


def half_offset_of(value: bytes | None) -> int | None:
    """The half offset a ``TRAN_HALF`` / ``PARKED_AT`` value names, None if it names none."""
    where = parse_marker(value) if value is not None else None
    if where is None or where[0] != HALF_TOPIC or where[1] != 0:
        return None
    return where[2]


def check_topic(group: str) -> str:
    return CHECK_PREFIX + group


def int_header(record, name: str, default: int = 0) -> int:
    value = header(record, name)
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default
