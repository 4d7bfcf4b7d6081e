"""``rmqk dlq list|resend GROUP``: a consumer group's dead letters (``rmq_dlq.GROUP``).

A record nacked by group G (produced to ``rmq_retry.G``) more often than the group's maximum
goes to ``rmq_dlq.G`` (see ``rmqkafka.client.retry``), with ``RECONSUME_TIMES`` = maximum + 1
and, when it was nacked by ``rmqkafka.client.RetryingConsumer``, ``ORIGIN_TOPIC`` /
``ORIGIN_PARTITION`` / ``ORIGIN_OFFSET``.

``list`` reads the topic from its beginning (a consumer that assigns itself the partitions;
it never joins a group or commits). A group without a DLQ topic has no dead letters: a
notice on stderr, nothing on stdout (``[]`` with ``--json``), exit status 0.

``resend`` produces dead letters again, keeping key, value, headers and timestamp:

- by default to ``rmq_retry.G`` with ``RECONSUME_TIMES`` set to 0: the broker delays the
  record as a first retry (level 3) and the group consumes it again from ``rmq_retry.G``
  with ``RECONSUME_TIMES`` 1 (RocketMQ console's "resend");
- with ``--to-origin`` to the record's ``ORIGIN_TOPIC`` (and ``ORIGIN_PARTITION`` when
  present; otherwise the producer's partitioner picks one) without ``RECONSUME_TIMES``. A
  selection that contains a record without ``ORIGIN_TOPIC`` is refused as a whole.

What has been resent is remembered as a committed offset of the consumer group
``rmq_dlq_resend.G`` on ``rmq_dlq.G`` (one per partition): a run resends the records at and
after that offset up to the end it found, then commits the end (``--limit`` N: up to the
N-th record), so running it twice resends nothing the second time. ``rmqk groups describe
rmq_dlq_resend.G`` shows the position, ``rmqk groups reset-offsets`` moves it. The offset is
committed after the broker has confirmed every record: a run that fails or is killed in
between resends those records again next time (at least once). Two runs at the same time
are not coordinated. ``--offset N`` (repeatable) resends exactly those records of one
partition (``--partition``, default 0), resent before or not, and leaves the position as it
is. ``--dry-run`` shows what would be sent.

confluent_kafka is imported inside the commands (see ``rmqkafka.cli.common``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click

from rmqkafka.cli.common import (
    ClientOptions,
    CliError,
    CliUsageError,
    Command,
    ErrorWatch,
    Group,
    client_options,
    config_error,
    echo_json,
    echo_table,
    handle_errors,
    json_bytes,
    json_option,
    kafka_error_text,
    one_line,
    report_error,
    topic_error,
    wait_for_cluster,
    warn,
)
from rmqkafka.client.retry import (
    ORIGIN_OFFSET,
    ORIGIN_PARTITION,
    ORIGIN_TOPIC,
    RECONSUME_TIMES,
    dlq_topic,
    retry_topic,
)

RESEND_GROUP_PREFIX = "rmq_dlq_resend."
DEFAULT_LIST_LIMIT = 100
_PREVIEW = 40
_BATCH = 500
_POLL_SECONDS = 0.2


def resend_group(group: str) -> str:
    """The consumer group whose committed offsets on ``rmq_dlq.<group>`` say what was resent."""
    return RESEND_GROUP_PREFIX + group


@click.group("dlq", cls=Group, no_args_is_help=True)
def dlq() -> None:
    """List and re-send the dead letters of a consumer group (topic rmq_dlq.GROUP)."""


# ---------------------------------------------------------------------------------------------
# reading the DLQ topic


@dataclass(slots=True)
class DeadLetter:
    topic: str
    partition: int
    offset: int
    timestamp_type: int  # 0 none, 1 CreateTime, 2 LogAppendTime
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]

    def header(self, name: str) -> bytes | None:
        for key, value in self.headers:
            if key == name:
                return value
        return None

    def text(self, name: str) -> str | None:
        value = self.header(name)
        return None if value is None else value.decode("utf-8", "replace")

    def number(self, name: str) -> int | None:
        value = self.text(name)
        try:
            return int(value) if value is not None else None
        except ValueError:
            return None

    @property
    def where(self) -> str:
        return f"{self.topic}-{self.partition}@{self.offset}"


class _Dlq:
    """A consumer on ``rmq_dlq.<group>`` with group id ``rmq_dlq_resend.<group>`` (it only
    assigns partitions and commits explicitly): partitions, watermarks, committed offsets."""

    def __init__(self, client: ClientOptions, group: str) -> None:
        from confluent_kafka import Consumer

        self.client = client
        self.group = group
        self.topic = dlq_topic(group)
        self.resend_group = resend_group(group)
        self.watch = ErrorWatch()
        conf = {
            "group.id": self.resend_group,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "error_cb": self.watch,
        }
        try:
            self.consumer = Consumer(client.config(**conf))
        except Exception as exc:  # noqa: BLE001 - bad -X properties
            raise config_error(exc) from None
        self.exists = False
        self.partitions: list[int] = []
        self.low: dict[int, int] = {}
        self.high: dict[int, int] = {}
        self.committed: dict[int, int | None] = {}

    def open(self) -> _Dlq:
        from confluent_kafka import TopicPartition

        metadata = wait_for_cluster(self.consumer, self.client, self.watch, topic=self.topic)
        if topic_error(metadata, self.topic):
            return self
        self.exists = True
        self.partitions = sorted(metadata.topics[self.topic].partitions)
        for p in self.partitions:
            try:
                self.low[p], self.high[p] = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, p), timeout=self.client.timeout)
            except Exception as exc:  # noqa: BLE001
                raise CliError(f"cannot get the offsets of {self.topic}-{p}: {_exc_text(exc)}") from None
        try:
            found = self.consumer.committed([TopicPartition(self.topic, p) for p in self.partitions],
                                            timeout=self.client.timeout)
        except Exception as exc:  # noqa: BLE001
            raise CliError(f"cannot fetch the committed offsets of group {self.resend_group!r}: {_exc_text(exc)}") from None
        for tp in found:
            self.committed[tp.partition] = tp.offset if tp.error is None and tp.offset >= 0 else None
        return self

    def position(self, partition: int) -> int:
        """Where the next default resend starts in ``partition``."""
        committed = self.committed.get(partition)
        return max(committed if committed is not None else 0, self.low[partition])

    def read(self, partition: int, start: int, end: int, limit: int | None = None,
             wanted: set[int] | None = None) -> list[DeadLetter]:
        """Records of ``partition`` in [start, end) (clamped to the partition's range), at
        most ``limit``, only ``wanted`` offsets if given."""
        from confluent_kafka import TopicPartition

        start = max(start, self.low[partition])
        end = min(end, self.high[partition])
        if start >= end or limit == 0:
            return []
        self.consumer.assign([TopicPartition(self.topic, partition, start)])
        out: list[DeadLetter] = []
        last_progress = time.monotonic()
        position = start
        try:
            while True:
                messages = self.consumer.consume(num_messages=_BATCH, timeout=_POLL_SECONDS)
                if self.watch.fatal is not None:
                    raise CliError(f"cannot read {self.topic}: {kafka_error_text(self.watch.fatal)}")
                if messages:
                    last_progress = time.monotonic()
                for msg in messages:
                    err = msg.error()
                    if err is not None:
                        if err.name() == "_PARTITION_EOF":
                            return out
                        raise CliError(f"cannot read {self.topic}-{partition}: {kafka_error_text(err)}")
                    offset = msg.offset()
                    if offset >= end:
                        return out
                    position = offset + 1
                    if wanted is None or offset in wanted:
                        kind, stamp = msg.timestamp()
                        out.append(DeadLetter(self.topic, partition, offset, kind, stamp, msg.key(), msg.value(),
                                              list(msg.headers() or [])))
                    if (limit is not None and len(out) >= limit) or position >= end:
                        return out
                if time.monotonic() - last_progress > self.client.timeout:
                    raise CliError(f"reading {self.topic}-{partition} stalled at offset {position} "
                                   f"for {self.client.timeout:g} s (it ends at {end})")
        finally:
            self.consumer.unassign()

    def commit(self, positions: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition

        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(positions.items())]
        try:
            result = self.consumer.commit(offsets=offsets, asynchronous=False)
        except Exception as exc:  # noqa: BLE001
            raise CliError(f"resent, but cannot commit the position of group {self.resend_group!r} "
                           f"(the next run resends these records again): {_exc_text(exc)}") from None
        for tp in result or []:
            if tp.error is not None:
                raise CliError(f"resent, but cannot commit the position of group {self.resend_group!r} on "
                               f"{tp.topic}-{tp.partition} (the next run resends these records again): "
                               f"{kafka_error_text(tp.error)}")

    def close(self) -> None:
        try:
            self.consumer.close()
        except Exception as exc:  # noqa: BLE001
            warn(f"closing the consumer failed: {one_line(exc)}")


def _exc_text(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    return kafka_error_text(err) if err is not None and hasattr(err, "name") else one_line(exc)


def _no_dlq(group: str) -> str:
    return f"group {group} has no dead letters (topic {dlq_topic(group)} does not exist)"


# ---------------------------------------------------------------------------------------------
# list


@dlq.command("list", cls=Command, short_help="List the dead letters of GROUP.")
@click.argument("group")
@click.option("-n", "--limit", type=click.IntRange(min=0), default=DEFAULT_LIST_LIMIT, show_default=True,
              help="Show at most this many records (oldest first); 0: all.")
@json_option
@client_options
@handle_errors
def list_dead_letters(group: str, limit: int, as_json: bool, client: ClientOptions) -> None:
    """List the dead letters of GROUP: offset, time, key, RECONSUME_TIMES, origin, value.

    RESENT tells whether 'rmqk dlq resend' has passed the record (the committed offset of
    the consumer group rmq_dlq_resend.GROUP).
    """
    if not group.strip():
        raise CliUsageError("GROUP must not be empty")
    ctx = _Dlq(client, group)
    try:
        ctx.open()
        if not ctx.exists:
            warn(_no_dlq(group))
            if as_json:
                echo_json([])
            return
        records: list[DeadLetter] = []
        for p in ctx.partitions:
            remaining = None if limit == 0 else limit - len(records)
            if remaining == 0:
                break
            records += ctx.read(p, ctx.low[p], ctx.high[p], limit=remaining)
    finally:
        ctx.close()
    documents = [_document(r, ctx) for r in records]
    if as_json:
        echo_json(documents)
    else:
        echo_table(
            ["PARTITION", "OFFSET", "TIMESTAMP", "KEY", "RECONSUME-TIMES", "ORIGIN", "RESENT", "VALUE"],
            [
                (
                    d["partition"], d["offset"], _time_text(r), _preview(r.key, 24), d["reconsume_times"],
                    _origin_text(d), "yes" if d["resent"] else "no", _preview(r.value, _PREVIEW),
                )
                for d, r in zip(documents, records)
            ],
        )
    most = sum(ctx.high[p] - ctx.low[p] for p in ctx.partitions)
    if limit and len(records) >= limit and most > len(records):
        warn(f"showing the first {len(records)} records; {ctx.topic} holds up to {most} (--limit 0 shows all)")


def _document(r: DeadLetter, ctx: _Dlq) -> dict[str, Any]:
    committed = ctx.committed.get(r.partition)
    return {
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp if r.timestamp_type else None,
        "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(r.timestamp_type),
        "key": json_bytes(r.key),
        "value": json_bytes(r.value),
        "reconsume_times": r.number(RECONSUME_TIMES),
        "origin_topic": r.text(ORIGIN_TOPIC),
        "origin_partition": r.number(ORIGIN_PARTITION),
        "origin_offset": r.number(ORIGIN_OFFSET),
        "headers": [{"key": k, "value": json_bytes(v)} for k, v in r.headers],
        "resent": committed is not None and r.offset < committed,
    }


def _origin_text(doc: dict[str, Any]) -> str | None:
    topic = doc["origin_topic"]
    if topic is None:
        return None
    text = topic
    if doc["origin_partition"] is not None:
        text += f"-{doc['origin_partition']}"
    if doc["origin_offset"] is not None:
        text += f"@{doc['origin_offset']}"
    return text


def _time_text(r: DeadLetter) -> str | None:
    if not r.timestamp_type or r.timestamp < 0:
        return None
    return datetime.fromtimestamp(r.timestamp / 1000).isoformat(timespec="seconds")


def _preview(data: bytes | None, width: int) -> str | None:
    """A one-line preview: UTF-8 text with control characters escaped, cut at ``width``."""
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(data)} bytes, binary>"
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= width else text[: width - 3] + "..."


# ---------------------------------------------------------------------------------------------
# resend


@dlq.command("resend", cls=Command, short_help="Re-send dead letters (to the retry topic or their origin).")
@click.argument("group")
@click.option("--to-origin", is_flag=True, help="Send to each record's ORIGIN_TOPIC (ORIGIN_PARTITION) instead of rmq_retry.GROUP.")
@click.option("-o", "--offset", "offsets", type=click.IntRange(min=0), multiple=True, metavar="N",
              help="Resend only the record at this offset (repeatable); the resend position is left as it is.")
@click.option("-p", "--partition", type=click.IntRange(min=0), default=None, help="The partition of --offset. [default: 0]")
@click.option("-n", "--limit", type=click.IntRange(min=1), default=None, help="Resend at most this many records (the position moves past them only).")
@click.option("--dry-run", is_flag=True, help="Show what would be sent; send and commit nothing.")
@json_option
@client_options
@handle_errors
def resend(
    group: str,
    to_origin: bool,
    offsets: tuple[int, ...],
    partition: int | None,
    limit: int | None,
    dry_run: bool,
    as_json: bool,
    client: ClientOptions,
) -> None:
    """Re-send dead letters of GROUP not resent yet (to rmq_retry.GROUP, or --to-origin).

    To rmq_retry.GROUP with RECONSUME_TIMES=0 (the group gets them again after the first
    retry delay), or with --to-origin to ORIGIN_TOPIC / ORIGIN_PARTITION without
    RECONSUME_TIMES; key, value, other headers and timestamp are kept. What was resent is
    the committed offset of the consumer group rmq_dlq_resend.GROUP on rmq_dlq.GROUP, so a
    second run sends nothing new; --offset resends given records and leaves it alone.
    """
    if not group.strip():
        raise CliUsageError("GROUP must not be empty")
    if partition is not None and not offsets:
        raise CliUsageError("--partition selects the partition of --offset; give --offset too")
    if offsets and limit is not None:
        raise CliUsageError("--limit cannot be used with --offset")
    ctx = _Dlq(client, group)
    try:
        ctx.open()
        result: dict[str, Any] = {
            "group": group, "dlq_topic": ctx.topic, "resend_group": ctx.resend_group,
            "to": "origin" if to_origin else retry_topic(group),
            "dry_run": dry_run, "resent": [], "position": None,
        }
        if not ctx.exists:
            warn(f"nothing to resend: {_no_dlq(group)}")
            if as_json:
                echo_json(result)
            return
        records, ends = _select(ctx, list(dict.fromkeys(offsets)), partition or 0, limit)
        if not records:
            if offsets:  # _select refuses missing offsets, so only an empty selection gets here
                raise CliError("no record selected")
            warn(f"nothing to resend: every dead letter of group {group} in {ctx.topic} was resent already "
                 f"(position of {ctx.resend_group}: {_positions_text(ctx, {p: ctx.position(p) for p in ctx.partitions})})")
            if as_json:
                echo_json(result)
            return
        targets = _targets(ctx, records, to_origin)
        plan = [_planned(r, t, to_origin) for r, t in zip(records, targets)]
        if dry_run:
            sent = [{**{k: v for k, v in entry.items() if k != "headers"}, "to_offset": None, "sent": False} for entry in plan]
            failed = 0
        else:
            sent, failed = _send(client, records, plan)
        result["resent"] = sent
        if not offsets and not dry_run:
            positions = _new_positions(ends, records, sent, failed)
            if positions:
                ctx.commit(positions)
                result["position"] = {str(p): o for p, o in positions.items()}
    finally:
        ctx.close()

    if as_json:
        echo_json(result)
    else:
        echo_table(
            ["PARTITION", "OFFSET", "KEY", "RECONSUME-TIMES", "SENT-TO"],
            [
                (e["partition"], e["offset"], _preview(r.key, 24), r.number(RECONSUME_TIMES),
                 _sent_to(e) if e["sent"] or dry_run else "FAILED")
                for e, r in zip(sent, records)
            ],
        )
    count = len(sent) if dry_run else sum(1 for e in sent if e["sent"])
    where = "their origin topics" if to_origin else retry_topic(group)
    if dry_run:
        warn(f"dry run: would resend {count} dead letter{'s' if count != 1 else ''} of group {group} to {where}; nothing sent")
    else:
        moved = f"; position of {ctx.resend_group}: {_positions_text(ctx, {int(p): o for p, o in result['position'].items()})}" if result["position"] else ""
        warn(f"resent {count} dead letter{'s' if count != 1 else ''} of group {group} to {where}{moved}")
    if failed:
        raise click.exceptions.Exit(1)


def _positions_text(ctx: _Dlq, positions: dict[int, int]) -> str:
    return ", ".join(f"{ctx.topic}-{p}@{o}" for p, o in sorted(positions.items()))


def _select(ctx: _Dlq, offsets: list[int], partition: int, limit: int | None) -> tuple[list[DeadLetter], dict[int, int]]:
    """The records to resend, and per partition the end of the range that was read."""
    if offsets:
        if partition not in ctx.high:
            raise CliError(f"topic {ctx.topic!r} has no partition {partition} (it has {len(ctx.partitions)})")
        wanted = set(offsets)
        found = ctx.read(partition, min(wanted), max(wanted) + 1, wanted=wanted)
        missing = sorted(wanted - {r.offset for r in found})
        if missing:
            low, high = ctx.low[partition], ctx.high[partition]
            holds = f"offsets {low}..{high - 1}" if high > low else "no records"
            raise CliError(
                f"no dead letter at offset{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} "
                f"of {ctx.topic}-{partition} (it holds {holds})"
            )
        order = {o: i for i, o in enumerate(offsets)}
        return sorted(found, key=lambda r: order[r.offset]), {}
    records: list[DeadLetter] = []
    ends: dict[int, int] = {}
    for p in ctx.partitions:
        remaining = None if limit is None else limit - len(records)
        if remaining == 0:
            break
        start = ctx.position(p)
        chunk = ctx.read(p, start, ctx.high[p], limit=remaining)
        records += chunk
        limited = remaining is not None and len(chunk) >= remaining
        ends[p] = chunk[-1].offset + 1 if limited else ctx.high[p]
        if ends[p] <= start:
            del ends[p]
    return records, ends


def _targets(ctx: _Dlq, records: list[DeadLetter], to_origin: bool) -> list[tuple[str, int | None]]:
    """(topic, partition or None for the partitioner) per record; refuses the whole
    selection when a record cannot go where it should."""
    if not to_origin:
        topic = retry_topic(ctx.group)
        problem = topic_error(_metadata(ctx, topic), topic)
        if problem:
            raise CliError(f"cannot resend to {topic}: {problem} (create it with 'rmqk topics create {topic} "
                           "--partitions 1', or resend with --to-origin)")
        return [(topic, None)] * len(records)
    lacking = [r.where for r in records if not r.text(ORIGIN_TOPIC)]
    if lacking:
        shown = ", ".join(lacking[:5]) + (f" and {len(lacking) - 5} more" if len(lacking) > 5 else "")
        raise CliError(
            f"cannot resend to the origin: {shown} {'has' if len(lacking) == 1 else 'have'} no {ORIGIN_TOPIC} header "
            "(nothing was sent; resend without --to-origin to use the retry topic, or select records with --offset)"
        )
    partition_counts: dict[str, int] = {}
    targets: list[tuple[str, int | None]] = []
    for r in records:
        topic = r.text(ORIGIN_TOPIC) or ""
        if topic not in partition_counts:
            metadata = _metadata(ctx, topic)
            problem = topic_error(metadata, topic)
            if problem:
                raise CliError(f"cannot resend {r.where} to its origin: {problem} (nothing was sent)")
            partition_counts[topic] = len(metadata.topics[topic].partitions)
        raw = r.text(ORIGIN_PARTITION)
        if raw is None:
            targets.append((topic, None))
            continue
        wanted = r.number(ORIGIN_PARTITION)
        if wanted is None or not 0 <= wanted < partition_counts[topic]:
            raise CliError(f"cannot resend {r.where} to its origin: {ORIGIN_PARTITION}={raw!r} is not a partition of "
                           f"{topic!r} (it has {partition_counts[topic]}; nothing was sent)")
        targets.append((topic, wanted))
    return targets


def _metadata(ctx: _Dlq, topic: str) -> Any:
    try:
        return ctx.consumer.list_topics(topic=topic, timeout=ctx.client.timeout)
    except Exception as exc:  # noqa: BLE001
        raise CliError(f"cannot get metadata of {topic!r}: {_exc_text(exc)}") from None


def _planned(r: DeadLetter, target: tuple[str, int | None], to_origin: bool) -> dict[str, Any]:
    return {
        "partition": r.partition,
        "offset": r.offset,
        "key": json_bytes(r.key),
        "to_topic": target[0],
        "to_partition": target[1],
        "headers": _resent_headers(r.headers, to_origin),
    }


def _resent_headers(headers: list[tuple[str, bytes | None]], to_origin: bool) -> list[tuple[str, bytes | None]]:
    """The headers as they are, but RECONSUME_TIMES removed (to the origin) or 0 (to the
    retry topic: replaced where it is, or added last)."""
    if to_origin:
        return [(k, v) for k, v in headers if k != RECONSUME_TIMES]
    out = [(k, b"0" if k == RECONSUME_TIMES else v) for k, v in headers]
    if not any(k == RECONSUME_TIMES for k, _ in headers):
        out.append((RECONSUME_TIMES, b"0"))
    return out


def _send(client: ClientOptions, records: list[DeadLetter], plan: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """Produce the plan; (entries with ``to_partition``/``to_offset``/``sent``, failures)."""
    from confluent_kafka import Producer

    watch = ErrorWatch()
    try:
        producer = Producer(client.config(**{"acks": "all", "enable.idempotence": True, "linger.ms": 5, "error_cb": watch}))
    except Exception as exc:  # noqa: BLE001
        raise config_error(exc) from None
    outcomes: list[tuple[Any, Any] | None] = [None] * len(records)

    def reporter(i: int) -> Any:
        def report(err: Any, msg: Any) -> None:
            outcomes[i] = (err, msg)
        return report

    for i, (r, entry) in enumerate(zip(records, plan)):
        kwargs: dict[str, Any] = {
            "value": r.value, "key": r.key, "headers": entry["headers"], "on_delivery": reporter(i),
        }
        if entry["to_partition"] is not None:
            kwargs["partition"] = entry["to_partition"]
        if r.timestamp_type and r.timestamp > 0:
            kwargs["timestamp"] = r.timestamp
        while True:
            try:
                producer.produce(entry["to_topic"], **kwargs)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    deadline = time.monotonic() + max(client.timeout, 5.0) + len(records) / 1000
    while any(o is None for o in outcomes) and time.monotonic() < deadline:
        producer.flush(min(0.5, max(0.01, deadline - time.monotonic())))
        if watch.fatal is not None:
            break
    sent: list[dict[str, Any]] = []
    failed = 0
    for r, entry, outcome in zip(records, plan, outcomes):
        done = {k: v for k, v in entry.items() if k != "headers"}
        if outcome is None or outcome[0] is not None:
            failed += 1
            why = "not confirmed in time" if outcome is None else kafka_error_text(outcome[0])
            report_error(f"cannot resend {r.where} to {entry['to_topic']}: {why}")
            sent.append({**done, "to_offset": None, "sent": False})
            continue
        msg = outcome[1]
        sent.append({**done, "to_partition": msg.partition(), "to_offset": msg.offset(), "sent": True})
    return sent, failed


def _new_positions(ends: dict[int, int], records: list[DeadLetter], sent: list[dict[str, Any]], failed: int) -> dict[int, int]:
    """Per partition read: its end, or the offset of its first record that failed."""
    positions = dict(ends)
    if failed:
        for r, entry in zip(records, sent):
            if not entry["sent"] and r.offset < positions.get(r.partition, r.offset + 1):
                positions[r.partition] = r.offset
    return positions


def _sent_to(entry: dict[str, Any]) -> str:
    text = entry["to_topic"]
    if entry.get("to_partition") is not None:
        text += f"-{entry['to_partition']}"
    if entry.get("to_offset") is not None:
        text += f"@{entry['to_offset']}"
    return text
