"""Share-partition acknowledgements through ``__share_group_state`` (no protocol yet).

    python -m bench.share_state_acks [--records N] [--per-ack K]

One share-partition on a real MessageStore in a temporary directory: records acquired 500
at a time and accepted K per acknowledgement, each acknowledgement one update record
appended to the state topic (no fsync: the store's default flush). Prints records/s and how
many state records were written.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rmqkafka.rmqsemantics.share.config import ShareGroupSettings
from rmqkafka.rmqsemantics.share.partition import AckBatch, SharePartition
from rmqkafka.rmqsemantics.share.state_log import TOPIC
from rmqkafka.rmqsemantics.share.state_store import ShareStateStore
from rmqkafka.storage.clock import SystemClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

KEY = ("bench", "t", 0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--per-ack", type=int, default=1)
    args = parser.parse_args()
    clock = SystemClock()
    with tempfile.TemporaryDirectory() as tmp:
        store = MessageStore(StorageConfig(data_dir=Path(tmp) / "data"), clock)
        store.open()
        state = ShareStateStore(store, clock)
        state.open()
        state.initialize(KEY, 0)
        sp = SharePartition(ShareGroupSettings(), clock, 0, persist=state.persister(KEY))
        n, per, done = args.records, args.per_ack, 0
        started = time.perf_counter()
        while done < n:
            for r in sp.acquire("m", n, 500):
                for first in range(r.first_offset, r.last_offset + 1, per):
                    sp.acknowledge("m", [AckBatch(first, min(first + per - 1, r.last_offset), (1,))])
                done += r.last_offset - r.first_offset + 1
        took = time.perf_counter() - started
        written = store.partition(TOPIC, 0).next_offset
        print(f"{n} records, {per} per acknowledgement: {took:.2f} s, {n / took:,.0f} records/s, "
              f"{written} state records")
        store.close_sync()


if __name__ == "__main__":
    main()
