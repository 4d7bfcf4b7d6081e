"""The broker-wide bound on Fetch bytes waiting in sockets, with fake transports."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rmqkafka.adapter.client_quota_store import ClientQuotaStore
from rmqkafka.adapter.client_quotas import ClientQuotas
from rmqkafka.adapter.config import AdapterConfig, SecurityConfig
from rmqkafka.adapter.connection import KafkaConnection, _FetchResponse
from rmqkafka.adapter.response_budget import ResponseBudget
from rmqkafka.adapter.security.service import Security


class SlowTransport(asyncio.Transport):
    """A socket whose client reads nothing until told to."""

    def __init__(self) -> None:
        super().__init__()
        self.buffered = 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def writelines(self, data) -> None:
        self.buffered += sum(len(part) for part in data)

    def get_write_buffer_size(self) -> int:
        return self.buffered

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def connection_with_unsent_fetch(tmp_path, budget: ResponseBudget, size: int):
    """A connection that wrote a Fetch response of ``size`` bytes its client has not read."""
    ctx = SimpleNamespace(config=AdapterConfig(socket_request_max_bytes=1 << 20), listener_protocol="PLAINTEXT", listener_name="PLAINTEXT",
                          security=Security.open(SecurityConfig(), tmp_path),
                          client_quotas=ClientQuotas(ClientQuotaStore(None), 11, 1, lambda: 0))
    connection = KafkaConnection(ctx, set(), budget)
    transport = SlowTransport()
    connection.connection_made(transport)

    async def answer() -> list[bytes]:
        return _FetchResponse([b"x" * size])

    connection._pending.append(asyncio.ensure_future(answer()))
    connection._writer = asyncio.ensure_future(connection._write_in_order())
    connection.pause_writing()  # the socket's buffer is full: the response stays there
    await asyncio.sleep(0.01)
    return connection, transport


async def test_a_fetch_waits_while_the_sockets_hold_the_limit(tmp_path):
    budget = ResponseBudget(limit_bytes=1000)
    slow, transport = await connection_with_unsent_fetch(tmp_path, budget, 1500)
    assert budget.outstanding == 1500

    waiting = asyncio.ensure_future(budget.turn())  # another connection's next Fetch
    await asyncio.sleep(0.01)
    assert not waiting.done()
    transport.buffered = 0
    slow.resume_writing()  # the client read it
    await asyncio.wait_for(waiting, 1)
    assert budget.outstanding == 0
    await asyncio.gather(slow._writer, return_exceptions=True)


async def test_a_closed_connection_gives_its_bytes_back(tmp_path):
    budget = ResponseBudget(limit_bytes=10)
    connection, _ = await connection_with_unsent_fetch(tmp_path, budget, 50)
    assert budget.outstanding == 50
    connection.connection_lost(None)
    assert budget.outstanding == 0
