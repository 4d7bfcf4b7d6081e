"""One connection's authentication state: who it is, and what it may send before that.

On a SASL listener a connection starts unauthenticated and may send only ApiVersions,
SaslHandshake and then SaslAuthenticate (or, after SaslHandshake v0, bare SASL tokens in
size-prefixed frames, Kafka's pre-1.0 framing); anything else closes it, as Kafka does.
Until it has authenticated, a frame may not exceed ``sasl.server.max.receive.size``, so an
anonymous client cannot make the broker buffer large requests. A failed authentication is
answered (SASL_AUTHENTICATION_FAILED with Kafka's message) and the connection is closed.
Re-authentication (KIP-368) is not offered: the session lifetime is 0.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec.versions import ApiKey
from ..config import SASL_PLAINTEXT, SASL_SSL
from .principal import ANONYMOUS, Principal, Session, user
from .sasl import Exchange, SaslFailure, start_exchange
from .service import ListenerAuth

_BEFORE_HANDSHAKE = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE})
_DURING_EXCHANGE = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_AUTHENTICATE})


class Authentication:
    def __init__(self, listener: ListenerAuth, client_host: str, tls_principal: Principal | None = None) -> None:
        self.sasl = listener.config.protocol in (SASL_PLAINTEXT, SASL_SSL)
        self.session = Session(tls_principal or ANONYMOUS, client_host)
        self.authenticated = not self.sasl
        self.failed = False  # the connection is closed once this request is answered
        self.raw_tokens = False  # SaslHandshake v0: tokens follow without Kafka headers
        self._mechanisms = listener.config.sasl_mechanisms
        self._listener = listener
        self._exchange: Exchange | None = None

    @property
    def mechanisms(self) -> tuple[str, ...]:
        return self._mechanisms if self.sasl else ()

    def allows(self, api_key: int) -> bool:
        """Whether a request with this api key may come now."""
        if self.authenticated:
            return True
        return api_key in (_BEFORE_HANDSHAKE if self._exchange is None else _DURING_EXCHANGE)

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if not self.sasl or self.authenticated or self._exchange is not None:
            return ErrorCode.illegal_sasl_state
        if mechanism not in self._mechanisms:
            self.failed = True
            return ErrorCode.unsupported_sasl_mechanism
        self._exchange = start_exchange(mechanism, self._listener.users[mechanism])
        self.raw_tokens = version == 0
        return ErrorCode.none

    def authenticate(self, token: bytes) -> bytes:
        """The server's answer to one client token; SaslFailure when authentication failed
        (the connection is then to be closed)."""
        exchange = self._exchange
        if exchange is None or self.authenticated:
            raise IllegalSaslState("SaslAuthenticate request received after successful authentication"
                                   if self.authenticated else "SaslAuthenticate before SaslHandshake")
        try:
            answer = exchange.step(token)
        except SaslFailure:
            self.failed = True
            raise
        if exchange.done:
            assert exchange.username is not None
            self.session = Session(user(exchange.username), self.session.client_host)
            self.authenticated = True
            self.raw_tokens = False
        return answer


class IllegalSaslState(Exception):
    """A SASL request out of order (ILLEGAL_SASL_STATE)."""
