"""KafkaConnection's request pipeline, with a fake transport (no sockets)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from rmqkafka.adapter.client_quota_store import ClientQuotaStore
from rmqkafka.adapter.client_quotas import ClientQuotas
from rmqkafka.adapter.config import AdapterConfig, SecurityConfig
from rmqkafka.adapter.connection import KafkaConnection
from rmqkafka.adapter.response_budget import ResponseBudget
from rmqkafka.adapter.security.service import Security


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 5555) if name == "peername" else default

    def writelines(self, data) -> None:
        self.written.append(b"".join(data))

    def write(self, data) -> None:
        self.written.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def test_an_answer_that_outlives_its_closed_connection_is_dropped(caplog, tmp_path):
    # A handler may swallow its cancellation (asyncio.wait_for in a long poll can, when data
    # arrives at the same moment) and finish after connection_lost cleared the queue; the
    # writer then resumes with a result for a connection that no longer exists.
    ctx = SimpleNamespace(config=AdapterConfig(socket_request_max_bytes=1 << 20), listener_protocol="PLAINTEXT", listener_name="PLAINTEXT",
                          security=Security.open(SecurityConfig(), tmp_path),
                          client_quotas=ClientQuotas(ClientQuotaStore(None), 11, 1, lambda: 0))
    connection = KafkaConnection(ctx, set(), ResponseBudget(1 << 20))
    transport = FakeTransport()
    connection.connection_made(transport)

    async def stubborn() -> list[bytes]:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass
        return [b"late answer"]

    connection._pending.append(asyncio.ensure_future(stubborn()))
    connection._writer = asyncio.ensure_future(connection._write_in_order())
    await asyncio.sleep(0)
    connection.connection_lost(None)
    await asyncio.gather(connection._writer, return_exceptions=True)
    assert connection._writer.exception() is None  # no IndexError from an emptied queue
    assert transport.written == []
    assert "Traceback" not in caplog.text
