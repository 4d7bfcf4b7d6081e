"""adapter.http_server against what a hostile or slow client does: a client that never reads
its answer, slow or idle clients by the hundred (one peer or two), a head trickled a byte at a
time, a port full of busy requests, a Content-Length no body could have, and HEAD (the GET's
headers, no body).

Timing: every wait is a poll until a condition with a generous deadline; the server's own
timeouts and caps are made small through ``Limits``, never by sleeping."""

from __future__ import annotations

import asyncio
import time

from rmqkafka.adapter import http_server
from rmqkafka.adapter.http_server import Limits, Request, Response

BIG = 32 * 1024 * 1024  # far more than loopback's socket buffers take from a client that does not read
DEADLINE_S = 60.0


async def _serve(limits: Limits = Limits(), release: asyncio.Event | None = None,
                 blocked: list[Request] | None = None) -> tuple[asyncio.Server, int]:
    """/big: an answer no socket buffer takes whole; /block: busy in the handler (listed in
    ``blocked``) until ``release`` is set; anything else: a small answer."""

    async def handler(request: Request) -> Response:
        if request.path == "/big":
            return Response(200, b"x" * BIG)
        if request.path == "/block" and release is not None and blocked is not None:
            blocked.append(request)
            await release.wait()
        return Response(200, b"small " + request.method.encode())

    server = await http_server.start("127.0.0.1", 0, handler, limits)
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


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed the connection (EOF or a reset) without answering 200, within
    the deadline."""
    try:
        answer = await asyncio.wait_for(reader.read(), DEADLINE_S)
    except ConnectionError:
        return True
    except TimeoutError:
        return False
    return not answer.startswith(b"HTTP/1.1 200")


async def _open(port: int, n: int, local: str | None = None) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """``n`` connections that send nothing (from the address ``local`` when given)."""
    opened = []
    for _ in range(n):
        opened.append(await asyncio.open_connection("127.0.0.1", port, local_addr=(local, 0) if local else None))
        await asyncio.sleep(0)  # let the server take each in turn, so "oldest" is well defined
    return opened


async def _cut_short(reader: asyncio.StreamReader) -> bool:
    """Read an answer to /big at about 1 MB/s (32 s for all of it, far past the server's write
    timeout): whether the server ended the connection before all of it came."""
    got = 0
    try:
        while chunk := await asyncio.wait_for(reader.read(64 * 1024), DEADLINE_S):
            got += len(chunk)
            await asyncio.sleep(0.05)
    except ConnectionError:
        return True
    return got < BIG


def test_a_client_that_never_reads_is_dropped_and_frees_its_place() -> None:
    """Before: ``drain`` had no timeout and ``close`` kept the unsent bytes, so such a client
    held its answer's memory and its connection for as long as it liked. Now it is aborted
    after the write timeout, and a new client takes its place at once when the port is full."""

    async def scenario() -> tuple[bool, bytes, bool]:
        server, port = await _serve(Limits(max_connections=1, write_timeout=1))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /big HTTP/1.1\r\n\r\n")  # and read too slowly
            await writer.drain()
            dropped = await _cut_short(reader)
            writer.close()
            # the same, but a new client comes while the slow one holds the only place
            slow_reader, slow = await asyncio.open_connection("127.0.0.1", port)
            slow.write(b"GET /big HTTP/1.1\r\n\r\n")
            await slow.drain()
            served = await asyncio.wait_for(_ask(port, b"GET /small HTTP/1.1\r\n\r\n"), DEADLINE_S)
            displaced = await _cut_short(slow_reader)
            slow.close()
            return dropped, served, displaced
        finally:
            server.close()

    dropped, served, displaced = asyncio.run(scenario())
    assert dropped
    assert served.startswith(b"HTTP/1.1 200") and served.endswith(b"small GET")
    assert displaced


def test_idle_clients_by_the_hundred_never_keep_a_new_one_from_being_answered() -> None:
    """Before: 64 connections that sent nothing held the port for 10 s each, and every new
    client was answered 503 meanwhile. Now each new connection takes the place of the oldest
    idle one: the newest ``max_connections`` stay, the older ones are closed at once, and a
    well-behaved client is answered on its first try."""

    async def scenario() -> tuple[bytes, list[bool], list[bool]]:
        server, port = await _serve(Limits(max_connections=8, max_per_peer=8, read_timeout=DEADLINE_S))
        try:
            idle = await _open(port, 200)
            served = await asyncio.wait_for(_ask(port, b"GET /small HTTP/1.1\r\n\r\n"), DEADLINE_S)
            older = [await _closed_by_server(reader) for reader, _ in idle[:150]]
            # the newest are still held: each can still send its request and be answered
            newest = []
            for reader, writer in idle[-6:]:
                writer.write(b"GET /small HTTP/1.1\r\n\r\n")
                answer = await asyncio.wait_for(reader.read(), DEADLINE_S)
                newest.append(answer.startswith(b"HTTP/1.1 200"))
            for _, writer in idle:
                writer.close()
            return served, older, newest
        finally:
            server.close()

    served, older, newest = asyncio.run(scenario())
    assert served.startswith(b"HTTP/1.1 200")
    assert all(older), f"{older.count(False)} of the oldest idle connections were kept"
    assert all(newest), newest


def test_a_head_trickled_a_byte_at_a_time_is_cut_at_the_read_timeout() -> None:
    """A byte now and then does not extend the read timeout: it bounds the whole request."""

    async def scenario() -> tuple[bool, float]:
        server, port = await _serve(Limits(read_timeout=1))
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            started = time.monotonic()
            closed = False
            for byte in b"GET /small HTTP/1.1\r\nX-Slow: " + b"y" * 2000:  # 2,000 x 50 ms: 100 s
                try:
                    writer.write(bytes([byte]))
                    await writer.drain()
                except ConnectionError:
                    closed = True
                    break
                if reader.at_eof() or reader.exception() is not None:
                    closed = True
                    break
                await asyncio.sleep(0.05)
            elapsed = time.monotonic() - started
            writer.close()
            return closed, elapsed
        finally:
            server.close()

    closed, elapsed = asyncio.run(scenario())
    assert closed
    assert elapsed < DEADLINE_S  # the server's 1 s, however loaded the machine, not the 100 s of bytes


def test_a_peer_at_its_cap_displaces_only_its_own_connections() -> None:
    """One address flooding the port (127.0.0.2 here) takes at most ``max_per_peer`` places
    and displaces only its own: another client's idle connection, though older, is kept."""

    async def scenario() -> tuple[bytes, list[bool], list[bool]]:
        server, port = await _serve(Limits(max_connections=8, max_per_peer=3, read_timeout=DEADLINE_S))
        try:
            (other_reader, other), = await _open(port, 1)  # 127.0.0.1, the oldest of all
            flood = await _open(port, 50, local="127.0.0.2")
            older = [await _closed_by_server(reader) for reader, _ in flood[:-3]]
            other.write(b"GET /small HTTP/1.1\r\n\r\n")
            answer = await asyncio.wait_for(other_reader.read(), DEADLINE_S)
            newest = []
            for reader, writer in flood[-3:]:
                writer.write(b"GET /small HTTP/1.1\r\n\r\n")
                newest.append((await asyncio.wait_for(reader.read(), DEADLINE_S)).startswith(b"HTTP/1.1 200"))
            for _, writer in flood:
                writer.close()
            other.close()
            return answer, older, newest
        finally:
            server.close()

    answer, older, newest = asyncio.run(scenario())
    assert answer.startswith(b"HTTP/1.1 200"), answer
    assert all(older), f"{older.count(False)} of the flood's older connections were kept"
    assert all(newest), newest


def test_a_new_connection_is_refused_only_when_every_place_is_busy() -> None:
    """Connections whose handler runs are never displaced: the port full of them answers a
    new client 503 at once (not queued), and serves again once they are done."""

    async def scenario() -> tuple[bool, list[bytes], bytes]:
        release, blocked = asyncio.Event(), []
        server, port = await _serve(Limits(max_connections=2), release, blocked)
        try:
            busy = [asyncio.create_task(_ask(port, b"GET /block HTTP/1.1\r\n\r\n")) for _ in range(2)]
            deadline = time.monotonic() + DEADLINE_S
            while len(blocked) < 2 and time.monotonic() < deadline:  # both busy before the probe
                await asyncio.sleep(0.01)
            refused = False
            while time.monotonic() < deadline and not refused:
                refused = await _refused(port)
            release.set()
            answers = [await asyncio.wait_for(task, DEADLINE_S) for task in busy]
            return refused, answers, await _served_within(port, DEADLINE_S)
        finally:
            server.close()

    refused, answers, served = asyncio.run(scenario())
    assert refused
    assert all(answer.startswith(b"HTTP/1.1 200") for answer in answers), answers
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
