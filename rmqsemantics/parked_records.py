"""The record batches the scheduler writes: parked records and delivered ones.

A parked record (in ``SCHEDULE_TOPIC_XXXX`` or ``rmq_sys_wheel_timer``) is the produced
record with its key, value, timestamp and headers, plus ``REAL_TOPIC`` / ``REAL_QID`` naming
the partition it is for (replacing any the producer set, and without a ``PARKED_AT`` an
earlier delivery gave it), as RocketMQ parks them.

A delivered record is the parked one without its scheduling header (``DELAY`` / ``TIMER_*``,
as RocketMQ clears the delay property, so re-producing it does not delay it again), keeping
``REAL_TOPIC`` / ``REAL_QID``, plus ``PARKED_AT`` = ``<system topic>-<partition>@<offset>``:
where it waited. That header is how recovery knows, from the commitlog alone, which parked
records were delivered before a crash (scheduler.Scheduler.replay). Batches are built
uncompressed with aiokafka's C builder, CreateTime, no producer id.
"""

from __future__ import annotations

from collections.abc import Iterable

from .parking import SCHEDULING_HEADERS

REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
PARKED_AT = "PARKED_AT"
PARKED_AT_NEEDLE = PARKED_AT.encode()
_DROPPED_ON_DELIVERY = frozenset((*SCHEDULING_HEADERS, PARKED_AT))
_DROPPED_ON_PARK = frozenset((REAL_TOPIC, REAL_QID, PARKED_AT))

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


def park_batch(records: list, real_topic: str, real_qid: int,
               header_changes: list[dict[str, bytes]] | None = None) -> bytes:
    """The parked copy of ``records`` (aiokafka records) for partition ``real_qid`` of
    ``real_topic``; ``header_changes[i]`` sets headers of record i (replacing same names)."""
    topic_value, qid_value = real_topic.encode(), str(real_qid).encode()
    rows = []
    for i, record in enumerate(records):
        changes = header_changes[i] if header_changes else {}
        headers = [(k, v) for k, v in record.headers if k not in _DROPPED_ON_PARK and k not in changes]
        headers.extend(changes.items())
        headers.append((REAL_TOPIC, topic_value))
        headers.append((REAL_QID, qid_value))
        rows.append((record.timestamp, record.key, record.value, headers))
    return build_batch(rows)


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
    """(system topic, partition, offset) of a ``PARKED_AT`` value, None if malformed."""
    try:
        text = value.decode("ascii")
        where, offset = text.rsplit("@", 1)
        topic, partition = where.rsplit("-", 1)
        return topic, int(partition), int(offset)
    except (ValueError, UnicodeDecodeError):
        return None


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
