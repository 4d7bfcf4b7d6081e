"""One large request per API (tens of thousands of entries, as a hostile client sends them):
how long its answer takes, and the longest another client waits meanwhile for ApiVersions.

The broker handles, builds and encodes a request's answer on its one event loop; where any of
that is not split into turns, every other client waits as long (found by the hostile sweep,
tests/integration/test_hostile_sweep.py, which keeps its requests to a few thousand entries).

``python -m bench.large_requests [--entries 100000] [--only NAME]`` starts one broker, then for
each case sends one request (encoded beforehand) and reads its answer, while a second
connection sends ApiVersions every 20 ms. Prints one line per case.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from kio.index import load_request_schema

from .reliability_common import broker, raw


def cases(n: int) -> dict[str, tuple[int, int, dict]]:
    """name -> (api key, version, fields): the entries are ``n`` (configs: ``n // 10``)."""
    return {
        "Metadata v12": (3, 12, dict(topics=[dict(name=f"n{i}", topic_id=None) for i in range(n)],
                                     allow_auto_topic_creation=False, include_topic_authorized_operations=True)),
        "DescribeGroups v5": (15, 5, dict(groups=[f"g{i}" for i in range(n)], include_authorized_operations=True)),
        "OffsetFetch v7": (9, 7, dict(group_id="g", topics=[dict(name="t", partition_indexes=list(range(n)))],
                                      require_stable=False)),
        "ListOffsets v7": (2, 7, dict(replica_id=-1, isolation_level=0, topics=[dict(name="t", partitions=[
            dict(partition_index=i, current_leader_epoch=-1, timestamp=-1) for i in range(n)])])),
        "DescribeConfigs v4 (one broker named n/10 times)": (32, 4, dict(
            resources=[dict(resource_type=4, resource_name="0", configuration_keys=None)] * (n // 10),
            include_synonyms=True, include_documentation=True)),
        "DeleteTopics v6": (20, 6, dict(topics=[dict(name=f"n{i}", topic_id=None) for i in range(n)], timeout=1000)),
        "FindCoordinator v4": (10, 4, dict(key_type=0, coordinator_keys=[f"g{i}" for i in range(n)])),
        "ShareGroupDescribe v1": (77, 1, dict(group_ids=[f"s{i}" for i in range(n)],
                                              include_authorized_operations=True)),
        "ConsumerGroupDescribe v1": (69, 1, dict(group_ids=[f"c{i}" for i in range(n)],
                                                 include_authorized_operations=True)),
        "DescribeProducers v0": (61, 0, dict(topics=[dict(name="t", partition_indexes=list(range(n)))])),
        "DescribeTopicPartitions v0": (75, 0, dict(topics=[dict(name=f"n{i}") for i in range(n)],
                                                   response_partition_limit=2000, cursor=None)),
        "DescribeTransactions v0": (65, 0, dict(transactional_ids=[f"x{i}" for i in range(n)])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home, broker(Path(home) / "data") as b:
        conn = raw.KafkaRaw(b.host, b.port, timeout=300)
        conn.create_topic("t")
        other = raw.KafkaRaw(b.host, b.port, timeout=300)
        worst = [0.0]
        stop = threading.Event()

        def ping() -> None:
            while not stop.is_set():
                began = time.monotonic()
                other.api_versions()
                worst[0] = max(worst[0], time.monotonic() - began)
                time.sleep(0.02)

        pinger = threading.Thread(target=ping, daemon=True)
        pinger.start()
        try:
            for name, (key, version, fields) in cases(args.entries).items():
                if args.only not in name:
                    continue
                frame = raw.encode_request(key, version, 5, raw.build(load_request_schema(key, version), **fields))
                time.sleep(0.2)
                worst[0] = 0.0
                began = time.monotonic()
                conn.send_raw(frame)
                answer = conn.recv_frame(300)
                print(f"{name}: {len(frame) >> 10} KB request, {len(answer) >> 10} KB answer in "
                      f"{time.monotonic() - began:.2f} s; another client waited at most {worst[0] * 1000:.0f} ms",
                      flush=True)
        finally:
            stop.set()
            pinger.join()


if __name__ == "__main__":
    main()
