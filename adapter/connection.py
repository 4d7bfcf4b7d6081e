"""One client connection: bytes in, frames out of the codec, handlers, responses in order.

Requests are started in arrival order and may overlap (a produce waiting for its fsync does
not hold up the next request), but responses are written strictly in request order, which
Kafka clients rely on. At most ``MAX_OUTSTANDING`` requests of a connection are in flight: the
frames of one read beyond them (a 256 KB read holds thousands of small pipelined requests)
wait, split into frames but not started, so one client cannot queue seconds of handler work
on the event loop ahead of everyone else. Reading pauses while any frame waits, while that
many are in flight or while the socket's write buffer is full, so one fast client cannot make
the broker buffer without bound. A
Fetch response, the one that can be large, is built only once the responses before it have
been handed to the socket and its buffer has drained, one Fetch at a time: a client that
pipelines large fetches and never reads holds at most about two of them in memory, not all.
Across connections, a ResponseBudget (adapter.response_budget) bounds the Fetch bytes handed to
sockets that have not sent them yet.

A connection above ``max.connections`` (all listeners together) or ``max.connections.per.ip``
(from its client's address) is closed as it is accepted, before it costs a buffer or a TLS
handshake. One over its IP's ``connection_creation_rate`` quota (adapter.client_quotas) is
read no more and closed after the throttle time, as Kafka does. Both are read per connection, so a dynamic change counts for the next one.
(Kafka leaves connections above max.connections waiting in the accept queue; asyncio cannot
stop accepting, and a closed connection makes the client retry with its backoff.)

``stalled`` tells the broker's sweep (adapter.broker) when to close a connection: idle for
``connections.max.idle.ms`` (nothing in flight, no bytes either way), its client not reading
the responses for that long, or a request frame still incomplete ``request.read.timeout.ms``
after its first byte.

Bad input: a frame over ``socket.request.max.bytes``, a negative size, an unknown API key, a
version outside the advertised range (except ApiVersions, answered with error 35 and our
ranges) or a request that does not decode closes this connection only.

Metrics: with a metrics port, each request's time from decoded to answered (per API key),
the bytes read and written and the connections accepted are added to the broker's
RequestStats (adapter.request_stats: plain ints, no locks); without one, nothing is counted.

Security: each request runs with the connection's Session (context.SESSION) for the
authorizer. On SASL listeners the connection's Authentication decides which requests may
come before the client has authenticated (anything else closes the connection, as in
Kafka), bounds their frames by ``sasl.server.max.receive.size``, and turns the frames after
a SaslHandshake v0 into bare SASL tokens. A failed authentication is answered, and the
connection closed, ``connection.failed.authentication.delay.ms`` later (Kafka's delayed
close): reading stops meanwhile and only this connection's answer waits, so a password
guesser gets a few answers a second per connection and everyone else is served as before.
A session that has expired (KIP-368) closes the connection at its first request that does
not start a re-authentication. TLS is asyncio's, started here (``loop.start_tls``) rather
than by the server, so a failed handshake is known with its peer and reason: it is logged
and counted like a failed login (adapter.security.events). The protocol sees plaintext,
and the peer's verified certificate names the principal on SSL listeners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import ssl
import time
from collections import deque

from .client_quota_store import REQUEST_PERCENTAGE
from .client_quotas import CHARGE, RequestCharge, client_throttles, timed
from .codec import (
    Encoded,
    FrameDecoder,
    FrameError,
    MalformedRequest,
    UnknownApiKey,
    UnsupportedVersion,
    decode_request,
    encode_api_versions_fallback,
    encode_legacy_produce_rejection,
    response_parts,
)
from .codec.framing import frame as size_prefixed
from .codec.versions import ApiKey
from .config import SSL
from .context import AUTHENTICATION, SESSION, BrokerContext
from .errors import CloseConnection
from .handlers import HANDLERS
from .request_stats import RequestStats
from .response_budget import ResponseBudget
from .scatter_write import split_head, write_now
from .security import events
from .security.authentication import Authentication
from .security.principal import certificate_principal
from .security.sasl import SaslFailure
from .security.service import ListenerAuth

log = logging.getLogger(__name__)

MAX_OUTSTANDING = 64
TLS_HANDSHAKE_TIMEOUT_S = 10.0  # a client that opens a TLS connection and says nothing


class KafkaConnection(asyncio.Protocol):
    def __init__(self, ctx: BrokerContext, connections: set[KafkaConnection], budget: ResponseBudget,
                 stats: RequestStats | None = None) -> None:
        self._ctx = ctx
        self._stats = stats  # None without a metrics port: nothing is counted then
        self._connections = connections
        self._budget = budget  # shared by every connection of the broker
        self._held = 0  # bytes of Fetch responses written but not yet sent, held in the budget
        self._decoder = FrameDecoder(ctx.config.socket_request_max_bytes)
        self._pending: deque[asyncio.Task[list[bytes] | None]] = deque()
        self._waiting: deque[bytes] = deque()  # frames read but not started (MAX_OUTSTANDING)
        self._writer: asyncio.Task[None] | None = None
        self._transport: asyncio.Transport | None = None
        self._plain_fd: int | None = None  # the socket's descriptor on a plaintext listener (scatter_write)
        self._can_write = asyncio.Event()
        self._can_write.set()
        self._reading_paused = False
        self._muted: asyncio.TimerHandle | None = None  # reading stopped for a throttle time
        self._draining = False  # reading stopped for good: the connection closes once answered
        self._closed = False
        self._fetch_gate = asyncio.Lock()
        self._last_active = time.monotonic()
        self._partial_since: float | None = None  # when the incomplete frame's first byte came
        self._write_paused_since: float | None = None  # since when the client reads nothing
        self._auth: Authentication | None = None  # set once TLS (if any) is up
        self._handshake: asyncio.Future[None] | None = None  # the TLS handshake, on TLS listeners
        self._client_host = ""
        self.peer = "?"

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport, though not always an asyncio.Transport subclass (uvloop's is
        # its own type with the same methods: see rmqkafka.cli.serve.event_loop).
        self._transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self._client_host = peer[0] if peer else ""
        refusal = self._over_limit()
        if refusal is not None:
            log.info("closing %s: %s", self.peer, refusal)
            self._closed = True
            transport.abort()
            return
        throttle_ms = self._ctx.client_quotas.connection_throttle_ms(self._client_host)
        if throttle_ms:  # Kafka's delayed close of a connection over its IP's creation rate
            log.info("closing %s in %d ms: connection_creation_rate quota of %s", self.peer, throttle_ms,
                     self._client_host)
            self._closed = True
            transport.pause_reading()
            asyncio.get_running_loop().call_later(throttle_ms / 1000, transport.abort)
            return
        self._connections.add(self)
        if self._stats is not None:
            self._stats.connections_accepted += 1
        listener = self._ctx.security.listener(self._ctx.listener_name, self._ctx.listener_protocol)
        if listener.tls_context is None:
            sock = transport.get_extra_info("socket")
            self._plain_fd = sock.fileno() if sock is not None else None
            if self._plain_fd is not None:
                # Paused while anything is buffered: the next response then starts on an
                # empty buffer and goes to the kernel in place (scatter_write), where asyncio
                # would join it and copy it into the buffer behind the rest.
                transport.set_write_buffer_limits(high=0, low=0)
            self._authenticate_with(listener, None)
        else:
            self._handshake = asyncio.ensure_future(self._start_tls(listener))

    def _over_limit(self) -> str | None:
        cfg = self._ctx.config
        if len(self._connections) >= cfg.max_connections:
            return f"max.connections ({cfg.max_connections}) reached"
        if cfg.max_connections_per_ip < len(self._connections) + 1:  # counted only when it can matter
            same = sum(1 for c in self._connections if c._client_host == self._client_host)
            if same >= cfg.max_connections_per_ip:
                return f"max.connections.per.ip ({cfg.max_connections_per_ip}) reached for {self._client_host}"
        return None

    async def _start_tls(self, listener: ListenerAuth) -> None:
        """The TLS handshake; a failed one is logged and counted, and closes the connection."""
        raw = self._transport
        try:
            tls = await asyncio.get_running_loop().start_tls(
                raw, self, listener.tls_context, server_side=True, ssl_handshake_timeout=TLS_HANDSHAKE_TIMEOUT_S)
        except ssl.SSLError as exc:
            self._ctx.security.events.failure(listener.config.name, "", events.SSL_HANDSHAKE_FAILED, self.peer,
                                              f"SSL handshake failed: {exc.reason or exc}")
            self._abandon(raw)
            return
        except (OSError, asyncio.TimeoutError) as exc:  # gone, or silent, before the handshake ended
            log.debug("closing %s: TLS handshake did not complete (%r)", self.peer, exc)
            self._abandon(raw)
            return
        if self._closed:
            tls.close()
            return
        self._transport = tls
        principal = certificate_principal(tls.get_extra_info("peercert")) if listener.config.protocol == SSL else None
        self._authenticate_with(listener, principal)

    def _abandon(self, raw: asyncio.Transport) -> None:
        if not raw.is_closing():
            raw.abort()
        self.connection_lost(None)

    def _authenticate_with(self, listener: ListenerAuth, tls_principal) -> None:
        self._auth = Authentication(listener, self._client_host, tls_principal)
        if not self._auth.authenticated:
            self._decoder.max_frame_size = min(self._ctx.security.config.sasl_max_receive_size,
                                               self._ctx.config.socket_request_max_bytes)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._connections.discard(self)
        if self._muted is not None:
            self._muted.cancel()
        if self._handshake is not None and not self._handshake.done():
            self._handshake.cancel()
        for task in self._pending:
            task.cancel()
        self._pending.clear()
        self._waiting.clear()
        if self._writer is not None:
            self._writer.cancel()
        self._can_write.set()
        self._release_held()

    def pause_writing(self) -> None:
        self._can_write.clear()
        self._write_paused_since = time.monotonic()

    def resume_writing(self) -> None:
        self._can_write.set()
        self._write_paused_since = None
        self._last_active = time.monotonic()
        self._release_held()

    def _release_held(self) -> None:
        if self._held:
            self._budget.release(self._held)
            self._held = 0

    def data_received(self, data: bytes) -> None:
        now = self._last_active = time.monotonic()
        if self._stats is not None:
            self._stats.bytes_in += len(data)
        try:
            frames = self._decoder.feed(data)
        except FrameError as exc:
            log.warning("closing %s: %s", self.peer, exc)
            self._waiting.extend(exc.frames)  # complete requests that preceded the bad frame
            self._start_waiting()
            self._close_after_pending()
            return
        if frames:
            self._waiting.extend(frames)
            self._start_waiting()
        if not self._decoder.buffered:
            self._partial_since = None
        elif frames or self._partial_since is None:
            self._partial_since = now  # a new frame began in this chunk

    def stalled(self, now: float, idle_s: float, read_s: float) -> str | None:
        """Why this connection should be closed at ``now`` (monotonic), or None."""
        # A frame's rest left in the socket while the broker does not read (frames waiting,
        # a quota's mute) is not the client's delay: its time runs only while reading.
        broker_paused = self._reading_paused or self._muted is not None
        if self._partial_since is not None and not broker_paused and now - self._partial_since > read_s:
            return f"a request frame still incomplete {now - self._partial_since:.0f} s after its first byte"
        if self._write_paused_since is not None and now - self._write_paused_since > idle_s:
            return f"not reading its responses for {now - self._write_paused_since:.0f} s"
        if not self._pending and now - self._last_active > idle_s:
            return f"idle for {now - self._last_active:.0f} s"
        return None

    # -- request pipeline ------------------------------------------------------------------
    def _start_waiting(self) -> None:
        """Start waiting frames, in order, while fewer than MAX_OUTSTANDING are in flight;
        reading pauses while a frame still waits or the limit is reached."""
        while self._waiting and len(self._pending) < MAX_OUTSTANDING:
            self._pending.append(asyncio.ensure_future(self._answer(self._waiting.popleft())))
        if self._pending and (self._writer is None or self._writer.done()):
            self._writer = asyncio.ensure_future(self._write_in_order())
        if (self._waiting or len(self._pending) >= MAX_OUTSTANDING) and not self._reading_paused:
            self._reading_paused = True
            self._transport.pause_reading()

    async def _answer(self, frame: bytes) -> list[bytes] | None:
        """The response frame for one request, as parts for ``writelines``; None for none.

        Before authentication (and during a re-authentication) only the SASL requests are
        served; their handlers never wait on anything, so each runs to its end before the
        next frame's task starts (tasks start in order) and that frame sees the state this
        one left. Only a failure waits (the delayed answer), and it has marked the state
        failed before it does, so the frames behind it are closed with it."""
        auth = self._auth
        assert auth is not None
        api_key = int.from_bytes(frame[:2], "big", signed=True)
        if auth.sasl and auth.authenticated and not auth.reauthenticating:
            now = self._ctx.clock.monotonic()
            starts_reauthentication = api_key == ApiKey.SASL_HANDSHAKE and auth.begin_reauthentication(now)
            if not starts_reauthentication and auth.expired(now):
                self._ctx.security.events.expired[auth.listener] += 1
                raise CloseConnection(f"the SASL session of {auth.session.principal} expired "
                                      "(connections.max.reauth.ms) and the client did not re-authenticate")
        before_authentication = not auth.authenticated or auth.reauthenticating
        if before_authentication:
            if auth.failed:  # a request pipelined behind the failure: closed with it
                raise CloseConnection("request after a failed authentication")
            if auth.raw_tokens:
                return await self._raw_token(auth, frame)
            if not auth.allows(api_key):
                auth.fail(events.ILLEGAL_SASL_STATE, f"Unexpected Kafka request of type {_api_name(api_key)} during SASL "
                          + ("authentication" if auth.mechanisms and auth.allows(ApiKey.SASL_AUTHENTICATE)
                             else "handshake"))
                await self._after_failure(auth)
                raise CloseConnection(f"unexpected request with api key {api_key} before SASL authentication")
        try:
            request = decode_request(frame)
        except UnsupportedVersion as exc:
            return [_refusal(exc)]
        except (UnknownApiKey, MalformedRequest) as exc:
            raise CloseConnection(str(exc)) from None
        SESSION.set(auth.session)
        AUTHENTICATION.set(auth)
        handler = HANDLERS.get(request.api_key)
        if handler is None:  # advertised, but its handler is not registered
            raise CloseConnection(f"no handler for api key {request.api_key}")
        stats = self._stats
        began = time.perf_counter() if stats is not None else 0.0
        # quotas charge only authenticated requests (the SASL exchange is Kafka's exempt too)
        charge = None if before_authentication else RequestCharge(
            auth.session.principal.name, request.client_id or "", len(frame) + 4)
        CHARGE.set(charge)
        try:
            if request.api_key == ApiKey.FETCH:
                async with self._fetch_gate:
                    await self._can_write.wait()  # what was written before has drained
                    await self._budget.turn()
                    body = await self._handled(handler, request, charge)
            else:
                body = await self._handled(handler, request, charge)
        except (asyncio.CancelledError, CloseConnection):
            raise
        except Exception as exc:  # a handler bug must not take the broker down
            log.exception("handler for api %d v%d failed", request.api_key, request.api_version)
            raise CloseConnection(f"internal error: {exc}") from None
        if stats is not None:
            stats.observe(request.api_key, time.perf_counter() - began)
        if before_authentication:
            await self._after_authentication(auth)
        throttle_ms = 0
        if charge is not None:
            if not charge.decided:
                charge.throttle_ms = self._ctx.client_quotas.charge_request(charge)
                if charge.throttle_ms and body is not None:
                    body = _with_throttle(request.api_key, body, charge.throttle_ms)
            throttle_ms = charge.throttle_ms
            if throttle_ms and not client_throttles(request.api_key, request.api_version):
                await asyncio.sleep(throttle_ms / 1000)  # KIP-219: an old client is throttled by the broker
        if body is None:
            return _Muting([], throttle_ms) if throttle_ms else None
        parts = response_parts(request, body)
        if request.api_key == ApiKey.FETCH:
            parts = _FetchResponse(parts)
        if throttle_ms:
            return _Muting(parts, throttle_ms, isinstance(parts, _FetchResponse))
        return parts

    async def _handled(self, handler, request, charge: RequestCharge | None):
        # handler time is measured only while some request_percentage quota exists
        if charge is None or not self._ctx.client_quotas.store.has(REQUEST_PERCENTAGE):
            return await handler(self._ctx, request)
        return await timed(handler(self._ctx, request), charge)

    async def _raw_token(self, auth: Authentication, frame: bytes) -> list[bytes]:
        """A bare SASL token after SaslHandshake v0, answered size-prefixed without a header."""
        try:
            answer = auth.authenticate(frame, self._ctx.clock.monotonic())
        except SaslFailure as exc:
            await self._after_failure(auth)
            raise CloseConnection(f"SASL authentication failed: {exc}") from None
        await self._after_authentication(auth)
        return [size_prefixed([answer])]

    async def _after_authentication(self, auth: Authentication) -> None:
        if auth.failed:
            await self._after_failure(auth)
        elif auth.succeeded is not None:
            mechanism, reauthentication = auth.succeeded
            auth.succeeded = None
            self._ctx.security.events.success(auth.listener, mechanism, reauthentication)
            self._decoder.max_frame_size = self._ctx.config.socket_request_max_bytes
            log.debug("%s %sauthenticated as %s", self.peer, "re-" if reauthentication else "",
                      auth.session.principal)

    async def _after_failure(self, auth: Authentication) -> None:
        """Count and log the failure, stop reading, and hold this answer back for
        connection.failed.authentication.delay.ms; the connection closes once it is out."""
        failure = auth.failure
        assert failure is not None
        self._ctx.security.events.failure(auth.listener, failure.mechanism, failure.reason, self.peer,
                                          failure.message, failure.reauthentication)
        self._close_after_pending()
        delay_ms = self._ctx.security.config.failed_authentication_delay_ms
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000)

    async def _write_in_order(self) -> None:
        while self._pending and not self._closed:
            task = self._pending[0]
            try:
                response = await task
            except CloseConnection as exc:
                log.warning("closing %s: %s", self.peer, exc)
                self._close_now()
                return
            except Exception:  # e.g. a response that does not encode: a bug, never silent
                log.exception("closing %s: request failed", self.peer)
                self._close_now()
                return
            except asyncio.CancelledError:
                return
            if self._closed:
                # The connection went away while the request ran; a handler may still finish
                # (a long poll can swallow its cancellation), but nothing is left to answer.
                return
            self._pending.popleft()
            if self._waiting:
                self._start_waiting()
            if self._reading_paused and not self._waiting and len(self._pending) < MAX_OUTSTANDING // 2:
                self._reading_paused = False
                if self._muted is None and not self._draining:
                    self._resume_reading()
            if isinstance(response, _Muting):
                self._mute(response.throttle_ms)
                response = None if not response.parts else (
                    _FetchResponse(response.parts) if response.fetch else response.parts)
            if response is not None:
                if self._stats is not None:  # every frame starts with its int32 size
                    self._stats.bytes_out += 4 + int.from_bytes(response[0][:4], "big")
                if (self._plain_fd is not None and not self._transport.get_write_buffer_size()
                        and not self._transport.is_closing()):  # a closing transport's fd may be gone
                    await self._write_in_place(response, isinstance(response, _FetchResponse))
                else:
                    self._transport.writelines(response)
                self._last_active = time.monotonic()
                if isinstance(response, _FetchResponse) and self._transport.get_write_buffer_size():
                    size = sum(memoryview(part).nbytes for part in response)
                    self._held += size
                    self._budget.hold(size)
                await self._can_write.wait()

    def _mute(self, throttle_ms: int) -> None:
        """KIP-219: read nothing more from this client for ``throttle_ms`` (its response is
        being written now); a later throttle extends the mute, never shortens it."""
        loop = asyncio.get_running_loop()
        until = loop.time() + throttle_ms / 1000
        if self._muted is not None:
            if self._muted.when() >= until:
                return
            self._muted.cancel()
        else:
            self._transport.pause_reading()
        self._muted = loop.call_at(until, self._unmute)

    def _unmute(self) -> None:
        self._muted = None
        if not (self._closed or self._draining or self._reading_paused or self._transport.is_closing()):
            self._resume_reading()

    def _resume_reading(self) -> None:
        if self._partial_since is not None:
            self._partial_since = time.monotonic()  # the client's time for the rest starts now
        self._transport.resume_reading()

    async def _write_in_place(self, response: list, is_fetch: bool) -> None:
        """Write ``response`` to the plaintext socket without copying it (scatter_write);
        a Fetch response that the socket does not take at once counts against the response
        budget until it is all handed to the transport."""
        assert self._transport is not None and self._plain_fd is not None
        rest = write_now(self._plain_fd, response)
        if not rest:
            return
        held = sum(memoryview(part).nbytes for part in rest) if is_fetch else 0
        self._budget.hold(held)
        try:
            while rest and not self._closed and not self._transport.is_closing():
                head, rest = split_head(rest)
                self._transport.writelines(head)  # pauses writing until the socket drains
                await self._can_write.wait()
                if rest and not self._closed and not self._transport.get_write_buffer_size():
                    rest = write_now(self._plain_fd, rest)
        finally:
            self._budget.release(held)

    def _close_after_pending(self) -> None:
        asyncio.ensure_future(self.close_when_answered())

    async def close_when_answered(self, timeout: float | None = None) -> None:
        """Read no more requests, write the answers of those received (for at most
        ``timeout`` seconds), then close."""
        if self._transport is None or self._closed:
            return
        self._draining = True
        self._transport.pause_reading()
        if self._writer is not None:
            await asyncio.wait([self._writer], timeout=timeout)
        self._close_now()

    def _close_now(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def close(self) -> None:
        self._close_now()


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


class _FetchResponse(list):
    """The parts of a Fetch response: the one kind the response budget counts."""


@dataclasses.dataclass(slots=True)
class _Muting:
    """A response (parts; none for acks=0) after which the connection is muted (KIP-219)."""

    parts: list
    throttle_ms: int
    fetch: bool = False


def _with_throttle(api_key: int, body, throttle_ms: int):
    """``body`` answering with at least ``throttle_ms`` as its throttle time."""
    if isinstance(body, Encoded):
        if api_key == ApiKey.CREATE_TOPICS:  # its body starts with throttle_time_ms
            head = body.parts[0]
            ms = max(throttle_ms, int.from_bytes(head[:4], "big", signed=True))
            return Encoded([ms.to_bytes(4, "big", signed=True) + bytes(head[4:]), *body.parts[1:]])
        return body
    current = getattr(body, "throttle_time", None)
    if not isinstance(current, datetime.timedelta):
        return body
    wanted = datetime.timedelta(milliseconds=throttle_ms)
    return dataclasses.replace(body, throttle_time=wanted) if wanted > current else body


def _refusal(exc: UnsupportedVersion) -> bytes:
    """The answer to an unsupported version, where the protocol has one; else close."""
    if exc.api_key == ApiKey.API_VERSIONS and exc.correlation_id is not None:
        return encode_api_versions_fallback(exc.correlation_id)
    if exc.body is not None and exc.api_key == ApiKey.PRODUCE:
        try:
            answer = encode_legacy_produce_rejection(exc.api_version, exc.correlation_id, exc.body)
        except MalformedRequest as malformed:
            raise CloseConnection(str(malformed)) from None
        if answer is not None:
            return answer
        # acks=0: no answer is expected, so closing is the only way to say no (as Kafka does)
    raise CloseConnection(str(exc))
