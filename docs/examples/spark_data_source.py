from pyspark.sql import SparkSession

from rmqkafka import spark_connector

spark_connector.use_this_python_for_workers()        # else workers run `python3` from PATH
spark = SparkSession.builder.master("local[2]").appName("copy-orders").getOrCreate()
spark_connector.register(spark)                       # once per SparkSession

df = (spark.read.format("rmqkafka")                   # or spark.readStream
      .option("kafka.bootstrap.servers", "localhost:9092")
      .option("subscribe", "orders")                  # or subscribePattern / assign
      .option("includeHeaders", "true")
      .load())                                        # the built-in source's schema

(df.selectExpr("key", "value").write.format("rmqkafka")
   .option("kafka.bootstrap.servers", "localhost:9092").option("topic", "copy")
   .mode("append").save())                            # Python sources have no ErrorIfExists mode
print(f"copied {df.count()} records")
spark.stop()
