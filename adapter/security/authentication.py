"""One connection's authentication state: who it is, and what it may send before that.

On a SASL listener a connection starts unauthenticated and may send only ApiVersions,
SaslHandshake and then SaslAuthenticate (or, after SaslHandshake v0, bare SASL tokens in
size-prefixed frames, Kafka's pre-1.0 framing); anything else closes it, as Kafka does.
Until it has authenticated, a frame may not exceed ``sasl.server.max.receive.size``, so an
anonymous client cannot make the broker buffer large requests. A failed authentication is
answered (SASL_AUTHENTICATION_FAILED with Kafka's message) and the connection is closed;
the connection answers it ``connection.failed.authentication.delay.ms`` late.

Re-authentication (KIP-368): with ``connections.max.reauth.ms`` > 0 for the listener and
mechanism, SaslAuthenticate v1+ tells the client its session lifetime. A SaslHandshake on
an authenticated connection whose session has a lifetime starts a re-authentication (at most
one a second, as in Kafka); it must use the same mechanism and end with the same principal,
and it checks the user's current credentials. Once the lifetime has passed, the first
request that does not start a re-authentication closes the connection. Time is the
caller's ``now`` (monotonic seconds), so all of this is tested with a hand-moved clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ..codec.versions import ApiKey
from ..config import SASL_PLAINTEXT, SASL_SSL
from . import events
from .principal import ANONYMOUS, Principal, Session, user
from .sasl import Exchange, SaslFailure, start_exchange
from .service import ListenerAuth

_BEFORE_HANDSHAKE = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE})
_DURING_EXCHANGE = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE})
_MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS


@dataclass(frozen=True, slots=True)
class Failure:
    """Why an authentication failed: a bounded ``reason`` label and the message."""

    mechanism: str  # an enabled mechanism, or "" (never a string the client chose)
    reason: str
    message: str
    reauthentication: bool


class Authentication:
    def __init__(self, listener: ListenerAuth, client_host: str, tls_principal: Principal | None = None) -> None:
        self.sasl = listener.config.protocol in (SASL_PLAINTEXT, SASL_SSL)
        self.session = Session(tls_principal or ANONYMOUS, client_host)
        self.authenticated = not self.sasl
        self.failure: Failure | None = None  # set: the connection is closed once this is answered
        self.raw_tokens = False  # SaslHandshake v0: tokens follow without Kafka headers
        self.session_lifetime_ms = 0  # what the SaslAuthenticate answer being built tells the client
        self.reauthenticating = False
        self.succeeded: tuple[str, bool] | None = None  # (mechanism, re-authentication) of the last success
        self._listener = listener
        self._mechanisms = listener.config.sasl_mechanisms
        self._exchange: Exchange | None = None
        self._mechanism = ""  # of the current exchange, or of the session once authenticated
        self._bad_mechanism: str | None = None  # a re-authentication asked for another mechanism
        self._expires_at: float | None = None  # monotonic; None: the session never expires
        self._reauth_started_at: float | None = None

    @property
    def failed(self) -> bool:
        return self.failure is not None

    @property
    def listener(self) -> str:
        return self._listener.config.name

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self._mechanisms if self.sasl else ()

    def allows(self, api_key: int) -> bool:
        """Whether a request with this api key may come now."""
        if self.authenticated and not self.reauthenticating:
            return True
        return api_key in (_BEFORE_HANDSHAKE if self._exchange is None else _DURING_EXCHANGE)

    def expired(self, now: float) -> bool:
        return self.authenticated and self._expires_at is not None and now > self._expires_at

    def begin_reauthentication(self, now: float) -> bool:
        """Called for a SaslHandshake on an authenticated connection: whether it starts a
        re-authentication (the session has a lifetime, and the last one began at least a
        second ago); if not, the handshake is answered ILLEGAL_SASL_STATE, as in Kafka."""
        if not self.authenticated or self._expires_at is None or self.reauthenticating:
            return False
        if self._reauth_started_at is not None and now - self._reauth_started_at < _MIN_REAUTH_INTERVAL_S:
            return False
        self._reauth_started_at = now
        self.reauthenticating = True
        return True

    def fail(self, reason: str, message: str, mechanism: str = "") -> None:
        self.failure = Failure(mechanism, reason, message, self.reauthenticating)

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if not self.sasl or self._exchange is not None or (self.authenticated and not self.reauthenticating):
            return ErrorCode.illegal_sasl_state
        if mechanism not in self._mechanisms:
            self.fail(events.UNSUPPORTED_SASL_MECHANISM, f"Unsupported SASL mechanism {mechanism}")
            return ErrorCode.unsupported_sasl_mechanism
        if self.reauthenticating and mechanism != self._mechanism:
            # Kafka accepts the handshake and fails the SaslAuthenticate that follows
            self._bad_mechanism = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                   f"re-authentication of mechanism '{self._mechanism}'")
        self._exchange = start_exchange(mechanism, self._listener.users[mechanism])
        self._mechanism = mechanism
        self.raw_tokens = version == 0
        return ErrorCode.none

    def authenticate(self, token: bytes, now: float) -> bytes:
        """The server's answer to one client token; SaslFailure when authentication failed
        (the connection is then to be closed)."""
        self.session_lifetime_ms = 0  # told only with the answer that completes the exchange
        exchange = self._exchange
        if exchange is None:
            raise IllegalSaslState("SaslAuthenticate request received after successful authentication"
                                   if self.authenticated else "SaslAuthenticate before SaslHandshake")
        try:
            if self._bad_mechanism is not None:
                raise SaslFailure(self._bad_mechanism)
            answer = exchange.step(token)
            if exchange.done:
                assert exchange.username is not None
                principal = user(exchange.username)
                if self.reauthenticating and principal != self.session.principal:
                    previous = self.session.principal
                    raise SaslFailure(f"Cannot change principals during re-authentication from "
                                      f"{previous.type}.{previous.name}: {principal.type}.{principal.name}")
        except SaslFailure as exc:
            self.fail(events.SASL_AUTHENTICATION_FAILED, str(exc), self._mechanism)
            raise
        if exchange.done:
            self.succeeded = (self._mechanism, self.reauthenticating)
            self.session = Session(principal, self.session.client_host)
            self.authenticated = True
            self.reauthenticating = False
            self.raw_tokens = False
            self._exchange = None
            lifetime_ms = self._listener.config.reauth_ms(self._mechanism)
            self.session_lifetime_ms = max(0, lifetime_ms)
            self._expires_at = now + lifetime_ms / 1000 if lifetime_ms > 0 else None
        return answer


class IllegalSaslState(Exception):
    """A SASL request out of order (ILLEGAL_SASL_STATE)."""
