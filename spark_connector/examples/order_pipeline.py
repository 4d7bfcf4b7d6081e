"""Example pipeline: tagged order events -> Spark (``rmqkafka`` source) -> per-tag window stats.

    python -m rmqkafka.spark_connector.examples.order_pipeline                  # zero set-up
    python -m rmqkafka.spark_connector.examples.order_pipeline --bootstrap-servers 127.0.0.1:9092
    python -m rmqkafka.spark_connector.examples.order_pipeline --master spark://spark-master:7077 \\
        --bootstrap-servers broker:9092                                 # a Spark cluster

Steps:

1. Produce ``--orders`` order events to the ``orders`` topic (confluent-kafka): key = the
   customer, value = JSON ``{"order_id", "customer", "amount", "event_time"}`` (amount a
   2-decimal number, event_time epoch milliseconds, also the record timestamp), and the
   RocketMQ ``TAGS`` header = the category (``book``, ``food``, ``toy``, ...). Event times are
   spread evenly over ``--span-seconds`` from a fixed start, so the windows are reproducible.
2. Read exactly those records back with Spark through the ``rmqkafka`` source
   (``includeHeaders``; ``startingOffsets``/``endingOffsets`` are the offsets taken before and
   after producing, so earlier runs against the same broker do not count), take the tag from
   the headers, and aggregate ``count`` and ``sum(amount)`` per tag and tumbling event-time
   ``--window``.
3. Write one JSON record per (window, tag) to the ``order-stats`` topic through the
   ``rmqkafka`` sink (key ``TAG@WINDOW_START``). With ``--streaming`` steps 2-3 are a
   streaming query (``Trigger.AvailableNow``, optionally ``--max-offsets-per-trigger``, a
   temporary checkpoint) whose ``foreachBatch`` aggregates each micro-batch and writes it with
   the batch sink: Python data source sinks support only the ``append`` output mode, so a
   window spanning several micro-batches is written as several partial records (each with
   its ``batch_id``) that add up. The sink is at-least-once, so a retried micro-batch may
   write its partials twice (the check would then fail, visibly).
4. Read ``order-stats`` back (again by offsets), add up the records per key, and print a
   summary table per tag.
5. Read the orders of one tag (``--view-tag``, default the first tag) with the source's
   ``tags`` option: the broker filters them through a subscription view, and only that
   tag's records reach Spark. Then the check line: the totals read back, and the one tag's
   orders through the view, must equal what was produced (``check: OK``; exit status 0),
   else ``check: FAILED`` and exit status 1.

Broker: ``--bootstrap-servers`` if given; otherwise an :class:`rmqkafka.adapter.embedded.EmbeddedBroker`
is started (and stopped) by this script on 127.0.0.1 with a temporary data directory, so it
runs with nothing but ``pip install -e ".[spark]"`` and Java 17. The embedded broker is only
reachable from this machine, so a ``spark://`` master requires ``--bootstrap-servers``.

Spark cluster: the Python workers must be able to import ``spark_connector``. Either install
the package on every worker (``pip install "rmqkafka[spark]"``; the compose/ image does) or
pass ``--ship-package``, which zips ``spark_connector`` and adds it with ``addPyFile``
(``spark_connector`` imports only the standard library, confluent-kafka and pyarrow, which
the workers then still need). The driver must be reachable from the executors (use
``--conf spark.driver.host=NAME`` in containers).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import rmqkafka
from rmqkafka import spark_connector

DEFAULT_CATEGORIES = "book,food,toy"
START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: fixed, so windows are reproducible
TAGS_HEADER = "TAGS"


@dataclass
class Produced:
    orders: int
    amount: Decimal
    per_tag: dict[str, tuple[int, Decimal]]


# --------------------------------------------------------------------------- arguments


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m rmqkafka.spark_connector.examples.order_pipeline",
        description="Tagged order events -> Spark (rmqkafka source) -> per-tag window stats.",
    )
    ap.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                    help="broker to use; default: start an embedded broker on 127.0.0.1")
    ap.add_argument("--master", default="local[*]", help="Spark master [local[*]]")
    ap.add_argument("--orders", type=int, default=1000, help="order events to produce [1000]")
    ap.add_argument("--window", default="10 seconds", help="tumbling window ['10 seconds']")
    ap.add_argument("--span-seconds", type=float, default=60.0,
                    help="event times are spread over this many seconds [60]")
    ap.add_argument("--categories", default=DEFAULT_CATEGORIES,
                    help=f"comma-separated TAGS values [{DEFAULT_CATEGORIES}]")
    ap.add_argument("--orders-topic", default="orders")
    ap.add_argument("--stats-topic", default="order-stats")
    ap.add_argument("--view-tag", default=None,
                    help="the tag step 5 reads through a broker-side view [the first tag]")
    ap.add_argument("--partitions", type=int, default=3,
                    help="partitions of the orders topic when it is created [3]")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--streaming", action="store_true",
                    help="run steps 2-3 as a streaming query with Trigger.AvailableNow")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None,
                    help="with --streaming: maxOffsetsPerTrigger (several micro-batches)")
    ap.add_argument("--ship-package", action="store_true",
                    help="zip spark_connector and addPyFile it (cluster without the package)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="extra Spark configuration (repeatable)")
    ap.add_argument("--max-rows", type=int, default=20,
                    help="window rows to print before the per-tag summary [20]")
    args = ap.parse_args(argv)
    if args.orders < 1:
        ap.error("--orders must be >= 1")
    if args.partitions < 1:
        ap.error("--partitions must be >= 1")
    categories = [c.strip() for c in args.categories.split(",") if c.strip()]
    if not categories:
        ap.error("--categories must name at least one tag")
    args.category_list = categories
    if args.bootstrap_servers is None and not args.master.startswith("local"):
        ap.error("a non-local --master needs --bootstrap-servers reachable from the workers "
                 "(the embedded broker listens on 127.0.0.1 only)")
    for item in args.conf:
        if "=" not in item:
            ap.error(f"--conf expects KEY=VALUE, got {item!r}")
    return args


# --------------------------------------------------------------------------- broker side


@contextlib.contextmanager
def broker_address(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from rmqkafka.adapter.embedded import EmbeddedBroker

    with EmbeddedBroker() as broker:
        print(f"started an embedded broker on {broker.bootstrap_servers}", flush=True)
        yield broker.bootstrap_servers


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> int:
    """Create ``topic`` unless it exists; return its partition count."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = admin.list_topics(timeout=15).topics
    if topic not in existing:
        future = admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=15)[topic]
        try:
            future.result(timeout=20)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    deadline = time.monotonic() + 15
    while True:
        meta = admin.list_topics(topic=topic, timeout=15).topics.get(topic)
        if meta is not None and meta.error is None and meta.partitions:
            return len(meta.partitions)
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic!r} did not appear in the metadata")
        time.sleep(0.2)


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[str, int]:
    """The current end (high watermark) of every partition, in Spark's JSON offset form."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "order-pipeline-offsets",
                         "enable.auto.commit": False})
    try:
        return {
            str(p): consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=15)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


def produce_orders(args: argparse.Namespace, bootstrap: str) -> Produced:
    from confluent_kafka import Producer

    rng = random.Random(args.seed)
    customers = [f"customer-{i:03d}" for i in range(max(1, min(50, args.orders // 5)))]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all",
                         "enable.idempotence": True})
    failures: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None:
            failures.append(str(err))

    per_tag: dict[str, list[Any]] = defaultdict(lambda: [0, Decimal("0.00")])
    total = Decimal("0.00")
    step_ms = args.span_seconds * 1000.0 / args.orders
    for i in range(args.orders):
        tag = rng.choice(args.category_list)
        customer = rng.choice(customers)
        amount = Decimal(rng.randint(100, 50_000)) / 100  # 1.00 .. 500.00
        event_ms = START_MS + int(i * step_ms)
        value = json.dumps({"order_id": f"order-{i:07d}", "customer": customer,
                            "amount": float(amount), "event_time": event_ms})
        producer.produce(args.orders_topic, key=customer.encode(), value=value.encode(),
                         headers=[(TAGS_HEADER, tag.encode())], timestamp=event_ms,
                         on_delivery=on_delivery)
        producer.poll(0)
        per_tag[tag][0] += 1
        per_tag[tag][1] += amount
        total += amount
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"produce failed: {remaining} undelivered, errors: {failures[:3]}")
    return Produced(args.orders, total, {t: (c, a) for t, (c, a) in per_tag.items()})


# --------------------------------------------------------------------------- Spark side


def zip_package(dest_dir: Path) -> Path:
    """``rmqkafka/__init__.py`` and ``rmqkafka/spark_connector/``: what executors import."""
    out = dest_dir / "rmqkafka-spark-connector.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(rmqkafka.__file__, "rmqkafka/__init__.py")
        pkg = Path(spark_connector.__file__).resolve().parent
        for path in sorted(pkg.rglob("*.py")):
            zf.write(path, Path("rmqkafka/spark_connector") / path.relative_to(pkg))
    return out


def spark_session(args: argparse.Namespace, workdir: Path) -> Any:
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.appName("rmqkafka-order-pipeline").master(args.master)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # keep stdout for the summary
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "4")
    )
    for item in args.conf:
        key, _, value = item.partition("=")
        builder = builder.config(key.strip(), value.strip())
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if args.ship_package:
        spark.sparkContext.addPyFile(str(zip_package(workdir)))
    spark_connector.register(spark)
    return spark


def order_stats(orders_df: Any, window: str, batch_id: int | None = None) -> Any:
    """Raw ``rmqkafka`` rows (with headers) -> one row per (window, tag): key, value (JSON)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        DecimalType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    schema = StructType([
        StructField("order_id", StringType()),
        StructField("customer", StringType()),
        StructField("amount", DecimalType(12, 2)),
        StructField("event_time", LongType()),
    ])
    tag = F.expr(f"element_at(filter(headers, h -> h.key = '{TAGS_HEADER}'), 1).value")
    orders = orders_df.select(
        F.from_json(F.col("value").cast("string"), schema).alias("o"),
        F.coalesce(tag.cast("string"), F.lit("(untagged)")).alias("tag"),
    ).select("o.*", "tag").withColumn("event_time", F.timestamp_millis("event_time"))
    stats = orders.groupBy(F.window("event_time", window).alias("w"), "tag").agg(
        F.count(F.lit(1)).alias("orders"), F.sum("amount").alias("amount")
    )
    fmt = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    start = F.date_format("w.start", fmt)
    fields = [
        F.col("tag"), start.alias("window_start"), F.date_format("w.end", fmt).alias("window_end"),
        F.col("orders"), F.col("amount").cast("string").alias("amount"),
    ]
    if batch_id is not None:
        fields.append(F.lit(batch_id).alias("batch_id"))
    return stats.select(
        F.concat_ws("@", "tag", start).alias("key"), F.to_json(F.struct(*fields)).alias("value")
    )


def run_spark(args: argparse.Namespace, bootstrap: str, spark: Any, workdir: Path,
              starting: dict[str, int], ending: dict[str, int]) -> int:
    """Steps 2-3; returns the number of micro-batches (1 in batch mode)."""
    reader = spark.readStream if args.streaming else spark.read
    source = (
        reader.format("rmqkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", args.orders_topic)
        .option("includeHeaders", "true")
        .option("startingOffsets", json.dumps({args.orders_topic: starting}))
    )

    def write(df: Any) -> None:
        (df.write.format("rmqkafka").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", args.stats_topic).mode("append").save())

    if not args.streaming:
        source = source.option("endingOffsets", json.dumps({args.orders_topic: ending}))
        write(order_stats(source.load(), args.window))
        return 1
    if args.max_offsets_per_trigger:
        source = source.option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
    batches: list[int] = []

    def per_batch(df: Any, batch_id: int) -> None:
        write(order_stats(df, args.window, batch_id))
        batches.append(batch_id)

    query = (
        source.load().writeStream.foreachBatch(per_batch)
        .option("checkpointLocation", str(workdir / "checkpoint"))
        .trigger(availableNow=True).start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"streaming query failed: {query.exception()}")
    return len(batches)


def read_one_tag(args: argparse.Namespace, bootstrap: str, spark: Any, tag: str,
                 starting: dict[str, int], ending: dict[str, int]) -> tuple[int, Decimal]:
    """(orders, amount) of one tag, read through a broker-side view (option ``tags``)."""
    rows = (
        spark.read.format("rmqkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", args.orders_topic)
        .option("tags", tag)
        .option("startingOffsets", json.dumps({args.orders_topic: starting}))
        .option("endingOffsets", json.dumps({args.orders_topic: ending}))
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .collect()
    )
    amounts = [Decimal(str(json.loads(r["value"])["amount"])).quantize(Decimal("0.01")) for r in rows]
    return len(amounts), sum(amounts, Decimal("0.00"))


def read_stats(args: argparse.Namespace, bootstrap: str, spark: Any,
               starting: dict[str, int], ending: dict[str, int]) -> list[dict[str, Any]]:
    """Per (window, tag) key, the records this run wrote to the stats topic, added up."""
    rows = (
        spark.read.format("rmqkafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", args.stats_topic)
        .option("startingOffsets", json.dumps({args.stats_topic: starting}))
        .option("endingOffsets", json.dumps({args.stats_topic: ending}))
        .load()
        .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value")
        .collect()
    )
    merged: dict[str, dict[str, Any]] = {}
    for row in rows:
        record = json.loads(row["value"])
        entry = merged.setdefault(row["key"], {
            "tag": record["tag"], "window_start": record["window_start"],
            "orders": 0, "amount": Decimal("0.00"), "records": 0,
        })
        entry["orders"] += int(record["orders"])
        entry["amount"] += Decimal(record["amount"])
        entry["records"] += 1
    return list(merged.values())


# --------------------------------------------------------------------------- summary


def summarize(args: argparse.Namespace, produced: Produced, stats: list[dict[str, Any]]) -> bool:
    stats.sort(key=lambda s: (s["window_start"], s["tag"]))
    print(f"\norder-stats ({len(stats)} rows: tag x {args.window} window)")
    print(f"{'window_start':<22}{'tag':<12}{'orders':>8}{'amount':>14}")
    for s in stats[: args.max_rows]:
        print(f"{s['window_start']:<22}{s['tag']:<12}{s['orders']:>8}{s['amount']:>14}")
    if len(stats) > args.max_rows:
        print(f"... {len(stats) - args.max_rows} more rows")

    per_tag: dict[str, list[Any]] = defaultdict(lambda: [0, 0, Decimal("0.00")])
    for s in stats:
        entry = per_tag[s["tag"]]
        entry[0] += 1
        entry[1] += int(s["orders"])
        entry[2] += Decimal(s["amount"])
    print("\nper tag (from order-stats)      produced")
    print(f"{'tag':<12}{'windows':>8}{'orders':>8}{'amount':>14}{'orders':>8}{'amount':>14}")
    ok = True
    for tag in sorted(set(per_tag) | set(produced.per_tag)):
        windows, count, amount = per_tag.get(tag, [0, 0, Decimal("0.00")])
        p_count, p_amount = produced.per_tag.get(tag, (0, Decimal("0.00")))
        ok &= (count, amount) == (p_count, p_amount)
        print(f"{tag:<12}{windows:>8}{count:>8}{amount:>14}{p_count:>8}{p_amount:>14}")
    total_orders = sum(v[1] for v in per_tag.values())
    total_amount = sum((v[2] for v in per_tag.values()), Decimal("0.00"))
    ok &= (total_orders, total_amount) == (produced.orders, produced.amount)
    print(f"\nproduced: orders={produced.orders} amount={produced.amount}")
    records = sum(s["records"] for s in stats)
    print(f"order-stats: orders={total_orders} amount={total_amount} rows={len(stats)} "
          f"records={records}")
    return ok


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.master.startswith("local"):
        spark_connector.use_this_python_for_workers()
    workdir = Path(tempfile.mkdtemp(prefix="rmqk-order-pipeline-"))
    spark = None
    try:
        with broker_address(args.bootstrap_servers) as bootstrap:
            orders_parts = ensure_topic(bootstrap, args.orders_topic, args.partitions)
            stats_parts = ensure_topic(bootstrap, args.stats_topic, 1)
            before = end_offsets(bootstrap, args.orders_topic, orders_parts)
            t0 = time.monotonic()
            produced = produce_orders(args, bootstrap)
            after = end_offsets(bootstrap, args.orders_topic, orders_parts)
            print(f"produced {produced.orders} orders to {args.orders_topic!r} "
                  f"({orders_parts} partitions) in {time.monotonic() - t0:.2f}s", flush=True)

            spark = spark_session(args, workdir)
            stats_before = end_offsets(bootstrap, args.stats_topic, stats_parts)
            t0 = time.monotonic()
            batches = run_spark(args, bootstrap, spark, workdir, before, after)
            stats_after = end_offsets(bootstrap, args.stats_topic, stats_parts)
            mode = (f"streaming (availableNow, {batches} micro-batches)" if args.streaming
                    else "batch")
            print(f"spark {mode} on {args.master}: aggregated into {args.stats_topic!r} "
                  f"in {time.monotonic() - t0:.2f}s", flush=True)
            stats = read_stats(args, bootstrap, spark, stats_before, stats_after)
            ok = summarize(args, produced, stats)
            tag = args.view_tag or sorted(produced.per_tag)[0]
            got = read_one_tag(args, bootstrap, spark, tag, before, after)
            want = produced.per_tag.get(tag, (0, Decimal("0.00")))
            print(f"tag {tag!r} through a broker-side view: orders={got[0]} amount={got[1]} "
                  f"(produced {want[0]} / {want[1]})")
            ok &= got == tuple(want)
            print(f"check: {'OK' if ok else 'FAILED'}", flush=True)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
