from confluent_kafka import Producer

producer = Producer({"bootstrap.servers": "localhost:9092", "enable.idempotence": True})
producer.produce("orders", b"tagged", headers=[("TAGS", b"TagA")])     # for views that filter
producer.produce("orders", b"remind me", headers=[("DELAY", b"3")])     # delay level 3: 10 s
producer.produce("orders", b"in 1.5 s", headers=[("TIMER_DELAY_MS", b"1500")])
assert producer.flush(30) == 0                                          # all acknowledged
