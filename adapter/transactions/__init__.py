"""Kafka transactions: the transaction coordinator and its ``__transaction_state`` log."""
