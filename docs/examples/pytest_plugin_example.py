from kafka import KafkaConsumer, KafkaProducer


def test_round_trip(rmqkafka_broker, rmqkafka_topic):      # session broker, fresh topic
    producer = KafkaProducer(bootstrap_servers=rmqkafka_broker.bootstrap_servers)
    producer.send(rmqkafka_topic, b"hello").get(timeout=10)
    consumer = KafkaConsumer(rmqkafka_topic, bootstrap_servers=rmqkafka_broker.bootstrap_servers,
                             auto_offset_reset="earliest", consumer_timeout_ms=30000)
    assert next(consumer).value == b"hello"   # returns as soon as the record is there


def test_crash(rmqkafka_broker_factory, rmqkafka_admin):
    broker = rmqkafka_broker_factory(flush="sync", properties={"num.partitions": 3})
    broker.kill(); broker.restart()                           # recovery on the same data dir
    orders = rmqkafka_admin.create_topic(partitions=3)        # a unique name on the session broker
    assert orders in rmqkafka_admin.list_topics()
