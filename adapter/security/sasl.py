"""The SASL mechanisms a listener offers, each one exchange per authentication, sans-IO.

An exchange takes the client's tokens one at a time (:meth:`step`), answers each, and sets
``username`` when authentication has succeeded; any failure is :class:`SaslFailure` with the
message Kafka would send. SaslHandshake / SaslAuthenticate (the handlers) and the raw-token
framing of SaslHandshake v0 (adapter.connection) drive them.
"""

from __future__ import annotations

import hmac
from typing import Protocol

from .credentials import Credentials, Users
from .scram import MECHANISMS as SCRAM_MECHANISMS
from .scram import ScramError, ScramExchange

PLAIN = "PLAIN"
SUPPORTED = (PLAIN, *SCRAM_MECHANISMS)


class SaslFailure(Exception):
    """Authentication failed; the message is the one the client is told."""


class Exchange(Protocol):
    username: str | None

    @property
    def done(self) -> bool: ...

    def step(self, token: bytes) -> bytes: ...


class PlainExchange:
    """RFC 4616: one message ``authzid NUL authcid NUL password``, compared in constant time
    with the configured password (Kafka's PlainSaslServer messages)."""

    def __init__(self, credentials: Credentials | Users) -> None:
        self._credentials = credentials
        self.username: str | None = None

    @property
    def done(self) -> bool:
        return self.username is not None

    def step(self, token: bytes) -> bytes:
        if self.done:
            raise SaslFailure("Unexpected SASL/PLAIN message after authentication completed")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslFailure(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, username, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise SaslFailure("Invalid SASL/PLAIN response: not UTF-8") from None
        if not username:
            raise SaslFailure("Authentication failed: username not specified")
        if not password:
            raise SaslFailure("Authentication failed: password not specified")
        expected = self._credentials.plain_password(username)
        # compare even for an unknown user, so timing does not tell which users exist
        matches = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslFailure("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslFailure("Authentication failed: Client requested an authorization id that "
                              "is different from username")
        self.username = username
        return b""


class _Scram:
    """ScramExchange with its errors as SaslFailure."""

    def __init__(self, mechanism: str, credentials: Credentials | Users) -> None:
        self._exchange = ScramExchange(SCRAM_MECHANISMS[mechanism], credentials.scram)

    @property
    def username(self) -> str | None:
        return self._exchange.username

    @property
    def done(self) -> bool:
        return self._exchange.done

    def step(self, token: bytes) -> bytes:
        try:
            return self._exchange.step(token)
        except ScramError as exc:
            raise SaslFailure(str(exc)) from None


def start_exchange(mechanism: str, credentials: Credentials | Users) -> Exchange:
    """A new exchange for an enabled mechanism (the handshake has checked it is one)."""
    if mechanism == PLAIN:
        return PlainExchange(credentials)
    return _Scram(mechanism, credentials)
