"""Share consumption through ShareFetch/ShareAcknowledge against a broker process, with the raw
protocol client (no share consumer library yet: ShareGroupHeartbeat is another increment).

    python -m bench.share_fetch_raw [--records N] [--members M]

One partition of N records of 100 B (batches of 1000). Three passes over the same data, each
by a fresh group, printing records/s and broker CPU microseconds per record (utime + stime of
the broker process from /proc):

- ``fetch``: a classic Fetch loop (1 MiB per request), the baseline;
- ``share implicit``: one member, ShareFetch of 500 records, each fetch accepting the
  previous one's records with one range (what librdkafka's implicit mode sends);
- ``share explicit xM``: M members on the one partition, each accepting every record with its
  own single-offset batch in a ShareAcknowledge (librdkafka's explicit mode).

Every pass decodes the records it receives, so the client's work is alike.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid

from bench.reliability_common import raw
from rmqkafka.adapter.embedded import EmbeddedBroker

GROUP_RESOURCE = 32
PAGE = 500


TOPIC = "bench-share"


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def earliest(conn, group: str) -> None:
    """Start the group at the beginning, and have a member join it subscribed to the topic:
    share-partition state is made only for partitions the coordinator assigns."""
    conn.request(44, 1, validate_only=False, resources=[dict(
        resource_type=GROUP_RESOURCE, resource_name=group,
        configs=[dict(name="share.auto.offset.reset", config_operation=0, value="earliest")])])
    joined = conn.request(76, 1, group_id=group, member_id="bench-keeper", member_epoch=0,
                          subscribed_topic_names=(TOPIC,))
    assert joined.error_code == 0, joined


def share_fetch(conn, group, member, epoch, tid, acks=()):
    return conn.request(78, 1, group_id=group, member_id=member, share_session_epoch=epoch, max_wait=500,
                        min_bytes=1, max_bytes=52428800, max_records=PAGE, batch_size=PAGE,
                        topics=[dict(topic_id=tid, partitions=[dict(partition_index=0, acknowledgement_batches=[
                            dict(first_offset=f, last_offset=l, acknowledge_types=[1]) for f, l in acks])])],
                        forgotten_topics_data=[])


def acquired_offsets(response) -> list[int]:
    out = []
    for topic in response.responses:  # an incremental answer leaves out partitions with nothing
        for part in topic.partitions:
            raw.decode_records(part.records)
            out += [o for r in part.acquired_records for o in range(r.first_offset, r.last_offset + 1)]
    return out


def run_fetch(bootstrap: str, topic: str, total: int) -> None:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        offset = 0
        while offset < total:
            entry = conn.fetch(topic, 0, offset, max_bytes=1 << 20, partition_max_bytes=1 << 20)
            offset = raw.decode_records(entry.records)[-1].offset + 1


def run_implicit(bootstrap: str, tid: uuid.UUID, group: str, total: int) -> None:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        earliest(conn, group)
        seen, epoch, held = 0, 0, []
        while seen < total:
            got = acquired_offsets(share_fetch(conn, group, "m", epoch, tid, [(held[0], held[-1])] if held else ()))
            epoch += 1
            held = got
            seen += len(got)
        share_fetch(conn, group, "m", epoch, tid, [(held[0], held[-1])] if held else ())


def run_explicit(bootstrap: str, tid: uuid.UUID, group: str, total: int, members: int) -> None:
    with raw.KafkaRaw.connect(bootstrap) as conn:
        earliest(conn, group)
    seen = [0]
    lock = threading.Lock()

    def member(name: str) -> None:
        with raw.KafkaRaw.connect(bootstrap) as conn:
            epoch = 0
            while True:
                with lock:
                    if seen[0] >= total:
                        return
                got = acquired_offsets(share_fetch(conn, group, name, epoch, tid))
                epoch += 1
                if got:
                    conn.request(79, 1, group_id=group, member_id=name, share_session_epoch=epoch, topics=[dict(
                        topic_id=tid, partitions=[dict(partition_index=0, acknowledgement_batches=[
                            dict(first_offset=o, last_offset=o, acknowledge_types=[1]) for o in got])])])
                    epoch += 1
                with lock:
                    seen[0] += len(got)

    threads = [threading.Thread(target=member, args=(f"m{i}",)) for i in range(members)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--members", type=int, default=4)
    args = parser.parse_args()
    total = args.records - args.records % 1000
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        with raw.KafkaRaw.connect(bootstrap) as conn:
            conn.create_topic(TOPIC, 1)
            for _ in range(0, total, 1000):
                conn.produce_ok(TOPIC, 0, raw.make_batch([b"x" * 100] * 1000))
            tid = conn.metadata([TOPIC], version=12).topics[0].topic_id
        passes = [
            ("fetch", lambda: run_fetch(bootstrap, TOPIC, total)),
            ("share implicit", lambda: run_implicit(bootstrap, tid, "bench-implicit", total)),
            (f"share explicit x{args.members}",
             lambda: run_explicit(bootstrap, tid, "bench-explicit", total, args.members)),
        ]
        for name, run in passes:
            cpu, began = cpu_seconds(broker.pid), time.perf_counter()
            run()
            wall, used = time.perf_counter() - began, cpu_seconds(broker.pid) - cpu
            print(f"{name:>20}: {total / wall:>9,.0f} records/s, broker CPU {used / total * 1e6:5.1f} us/record")


if __name__ == "__main__":
    main()
