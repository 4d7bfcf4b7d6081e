"""Kafka wire protocol: sans-IO codec, asyncio server, one handler module per API."""
