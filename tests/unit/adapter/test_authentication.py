"""One connection's SASL state (adapter.security.authentication) and the failure log
(adapter.security.events), driven with explicit times: no sockets, no sleeps."""

from __future__ import annotations

import logging

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.codec.versions import ApiKey
from rmqkafka.adapter.config import ListenerSecurity, SecurityConfig
from rmqkafka.adapter.security import events
from rmqkafka.adapter.security.authentication import Authentication
from rmqkafka.adapter.security.credentials import Deletion, Upsertion
from rmqkafka.adapter.security.events import AuthenticationEvents
from rmqkafka.adapter.security.sasl import SaslFailure
from rmqkafka.adapter.security.scram import MIN_ITERATIONS, SHA_256, salted_password
from rmqkafka.adapter.security.service import Security

USERS = (("alice", "alice-pw"), ("bob", "bob-pw"))
MECHANISMS = ("PLAIN", "SCRAM-SHA-256")


def security(tmp_path, reauth_ms: int = 0) -> Security:
    listener = ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", MECHANISMS,
                                tuple((m, USERS) for m in MECHANISMS), None,
                                tuple((m, reauth_ms) for m in MECHANISMS))
    return Security.open(SecurityConfig(users=USERS, listeners=(listener,)), tmp_path)


def connection(security: Security) -> Authentication:
    return Authentication(security.listener("SASL_PLAINTEXT", "SASL_PLAINTEXT"), "10.0.0.7")


def plain_login(auth: Authentication, user: str, password: str, now: float) -> None:
    assert auth.handshake("PLAIN", 1) == ErrorCode.none
    auth.authenticate(f"\0{user}\0{password}".encode(), now)


def test_without_connections_max_reauth_ms_sessions_never_expire(tmp_path):
    auth = connection(security(tmp_path))
    plain_login(auth, "alice", "alice-pw", now=0.0)
    assert auth.session_lifetime_ms == 0
    assert not auth.expired(10**9)
    assert not auth.begin_reauthentication(5.0)  # the handshake is then ILLEGAL_SASL_STATE
    assert auth.handshake("PLAIN", 1) == ErrorCode.illegal_sasl_state


def test_the_session_lifetime_is_told_and_enforced(tmp_path):
    auth = connection(security(tmp_path, reauth_ms=1500))
    assert auth.handshake("PLAIN", 1) == ErrorCode.none
    auth.authenticate(b"\0alice\0alice-pw", 100.0)
    assert auth.session_lifetime_ms == 1500
    assert not auth.expired(101.5)
    assert auth.expired(101.501)


def test_re_authentication_renews_the_session(tmp_path):
    auth = connection(security(tmp_path, reauth_ms=1500))
    plain_login(auth, "alice", "alice-pw", now=0.0)
    assert auth.begin_reauthentication(1.2)
    assert not auth.allows(ApiKey.METADATA)  # during the exchange only SASL requests
    plain_login(auth, "alice", "alice-pw", now=1.3)
    assert auth.succeeded == ("PLAIN", True)
    assert not auth.expired(2.7)
    assert auth.expired(2.9)
    assert auth.allows(ApiKey.METADATA)


def test_at_most_one_re_authentication_a_second(tmp_path):
    auth = connection(security(tmp_path, reauth_ms=60_000))
    plain_login(auth, "alice", "alice-pw", now=0.0)
    assert auth.begin_reauthentication(10.0)
    plain_login(auth, "alice", "alice-pw", now=10.1)
    assert not auth.begin_reauthentication(10.9)
    assert auth.begin_reauthentication(11.0)


def test_re_authentication_may_not_change_the_principal(tmp_path):
    auth = connection(security(tmp_path, reauth_ms=1500))
    plain_login(auth, "alice", "alice-pw", now=0.0)
    assert auth.begin_reauthentication(1.0)
    with pytest.raises(SaslFailure, match="Cannot change principals during re-authentication from "
                                          "User.alice: User.bob"):
        plain_login(auth, "bob", "bob-pw", now=1.0)
    assert auth.failure.reauthentication and auth.failure.reason == events.SASL_AUTHENTICATION_FAILED
    assert str(auth.session.principal) == "User:alice"


def test_re_authentication_may_not_change_the_mechanism(tmp_path):
    auth = connection(security(tmp_path, reauth_ms=1500))
    plain_login(auth, "alice", "alice-pw", now=0.0)
    assert auth.begin_reauthentication(1.0)
    assert auth.handshake("SCRAM-SHA-256", 1) == ErrorCode.none  # Kafka fails the next step
    with pytest.raises(SaslFailure, match="SASL mechanism 'SCRAM-SHA-256' requested by client is not "
                                          "supported for re-authentication of mechanism 'PLAIN'"):
        auth.authenticate(b"n,,n=alice,r=abc", 1.0)


def test_re_authentication_checks_the_current_credentials(tmp_path):
    sec = security(tmp_path, reauth_ms=1500)
    salt = b"s" * 32
    sec.credentials.alter([], [Upsertion("carol", SHA_256.code, MIN_ITERATIONS, salt,
                                         salted_password(SHA_256, "carol-pw", salt, MIN_ITERATIONS))])
    auth = connection(sec)
    scram_login(auth, "carol", "carol-pw", now=0.0)
    sec.credentials.alter([Deletion("carol", SHA_256.code)], [])
    assert auth.begin_reauthentication(1.0)
    with pytest.raises(SaslFailure, match="invalid credentials"):
        scram_login(auth, "carol", "carol-pw", now=1.0)


def scram_login(auth: Authentication, user: str, password: str, now: float) -> None:
    import base64
    import hashlib
    import hmac

    assert auth.handshake("SCRAM-SHA-256", 1) == ErrorCode.none
    first_bare = f"n={user},r=clientnonce"
    server_first = auth.authenticate(f"n,,{first_bare}".encode(), now).decode()
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={fields['r']}"
    message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), message, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    auth.authenticate(f"{without_proof},p={proof}".encode(), now)


def test_an_unknown_mechanism_is_a_failure_without_the_clients_string_as_a_label(tmp_path):
    auth = connection(security(tmp_path))
    assert auth.handshake("X" * 1000, 1) == ErrorCode.unsupported_sasl_mechanism
    assert auth.failure.mechanism == "" and auth.failure.reason == events.UNSUPPORTED_SASL_MECHANISM


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_failures_are_counted_and_their_log_lines_rate_limited(caplog):
    clock = Clock()
    log = AuthenticationEvents(clock, burst=3, interval_s=1.0)
    with caplog.at_level(logging.INFO, logger="rmqkafka.authentication"):
        for _ in range(1000):  # a flood in one instant
            log.failure("SASL_PLAINTEXT", "PLAIN", events.SASL_AUTHENTICATION_FAILED, "10.0.0.7:5000",
                        "Authentication failed: Invalid username or password")
        assert log.failed[("SASL_PLAINTEXT", "PLAIN", events.SASL_AUTHENTICATION_FAILED)] == 1000
        assert len(caplog.records) == 3
        clock.now = 1.0
        log.failure("SSL", "", events.SSL_HANDSHAKE_FAILED, "10.0.0.8:6000", "SSL handshake failed: x")
    assert len(caplog.records) == 4
    last = caplog.records[-1].getMessage()
    assert last.startswith("Failed authentication with 10.0.0.8:6000 on listener SSL: SSL handshake failed")
    assert "(997 more failed authentications not logged)" in last
    assert "10.0.0.7:5000 on listener SASL_PLAINTEXT (PLAIN): Authentication failed" in caplog.records[0].getMessage()
