"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) on the server side, sans-IO.

A broker never keeps passwords for SCRAM: a :class:`ScramCredential` holds the salt, the
iteration count and the two derived keys, exactly what Kafka stores (and what
AlterUserScramCredentials sends, as a salted password). :class:`ScramExchange` runs the
two round trips of one authentication:

    client-first  n,,n=alice,r=<client nonce>
    server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>
    client-final  c=biws,r=<both nonces>,p=<proof>
    server-final  v=<server signature>

Every check Kafka's ScramSaslServer makes is made here: the nonce of the final message must
be the one the server sent (CVE-2024-56128's missing check), the channel binding must match
the GS2 header, the proof is compared in constant time (CVE-2021-38153), and an unknown user
fails exactly like a wrong password, with the same message.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism minimum for both mechanisms
MAX_ITERATIONS = 16384  # Kafka's maximum


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    name: str  # the SASL mechanism name
    code: int  # AlterUserScramCredentials / DescribeUserScramCredentials mechanism code
    hash_name: str

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS = {m.name: m for m in (SHA_256, SHA_512)}
BY_CODE = {m.code: m for m in (SHA_256, SHA_512)}


class ScramError(Exception):
    """The exchange failed; the message is safe to show the client."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the broker keeps per user and mechanism (RFC 5802's StoredKey and ServerKey)."""

    mechanism: ScramMechanism
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def from_salted_password(cls, mechanism: ScramMechanism, salt: bytes, iterations: int,
                             salted_password: bytes) -> ScramCredential:
        client_key = _hmac(mechanism, salted_password, b"Client Key")
        return cls(mechanism, salt, iterations, hashlib.new(mechanism.hash_name, client_key).digest(),
                   _hmac(mechanism, salted_password, b"Server Key"))

    @classmethod
    def from_password(cls, mechanism: ScramMechanism, password: str, iterations: int = MIN_ITERATIONS,
                      salt: bytes | None = None) -> ScramCredential:
        salt = os.urandom(mechanism.digest_size) if salt is None else salt
        return cls.from_salted_password(mechanism, salt, iterations,
                                         salted_password(mechanism, password, salt, iterations))

    def to_json(self) -> dict:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "iterations": self.iterations,
                "stored_key": b64(self.stored_key).decode(), "server_key": b64(self.server_key).decode()}

    @classmethod
    def from_json(cls, mechanism: ScramMechanism, data: dict) -> ScramCredential:
        b64 = base64.b64decode
        return cls(mechanism, b64(data["salt"]), int(data["iterations"]), b64(data["stored_key"]),
                   b64(data["server_key"]))


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def _attributes(message: str) -> dict[str, str]:
    attributes = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"Invalid SCRAM message attribute `{part}`")
        attributes.setdefault(key, value)
    return attributes


def _saslname(value: str) -> str:
    """RFC 5802 5.1: ``=2C`` is a comma and ``=3D`` an equals sign; any other ``=`` is bad."""
    if "=" in value.replace("=2C", "").replace("=3D", ""):
        raise ScramError("Invalid username encoding")
    return value.replace("=2C", ",").replace("=3D", "=")


class ScramExchange:
    """One SCRAM authentication: feed each client message to :meth:`step`, send back what it
    returns; :attr:`username` is set once the exchange has succeeded (``done``)."""

    def __init__(self, mechanism: ScramMechanism,
                 lookup: Callable[[str, ScramMechanism], ScramCredential | None],
                 nonce: Callable[[], str] | None = None) -> None:
        self._mechanism = mechanism
        self._lookup = lookup
        self._nonce = nonce or (lambda: base64.b64encode(os.urandom(24)).decode())
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2_header = ""
        self._nonce_sent = ""
        self._user = ""
        self._credential: ScramCredential | None = None
        self.username: str | None = None

    @property
    def done(self) -> bool:
        return self.username is not None

    def step(self, message: bytes) -> bytes:
        try:
            text = message.decode("utf-8")
        except UnicodeDecodeError:
            raise ScramError("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._first(text)
        if self._state == "final":
            return self._final(text)
        raise ScramError("Unexpected SCRAM message after the exchange completed")

    def _first(self, text: str) -> bytes:
        flag, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or flag not in ("n", "y"):
            # "p=..." asks for channel binding, which Kafka does not support either
            raise ScramError(f"Invalid SCRAM client first message (GS2 header `{flag}`)")
        attributes = _attributes(bare)
        if "n" not in attributes or "r" not in attributes or not attributes["r"]:
            raise ScramError("Invalid SCRAM client first message: no username or nonce")
        self._user = _saslname(attributes["n"])
        if authzid and _saslname(authzid.removeprefix("a=")) != self._user:
            raise ScramError("Authentication failed: Client requested an authorization id that "
                             "is different from username")
        if attributes.get("tokenauth", "false").lower() == "true":
            raise ScramError("Authentication failed: delegation tokens are not supported")
        credential = self._lookup(self._user, self._mechanism)
        if credential is None:
            raise ScramError(_invalid_credentials(self._mechanism))
        self._credential = credential
        self._gs2_header = f"{flag},{authzid},"
        self._client_first_bare = bare
        self._nonce_sent = attributes["r"] + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce_sent},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        self._state = "failed"
        without_proof, sep, proof_part = text.rpartition(",p=")
        if not sep:
            raise ScramError("Invalid SCRAM client final message: no proof")
        attributes = _attributes(without_proof)
        if attributes.get("r") != self._nonce_sent:
            raise ScramError("Invalid SCRAM client final message: nonce mismatch")
        if attributes.get("c") != base64.b64encode(self._gs2_header.encode()).decode():
            raise ScramError("Invalid SCRAM client final message: channel binding mismatch")
        credential = self._credential
        assert credential is not None
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise ScramError("Invalid SCRAM client final message: proof is not base64") from None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self._mechanism, credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError(_invalid_credentials(self._mechanism))
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        computed = hashlib.new(self._mechanism.hash_name, client_key).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise ScramError(_invalid_credentials(self._mechanism))
        server_signature = _hmac(self._mechanism, credential.server_key, auth_message)
        self._state = "complete"
        self.username = self._user
        return b"v=" + base64.b64encode(server_signature)


def _invalid_credentials(mechanism: ScramMechanism) -> str:
    return (f"Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {mechanism.name}")
