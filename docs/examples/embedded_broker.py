from confluent_kafka import Consumer, Producer
from rmqkafka import EmbeddedBroker

with EmbeddedBroker(flush="sync") as broker:   # ephemeral port, temporary data directory
    bootstrap = broker.bootstrap_servers       # "127.0.0.1:PORT"
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("orders", b"kept")
    assert producer.flush(10) == 0             # acknowledged: fsynced (flush="sync")
    broker.kill(); broker.restart()            # crash and recover on the same data directory
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "readers",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    message = consumer.poll(30)                # returns as soon as the record is there
    print(message.value())                     # b'kept'
    consumer.close()
