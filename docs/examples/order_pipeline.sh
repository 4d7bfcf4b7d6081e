python -m rmqkafka.spark_connector.examples.order_pipeline           # starts its own broker (zero set-up)
python -m rmqkafka.spark_connector.examples.order_pipeline --bootstrap-servers localhost:9092
python -m rmqkafka.spark_connector.examples.order_pipeline --streaming --max-offsets-per-trigger 500
