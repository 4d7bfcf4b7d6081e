"""``rmqk consume TOPIC``: print records, like kafka-console-consumer and ``kcat -C``.

Without ``--group`` the consumer assigns partitions itself (all, or ``--partition``) and
never joins or commits to a group (librdkafka still needs a group.id; a generated one is
used and nothing is ever committed under it). With ``--group G`` it subscribes, takes part
in group coordination and commits what it has printed (auto-commit of stored offsets,
and a final commit on exit).

Start position: the end (new records only) unless ``--from-beginning``, ``--offset N``
(absolute, clamped to the partition's range; ``-N`` means N records before the end) or
``--timestamp`` (the first record at or after it, via ListOffsets). With ``--group`` these
override the group's committed offsets; without them the committed offset is used, and
``--from-beginning`` only decides where a group without one starts.

Output: the value per line by default; ``--print-key`` / ``--print-headers`` /
``--print-offset`` / ``--print-partition`` / ``--print-timestamp`` prefix tab-separated
fields like kafka-console-consumer (``Partition:0  Offset:5  h1:v1,h2:v2  key  value``);
``--format`` takes kcat's tokens; ``--json`` writes one JSON object per record (JSON Lines).
Values are written as raw bytes. The count of records goes to stderr at the end.
"""

from __future__ import annotations

import re
import signal
import sys
from collections.abc import Callable
from typing import Any

import click

from rmqkafka.cli.common import (
    ClientOptions,
    CliError,
    CliUsageError,
    Command,
    ErrorWatch,
    Progress,
    client_options,
    config_error,
    generated_group_id,
    handle_errors,
    json_bytes,
    kafka_error_text,
    one_line,
    parse_timestamp,
    progress_option,
    topic_error,
    wait_for_cluster,
    warn,
)

BATCH = 500  # records taken per consume() call
POLL_SECONDS = 0.2

# kcat --format tokens
_TOKEN = re.compile(rb"%[tpokKsSvTh%]|\\[ntr\\0]")
_ESCAPES = {b"\\n": b"\n", b"\\t": b"\t", b"\\r": b"\r", b"\\\\": b"\\", b"\\0": b"\0"}


class OffsetParam(click.ParamType):
    """``beginning``/``earliest``, ``end``/``latest``, ``N`` (absolute) or ``-N`` (N before the end)."""

    name = "offset"

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        if isinstance(value, (int, tuple)):
            return value
        text = str(value).strip().lower()
        if text in ("beginning", "earliest"):
            return ("beginning", 0)
        if text in ("end", "latest"):
            return ("end", 0)
        try:
            number = int(text)
        except ValueError:
            self.fail(f"{value!r} is not an offset (N, -N, beginning or end)", param, ctx)
        return ("tail", -number) if number < 0 else ("absolute", number)


@click.command("consume", cls=Command)
@click.argument("topic")
@click.option("-g", "--group", metavar="GROUP", help="Consume as a member of GROUP and commit offsets. [default: no group]")
@click.option("--from-beginning", is_flag=True, help="Start at the earliest offset (with --group: when the group has no committed offset).")
@click.option("-o", "--offset", type=OffsetParam(), default=None, help="Start offset: N, -N (N before the end), beginning or end.")
@click.option("--timestamp", metavar="MS|ISO8601", help="Start at the first record at or after this time (epoch ms or e.g. 2024-05-01T12:00:00Z).")
@click.option("-p", "--partition", "partitions", type=click.IntRange(min=0), multiple=True, help="Only these partitions (repeatable; not with --group).")
@click.option("-c", "--max-messages", type=click.IntRange(min=1), default=None, help="Exit after this many records.")
@click.option("-e", "--exit-at-end", is_flag=True, help="Exit when every partition has been read to its end.")
@click.option("-f", "--format", "fmt", metavar="FORMAT", help="kcat format: %t %p %o %k %s (=%v) %K %S %T %h; \\n \\t escapes.")
@click.option("--print-key", is_flag=True, help="Print the key (tab-separated, before the value).")
@click.option("--print-headers", is_flag=True, help="Print headers as k:v,k2:v2 (NO_HEADERS when none).")
@click.option("--print-offset", is_flag=True, help="Print Offset:N.")
@click.option("--print-partition", is_flag=True, help="Print Partition:N.")
@click.option("--print-timestamp", is_flag=True, help="Print CreateTime:MS (or LogAppendTime:MS).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per record (JSON Lines).")
@click.option("--isolation", type=click.Choice(["read_committed", "read_uncommitted"]), default="read_committed",
              show_default=True, help="read_committed: only records of committed transactions (and non-transactional ones); read_uncommitted: every record.")
@progress_option
@client_options
@handle_errors
def consume(
    topic: str,
    group: str | None,
    from_beginning: bool,
    offset: tuple[str, int] | None,
    timestamp: str | None,
    partitions: tuple[int, ...],
    max_messages: int | None,
    exit_at_end: bool,
    fmt: str | None,
    print_key: bool,
    print_headers: bool,
    print_offset: bool,
    print_partition: bool,
    print_timestamp: bool,
    as_json: bool,
    isolation: str,
    progress: bool | None,
    client: ClientOptions,
) -> None:
    """Print records of TOPIC to stdout."""
    from confluent_kafka import Consumer

    starts = [name for name, given in (("--from-beginning", from_beginning), ("--offset", offset is not None), ("--timestamp", timestamp is not None)) if given]
    if len(starts) > 1:
        raise CliUsageError(f"{' and '.join(starts)} cannot be used together")
    if group is not None and partitions:
        raise CliUsageError("--partition cannot be used with --group (the group assigns partitions)")
    if group is not None and not group.strip():
        raise CliUsageError("--group must not be empty")
    printing = print_key or print_headers or print_offset or print_partition or print_timestamp
    if sum(map(bool, (fmt is not None, as_json, printing))) > 1:
        raise CliUsageError("choose one of --format, --json and the --print-* options")
    if fmt is not None and not fmt:
        raise CliUsageError("--format must not be empty")
    start_ms = parse_timestamp(timestamp, "--timestamp") if timestamp is not None else None
    if from_beginning:
        offset = ("beginning", 0)
    render = _renderer(fmt, as_json, print_key, print_headers, print_offset, print_partition, print_timestamp)

    watch = ErrorWatch()
    conf: dict[str, Any] = {"error_cb": watch, "enable.partition.eof": True, "enable.auto.offset.store": False,
                            "isolation.level": isolation}
    if group is not None:
        # auto.offset.reset: where a group without a committed offset starts.
        reset = "earliest" if offset is not None and offset[0] == "beginning" else "latest"
        conf.update({"group.id": group, "enable.auto.commit": True, "auto.commit.interval.ms": 1000, "auto.offset.reset": reset})
    else:
        # Positions are explicit; auto.offset.reset only applies if one falls out of range.
        conf.update({"group.id": generated_group_id("consume"), "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        consumer = Consumer(client.config(**conf))
    except Exception as exc:  # noqa: BLE001 - bad -X properties
        raise config_error(exc) from None

    stop = _StopFlag()
    try:
        metadata = wait_for_cluster(consumer, client, watch, topic=topic)
        problem = topic_error(metadata, topic)
        if problem:
            raise CliError(problem)
        available = sorted(metadata.topics[topic].partitions)
        for p in partitions:
            if p not in available:
                raise CliError(f"topic {topic!r} has no partition {p} (it has {len(available)})")
        positioner = _Positioner(consumer, topic, offset, start_ms, client.timeout)
        positions: list[Any] = []
        if group is None:
            positions = positioner.positions(list(dict.fromkeys(partitions)) or available)
            consumer.assign(positions)
        else:
            overriding = (offset is not None and offset[0] != "beginning") or start_ms is not None
            placed: set[int] = set()  # later rebalances resume from the committed offsets

            def on_assign(c: Any, assigned: list[Any]) -> None:
                fresh = [tp.partition for tp in assigned if tp.partition not in placed]
                if overriding and fresh:
                    moved = {tp.partition: tp for tp in positioner.positions(fresh)}
                    placed.update(fresh)
                    c.assign([moved.get(tp.partition, tp) for tp in assigned])

            consumer.subscribe([topic], on_assign=on_assign)
        meter = Progress(_auto_off(progress, sys.stdout), "consume")
        starts = _starts(consumer, positions, client.timeout) if meter.enabled and exit_at_end and positions else None
        if starts is not None:
            # the bar: offsets read of those up to the end (the record count after the rate)
            meter.set_total(sum(end - start for start, end in starts.values()), unit="offsets")
        elif max_messages is not None:
            meter.set_total(max_messages)
        count = _loop(consumer, topic, render, max_messages, exit_at_end, group is not None, meter, stop, watch, starts)
    finally:
        stop.restore()
        try:
            consumer.close()  # with --group: commits the stored offsets and leaves the group
        except Exception as exc:  # noqa: BLE001
            warn(f"closing the consumer failed: {one_line(exc)}")
    sys.stderr.write(f"rmqk: consumed {count} record{'s' if count != 1 else ''}\n")
    sys.stderr.flush()


def _starts(consumer: Any, positions: list[Any], timeout: float) -> dict[int, tuple[int, int]] | None:
    """partition -> (start offset, end offset) for the bar of ``--exit-at-end`` (None if unknown).

    Asked only when a bar is drawn: one watermark request per partition.
    """
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    found = {}
    for tp in positions:
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(tp.topic, tp.partition), timeout=timeout)
        except Exception:  # noqa: BLE001 - only the bar's total
            return None
        start = tp.offset if tp.offset >= 0 else low if tp.offset == OFFSET_BEGINNING else high
        found[tp.partition] = (min(max(start, low), high), high)
    return found


def _auto_off(progress: bool | None, records_stream: Any) -> bool | None:
    """No automatic progress line while records go to the same terminal."""
    if progress is None and records_stream.isatty():
        return False
    return progress


class _StopFlag:
    """SIGINT and SIGTERM end the loop cleanly (so a group consumer commits and leaves)."""

    def __init__(self) -> None:
        self.stopped = False
        self._previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self._previous[signum] = signal.signal(signum, self._handle)
            except ValueError:  # not the main thread (e.g. some test runners)
                pass

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stopped:  # a second signal: give up at once
            raise KeyboardInterrupt
        self.stopped = True

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()


class _Positioner:
    """Starting TopicPartitions for the requested start (offset tuple or timestamp)."""

    def __init__(self, consumer: Any, topic: str, offset: tuple[str, int] | None, start_ms: int | None, timeout: float) -> None:
        self.consumer, self.topic, self.offset, self.start_ms, self.timeout = consumer, topic, offset, start_ms, timeout

    def positions(self, partitions: list[int]) -> list[Any]:
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, TopicPartition

        if self.start_ms is not None:
            query = [TopicPartition(self.topic, p, self.start_ms) for p in partitions]
            try:
                found = self.consumer.offsets_for_times(query, timeout=self.timeout)
            except Exception as exc:  # noqa: BLE001
                raise CliError(f"cannot look up offsets by timestamp: {_exc_text(exc)}") from None
            out = []
            for tp in found:
                if tp.error is not None:
                    raise CliError(f"cannot look up the offset of {self.topic}-{tp.partition} by timestamp: {kafka_error_text(tp.error)}")
                out.append(TopicPartition(self.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_END))
            return out
        kind, number = self.offset if self.offset is not None else ("end", 0)
        if kind == "beginning":
            return [TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in partitions]
        if kind == "end":
            return [TopicPartition(self.topic, p, OFFSET_END) for p in partitions]
        out = []
        for p in partitions:
            try:
                low, high = self.consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=self.timeout)
            except Exception as exc:  # noqa: BLE001
                raise CliError(f"cannot get the offsets of {self.topic}-{p}: {_exc_text(exc)}") from None
            target = number if kind == "absolute" else high - number
            out.append(TopicPartition(self.topic, p, min(max(target, low), high)))
        return out


def _exc_text(exc: BaseException) -> str:
    err = exc.args[0] if exc.args else None
    return kafka_error_text(err) if err is not None and hasattr(err, "name") else one_line(exc)


def _loop(
    consumer: Any,
    topic: str,
    render: Callable[[Any], bytes],
    max_messages: int | None,
    exit_at_end: bool,
    grouped: bool,
    meter: Progress,
    stop: _StopFlag,
    watch: ErrorWatch,
    starts: dict[int, tuple[int, int]] | None = None,
) -> int:
    out = sys.stdout.buffer
    read_to = {p: start for p, (start, _) in (starts or {}).items()}  # the bar's position per partition
    interactive = sys.stdout.isatty()
    at_end: set[int] = set()
    count = 0
    try:
        while not stop.stopped:
            want = BATCH if max_messages is None else min(BATCH, max_messages - count)
            messages = consumer.consume(num_messages=want, timeout=POLL_SECONDS)
            if watch.fatal is not None:
                raise CliError(f"consumer failed: {kafka_error_text(watch.fatal)}")
            written = advanced = 0
            for msg in messages:
                err = msg.error()
                if err is not None:
                    if err.name() == "_PARTITION_EOF":
                        at_end.add(msg.partition())
                        if starts is not None:
                            advanced += _advance(read_to, msg.partition(), msg.offset())
                        continue
                    if err.fatal() or err.name() in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"):
                        raise CliError(f"cannot consume {topic}: {kafka_error_text(err)}")
                    warn(f"consumer: {kafka_error_text(err)}")
                    continue
                at_end.discard(msg.partition())
                if starts is not None:
                    advanced += _advance(read_to, msg.partition(), msg.offset() + 1)
                out.write(render(msg))
                written += 1
                count += 1
                if grouped:
                    consumer.store_offsets(message=msg)
                if interactive:
                    out.flush()
            if written or advanced:
                out.flush()
                meter.add(written, advanced if starts is not None else None)
            if max_messages is not None and count >= max_messages:
                break
            if exit_at_end and at_end:
                assigned = {tp.partition for tp in consumer.assignment()}
                if assigned and assigned <= at_end:
                    break
    except KeyboardInterrupt:
        pass
    finally:
        meter.done()
        try:
            out.flush()
        except BrokenPipeError:
            pass
    return count


def _advance(read_to: dict[int, int], partition: int, offset: int | None) -> int:
    """Move a partition's bar position to ``offset``; returns how far it moved."""
    before = read_to.get(partition)
    if offset is None or offset < 0 or before is None or offset <= before:
        return 0
    read_to[partition] = offset
    return offset - before


# ---------------------------------------------------------------------------------------------
# rendering


def _renderer(
    fmt: str | None, as_json: bool, key: bool, headers: bool, offset: bool, partition: bool, timestamp: bool
) -> Callable[[Any], bytes]:
    if as_json:
        return _render_json
    if fmt is not None:
        return _format_renderer(fmt)
    if not (key or headers or offset or partition or timestamp):
        return lambda msg: _or_null(msg.value()) + b"\n"

    def render(msg: Any) -> bytes:
        fields: list[bytes] = []
        if timestamp:
            kind, ms = msg.timestamp()
            label = "LogAppendTime" if kind == 2 else "CreateTime" if kind == 1 else "NoTimestampType"
            fields.append(f"{label}:{ms}".encode())
        if partition:
            fields.append(f"Partition:{msg.partition()}".encode())
        if offset:
            fields.append(f"Offset:{msg.offset()}".encode())
        if headers:
            hs = msg.headers()
            fields.append(b",".join(k.encode() + b":" + _or_null(v) for k, v in hs) if hs else b"NO_HEADERS")
        if key:
            fields.append(_or_null(msg.key()))
        fields.append(_or_null(msg.value()))
        return b"\t".join(fields) + b"\n"

    return render


def _or_null(data: bytes | None) -> bytes:
    return b"null" if data is None else data


_FIELDS: dict[bytes, Callable[[Any], bytes]] = {
    b"%t": lambda m: m.topic().encode(),
    b"%p": lambda m: str(m.partition()).encode(),
    b"%o": lambda m: str(m.offset()).encode(),
    b"%k": lambda m: m.key() or b"",
    b"%s": lambda m: m.value() or b"",
    b"%v": lambda m: m.value() or b"",
    b"%K": lambda m: str(-1 if m.key() is None else len(m.key())).encode(),
    b"%S": lambda m: str(-1 if m.value() is None else len(m.value())).encode(),
    b"%T": lambda m: str(m.timestamp()[1]).encode(),
    b"%h": lambda m: b",".join(k.encode() + b"=" + (v or b"") for k, v in (m.headers() or [])),
}


def _format_renderer(fmt: str) -> Callable[[Any], bytes]:
    """kcat's ``-f``: tokens are replaced, anything else is copied; a newline is added unless
    the format ends with one."""
    template = fmt.encode()
    if not template.endswith((b"\n", b"\\n")):
        template += b"\\n"
    pieces: list[bytes | Callable[[Any], bytes]] = []
    pos = 0
    for match in _TOKEN.finditer(template):
        if match.start() > pos:
            pieces.append(template[pos : match.start()])
        token = match.group()
        if token == b"%%":
            pieces.append(b"%")
        elif token.startswith(b"\\"):
            pieces.append(_ESCAPES[token])
        else:
            pieces.append(_FIELDS[token])
        pos = match.end()
    if pos < len(template):
        pieces.append(template[pos:])

    def render(msg: Any) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(msg) for p in pieces)

    return render


def _render_json(msg: Any) -> bytes:
    import json

    kind, ms = msg.timestamp()
    document = {
        "topic": msg.topic(),
        "partition": msg.partition(),
        "offset": msg.offset(),
        "timestamp": ms if kind else None,
        "timestamp_type": {1: "CreateTime", 2: "LogAppendTime"}.get(kind),
        "key": json_bytes(msg.key()),
        "value": json_bytes(msg.value()),
        "headers": [{"key": k, "value": json_bytes(v)} for k, v in (msg.headers() or [])],
    }
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
