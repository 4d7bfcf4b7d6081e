"""Scale curves: what a record, a connection and a GB of commitlog cost as each grows.

Usage:  python -m bench.scale [--quick] [--only partitions|connections|recovery]
                              [--records N] [--gb 1,2,4,10] [--profile DIR]

Every figure is read from the broker process itself (psutil: user + system CPU, RSS), so CPU
per record is the robust figure on a shared machine; wall rates depend on its other load.

1. partitions: a fresh broker per point; one topic of 1, 100, 1,000, 4,000 and 10,000
   partitions; one record to each partition first (its first use opens and creates its
   files: CPU us per partition, files per partition), then the same N records of 100 B
   (default 400,000) produced with confluent-kafka (acks=all, the loops of
   ``bench.broker_vs_mock``) spread evenly over the partitions, then all consumed (assign +
   poll). Broker CPU us per record, records/s, RSS after each phase and records per stored
   batch (read back from the commitlog), since librdkafka's batches shrink as the records
   spread over more partitions. Produce CPU includes the checkpoints that sync what it wrote
   (until the broker's CPU stands still). Then kill -9 and a restart on the data directory:
   seconds and CPU-s to ready; then SIGTERM: seconds to exit. The broker gets a server.properties raising
   ``max.partitions.per.topic`` and ``max.partitions`` to 100,000. A point whose partitions
   need more open files than the hard limit allows (4 a busy partition, see
   FILES_PER_BUSY_PARTITION) is skipped and says so.
2. connections: a fresh broker per point; 1, 100 and 1,000 asyncio sockets speaking Produce
   v9 and Fetch v12 (kio, the codec the broker uses) on one topic of 4 partitions, each
   producing an equal share of the same N records in batches of 100 (one request in flight
   per connection, so every point sends the same N / 100 Produce requests), then fetching
   its share back (contiguous whole batches of its partition, up to 1 MiB a request). Broker
   CPU per record, RSS, and RSS per idle connection (connected, ApiVersions answered).
3. recovery: one data directory filled with 1 KiB records (a few connections, 512-record
   batches) up to each size of ``--gb``; at each size the broker is killed with SIGKILL and
   started again on the directory (spawn to the started line, spawn to the first successful
   Fetch, the commitlog bytes recovery re-validated, RSS after), then stopped with SIGTERM
   and started again (the clean restart) before filling on. The directory is deleted at
   the end. The fill leaves the commitlog in the page cache: recovery reads it from memory.

Prints a table per curve and then one JSON line (``{"bench": "scale", ...}``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import struct
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from rmqkafka.storage.commitlog import CommitLog
from tests.integration.rawkafka import ApiKey, build, decode_response, encode_request, make_batch

from .broker_vs_mock import consume, produce
from .common import BrokerProcess, create_topic, start_broker
from .cost import broker_cpu_seconds, start_profiler, stop_profiler
from .text_table import SEPARATOR, Table

PARTITION_POINTS = (1, 100, 1_000, 4_000, 10_000)
# open files a busy partition costs the broker at a checkpoint: its consume queue and time
# index files, and a duplicate of each while the checkpoint syncs them
FILES_PER_BUSY_PARTITION = 4
FILES_SPARE = 1_000
CONNECTION_POINTS = (1, 100, 1_000)
CONNECTION_PARTITIONS = 4
CONNECTION_BATCH = 100  # records per Produce request of the connection curve
WARM_BATCHES = 200
FILL_VALUE = 1024
FILL_BATCH = 512
FILL_CONNECTIONS = 4
FETCH_LIMIT = 1 << 20
PRODUCE_V, FETCH_V, API_VERSIONS_V = 9, 12, 3
RECORDS_COUNT_AT = 57  # a v2 batch's int32 record count (after base offset .. producer fields)
RECOVERING = re.compile(r"recovering commitlog from position (\d+)")
SERVER_PROPERTIES = "max.partitions.per.topic=100000\nmax.partitions=100000\n"
_I32 = struct.Struct(">i")


def broker_with_limits(directory: str, extra: list[str] | None = None, **kw) -> BrokerProcess:
    """A broker whose partition limits let one topic have 10,000 partitions."""
    path = os.path.join(directory, "server.properties")
    with open(path, "w") as f:
        f.write(SERVER_PROPERTIES)
    return start_broker(extra=["--config", path, *(extra or [])], **kw)


def files_under(path: str) -> int:
    return sum(len(files) for _, _, files in os.walk(path))


def stored_batches(data_dir: str, from_position: int) -> tuple[int, int]:
    """(batches, records) of the commitlog entries from ``from_position`` on."""
    commitlog = CommitLog(Path(data_dir) / "commitlog", 1 << 30)
    try:
        batches = records = 0
        for entry in commitlog.entries(from_position):
            batches += 1
            records += _I32.unpack_from(entry.batch, RECORDS_COUNT_AT)[0]
        return batches, records
    finally:
        commitlog.close()


def commitlog_end(data_dir: str) -> int:
    commitlog = CommitLog(Path(data_dir) / "commitlog", 1 << 30)
    try:
        return commitlog.end_position
    finally:
        commitlog.close()


def settle(broker: BrokerProcess, timeout: float = 120) -> None:
    """Until the broker's CPU time stands still (under 20 ms in a second): the checkpoint after
    many partitions were written syncs two files of each, for seconds after the writes."""
    deadline = time.monotonic() + timeout
    last = broker_cpu_seconds(broker.process.pid)
    while time.monotonic() < deadline:
        time.sleep(1.0)
        now = broker_cpu_seconds(broker.process.pid)
        if now - last < 0.02:
            return
        last = now


class Phase:
    """Broker CPU and wall seconds across a ``with`` block (py-spy sampling it if asked)."""

    def __init__(self, broker: BrokerProcess, profile: str | None, name: str) -> None:
        self.pid, self.profile, self.name = broker.process.pid, profile, name

    def __enter__(self) -> Phase:
        self.profiler = start_profiler(self.pid, self.profile, self.name) if self.profile else None
        self.cpu = broker_cpu_seconds(self.pid)
        self.began = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.began
        self.cpu = broker_cpu_seconds(self.pid) - self.cpu
        if self.profiler is not None:
            stop_profiler(self.profiler)


# -- 1. partitions ------------------------------------------------------------------------


def open_files_limit() -> int:
    """The broker's limit: rmqk serve raises its soft limit to the hard one."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    return 1 << 20 if hard == resource.RLIM_INFINITY else hard


def partitions_point(partitions: int, records: int, profile: str | None) -> dict:
    need = partitions * FILES_PER_BUSY_PARTITION + FILES_SPARE
    if need > open_files_limit():
        return {"partitions": partitions, "records": records, "skipped":
                f"needs ~{need} open files, the hard limit is {open_files_limit()}"}
    scratch = tempfile.mkdtemp(prefix="rmqk-scale-")
    broker = broker_with_limits(scratch)
    try:
        warm = f"scale-warmup-{uuid.uuid4().hex[:8]}"  # imports and first-use costs of the process
        create_topic(broker.bootstrap, warm, False)
        produce(broker.bootstrap, warm, 20_000, 100)
        consume(broker.bootstrap, warm, 20_000)
        topic = f"scale-{partitions}-{uuid.uuid4().hex[:8]}"
        files_before = files_under(broker.data_dir)
        began = time.perf_counter()
        create_topic(broker.bootstrap, topic, False, partitions, timeout=120)
        create_seconds = time.perf_counter() - began
        files_created = files_under(broker.data_dir)
        with Phase(broker, None, "first use") as first_use:  # one record to each partition opens its files
            produce(broker.bootstrap, topic, partitions, 100, partitions)
        files_used = files_under(broker.data_dir)
        position = commitlog_end(broker.data_dir)
        settle(broker)
        with Phase(broker, profile, f"produce-{partitions}") as produced:
            produce_seconds = produce(broker.bootstrap, topic, records, 100, partitions)
            settle(broker)  # the checkpoints syncing what the produce wrote are its cost
        rss_produced = broker.rss_mb()
        batches, stored = stored_batches(broker.data_dir, position)
        with Phase(broker, profile, f"consume-{partitions}") as consumed:
            consume(broker.bootstrap, topic, records + partitions, partitions)
        rss_consumed = broker.rss_mb()
        broker.process.kill()  # SIGKILL: the restart recovers every used partition
        broker.process.wait()
        broker = broker_with_limits(scratch, data_dir=broker.data_dir)
        killed_ready = broker.ready_seconds, broker_cpu_seconds(broker.process.pid)
        stop_seconds = stop_cleanly(broker)
    finally:
        if broker.process.poll() is None:
            broker.process.kill()
            broker.process.wait()
        shutil.rmtree(broker.data_dir, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "partitions": partitions, "records": records,
        "create_s": create_seconds,
        "files_per_partition_create": (files_created - files_before) / partitions,
        "files_per_partition_first_produce": (files_used - files_created) / partitions,
        "first_use_us_per_partition": first_use.cpu / partitions * 1e6,
        "records_per_batch": stored / batches if batches else 0.0,
        "produce_us_per_record": produced.cpu / records * 1e6,
        "produce_records_per_s": records / produce_seconds,
        "consume_us_per_record": consumed.cpu / (records + partitions) * 1e6,
        "consume_records_per_s": (records + partitions) / consumed.seconds,
        "rss_mb_produced": rss_produced, "rss_mb_consumed": rss_consumed,
        "kill9_ready_s": killed_ready[0], "kill9_ready_cpu_s": killed_ready[1], "stop_s": stop_seconds,
    }


def stop_cleanly(broker: BrokerProcess) -> float:
    """Seconds from SIGTERM to the broker's exit (it syncs and checkpoints every partition)."""
    began = time.perf_counter()
    broker.process.send_signal(signal.SIGTERM)
    broker.process.wait(timeout=600)
    return time.perf_counter() - began


PARTITIONS_TABLE = Table.of(
    ("partitions", "10d", "partitions"), ("rec/batch", "9.1f", "records_per_batch"),
    ("files/p", "8.2f", lambda r: r["files_per_partition_create"] + r["files_per_partition_first_produce"]),
    ("create s", "8.2f", "create_s"), ("1st us/p", "8.0f", "first_use_us_per_partition"),
    ("prod us/rec", "11.3f", "produce_us_per_record"), ("prod rec/s", "10.0f", "produce_records_per_s"),
    ("cons us/rec", "11.3f", "consume_us_per_record"), ("cons rec/s", "10.0f", "consume_records_per_s"),
    ("RSS prod", "8.1f", "rss_mb_produced"), ("RSS cons", "8.1f", "rss_mb_consumed"),
    ("kill9 s", "7.2f", "kill9_ready_s"), ("CPU-s", "5.2f", "kill9_ready_cpu_s"), ("stop s", "6.2f", "stop_s"))


def print_partitions(rows: list[dict], header: bool = True) -> None:
    if header:
        print(PARTITIONS_TABLE.header())
    for r in rows:
        if "skipped" in r:
            print(f"{r['partitions']:10d} skipped: {r['skipped']}", flush=True)
        else:
            PARTITIONS_TABLE.print([r], header=False)


# -- a light asyncio client ---------------------------------------------------------------


class Connection:
    """One asyncio socket to the broker, one request in flight."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.correlation = 0

    @classmethod
    async def open(cls, bootstrap: str) -> Connection:
        host, port = bootstrap.rsplit(":", 1)
        for attempt in range(10):  # a full listen backlog drops a SYN: try again
            try:
                return cls(*await asyncio.wait_for(asyncio.open_connection(host, int(port)), 30))
            except (OSError, asyncio.TimeoutError):
                if attempt == 9:
                    raise
                await asyncio.sleep(0.5)
        raise AssertionError("unreachable")

    async def send_frame(self, frame: bytes) -> bytes:
        """Send a request frame, return the response payload (size prefix removed)."""
        self.writer.write(frame)
        size = _I32.unpack(await asyncio.wait_for(self.reader.readexactly(4), 120))[0]
        return await self.reader.readexactly(size)

    async def request(self, api_key: int, version: int, **fields) -> object:
        from kio.index import load_request_schema

        self.correlation += 1
        body = build(load_request_schema(api_key, version), **fields)
        payload = await self.send_frame(encode_request(api_key, version, self.correlation, body))
        return decode_response(api_key, version, payload)[1]

    async def api_versions(self) -> None:
        await self.request(ApiKey.API_VERSIONS, API_VERSIONS_V, client_software_name="scale",
                           client_software_version="1")

    def produce_frame(self, topic: str, partition: int, batch: bytes) -> bytes:
        """A Produce request carrying ``batch``; ``send_produce`` sends it again and again."""
        from kio.index import load_request_schema

        body = build(load_request_schema(ApiKey.PRODUCE, PRODUCE_V), transactional_id=None, acks=-1,
                     timeout=30_000, topic_data=[dict(name=topic, partition_data=[
                         dict(index=partition, records=batch)])])
        return encode_request(ApiKey.PRODUCE, PRODUCE_V, 0, body)

    async def send_produce(self, frame: bytearray) -> int:
        """Sends a frame from ``produce_frame`` (a new correlation id); returns the base offset."""
        self.correlation += 1
        struct.pack_into(">i", frame, 8, self.correlation)
        payload = await self.send_frame(bytes(frame))
        response = decode_response(ApiKey.PRODUCE, PRODUCE_V, payload)[1]
        entry = response.responses[0].partition_responses[0]
        if entry.error_code.value != 0:
            raise RuntimeError(f"produce failed: {entry.error_code!r} {entry.error_message}")
        return entry.base_offset

    async def fetch(self, topic: str, partition: int, offset: int, max_bytes: int) -> tuple[int, bytes]:
        """(error code, records) of one partition from ``offset``."""
        response = await self.request(
            ApiKey.FETCH, FETCH_V, replica_id=-1, max_wait=500, min_bytes=1, max_bytes=max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
            topics=[dict(topic=topic, partitions=[dict(
                partition=partition, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=max_bytes)])])
        entry = response.responses[0].partitions[0]
        return entry.error_code.value, entry.records or b""

    def close(self) -> None:
        self.writer.close()


def batch_spans(records: bytes) -> list[tuple[int, int]]:
    """(base offset, record count) of each whole v2 batch in a Fetch response's records."""
    spans, at = [], 0
    while at + RECORDS_COUNT_AT + 4 <= len(records):
        base, length = struct.unpack_from(">qi", records, at)
        if at + 12 + length > len(records):
            break
        spans.append((base, _I32.unpack_from(records, at + RECORDS_COUNT_AT)[0]))
        at += 12 + length
    return spans


async def open_many(bootstrap: str, count: int) -> list[Connection]:
    gate = asyncio.Semaphore(50)

    async def one() -> Connection:
        async with gate:
            connection = await Connection.open(bootstrap)
            await connection.api_versions()
            return connection

    return list(await asyncio.gather(*(one() for _ in range(count))))


# -- 2. connections -----------------------------------------------------------------------


async def connections_run(broker: BrokerProcess, count: int, records: int, profile: str | None) -> dict:
    topic = f"conn-{count}-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, False, CONNECTION_PARTITIONS)
    warm = await Connection.open(broker.bootstrap)
    await warm.api_versions()
    frame = bytearray(warm.produce_frame(topic, 0, make_batch([b"w" * 100] * CONNECTION_BATCH)))
    rss_before = broker.rss_mb()
    connections = await open_many(broker.bootstrap, count)
    rss_idle = broker.rss_mb()
    batches_each = max(1, records // CONNECTION_BATCH // count)
    batch = make_batch([b"x" * 100] * CONNECTION_BATCH)
    frames = [bytearray(c.produce_frame(topic, i % CONNECTION_PARTITIONS, batch)) for i, c in enumerate(connections)]
    for _ in range(WARM_BATCHES):  # first-use costs of the process and of partition 0
        await warm.send_produce(frame)
    for p in range(1, CONNECTION_PARTITIONS):
        await warm.send_produce(bytearray(warm.produce_frame(topic, p, make_batch([b"w" * 100] * CONNECTION_BATCH))))

    async def produce_share(i: int) -> None:
        for _ in range(batches_each):
            await connections[i].send_produce(frames[i])

    with Phase(broker, profile, f"conn-produce-{count}") as produced:
        await asyncio.gather(*(produce_share(i) for i in range(count)))
    rss_produced = broker.rss_mb()

    # Fetch: the batches of each partition past the warm-up ones, split into one contiguous
    # run of whole batches per connection of that partition.
    per_partition: dict[int, list[int]] = {}
    for i in range(count):
        per_partition.setdefault(i % CONNECTION_PARTITIONS, []).append(i)
    stored = len(batch)  # stored as sent (only the base offset is set)
    shares = []
    for p, members in per_partition.items():
        first = WARM_BATCHES * CONNECTION_BATCH if p == 0 else CONNECTION_BATCH
        total_batches = len(members) * batches_each
        start = 0
        for j, i in enumerate(members):
            take = total_batches // len(members) + (1 if j < total_batches % len(members) else 0)
            shares.append((i, p, first + start * CONNECTION_BATCH, first + (start + take) * CONNECTION_BATCH))
            start += take
    fetched = {"records": 0, "requests": 0}

    async def fetch_share(i: int, p: int, begin: int, end: int) -> None:
        offset = begin
        while offset < end:
            limit = min(FETCH_LIMIT, (end - offset) // CONNECTION_BATCH * stored)
            error, data = await connections[i].fetch(topic, p, offset, max(limit, stored))
            fetched["requests"] += 1
            if error:
                raise RuntimeError(f"fetch {topic}-{p}@{offset}: error {error}")
            for base, n in batch_spans(data):
                if base >= offset:
                    fetched["records"] += min(n, end - base)
                    offset = base + n
            if offset >= end:
                return

    with Phase(broker, profile, f"conn-fetch-{count}") as consumed:
        await asyncio.gather(*(fetch_share(*share) for share in shares))
    rss_fetched = broker.rss_mb()
    total = batches_each * count * CONNECTION_BATCH
    for connection in (*connections, warm):
        connection.close()
    if fetched["records"] != total:
        raise RuntimeError(f"fetched {fetched['records']} of {total} records")
    return {
        "connections": count, "records": total,
        "produce_requests": batches_each * count, "fetch_requests": fetched["requests"],
        "produce_us_per_record": produced.cpu / total * 1e6, "produce_records_per_s": total / produced.seconds,
        "fetch_us_per_record": consumed.cpu / total * 1e6, "fetch_records_per_s": total / consumed.seconds,
        "rss_mb_before": rss_before, "rss_mb_idle": rss_idle,
        "rss_kb_per_idle_connection": (rss_idle - rss_before) * 1024 / count,
        "rss_mb_produced": rss_produced, "rss_mb_fetched": rss_fetched,
    }


def connections_point(count: int, records: int, profile: str | None) -> dict:
    broker = start_broker()
    try:
        return asyncio.run(connections_run(broker, count, records, profile))
    finally:
        broker.stop()


CONNECTIONS_TABLE = Table.of(
    ("conns", "6d", "connections"), ("records", "8d", "records"), ("fetches", "7d", "fetch_requests"),
    ("prod us/rec", "11.3f", "produce_us_per_record"), ("prod rec/s", "10.0f", "produce_records_per_s"),
    ("fetch us/rec", "12.3f", "fetch_us_per_record"), ("fetch rec/s", "11.0f", "fetch_records_per_s"),
    ("RSS 0", "6.1f", "rss_mb_before"), ("RSS idle", "8.1f", "rss_mb_idle"),
    ("KB/conn", "8.1f", "rss_kb_per_idle_connection"), ("RSS end", "7.1f", "rss_mb_fetched"))


# -- 3. recovery --------------------------------------------------------------------------


async def fill(bootstrap: str, topic: str, target_bytes: int, data_dir: str) -> None:
    """Produce 1 KiB records until the commitlog holds ``target_bytes``."""
    batch = make_batch([b"r" * FILL_VALUE] * FILL_BATCH)
    connections = [await Connection.open(bootstrap) for _ in range(FILL_CONNECTIONS)]
    per_request = len(batch) + 32  # the commitlog entry header
    need = max(0, (target_bytes - commitlog_end(data_dir)) // per_request + 1)

    async def run(i: int, c: Connection) -> None:
        frame = bytearray(c.produce_frame(topic, i % FILL_CONNECTIONS, batch))
        for _ in range(need // FILL_CONNECTIONS + 1):
            await c.send_produce(frame)

    await asyncio.gather(*(run(i, c) for i, c in enumerate(connections)))
    for c in connections:
        c.close()


async def first_fetch(bootstrap: str, topic: str) -> None:
    """Until a Fetch of partition 0 from offset 0 returns records."""
    while True:
        try:
            connection = await Connection.open(bootstrap)
            try:
                error, data = await connection.fetch(topic, 0, 0, 1 << 16)
            finally:
                connection.close()
            if not error and data:
                return
        except (OSError, asyncio.IncompleteReadError):
            pass
        await asyncio.sleep(0.01)


def restart(data_dir: str, log_path: str, topic: str) -> dict:
    """Start a broker on ``data_dir``: seconds to ready and to the first fetch, RSS, and the
    commitlog bytes recovery re-validated (from the broker's log)."""
    with open(log_path, "w") as log:
        began = time.perf_counter()
        broker = broker_with_limits(os.path.dirname(data_dir), data_dir=data_dir, extra=["--log-level", "INFO"],
                                    stderr=log)
    start_cpu = broker_cpu_seconds(broker.process.pid)
    asyncio.run(first_fetch(broker.bootstrap, topic))
    fetched = time.perf_counter() - began
    with open(log_path) as log:
        positions = [int(m.group(1)) for m in RECOVERING.finditer(log.read())]
    end = commitlog_end(data_dir)
    return {"broker": broker, "ready_s": broker.ready_seconds, "ready_cpu_s": start_cpu, "first_fetch_s": fetched,
            "rss_mb": broker.rss_mb(), "revalidated_mb": (end - positions[-1]) / 2**20 if positions else 0.0}


def recovery_curve(sizes_gb: list[float]) -> list[dict]:
    scratch = tempfile.mkdtemp(prefix="rmqk-scale-recovery-")
    data_dir = os.path.join(scratch, "data")
    log_path = os.path.join(scratch, "broker.log")
    topic = "recovery"
    rows = []
    broker = broker_with_limits(scratch, data_dir=data_dir)
    empty = {"ready_s": broker.ready_seconds, "ready_cpu_s": broker_cpu_seconds(broker.process.pid)}
    print(f"empty data directory: ready in {empty['ready_s']:.2f} s, {empty['ready_cpu_s']:.2f} CPU-s", flush=True)
    try:
        create_topic(broker.bootstrap, topic, False, FILL_CONNECTIONS)
        for gb in sizes_gb:
            began = time.perf_counter()
            cpu = broker_cpu_seconds(broker.process.pid)
            before = commitlog_end(data_dir)
            asyncio.run(fill(broker.bootstrap, topic, int(gb * 2**30), data_dir))
            filled = commitlog_end(data_dir)
            fill_row = {"fill_s": time.perf_counter() - began,
                        "fill_cpu_s_per_gb": (broker_cpu_seconds(broker.process.pid) - cpu) / ((filled - before) / 2**30),
                        "commitlog_gb": filled / 2**30, "rss_mb_filled": broker.rss_mb()}
            broker.process.kill()  # SIGKILL
            broker.process.wait()
            killed = restart(data_dir, log_path, topic)
            broker = killed.pop("broker")
            stop_seconds = stop_cleanly(broker)
            clean = restart(data_dir, log_path, topic)
            broker = clean.pop("broker")
            rows.append({"gb": gb, **fill_row, "stop_s": stop_seconds, **{f"kill9_{k}": v for k, v in killed.items()},
                         **{f"clean_{k}": v for k, v in clean.items()}})
            RECOVERY_TABLE.print(rows[-1:], header=len(rows) == 1)
    finally:
        broker.process.kill()
        broker.process.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    return [{"gb": 0.0, **{f"clean_{k}": v for k, v in empty.items()}}, *rows]


RECOVERY_TABLE = Table.of(
    ("GB", "5.2f", "commitlog_gb"), ("fill s", "7.1f", "fill_s"), ("CPU-s/GB", "8.2f", "fill_cpu_s_per_gb"),
    ("RSS fill", "8.1f", "rss_mb_filled"), SEPARATOR,
    ("kill-9 ready", "12.2f", "kill9_ready_s"), ("CPU-s", "6.2f", "kill9_ready_cpu_s"),
    ("1st fetch", "9.2f", "kill9_first_fetch_s"), ("revalid MB", "10.1f", "kill9_revalidated_mb"),
    ("RSS", "6.1f", "kill9_rss_mb"), SEPARATOR,
    ("clean ready", "11.2f", "clean_ready_s"), ("CPU-s", "6.2f", "clean_ready_cpu_s"),
    ("1st fetch", "9.2f", "clean_first_fetch_s"), ("RSS", "6.1f", "clean_rss_mb"))


# -- main ---------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--quick", action="store_true",
                        help="100,000 records per point, recovery at 0.25 and 0.5 GB")
    parser.add_argument("--only", choices=("partitions", "connections", "recovery"), action="append",
                        help="run only this curve (repeatable)")
    parser.add_argument("--records", type=int, default=400_000, help="records per point; default 400000")
    parser.add_argument("--gb", default="1,2,4,10", help="commitlog sizes of the recovery curve (GiB)")
    parser.add_argument("--profile", metavar="DIR",
                        help="sample the broker with py-spy during each produce/consume phase into DIR")
    args = parser.parse_args()
    if args.quick:
        args.records, args.gb = 100_000, "0.25,0.5"
    curves = args.only or ["partitions", "connections", "recovery"]
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores; "
          f"{args.records} records of 100 B per point", flush=True)
    result: dict = {"bench": "scale", "records": args.records, "load_average": load[0]}
    if "partitions" in curves:
        result["partitions"] = curve(PARTITION_POINTS, lambda n: partitions_point(n, args.records, args.profile),
                                     print_partitions)
    if "connections" in curves:
        result["connections"] = curve(CONNECTION_POINTS, lambda n: connections_point(n, args.records, args.profile),
                                      CONNECTIONS_TABLE.print)
    if "recovery" in curves:
        result["recovery"] = recovery_curve([float(g) for g in args.gb.split(",")])
    result["load_average_end"] = os.getloadavg()[0]
    print(json.dumps(rounded(result)))


def curve(points: tuple[int, ...], measure: Callable[[int], dict],
          show: Callable[..., None]) -> list[dict]:
    """``measure`` at each point, each row shown as soon as it is measured."""
    rows: list[dict] = []
    for n in points:
        rows.append(measure(n))
        show(rows[-1:], header=len(rows) == 1)
    return rows


def rounded(value):
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [rounded(v) for v in value]
    return value


if __name__ == "__main__":
    main()
