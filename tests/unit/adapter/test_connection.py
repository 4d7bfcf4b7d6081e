"""KafkaConnection's request pipeline, with a fake transport (no sockets)."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

from rmqkafka.adapter.client_quota_store import ClientQuotaStore
from rmqkafka.adapter.client_quotas import ClientQuotas
from rmqkafka.adapter.config import AdapterConfig, SecurityConfig
from rmqkafka.adapter.connection import MAX_OUTSTANDING, KafkaConnection
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


def _connection(tmp_path) -> tuple[KafkaConnection, FakeTransport]:
    ctx = SimpleNamespace(config=AdapterConfig(socket_request_max_bytes=1 << 20), listener_protocol="PLAINTEXT",
                          listener_name="PLAINTEXT", security=Security.open(SecurityConfig(), tmp_path),
                          client_quotas=ClientQuotas(ClientQuotaStore(None), 11, 1, lambda: 0))
    connection = KafkaConnection(ctx, set(), ResponseBudget(1 << 20))
    transport = FakeTransport()
    connection.connection_made(transport)
    return connection, transport


async def test_a_partial_frame_the_broker_does_not_read_is_not_a_stalled_client(tmp_path):
    """Reading paused by the broker (frames beyond MAX_OUTSTANDING waiting, or a quota's
    mute) leaves the rest of a frame unread in the socket: that is not the client trickling
    its request, so request.read.timeout.ms does not run meanwhile, and runs afresh once
    reading resumes."""
    connection, _ = _connection(tmp_path)
    gate = asyncio.Event()

    async def held(frame: bytes) -> None:
        await gate.wait()
        return None

    connection._answer = held
    frame = (4).to_bytes(4, "big") + b"\x00\x12\x00\x00"
    connection.data_received(frame * (MAX_OUTSTANDING + 10) + frame[:3])
    assert connection._reading_paused and connection._waiting
    read_s = 60.0
    assert connection.stalled(time.monotonic() + read_s + 1, 600.0, read_s) is None
    gate.set()
    for _ in range(1000):
        if not connection._reading_paused:
            break
        await asyncio.sleep(0.01)
    assert not connection._reading_paused
    assert connection.stalled(time.monotonic() + read_s - 5, 600.0, read_s) is None
    assert connection.stalled(time.monotonic() + read_s + 1, 600.0, read_s) is not None
    connection._mute(600_000)  # a quota's throttle time: reading paused again, by the broker
    assert connection.stalled(time.monotonic() + read_s + 1, 600.0, read_s) is None
    connection.connection_lost(None)
