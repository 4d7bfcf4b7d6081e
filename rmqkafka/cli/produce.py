"""``rmqk produce TOPIC``: one record per input line, like kafka-console-producer and ``kcat -P``.

Lines come from stdin or ``--file`` as bytes (no decoding; a trailing ``\\r`` is dropped with
the ``\\n``). ``--key-separator SEP`` splits each line at its first SEP into key and value; a
line without SEP is reported and skipped. ``--header k=v`` (repeatable) and ``--tag TAG``
(RocketMQ: the ``TAGS`` header) apply to every record.

At the end one summary goes to stdout: how many records were acknowledged, per partition
the offset range, and how many failed. Every failed record is reported on stderr (the
first 20 individually); any failure makes the exit status non-zero: 1 when the broker
failed records, 2 when only input lines were malformed.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path
from typing import IO, Any

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
    echo,
    echo_json,
    handle_errors,
    json_option,
    kafka_error_text,
    parse_key_values,
    progress_option,
    report_error,
    topic_error,
    wait_for_cluster,
)

MAX_REPORTED = 20  # per-record error lines before the rest are only counted
MIN_DELIVERY_TIMEOUT = 30.0  # seconds a record may wait for its acknowledgement


class _Tally:
    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.bad_lines = 0
        self.reported = 0
        self.ranges: dict[int, list[int]] = {}  # partition -> [first, last, count]
        self.codes: set[str] = set()  # error code names of failed records

    def report(self, message: str) -> None:
        self.reported += 1
        if self.reported <= MAX_REPORTED:
            report_error(message)

    def delivered(self, line_no: int, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            self.codes.add(err.name())
            self.report(f"line {line_no}: not produced: {kafka_error_text(err)}")
            return
        self.acked += 1
        partition, offset = msg.partition(), msg.offset()
        if offset is None:  # acks=0: the broker does not say
            offset = -1
        entry = self.ranges.get(partition)
        if entry is None:
            self.ranges[partition] = [offset, offset, 1]
        else:
            if offset >= 0:
                entry[0] = offset if entry[0] < 0 else min(entry[0], offset)
                entry[1] = max(entry[1], offset)
            entry[2] += 1


@click.command("produce", cls=Command)
@click.argument("topic")
@click.option("-k", "--key-separator", metavar="SEP", help="Split each line at the first SEP into key and value.")
@click.option("-H", "--header", "headers", multiple=True, metavar="KEY=VALUE", help="Header for every record (repeatable).")
@click.option("-t", "--tag", metavar="TAG", help="RocketMQ tag: sets the TAGS header of every record.")
@click.option("-p", "--partition", type=click.IntRange(min=0), default=None, help="Send every record to this partition. [default: by key hash, or sticky]")
@click.option("--acks", type=click.Choice(["0", "1", "all", "-1"]), default="all", show_default=True, help="Acknowledgements the producer waits for.")
@click.option(
    "--compression", type=click.Choice(["none", "gzip", "snappy", "lz4", "zstd"]), default="none", show_default=True,
    help="Batch compression.",
)
@click.option("-f", "--file", "path", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), default=None, help="Read lines from this file instead of stdin.")
@json_option
@progress_option
@client_options
@handle_errors
def produce(
    topic: str,
    key_separator: str | None,
    headers: tuple[str, ...],
    tag: str | None,
    partition: int | None,
    acks: str,
    compression: str,
    path: Path | None,
    as_json: bool,
    progress: bool | None,
    client: ClientOptions,
) -> None:
    """Send one record per line of stdin (or --file) to TOPIC."""
    from confluent_kafka import Producer

    if key_separator is not None and key_separator == "":
        raise CliUsageError("--key-separator must not be empty")
    record_headers = [(k, v.encode()) for k, v in parse_key_values(headers, "--header")]
    if tag is not None:
        if not tag.strip():
            raise CliUsageError("--tag must not be empty")
        record_headers.append(("TAGS", tag.encode()))
    separator = key_separator.encode() if key_separator is not None else None
    stream = _open_input(path)

    delivery_timeout = max(client.timeout, MIN_DELIVERY_TIMEOUT)
    watch = ErrorWatch()
    try:
        producer = Producer(
            client.config(
                error_cb=watch,
                acks=acks,
                **{"compression.type": compression, "message.timeout.ms": int(delivery_timeout * 1000), "linger.ms": 5},
            )
        )
    except Exception as exc:  # noqa: BLE001 - bad -X properties
        raise config_error(exc) from None
    metadata = wait_for_cluster(producer, client, watch, topic=topic)
    problem = topic_error(metadata, topic)
    if problem:
        raise CliError(problem)
    count = len(metadata.topics[topic].partitions)
    if partition is not None and partition >= count:
        raise CliError(f"topic {topic!r} has no partition {partition} (it has {count})")

    tally = _Tally()
    size = _remaining_bytes(stream)  # a file (--file, or stdin redirected from one): a bar in bytes
    meter = Progress(
        False if progress is None and _isatty(stream) else progress, "produce",
        total=size, unit="B" if size is not None else "records", unit_scale=size is not None,
    )
    produce_kwargs: dict[str, Any] = {}
    if partition is not None:
        produce_kwargs["partition"] = partition
    if record_headers:
        produce_kwargs["headers"] = record_headers
    sent = 0
    interrupted = False
    try:
        for line_no, raw in enumerate(stream, start=1):
            line = raw[:-1] if raw.endswith(b"\n") else raw
            if line.endswith(b"\r"):
                line = line[:-1]
            key = None
            if separator is not None:
                key, found, value = line.partition(separator)
                if not found:
                    tally.bad_lines += 1
                    tally.report(f"line {line_no}: no key separator {key_separator!r}; line skipped")
                    continue
            else:
                value = line
            callback = functools.partial(tally.delivered, line_no)
            while True:
                try:
                    producer.produce(topic, value, key, on_delivery=callback, **produce_kwargs)
                    break
                except BufferError:  # local queue full: let deliveries drain it
                    producer.poll(0.05)
            sent += 1
            meter.add(1, len(raw) if size is not None else None)
            if sent % 1000 == 0:
                producer.poll(0)
            if watch.fatal is not None:
                raise CliError(f"producer failed: {kafka_error_text(watch.fatal)}")
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()
    deadline = time.monotonic() + delivery_timeout + 1
    while (left := producer.flush(0.25)) > 0 and time.monotonic() < deadline:
        pass
    meter.done()
    if left:
        tally.failed += left
        tally.report(f"{left} records were not acknowledged within {delivery_timeout:g} s")

    partitions = [
        {"partition": p, "first_offset": r[0] if r[0] >= 0 else None, "last_offset": r[1] if r[1] >= 0 else None, "count": r[2]}
        for p, r in sorted(tally.ranges.items())
    ]
    if as_json:
        echo_json({"topic": topic, "produced": tally.acked, "failed": tally.failed, "skipped_lines": tally.bad_lines, "partitions": partitions})
    else:
        echo(_summary(topic, tally, partitions))
    if tally.reported > MAX_REPORTED:
        report_error(f"{tally.reported - MAX_REPORTED} more errors not shown")
    if interrupted:
        raise CliError("interrupted", exit_code=130)
    if tally.failed:
        reason = _view_reason(client, topic) if "TOPIC_EXCEPTION" in tally.codes else None
        raise CliError(f"{tally.failed} of {sent} records failed" + (f": {reason}" if reason else ""))
    if tally.bad_lines:
        raise CliError(f"{tally.bad_lines} input lines had no key separator and were skipped", exit_code=2)


def _summary(topic: str, tally: _Tally, partitions: list[dict[str, Any]]) -> str:
    plural = "" if tally.acked == 1 else "s"
    text = f"produced {tally.acked} record{plural} to {topic}"
    shown = []
    for p in partitions:
        if p["first_offset"] is None:
            shown.append(f"partition {p['partition']}: {p['count']} records (acks=0: offsets unknown)")
        elif p["first_offset"] == p["last_offset"]:
            shown.append(f"partition {p['partition']} offset {p['first_offset']}")
        else:
            shown.append(f"partition {p['partition']} offsets {p['first_offset']}-{p['last_offset']}")
    if shown:
        text += ": " + ", ".join(shown)
    if tally.failed:
        text += f"; {tally.failed} failed"
    if tally.bad_lines:
        text += f"; {tally.bad_lines} lines skipped"
    return text


def _view_reason(client: ClientOptions, topic: str) -> str | None:
    """Why an INVALID_TOPIC_EXCEPTION, when ``topic`` is a subscription view (librdkafka keeps
    the broker's message from us): asked only after records failed, never on the normal path."""
    from confluent_kafka.admin import AdminClient

    from rmqkafka.cli.views import definitions

    try:
        admin = AdminClient(client.config())
        definition = definitions(admin, client, [topic]).get(topic)
    except Exception:  # noqa: BLE001 - only a hint
        return None
    if definition is None:
        return None
    source = definition["source"]
    return f"{topic!r} is a view (read-only) over topic {source!r}; produce to {source!r}"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _remaining_bytes(stream: IO[bytes]) -> int | None:
    """Bytes left in ``stream`` when it is a regular file (None for a pipe or terminal)."""
    import os
    import stat

    try:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None
        return max(0, info.st_size - os.lseek(stream.fileno(), 0, os.SEEK_CUR))
    except (OSError, AttributeError, ValueError):
        return None


def _open_input(path: Path | None) -> IO[bytes]:
    if path is None or str(path) == "-":
        return sys.stdin.buffer
    try:
        return path.open("rb")
    except OSError as exc:
        raise CliUsageError(f"cannot read {path}: {exc.strerror or exc}") from None
