"""The record batches the scheduler writes: parked records and delivered ones.

A parked record (in ``SCHEDULE_TOPIC_XXXX`` or ``rmq_sys_wheel_timer``) is the produced
record with its key, value, timestamp and headers, plus (replacing any of these the producer
set, and without a ``PARKED_AT`` an earlier delivery gave it):

``REAL_TOPIC`` / ``REAL_QID``  the partition it is for, as RocketMQ parks them;
``TIMER_OUT_MS``               when it is due (RocketMQ 5's property): the consume-queue code
                               of a parked record, so a replay after a crash indexes it again;
``PARKED_FROM``                ``<topic>-<partition>@<offset>``: the offset it keeps (as a gap)
                               in the produced batch it was taken from (park_replay.py).

A delivered record is the parked one without its scheduling header (``DELAY`` / ``TIMER_*``
other than ``TIMER_OUT_MS``, as RocketMQ clears the delay property, so re-producing it does
not delay it again) and without ``PARKED_FROM``, keeping ``REAL_TOPIC``, ``REAL_QID`` and
``TIMER_OUT_MS``, plus ``PARKED_AT`` = ``<system topic>-<partition>@<offset>``: where it
waited. That header is how recovery knows, from the commitlog alone, which parked records
were delivered before a crash. Batches are built uncompressed with aiokafka's C builder,
CreateTime, no producer id.
"""

from __future__ import annotations

from collections.abc import Iterable

from .parking import SCHEDULING_HEADERS

REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
PARKED_AT = "PARKED_AT"
PARKED_FROM = "PARKED_FROM"
TIMER_OUT_MS = "TIMER_OUT_MS"
PARKED_AT_NEEDLE = PARKED_AT.encode()
_DROPPED_ON_DELIVERY = frozenset((*SCHEDULING_HEADERS, PARKED_AT, PARKED_FROM))
_DROPPED_ON_PARK = frozenset((REAL_TOPIC, REAL_QID, PARKED_AT, PARKED_FROM, TIMER_OUT_MS))

Header = tuple[str, bytes | None]


def _builder():
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    return DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 31,
    )


def build_batch(records: Iterable[tuple[int, bytes | None, bytes | None, list[Header]]]) -> bytes:
    """A dense batch of (timestamp, key, value, headers) records."""
    builder = _builder()
    for delta, (timestamp, key, value, headers) in enumerate(records):
        builder.append(delta, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def park_batch(records: list, real_topic: str, real_qid: int, dues: list[int], source: tuple[str, int],
               placed: list[int], header_changes: list[dict[str, bytes]] | None = None) -> bytes:
    """The parked copy of ``records`` (aiokafka records) for partition ``real_qid`` of
    ``real_topic``, due at ``dues``, taken from ``placed`` offsets of partition ``source``;
    ``header_changes[i]`` sets headers of record i (replacing same names)."""
    real = [(REAL_TOPIC, real_topic.encode()), (REAL_QID, str(real_qid).encode())]
    origin = f"{source[0]}-{source[1]}@".encode()
    builder = _builder()
    append = builder.append
    for i, record in enumerate(records):
        if header_changes:
            changes = header_changes[i]
            headers = [(k, v) for k, v in record.headers if k not in _DROPPED_ON_PARK and k not in changes]
            headers.extend(changes.items())
        else:
            headers = [h for h in record.headers if h[0] not in _DROPPED_ON_PARK]
        headers += real
        headers.append((TIMER_OUT_MS, b"%d" % dues[i]))
        headers.append((PARKED_FROM, b"%s%d" % (origin, placed[i])))
        append(i, record.timestamp, record.key, record.value, headers)
    return bytes(builder.build())


def delivered_batch(parked: list[tuple[str, object]]) -> bytes:
    """The delivered copies of parked records, each given with its ``PARKED_AT`` value."""
    rows = []
    for marker, record in parked:
        headers = [(k, v) for k, v in record.headers if k not in _DROPPED_ON_DELIVERY]
        headers.append((PARKED_AT, marker.encode()))
        rows.append((record.timestamp, record.key, record.value, headers))
    return build_batch(rows)


def marker(system_topic: str, partition: int, offset: int) -> str:
    return f"{system_topic}-{partition}@{offset}"


def parse_marker(value: bytes) -> tuple[str, int, int] | None:
    """(topic, partition, offset) of a ``PARKED_AT`` / ``PARKED_FROM`` value, None if
    malformed."""
    try:
        text = value.decode("ascii")
        where, offset = text.rsplit("@", 1)
        topic, partition = where.rsplit("-", 1)
        return topic, int(partition), int(offset)
    except (ValueError, UnicodeDecodeError):
        return None


def parked_from(record) -> tuple[str, int, int] | None:
    """(topic, partition, offset) of a parked record's ``PARKED_FROM``, None if absent."""
    value = header(record, PARKED_FROM)
    return parse_marker(value) if value is not None else None


def due_of(record) -> int:
    """A parked record's ``TIMER_OUT_MS`` (0, due at once, if absent or malformed)."""
    value = header(record, TIMER_OUT_MS)
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def header(record, name: str) -> bytes | None:
    for key, value in record.headers:
        if key == name:
            return value
    return None


def real_partition(record) -> tuple[str, int] | None:
    """(REAL_TOPIC, REAL_QID) of a parked record, None if they are missing or malformed."""
    topic, qid = header(record, REAL_TOPIC), header(record, REAL_QID)
    try:
        return topic.decode(), int(qid)  # type: ignore[union-attr, arg-type]
    except (AttributeError, ValueError, UnicodeDecodeError, TypeError):
        return None
