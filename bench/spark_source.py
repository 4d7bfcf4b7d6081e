"""PySpark read benchmark: the `rmqkafka` Python data source (and Spark's built-in Kafka
source when its jars are available), batch-reading the same topic in the same run.

Usage:  python -m bench.spark_source [--records 1000000] [--partitions 4]

The built-in source runs only when SPARK_KAFKA_JARS names the jars of Spark's Kafka connector
(spark-sql-kafka-0-10, its token provider, kafka-clients, commons-pool2), as in
tests/spark/test_builtin_kafka_source.py. Each source reads the whole topic into Spark's noop
sink twice; the second (warm) run is reported. Target: the data source at >= 0.5x the
built-in source.
"""

from __future__ import annotations

import argparse
import os
import re
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from .common import start_broker


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000,
                         "queue.buffering.max.messages": 2_000_000})
    value = b"v" * 100
    for i in range(records):
        while True:
            try:
                producer.produce(topic, value, key=str(i).encode(), partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)


def timed_read(spark, fmt: str, bootstrap: str, topic: str) -> float:
    began = time.perf_counter()
    (spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
     .load().write.format("noop").mode("overwrite").save())
    return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from rmqkafka import spark_connector

    spark_connector.use_this_python_for_workers()
    jars = [j for j in re.split(r"[:,]", os.environ.get("SPARK_KAFKA_JARS", "")) if j]
    builder = (SparkSession.builder.master("local[2]").appName("rmqk-bench")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    broker = start_broker(flush="async")
    spark = builder.getOrCreate()
    try:
        spark_connector.register(spark)
        topic = "bench-spark"
        began = time.perf_counter()
        produce(broker.bootstrap, topic, args.records, args.partitions)
        print(f"produced {args.records} x 100 B records on {args.partitions} partitions in "
              f"{time.perf_counter() - began:.1f} s", flush=True)
        sources = [("rmqkafka (Python data source)", "rmqkafka")]
        if jars:
            sources.append(("kafka (Spark built-in)", "kafka"))
        results = {}
        for label, fmt in sources:
            timed_read(spark, fmt, broker.bootstrap, topic)  # warm-up: JVM, Python workers
            seconds = timed_read(spark, fmt, broker.bootstrap, topic)
            results[label] = args.records / seconds
            print(f"{label:32} {results[label]:12.0f} rows/s  ({seconds:.2f} s)", flush=True)
        if len(results) == 2:
            ours, builtin = results.values()
            print(f"{'ratio (target >= 0.5)':32} {ours / builtin:12.2f}")
        else:
            print("built-in source not measured: set SPARK_KAFKA_JARS to its jars to compare")
    finally:
        spark.stop()
        broker.stop()


if __name__ == "__main__":
    main()
