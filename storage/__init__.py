"""Durable storage: one commitlog of Kafka record batches, consume queues derived from it.

Knows nothing of Kafka requests or RocketMQ topics. "offset" always means a logical record
offset inside a partition, "position" a byte position in the commitlog.
"""
