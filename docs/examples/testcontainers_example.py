from confluent_kafka import Consumer, Producer
from rmqkafka.testcontainers import RmqkafkaContainer

with RmqkafkaContainer() as broker:                       # image rmqkafka:latest
    bootstrap = broker.get_bootstrap_server()             # "HOST:PORT", the mapped port
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("greetings", b"hello", headers=[("TAGS", b"TagA")])
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readers",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["greetings"])
    message = consumer.poll(30)                           # returns as soon as the record is there
    print(message.value(), dict(message.headers()))       # b'hello' {'TAGS': b'TagA'}
    consumer.close()
