"""SASL mechanisms, sans-IO: SCRAM against RFC 7677's exchange and each check Kafka's
ScramSaslServer makes, PLAIN against PlainSaslServer's rules."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from rmqkafka.adapter.security.credentials import Credentials
from rmqkafka.adapter.security.sasl import PlainExchange, SaslFailure
from rmqkafka.adapter.security.scram import (
    SHA_256,
    SHA_512,
    ScramCredential,
    ScramError,
    ScramExchange,
)

# RFC 7677 section 3
CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = f"n,,n=user,r={CLIENT_NONCE}".encode()
CLIENT_FINAL = (f"c=biws,r={CLIENT_NONCE}{SERVER_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=").encode()


def rfc_exchange(users=None) -> ScramExchange:
    users = {"user": ScramCredential.from_password(SHA_256, "pencil", 4096, SALT)} if users is None else users
    return ScramExchange(SHA_256, lambda name, mechanism: users.get(name), nonce=lambda: SERVER_NONCE)


def test_rfc_7677_exchange():
    exchange = rfc_exchange()
    assert exchange.step(CLIENT_FIRST) == (
        f"r={CLIENT_NONCE}{SERVER_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode())
    assert exchange.step(CLIENT_FINAL) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert exchange.done and exchange.username == "user"


def test_a_wrong_password_fails_with_kafkas_message():
    users = {"user": ScramCredential.from_password(SHA_256, "not pencil", 4096, SALT)}
    exchange = rfc_exchange(users)
    exchange.step(CLIENT_FIRST)
    with pytest.raises(ScramError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        exchange.step(CLIENT_FINAL)
    assert not exchange.done
    with pytest.raises(ScramError):  # a failed exchange stays failed
        exchange.step(CLIENT_FINAL)


def test_an_unknown_user_fails_like_a_wrong_password():
    exchange = rfc_exchange({})
    with pytest.raises(ScramError, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        exchange.step(CLIENT_FIRST)


def test_the_final_nonce_must_be_the_one_the_server_sent():
    # CVE-2024-56128: a final message with another nonce must fail even with a valid proof
    exchange = rfc_exchange()
    exchange.step(CLIENT_FIRST)
    replayed = CLIENT_FINAL.replace(SERVER_NONCE.encode(), b"forged-nonce")
    with pytest.raises(ScramError, match="nonce mismatch"):
        exchange.step(replayed)


def test_channel_binding_must_match_the_gs2_header():
    exchange = rfc_exchange()
    exchange.step(CLIENT_FIRST)
    with pytest.raises(ScramError, match="channel binding"):
        exchange.step(CLIENT_FINAL.replace(b"c=biws", b"c=eSws"))


@pytest.mark.parametrize("first", [b"p=tls-unique,,n=user,r=abc", b"x", b"n,,r=abc", b"n,,n=user", b"\xff"])
def test_malformed_or_channel_bound_first_messages_are_refused(first):
    with pytest.raises(ScramError):
        rfc_exchange().step(first)


def test_an_authorization_id_other_than_the_user_is_refused():
    with pytest.raises(ScramError, match="authorization id"):
        rfc_exchange().step(f"n,a=admin,n=user,r={CLIENT_NONCE}".encode())


def test_usernames_are_decoded_and_bad_escapes_refused():
    seen = []
    exchange = ScramExchange(SHA_512, lambda name, m: seen.append(name))
    with pytest.raises(ScramError):
        exchange.step(b"n,,n=a=2Cb=3Dc,r=x")
    assert seen == ["a,b=c"]
    with pytest.raises(ScramError, match="encoding"):
        ScramExchange(SHA_512, lambda name, m: None).step(b"n,,n=a=b,r=x")


def client_proof(mechanism, password, salt, iterations, auth_message) -> bytes:
    salted = hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", mechanism.hash_name).digest()
    stored = hashlib.new(mechanism.hash_name, client_key).digest()
    signature = hmac.new(stored, auth_message, mechanism.hash_name).digest()
    return bytes(a ^ b for a, b in zip(client_key, signature))


def test_sha_512_round_trip_with_a_derived_credential():
    credential = ScramCredential.from_password(SHA_512, "secret")
    exchange = ScramExchange(SHA_512, lambda name, m: credential if name == "bob" else None)
    bare = "n=bob,r=cnonce"
    server_first = exchange.step(f"n,,{bare}".encode()).decode()
    attrs = dict(part.split("=", 1) for part in server_first.split(","))
    without_proof = f"c=biws,r={attrs['r']}"
    auth = f"{bare},{server_first},{without_proof}".encode()
    proof = client_proof(SHA_512, "secret", base64.b64decode(attrs["s"]), int(attrs["i"]), auth)
    answer = exchange.step(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())
    assert answer.startswith(b"v=") and exchange.username == "bob"


@pytest.fixture
def credentials(tmp_path):
    return Credentials({"alice": "alice-secret"}, tmp_path)


def test_plain_accepts_the_configured_password(credentials):
    exchange = PlainExchange(credentials)
    assert exchange.step(b"\0alice\0alice-secret") == b""
    assert exchange.username == "alice"


def test_plain_authzid_may_only_name_the_user(credentials):
    assert PlainExchange(credentials).step(b"alice\0alice\0alice-secret") == b""
    with pytest.raises(SaslFailure, match="authorization id"):
        PlainExchange(credentials).step(b"admin\0alice\0alice-secret")


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", "Invalid username or password"),
    (b"\0mallory\0alice-secret", "Invalid username or password"),
    (b"\0\0alice-secret", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"alice\0alice-secret", "expected 3 tokens, got 2"),
])
def test_plain_failures(credentials, token, message):
    with pytest.raises(SaslFailure, match=message):
        PlainExchange(credentials).step(token)
