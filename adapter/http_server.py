"""A very small HTTP/1.1 server on the broker's own event loop, for the metrics port.

Why not prometheus_client's start_http_server or a web framework: the former serves from a
thread of its own (and would read the broker's state from outside the loop that owns it),
the latter is a dependency for four kinds of request. This serves one request per connection
(``Connection: close``): GET and HEAD, and POST with a small body; enough for Prometheus,
probes, curl and a browser page polling a JSON API.

Bounds (what a client costs is bounded before it is paid; ``Limits``, one frozen object): the
request head and body must arrive within ``read_timeout`` s of the connection being taken,
however they trickle in (a byte at a time does not extend it), and the head must fit
``MAX_HEAD`` bytes; a body may not exceed ``MAX_BODY``; an answer must be taken by the client
within ``write_timeout`` s, or the connection is aborted and its unsent bytes dropped. At most
``max_connections`` connections are held, at most ``max_per_peer`` from one address
(adapter.http_connections): a new connection takes the place of the oldest one still waiting
on its client (that peer's own when the peer is at its cap), so slow or idle clients, however
many, never keep a new one from being answered; only when every held connection is busy in
its handler is the new one answered 503 and closed. The port so never takes the file
descriptors the Kafka listeners need, and the memory it holds is at most ``max_connections``
answers. There is no keep-alive (one request per connection), so no idle connection outlives
its answer. A handler that raises answers 500 and is logged; the broker keeps serving. HEAD
answers the GET's headers (its Content-Length too) without the body.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

from .http_connections import ConnectionTable

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024
MAX_BODY = 64 * 1024
_LENGTH_DIGITS = len(str(MAX_BODY))  # a longer Content-Length is too large whatever its digits
_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            413: "Payload Too Large", 415: "Unsupported Media Type", 429: "Too Many Requests", 500: "Internal Server Error",
            502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str  # percent-decoded, without the query
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass(slots=True)
class Response:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Limits:
    """What one port gives its clients (see the module docstring); tests make them small."""

    read_timeout: float = 5.0  # the whole request: a browser or Prometheus sends it at once
    write_timeout: float = 30.0
    max_connections: int = 64
    max_per_peer: int = 16  # a host's browser and scraper together use a few


async def start(host: str, port: int, handler: Handler, limits: Limits = Limits()) -> asyncio.Server:
    """Bind and serve; the caller closes the returned server."""
    table = ConnectionTable(limits.max_connections, limits.max_per_peer)

    async def on_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        held = table.admit(str(peer[0]) if isinstance(peer, tuple) else str(peer), writer.transport.abort)
        if held is None:
            # a few bytes into the new socket's empty buffer, never waited for
            writer.write(_encode(Response(503, b"too many connections\n")))
            writer.close()
            return
        try:
            request = await asyncio.wait_for(_read(reader), limits.read_timeout)
            table.busy(held)
            response, head_only = await _answer(request, handler)
            table.waiting(held)
            writer.write(_encode(response, head_only))
            await asyncio.wait_for(writer.drain(), limits.write_timeout)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError):
            writer.transport.abort()  # close() would keep the unsent bytes until the client reads
        finally:
            table.release(held)
            writer.close()

    return await asyncio.start_server(on_connection, host, port, reuse_address=True, limit=MAX_HEAD)


async def _answer(request: Request | Response, handler: Handler) -> tuple[Response, bool]:
    """The response to the connection's one request, and whether it answers a HEAD."""
    if isinstance(request, Response):
        return request, False
    try:
        response = await handler(request)
    except Exception:  # a bug in one page must not take the port down
        log.exception("metrics port: %s %s failed", request.method, request.path)
        response = Response(500, b"internal error\n")
    return response, request.method == "HEAD"


async def _read(reader: asyncio.StreamReader) -> Request | Response:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError:
        return Response(400, b"request head too large\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        return Response(400, b"bad request line\n")
    method, target = parts[0].upper(), parts[1]
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    length = headers.get("content-length", "0")
    if not length.isdigit():
        return Response(400, b"bad content-length\n")
    if len(length.lstrip("0")) > _LENGTH_DIGITS or int(length) > MAX_BODY:
        return Response(413, b"body too large\n")
    body = await reader.readexactly(int(length)) if int(length) else b""
    url = urlsplit(target)
    return Request(method, unquote(url.path), parse_qs(url.query), headers, body)


def _encode(response: Response, head_only: bool = False) -> bytes:
    head = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Unknown')}",
            f"Content-Type: {response.content_type}",
            f"Content-Length: {len(response.body)}",
            "Connection: close",
            "Cache-Control: no-store",
            *(f"{name}: {value}" for name, value in response.headers.items())]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else response.body)
