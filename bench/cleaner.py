"""Log cleaner benchmark: MB/s cleaned, write amplification, memory per million keys.

Usage:  python -m bench.cleaner [--keys N] [--value-bytes B] [--update-rounds R]

A broker process (``--metrics-port 0``, cleaner backoff 200 ms, a key map of 400 bytes per
key) and a compacted topic of one
partition, written with confluent-kafka:

1. ``--keys`` distinct keys, each written twice, while ``segment.ms`` is a day (nothing is
   cleanable). Then ``segment.ms`` goes to 1 (IncrementalAlterConfigs) and one more record
   makes everything before it cleanable: the first cleaning maps every key. Reported: its
   MB/s (bytes of batches read / the cleaning's time, from ``rmqk_cleaner_*``) and the
   broker's peak RSS during it less its RSS before, per million keys (psutil, sampled every
   20 ms).
2. ``--update-rounds`` rounds, each updating a tenth of the keys (at random) and waiting
   for the cleaning it triggers. Reported: write amplification, (bytes the producer
   appended + bytes the cleaner wrote) / bytes the producer appended, over the whole run,
   and the cleaner's bytes written per byte produced in the update rounds alone (each
   cleaning copies the clean part again, as Kafka's cleaner does).

Prints a table and one JSON line (``{"bench": "cleaner", ...}``).
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from .common import produce_when_room


def metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as response:
        text = response.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(("rmqk_cleaner_", "rmqk_commitlog_size_bytes")) and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def produce(bootstrap: str, topic: str, pairs, value_bytes: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                         "queue.buffering.max.messages": 1_000_000, "log_level": 0})
    pad = b"x" * max(0, value_bytes - 12)
    for key, version in pairs:
        produce_when_room(producer, topic, key=key, value=b"%010d" % version + pad)
        producer.poll(0)
    assert producer.flush(300) == 0


def wait_runs(url: str, runs: int, timeout: float = 600) -> dict[str, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = metrics(url)
        if m.get("rmqk_cleaner_runs_total", 0) >= runs:
            return m
        time.sleep(0.1)
    raise TimeoutError(f"the cleaner did not reach {runs} runs")


def alter(bootstrap: str, topic: str, configs: dict[str, str]) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--update-rounds", type=int, default=3)
    args = parser.parse_args()

    import psutil
    from confluent_kafka.admin import AdminClient, NewTopic

    from rmqkafka.adapter.embedded import EmbeddedBroker

    data = Path(tempfile.mkdtemp(prefix="rmqk-bench-cleaner-"))
    config = data / "server.properties"
    # a key map big enough for every key: the first cleaning maps them all in one go
    config.write_text(f"log.cleaner.backoff.ms=200\nlog.cleaner.dedupe.buffer.size={max(1 << 20, 400 * args.keys)}\n")
    broker = EmbeddedBroker(data_dir=data / "data", config_file=config, args=["--metrics-port", "0"])
    with broker:
        bootstrap, url = broker.bootstrap_servers, broker.metrics_url
        topic = f"cleaner-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        admin.create_topics([NewTopic(topic, 1, config={
            "cleanup.policy": "compact", "segment.ms": str(86_400_000), "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "600000"})])[topic].result(30)
        keys = [b"key-%012d" % k for k in range(args.keys)]
        began = time.perf_counter()
        produce(bootstrap, topic, ((k, 0) for k in keys), args.value_bytes)
        produce(bootstrap, topic, ((k, 1) for k in keys), args.value_bytes)
        produce_s = time.perf_counter() - began
        process = psutil.Process(broker.pid)
        time.sleep(1.0)
        before_rss = process.memory_info().rss
        peak = [before_rss]
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peak[0] = max(peak[0], process.memory_info().rss)
                time.sleep(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        alter(bootstrap, topic, {"segment.ms": "1"})
        produce(bootstrap, topic, [(b"sentinel", 0)], args.value_bytes)
        first = wait_runs(url, 1)
        stop.set()
        sampler.join()
        produced_first = first["rmqk_commitlog_size_bytes"]
        read_mb = first["rmqk_cleaner_read_bytes_total"] / 1e6
        first_seconds = first["rmqk_cleaner_seconds_total"]
        rng = random.Random(1)
        runs = 1
        update_written = 0.0
        last = first
        for round_ in range(args.update_rounds):
            chosen = rng.sample(keys, max(1, args.keys // 10))
            produce(bootstrap, topic, ((k, 2 + round_) for k in chosen), args.value_bytes)
            time.sleep(0.05)
            produce(bootstrap, topic, [(b"sentinel", 1 + round_)], args.value_bytes)
            runs += 1
            m = wait_runs(url, runs)
            update_written += m["rmqk_cleaner_written_bytes_total"] - last["rmqk_cleaner_written_bytes_total"]
            last = m
        produced = last["rmqk_commitlog_size_bytes"]
        update_produced = produced - produced_first
        result = {
            "bench": "cleaner",
            "keys": args.keys,
            "records_first_cleaning": 2 * args.keys + 1,
            "value_bytes": args.value_bytes,
            "produce_s": round(produce_s, 2),
            "first_cleaning_s": round(first_seconds, 2),
            "first_cleaning_mb_read": round(read_mb, 1),
            "cleaned_mb_per_s": round(read_mb / first_seconds, 1) if first_seconds else None,
            "rss_before_mb": round(before_rss / 2**20, 1),
            "rss_peak_mb": round(peak[0] / 2**20, 1),
            "memory_per_million_keys_mb": round((peak[0] - before_rss) / 2**20 / args.keys * 1e6, 1),
            "write_amplification": round((produced + last["rmqk_cleaner_written_bytes_total"]) / produced, 2),
            "update_rounds": args.update_rounds,
            "cleaner_bytes_per_update_byte": round(update_written / update_produced, 2) if update_produced else None,
            "cleaner_mb_per_s_overall": round(last["rmqk_cleaner_read_bytes_total"] / 1e6
                                              / last["rmqk_cleaner_seconds_total"], 1),
        }
    for key, value in result.items():
        if key != "bench":
            print(f"{key:32} {value}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
