"""adapter.http_server against what a hostile or slow client does: a client that never reads
its answer, more connections than the port takes, a Content-Length no body could have, and
HEAD (the GET's headers, no body).

Timing: every wait is a poll until a condition with a generous deadline; the server's own
timeouts are made short through ``start``'s keyword arguments, never by sleeping."""

from __future__ import annotations

import asyncio
import time

from rmqkafka.adapter import http_server
from rmqkafka.adapter.http_server import Request, Response

BIG = 32 * 1024 * 1024  # far more than loopback's socket buffers take from a client that does not read
DEADLINE_S = 60.0


async def _serve(**limits: float) -> tuple[asyncio.Server, int]:
    async def handler(request: Request) -> Response:
        if request.path == "/big":
            return Response(200, b"x" * BIG)
        return Response(200, b"small " + request.method.encode())

    server = await http_server.start("127.0.0.1", 0, handler, **limits)
    return server, server.sockets[0].getsockname()[1]


async def _ask(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        return await asyncio.wait_for(reader.read(), DEADLINE_S)
    finally:
        writer.close()


async def _refused(port: int) -> bool:
    """Whether a request is refused: the 503 the server writes before it closes, or the reset
    that closing a socket with the request unread sends instead when the request came first."""
    try:
        answer = await _ask(port, b"GET /small HTTP/1.1\r\n\r\n")
    except ConnectionError:
        return True
    return answer == b"" or answer.startswith(b"HTTP/1.1 503") and answer.endswith(b"too many connections\n")


async def _served_within(port: int, deadline_s: float) -> bytes:
    """Ask for /small until it is answered 200 (or the deadline passes): the last answer."""
    deadline = time.monotonic() + deadline_s
    answer = b""
    while time.monotonic() < deadline:
        try:
            answer = await asyncio.wait_for(_ask(port, b"GET /small HTTP/1.1\r\n\r\n"), 5)
        except (TimeoutError, ConnectionError):
            answer = b""
        if answer.startswith(b"HTTP/1.1 200"):
            return answer
        await asyncio.sleep(0.05)
    return answer


def test_a_client_that_never_reads_is_dropped_and_frees_its_place() -> None:
    """Before: ``drain`` had no timeout and ``close`` kept the unsent bytes, so such a client
    held its answer's memory and its connection for as long as it liked."""

    async def scenario() -> tuple[bool, bytes]:
        server, port = await _serve(max_connections=1, write_timeout=5)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /big HTTP/1.1\r\n\r\n")  # and never read
            await writer.drain()
            # once the slow client holds the one place, others are answered 503 at once ...
            deadline, refused = time.monotonic() + DEADLINE_S, False
            while time.monotonic() < deadline and not refused:
                refused = await _refused(port)
            # ... until the write timeout drops it and its place is free again
            served = await _served_within(port, DEADLINE_S)
            writer.close()
            return refused, served
        finally:
            server.close()

    refused, served = asyncio.run(scenario())
    assert refused
    assert served.startswith(b"HTTP/1.1 200") and served.endswith(b"small GET")


def test_connections_past_the_limit_are_refused_not_queued() -> None:
    async def scenario() -> tuple[bool, bytes]:
        server, port = await _serve(max_connections=2)
        try:
            idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]  # send nothing
            deadline, refused = time.monotonic() + DEADLINE_S, False
            while time.monotonic() < deadline and not refused:
                refused = await _refused(port)
            for _, writer in idle:
                writer.close()
            return refused, await _served_within(port, DEADLINE_S)
        finally:
            server.close()

    refused, served = asyncio.run(scenario())
    assert refused
    assert served.startswith(b"HTTP/1.1 200")


def test_a_content_length_with_thousands_of_digits_is_refused() -> None:
    """Before: int() of over 4,300 digits raised ValueError out of the connection's task, and
    the client got no answer."""

    async def scenario() -> bytes:
        server, port = await _serve()
        try:
            return await _ask(port, b"POST /p HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n")
        finally:
            server.close()

    assert asyncio.run(scenario()).startswith(b"HTTP/1.1 413")


def test_head_answers_the_get_headers_without_the_body() -> None:
    """Before: HEAD said Content-Length: 0 (RFC 9110 9.3.2: the same header fields as GET)."""

    async def scenario() -> tuple[bytes, bytes]:
        server, port = await _serve()
        try:
            return (await _ask(port, b"HEAD /small HTTP/1.1\r\n\r\n"),
                    await _ask(port, b"GET /small HTTP/1.1\r\n\r\n"))
        finally:
            server.close()

    head, get = asyncio.run(scenario())
    assert get.endswith(b"\r\n\r\nsmall GET")
    assert head.endswith(b"\r\n\r\n")  # no body
    assert b"\r\nContent-Length: 10\r\n" in head  # len(b"small HEAD"): what a GET's body would be
