"""Kafka's classic consumer-group protocol: membership, rebalancing, committed offsets."""
