"""Responses written in place to a plaintext socket (adapter.scatter_write): every byte, in
order, through a full socket, with the response budget held until the socket took them."""

from __future__ import annotations

import asyncio
import socket
from types import SimpleNamespace

from rmqkafka.adapter.client_quota_store import ClientQuotaStore
from rmqkafka.adapter.client_quotas import ClientQuotas
from rmqkafka.adapter.config import AdapterConfig, SecurityConfig
from rmqkafka.adapter.connection import KafkaConnection, _FetchResponse
from rmqkafka.adapter.response_budget import ResponseBudget
from rmqkafka.adapter.scatter_write import split_head, write_now
from rmqkafka.adapter.security.service import Security


def parts_of(total: int, size: int) -> list[bytes]:
    return [bytes([i % 251]) * min(size, total - start) for i, start in enumerate(range(0, total, size))]


def test_split_head_keeps_every_byte_in_order():
    parts = [b"abc", b"defgh", b"ij"]
    for limit in range(1, 12):
        head, rest = split_head(parts, limit)
        joined = b"".join(bytes(p) for p in head)
        assert joined == b"abcdefghij"[:limit] and joined + b"".join(bytes(p) for p in rest) == b"abcdefghij"


def test_write_now_stops_at_a_full_socket_and_returns_the_rest():
    left, right = socket.socketpair()
    left.setblocking(False)
    try:
        parts = parts_of(8 << 20, 100_000)
        rest = write_now(left.fileno(), parts)
        assert rest  # 8 MB do not fit a socket pair's buffers
        sent = (8 << 20) - sum(memoryview(p).nbytes for p in rest)
        received = bytearray()
        right.setblocking(False)
        while len(received) < sent:
            received += right.recv(1 << 20)
        assert bytes(received) == b"".join(parts)[:sent]
        assert write_now(left.fileno(), []) == []
    finally:
        left.close()
        right.close()


def test_write_now_leaves_an_error_to_the_transport():
    left, right = socket.socketpair()
    right.close()
    try:
        assert write_now(left.fileno(), [b"ab", b"c"]) == [b"ab", b"c"]
    finally:
        left.close()


async def test_a_large_fetch_response_arrives_whole_and_is_held_until_taken(tmp_path):
    ctx = SimpleNamespace(config=AdapterConfig(socket_request_max_bytes=1 << 20), listener_protocol="PLAINTEXT",
                          listener_name="PLAINTEXT", security=Security.open(SecurityConfig(), tmp_path),
                          client_quotas=ClientQuotas(ClientQuotaStore(None), 11, 1, lambda: 0))
    budget = ResponseBudget(limit_bytes=1 << 30)
    server_side, client = socket.socketpair()
    loop = asyncio.get_running_loop()
    connection = KafkaConnection(ctx, set(), budget)
    transport, _ = await loop.connect_accepted_socket(lambda: connection, server_side)
    assert connection._plain_fd == server_side.fileno()
    parts = parts_of(16 << 20, 300_000)
    expected = b"".join(parts) + b"tail"

    async def answer(response):
        return response

    connection._pending.append(asyncio.ensure_future(answer(_FetchResponse(parts))))
    connection._pending.append(asyncio.ensure_future(answer([b"tail"])))
    connection._writer = asyncio.ensure_future(connection._write_in_order())
    for _ in range(100):  # the client reads nothing yet: the unsent bytes are held
        await asyncio.sleep(0.01)
        if budget.outstanding:
            break
    assert 0 < budget.outstanding < 16 << 20
    client.setblocking(False)
    received = bytearray()
    deadline = loop.time() + 60
    while len(received) < len(expected) and loop.time() < deadline:
        try:
            received += client.recv(1 << 20)
        except BlockingIOError:
            await asyncio.sleep(0.001)
    assert len(received) == len(expected) and bytes(received) == expected
    await asyncio.wait_for(connection._writer, 10)
    assert budget.outstanding == 0
    transport.close()
    client.close()
