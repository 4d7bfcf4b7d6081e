"""SASL (PLAIN, SCRAM-SHA-256/512), TLS listeners and ACLs on a real broker, through
confluent-kafka, aiokafka and kafka-python, plus raw frames for what clients never send.

Certificates come from a throwaway CA made by trustme for each test module.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicCollection,
)
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from kio.schema.errors import ErrorCode
from rawkafka import KafkaRaw, make_batch

trustme = pytest.importorskip("trustme")

USERS = 'user_admin="admin-secret" user_alice="alice-secret" user_bob="bob-secret"'
JAAS = f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {USERS};\n"
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A CA, the broker's certificate for 127.0.0.1, and a client certificate CN=alice."""
    where = tmp_path_factory.mktemp("pki")
    ca = trustme.CA()
    paths = {name: where / f"{name}.pem" for name in ("ca", "server", "client_cert", "client_key")}
    ca.cert_pem.write_to_path(paths["ca"])
    ca.issue_cert("127.0.0.1", "localhost").private_key_and_cert_chain_pem.write_to_path(paths["server"])
    client = ca.issue_cert("alice@example.org", common_name="alice", organization_name="rmqkafka",
                           organization_unit_name="tests")
    client.cert_chain_pems[0].write_to_path(paths["client_cert"])
    client.private_key_pem.write_to_path(paths["client_key"])
    return paths


def start(broker_factory, tmp_path: Path, properties: str, name: str = "server.properties", **options):
    config = tmp_path / name
    config.write_text(properties)
    return broker_factory(config_file=config, **options)


WITH_METRICS = {"args": ["--metrics-port", "0"]}


def metric(broker, name: str, **labels: str) -> float:
    """A sample's value from /metrics (0 when it is not there)."""
    import urllib.request

    text = urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10).read().decode()
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + ("{" + wanted + "}" if labels else " ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def sasl_login(conn: KafkaRaw, user: str, password: str, mechanism: str = "PLAIN"):
    """SaslHandshake v1 + SaslAuthenticate v2 with PLAIN over raw frames: the answer."""
    assert conn.request(17, 1, mechanism=mechanism).error_code == ErrorCode.none
    return conn.request(36, 2, auth_bytes=f"\0{user}\0{password}".encode())


def sasl_conf(broker, mechanism: str, user: str, password: str, protocol: str = "SASL_PLAINTEXT") -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": protocol,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}


def produce(conf: dict, topic: str, values: list[bytes], **extra) -> list:
    """Produce with confluent-kafka; the delivery errors (None for delivered)."""
    errors: list = []
    producer = Producer({**conf, "message.timeout.ms": 10000, **extra})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(15)
    return errors


def consume(conf: dict, topic: str, count: int, group: str | None = None, timeout: float = 15) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": group or f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        end = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < end:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            got.append(message.value())
        if got and group is not None:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


def auth_failure(conf: dict) -> str:
    """The authentication error a client configured so reports (empty if none)."""
    seen: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": seen.append})
    end = time.monotonic() + 5
    while not seen and time.monotonic() < end:
        producer.poll(0.2)
    return " ".join(str(e) for e in seen)


# ---------------------------------------------------------------------------------- SASL


def test_sasl_plaintext_every_mechanism_with_every_client(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    for mechanism in MECHANISMS:
        conf = sasl_conf(broker, mechanism, "alice", "alice-secret")
        assert produce(conf, "sasl", [mechanism.encode()]) == [None]
    assert sorted(consume(sasl_conf(broker, "SCRAM-SHA-512", "bob", "bob-secret"), "sasl", 3)) == sorted(
        m.encode() for m in MECHANISMS)

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def with_aiokafka(mechanism: str) -> bytes:
        options = dict(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                       sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="alice-secret")
        producer = AIOKafkaProducer(**options)
        await producer.start()
        try:
            await producer.send_and_wait("aio", f"aio-{mechanism}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio", auto_offset_reset="earliest", **options)
        await consumer.start()
        try:
            return (await asyncio.wait_for(consumer.getone(), 10)).value
        finally:
            await consumer.stop()

    for mechanism in MECHANISMS:
        assert asyncio.run(with_aiokafka(mechanism)) == b"aio-PLAIN"  # the first record of "aio"

    from kafka import KafkaProducer

    for mechanism in MECHANISMS:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mechanism, sasl_plain_username="bob",
                                 sasl_plain_password="bob-secret")
        producer.send("kp", mechanism.encode()).get(10)
        producer.close()
    assert len(consume(sasl_conf(broker, "PLAIN", "admin", "admin-secret"), "kp", 3)) == 3


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_wrong_passwords_unknown_users_and_no_credentials_are_refused(broker_factory, tmp_path, mechanism):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    assert "Authentication failed" in auth_failure(sasl_conf(broker, mechanism, "alice", "wrong"))
    assert "Authentication failed" in auth_failure(sasl_conf(broker, mechanism, "mallory", "alice-secret"))
    with pytest.raises(KafkaException):  # a client without SASL cannot even read metadata
        AdminClient({"bootstrap.servers": broker.bootstrap_servers}).list_topics(timeout=3)

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    async def aiokafka_login() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism=mechanism, sasl_plain_username="alice",
                                    sasl_plain_password="wrong", request_timeout_ms=3000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(AioKafkaError):
        asyncio.run(aiokafka_login())

    from kafka import KafkaProducer
    from kafka.errors import KafkaError as KafkaPythonError

    with pytest.raises(KafkaPythonError):
        KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="wrong",
                      max_block_ms=3000, bootstrap_timeout_ms=3000).send("x", b"x").get(5)
    assert "SASL authentication failed" not in broker.stderr or "Traceback" not in broker.stderr


def raw_socket(broker) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=5)
    sock.settimeout(5)
    return sock


def is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_before_authentication_only_the_handshake_is_served(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    with KafkaRaw(broker.host, broker.port) as conn:  # ApiVersions is allowed
        assert conn.request(18, 3, client_software_name="t", client_software_version="1").error_code == 0
    # a Metadata request (api key 3, v0, no topics) before authenticating closes the connection
    with raw_socket(broker) as sock:
        header = struct.pack(">hhih", 3, 0, 7, 1) + b"t"
        sock.sendall(struct.pack(">i", len(header) + 4) + header + struct.pack(">i", 0))
        assert is_closed(sock)
    # an anonymous client may not make the broker buffer a large frame (sasl.server.max.receive.size)
    with raw_socket(broker) as sock:
        sock.sendall(struct.pack(">i", 600_000) + b"\0" * 1024)
        assert is_closed(sock)
    assert "before SASL authentication" in broker.stderr


def test_sasl_handshake_v0_then_bare_tokens(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)

    def handshake_v0(sock: socket.socket) -> int:
        body = struct.pack(">hhih", 17, 0, 1, 1) + b"t" + struct.pack(">h", 5) + b"PLAIN"
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", sock.recv(4))[0]
        answer = sock.recv(size)
        return struct.unpack(">h", answer[4:6])[0]

    with raw_socket(broker) as sock:
        assert handshake_v0(sock) == 0
        token = b"\0alice\0alice-secret"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert sock.recv(4) == b"\0\0\0\0"  # PLAIN's empty answer, size-prefixed
        metadata = struct.pack(">hhih", 3, 1, 9, 1) + b"t" + struct.pack(">i", -1)
        sock.sendall(struct.pack(">i", len(metadata)) + metadata)
        size = struct.unpack(">i", sock.recv(4))[0]
        assert struct.unpack(">i", sock.recv(size)[:4])[0] == 9  # answered: authenticated
    with raw_socket(broker) as sock:
        assert handshake_v0(sock) == 0
        token = b"\0alice\0wrong"
        sock.sendall(struct.pack(">i", len(token)) + token)
        assert is_closed(sock)


def test_failed_logins_are_answered_late_without_holding_up_anyone(broker_factory, tmp_path):
    # connection.failed.authentication.delay.ms: Kafka's delayed close after a failed login
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS
                   + "connection.failed.authentication.delay.ms=1500\n", **WITH_METRICS)
    with KafkaRaw(broker.host, broker.port) as guesser, KafkaRaw(broker.host, broker.port) as other:
        assert guesser.request(17, 1, mechanism="PLAIN").error_code == ErrorCode.none
        began = time.monotonic()
        correlation = guesser.send(36, 2, auth_bytes=b"\0alice\0guess")
        assert sasl_login(other, "bob", "bob-secret").error_code == ErrorCode.none  # served meanwhile
        assert other.api_versions().error_code == ErrorCode.none
        assert time.monotonic() - began < 1.4  # ...before the guess is answered
        answer = guesser.receive(36, 2, correlation, timeout=10)
        assert time.monotonic() - began >= 1.45
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert guesser.wait_closed()
    assert metric(broker, "rmqk_failed_authentication_total", listener="SASL_PLAINTEXT", mechanism="PLAIN",
                  reason="sasl_authentication_failed") == 1
    assert metric(broker, "rmqk_successful_authentication_total", listener="SASL_PLAINTEXT", mechanism="PLAIN") == 1
    assert "Failed authentication with 127.0.0.1:" in broker.stderr
    assert "on listener SASL_PLAINTEXT (PLAIN): Authentication failed: Invalid username or password" in broker.stderr


def test_the_default_delay_slows_a_password_guesser(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    began = time.monotonic()
    for guess in range(5):  # each guess costs a connection and at least 100 ms
        with KafkaRaw(broker.host, broker.port) as conn:
            assert sasl_login(conn, "alice", f"guess-{guess}").error_code == ErrorCode.sasl_authentication_failed
            assert conn.wait_closed()
    assert time.monotonic() - began >= 0.5
    with KafkaRaw(broker.host, broker.port) as conn:  # an unknown mechanism is a failure too
        began = time.monotonic()
        assert conn.request(17, 1, mechanism="GSSAPI").error_code == ErrorCode.unsupported_sasl_mechanism
        assert time.monotonic() - began >= 0.1
        assert conn.wait_closed()


def test_failed_tls_handshakes_are_logged_and_counted(broker_factory, tmp_path, pki):
    broker = start(broker_factory, tmp_path, tls_properties(pki, client_auth="required"), **WITH_METRICS)
    with raw_socket(broker) as sock:  # plaintext on the TLS port
        sock.sendall(struct.pack(">i", 10) + b"\0" * 10)
        assert is_closed(sock)
    conf = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"])}
    with pytest.raises(KafkaException):  # no client certificate
        AdminClient(conf).list_topics(timeout=3)
    failed = metric(broker, "rmqk_failed_authentication_total", listener="SSL", mechanism="",
                    reason="ssl_handshake_failed")
    assert failed >= 2
    assert "Failed authentication with 127.0.0.1:" in broker.stderr
    assert "on listener SSL: SSL handshake failed" in broker.stderr
    with_cert = {**conf, "ssl.certificate.location": str(pki["client_cert"]), "ssl.key.location": str(pki["client_key"])}
    assert produce(with_cert, "tls", [b"still serving"]) == [None]


REAUTH = "connections.max.reauth.ms=1500\n"


def test_sessions_expire_unless_the_client_re_authenticates(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS + REAUTH,
                   **WITH_METRICS)
    with KafkaRaw(broker.host, broker.port) as conn:
        answer = sasl_login(conn, "alice", "alice-secret")
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime.total_seconds() == 1.5  # KIP-368: SaslAuthenticate v1+
        assert conn.metadata([]).brokers
        time.sleep(1.1)  # at least a second after the first login: a re-authentication may start
        again = sasl_login(conn, "alice", "alice-secret")  # on the open connection
        assert (again.error_code, again.session_lifetime.total_seconds()) == (ErrorCode.none, 1.5)
        renewed = time.monotonic()
        while time.monotonic() - renewed < 0.9:  # still served after the first session's end
            assert conn.metadata([]).brokers
            time.sleep(0.2)
        time.sleep(1.0)  # now past the renewed session's end too
        conn.send(3, 1, topics=None)
        assert conn.wait_closed()
    assert metric(broker, "rmqk_successful_reauthentication_total", listener="SASL_PLAINTEXT", mechanism="PLAIN") == 1
    assert metric(broker, "rmqk_expired_sessions_closed_total", listener="SASL_PLAINTEXT") == 1
    with KafkaRaw(broker.host, broker.port) as conn:  # a re-authentication must keep the principal
        assert sasl_login(conn, "alice", "alice-secret").error_code == ErrorCode.none
        time.sleep(1.1)
        answer = sasl_login(conn, "bob", "bob-secret")
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == "Cannot change principals during re-authentication from User.alice: User.bob"
        assert conn.wait_closed()


def test_without_a_session_lifetime_a_second_handshake_is_refused(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    with KafkaRaw(broker.host, broker.port) as conn:
        answer = sasl_login(conn, "alice", "alice-secret")
        assert (answer.error_code, answer.session_lifetime.total_seconds()) == (ErrorCode.none, 0)
        assert conn.request(17, 1, mechanism="PLAIN").error_code == ErrorCode.illegal_sasl_state
        assert conn.metadata([]).brokers


def test_librdkafka_re_authenticates_and_a_deleted_credential_stops_working(broker_factory, tmp_path):
    # librdkafka re-authenticates at 90 % of the lifetime: 3 s leaves it 300 ms on a busy machine
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS
                   + "connections.max.reauth.ms=3000\n", **WITH_METRICS)
    admin = AdminClient(sasl_conf(broker, "PLAIN", "admin", "admin-secret"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-pw")])["carol"].result(10)
    errors: list = []
    producer = Producer({**sasl_conf(broker, "SCRAM-SHA-256", "carol", "carol-pw"), "message.timeout.ms": 10000,
                         "error_cb": errors.append})
    delivered: list = []
    end = time.monotonic() + 7
    while time.monotonic() < end:  # one connection, kept for more than two session lifetimes
        producer.produce("reauth", b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.flush(10)
        time.sleep(0.25)
    assert delivered and set(delivered) == {None}
    assert metric(broker, "rmqk_successful_reauthentication_total", listener="SASL_PLAINTEXT",
                  mechanism="SCRAM-SHA-256") >= 2
    assert metric(broker, "rmqk_expired_sessions_closed_total", listener="SASL_PLAINTEXT") == 0

    from confluent_kafka.admin import UserScramCredentialDeletion

    admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)]
                                       )["carol"].result(10)
    end = time.monotonic() + 10
    while time.monotonic() < end and not any("Authentication failed" in str(e) for e in errors):
        producer.poll(0.2)
    assert any("Authentication failed" in str(e) for e in errors), errors
    assert metric(broker, "rmqk_failed_authentication_total", listener="SASL_PLAINTEXT", mechanism="SCRAM-SHA-256",
                  reason="sasl_authentication_failed") >= 1


def test_scram_credentials_are_managed_through_the_admin_api_and_kept(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    admin = AdminClient(sasl_conf(broker, "PLAIN", "admin", "admin-secret"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-pw")])
    futures["carol"].result(10)
    described = admin.describe_user_scram_credentials(["carol"])
    description = described["carol"].result(10) if isinstance(described, dict) else described.result(10)["carol"]
    assert [(c.mechanism, c.iterations) for c in description.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)]
    assert produce(sasl_conf(broker, "SCRAM-SHA-512", "carol", "carol-pw"), "scram", [b"c"]) == [None]
    assert "Authentication failed" in auth_failure(sasl_conf(broker, "SCRAM-SHA-256", "carol", "carol-pw"))
    assert "Authentication failed" in auth_failure(sasl_conf(broker, "PLAIN", "carol", "carol-pw"))
    broker.restart()
    assert produce(sasl_conf(broker, "SCRAM-SHA-512", "carol", "carol-pw"), "scram", [b"d"]) == [None]
    stored = [(Path(broker.data_dir) / name).read_text() for name in ("scram_users.json", "scram_users.journal")]
    assert "carol" in stored[1] and not any("carol-pw" in text for text in stored)


# ----------------------------------------------------------------------------------- TLS


def tls_properties(pki, protocol: str = "SSL", client_auth: str = "none") -> str:
    return (f"listeners={protocol}://127.0.0.1:9092\nssl.keystore.type=PEM\nssl.keystore.location={pki['server']}\n"
            f"ssl.truststore.location={pki['ca']}\nssl.client.auth={client_auth}\n" + JAAS)


def test_tls_listener_with_every_client(broker_factory, tmp_path, pki):
    broker = start(broker_factory, tmp_path, tls_properties(pki))
    conf = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"])}
    assert produce(conf, "tls", [b"over tls"]) == [None]
    assert consume(conf, "tls", 1) == [b"over tls"]

    from aiokafka import AIOKafkaProducer
    from aiokafka.helpers import create_ssl_context

    async def with_aiokafka() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SSL",
                                    ssl_context=create_ssl_context(cafile=str(pki["ca"])))
        await producer.start()
        try:
            await producer.send_and_wait("tls", b"aiokafka")
        finally:
            await producer.stop()

    asyncio.run(with_aiokafka())

    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, security_protocol="SSL",
                             ssl_cafile=str(pki["ca"]))
    producer.send("tls", b"kafka-python").get(10)
    producer.close()
    assert sorted(consume(conf, "tls", 3)) == [b"aiokafka", b"kafka-python", b"over tls"]
    # plaintext bytes on the TLS port are a failed handshake for that connection only
    with raw_socket(broker) as sock:
        sock.sendall(struct.pack(">i", 10) + b"\0" * 10)
        assert is_closed(sock)
    assert produce(conf, "tls", [b"still serving"]) == [None]


def test_mutual_tls_names_the_principal_that_acls_see(broker_factory, tmp_path, pki):
    properties = tls_properties(pki, client_auth="required") + (
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        "super.users=User:CN=alice,OU=tests,O=rmqkafka\n")
    broker = start(broker_factory, tmp_path, properties)
    conf = {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
            "ssl.ca.location": str(pki["ca"])}
    with pytest.raises(KafkaException):  # no client certificate: the handshake fails
        AdminClient(conf).list_topics(timeout=3)
    with_cert = {**conf, "ssl.certificate.location": str(pki["client_cert"]),
                 "ssl.key.location": str(pki["client_key"])}
    assert produce(with_cert, "mtls", [b"from alice's certificate"]) == [None]  # a super user by DN


def test_sasl_ssl_with_scram(broker_factory, tmp_path, pki):
    broker = start(broker_factory, tmp_path, tls_properties(pki, "SASL_SSL"))
    conf = {**sasl_conf(broker, "SCRAM-SHA-256", "alice", "alice-secret", "SASL_SSL"),
            "ssl.ca.location": str(pki["ca"])}
    assert produce(conf, "sasl-ssl", [b"x"]) == [None]
    assert consume(conf, "sasl-ssl", 1) == [b"x"]
    assert "Authentication failed" in auth_failure({**conf, "sasl.password": "wrong"})


def test_broker_wide_ssl_client_auth_does_not_ask_sasl_ssl_clients_for_certificates(broker_factory, tmp_path, pki):
    # KIP-684: SASL already names the principal; only listener.name.<name>.ssl.client.auth
    # asks SASL_SSL clients for a certificate, while the SSL listener follows ssl.client.auth
    properties = tls_properties(pki, "SASL_SSL", client_auth="required").replace(
        "listeners=SASL_SSL://127.0.0.1:9092", "listeners=SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0")
    broker = start(broker_factory, tmp_path, properties)
    conf = {**sasl_conf(broker, "PLAIN", "alice", "alice-secret", "SASL_SSL"), "ssl.ca.location": str(pki["ca"])}
    assert produce(conf, "kip-684", [b"no certificate needed"]) == [None]
    assert "applied only to SSL listeners" in broker.stderr

    broker.close()
    broker = start(broker_factory, tmp_path, properties + "listener.name.sasl_ssl.ssl.client.auth=required\n",
                   "own.properties")
    conf = {**conf, "bootstrap.servers": broker.bootstrap_servers}
    with pytest.raises(KafkaException):  # the listener's own setting asks for one
        AdminClient(conf).list_topics(timeout=3)
    with_cert = {**conf, "ssl.certificate.location": str(pki["client_cert"]),
                 "ssl.key.location": str(pki["client_key"])}
    assert produce(with_cert, "kip-684", [b"with a certificate"]) == [None]


# ---------------------------------------------------------------------------------- ACLs

AUTHORIZER = ("authorizer.class.name=kafka.security.authorizer.AclAuthorizer\n"
              "super.users=User:admin\n")


@pytest.fixture
def secured(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS + AUTHORIZER)
    admin = AdminClient(sasl_conf(broker, "PLAIN", "admin", "admin-secret"))
    for future in admin.create_topics([NewTopic("orders", 2), NewTopic("secret", 1)]).values():
        future.result(10)
    return broker, admin


def grant(admin, *bindings) -> None:
    for future in admin.create_acls(list(bindings)).values():
        future.result(10)


def allow(resource, name, principal, operation, pattern=ResourcePatternType.LITERAL, permission=AclPermissionType.ALLOW):
    return AclBinding(resource, name, pattern, principal, "*", operation, permission)


def delivery_codes(errors: list) -> list:
    return [None if e is None else e.code() for e in errors]


def test_acls_decide_what_each_user_may_do(secured):
    broker, admin = secured
    alice = sasl_conf(broker, "SCRAM-SHA-256", "alice", "alice-secret")
    bob = sasl_conf(broker, "PLAIN", "bob", "bob-secret")
    assert delivery_codes(produce(alice, "orders", [b"refused"])) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    grant(admin,
          allow(ResourceType.TOPIC, "orders", "User:alice", AclOperation.WRITE),
          allow(ResourceType.TOPIC, "ord", "User:alice", AclOperation.READ, ResourcePatternType.PREFIXED),
          allow(ResourceType.GROUP, "alice-", "User:alice", AclOperation.READ, ResourcePatternType.PREFIXED))
    assert produce(alice, "orders", [b"a1", b"a2"]) == [None, None]
    assert sorted(consume(alice, "orders", 2, group="alice-1")) == [b"a1", b"a2"]
    with pytest.raises(KafkaException):  # a group she has no ACL for
        consume(alice, "orders", 1, group="bobs-group", timeout=5)

    # Metadata lists only what a user may describe; bob may describe nothing
    alice_admin, bob_admin = AdminClient(alice), AdminClient(bob)
    assert set(alice_admin.list_topics(timeout=5).topics) == {"orders"}
    assert set(bob_admin.list_topics(timeout=5).topics) == set()
    assert alice_admin.list_topics("secret", timeout=5).topics["secret"].error.code() == (
        KafkaError.TOPIC_AUTHORIZATION_FAILED)

    # authorized operations reported for the caller
    described = alice_admin.describe_topics(TopicCollection(["orders"]),
                                            include_authorized_operations=True)["orders"].result(10)
    assert set(described.authorized_operations) == {AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}

    # only the cluster's ALTER/DESCRIBE holders manage ACLs (librdkafka drops DescribeAcls'
    # top-level error, so kafka-python asks)
    from kafka import KafkaAdminClient
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    kp_bob = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                              sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            kp_bob.describe_acls(ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                           permission_type=ACLPermissionType.ANY,
                                           resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                                                  ACLResourcePatternType.ANY)))
    finally:
        kp_bob.close()
    refused = bob_admin.create_acls([allow(ResourceType.TOPIC, "orders", "User:bob", AclOperation.ALL)])
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):
        next(iter(refused.values())).result(10)

    # a DENY wins over the ALLOW
    grant(admin, allow(ResourceType.TOPIC, "orders", "User:alice", AclOperation.WRITE,
                       permission=AclPermissionType.DENY))
    assert delivery_codes(produce(alice, "orders", [b"denied"])) == [KafkaError.TOPIC_AUTHORIZATION_FAILED]

    # ACLs survive a restart, and deleting them takes the access away
    broker.restart()
    admin = AdminClient(sasl_conf(broker, "PLAIN", "admin", "admin-secret"))
    alice = {**alice, "bootstrap.servers": broker.bootstrap_servers}
    listed = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:alice",
                                                  None, AclOperation.ANY, AclPermissionType.ANY)).result(10)
    assert len(listed) == 4
    assert sorted(consume(alice, "orders", 2, group="alice-2")) == [b"a1", b"a2"]
    deleted = admin.delete_acls([AclBindingFilter(ResourceType.TOPIC, "ord", ResourcePatternType.PREFIXED, None,
                                                  None, AclOperation.ANY, AclPermissionType.ANY)])
    assert len(next(iter(deleted.values())).result(10)) == 1
    with pytest.raises(KafkaException):
        consume(alice, "orders", 1, group="alice-3", timeout=5)


def test_idempotent_and_transactional_producers_need_their_acls(secured):
    broker, admin = secured
    alice = sasl_conf(broker, "PLAIN", "alice", "alice-secret")
    grant(admin, allow(ResourceType.TOPIC, "orders", "User:alice", AclOperation.WRITE))
    assert produce(alice, "orders", [b"idempotent"], **{"enable.idempotence": True}) == [None]

    def transactional_send() -> None:
        producer = Producer({**alice, "transactional.id": "alice-tx", "transaction.timeout.ms": 10000})
        producer.init_transactions(10)
        producer.begin_transaction()
        producer.produce("orders", b"in a transaction")
        producer.commit_transaction(10)

    with pytest.raises(KafkaException, match="TRANSACTIONAL_ID_AUTHORIZATION_FAILED"):
        transactional_send()
    grant(admin, allow(ResourceType.TRANSACTIONAL_ID, "alice-tx", "User:alice", AclOperation.WRITE))
    transactional_send()

    # bob may read the topic but write nowhere: no producer id for him
    grant(admin, allow(ResourceType.TOPIC, "orders", "User:bob", AclOperation.READ))
    bob = sasl_conf(broker, "PLAIN", "bob", "bob-secret")
    producer = Producer({**bob, "enable.idempotence": True})
    with pytest.raises(KafkaException, match="CLUSTER_AUTHORIZATION_FAILED"):  # fatal for the producer
        end = time.monotonic() + 10
        while time.monotonic() < end:
            producer.poll(0.2)
    assert "User:bob is Denied operation = IDEMPOTENT_WRITE" in broker.stderr


def test_kafka_python_and_aiokafka_under_acls(secured):
    broker, admin = secured
    grant(admin, allow(ResourceType.TOPIC, "orders", "User:bob", AclOperation.ALL),
          allow(ResourceType.GROUP, "*", "User:bob", AclOperation.READ))

    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    options = dict(bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                   sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob", sasl_plain_password="bob-secret")
    producer = KafkaProducer(**options)
    producer.send("orders", b"kafka-python", partition=0).get(10)
    producer.close()
    kp_admin = KafkaAdminClient(**{**options, "sasl_plain_username": "admin", "sasl_plain_password": "admin-secret"})
    acls, _ = kp_admin.describe_acls(ACLFilter(principal="User:bob", host="*", operation=ACLOperation.ANY,
                                                   permission_type=ACLPermissionType.ANY,
                                                   resource_pattern=ResourcePatternFilter(KpResourceType.ANY, None,
                                                                                          ACLResourcePatternType.LITERAL)))
    kp_admin.close()
    assert len(acls) == 2

    from aiokafka import AIOKafkaConsumer

    async def read_one() -> bytes:
        consumer = AIOKafkaConsumer("orders", group_id="bob-g", auto_offset_reset="earliest",
                                    bootstrap_servers=broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism="PLAIN", sasl_plain_username="bob", sasl_plain_password="bob-secret")
        await consumer.start()
        try:
            value = (await asyncio.wait_for(consumer.getone(), 10)).value
            await consumer.commit()
            return value
        finally:
            await consumer.stop()

    assert asyncio.run(read_one()) == b"kafka-python"


def test_crafted_transactional_produce_is_refused_without_the_transactional_id_acl(broker_factory, tmp_path):
    # CVE-2018-17196's class, on a PLAINTEXT listener whose clients are User:ANONYMOUS; its
    # ACLs are written before the broker starts (nobody could create them over this listener)
    from rmqkafka.adapter.security import acls

    config = tmp_path / "server.properties"
    config.write_text(AUTHORIZER)
    broker = broker_factory(config_file=config, start=False)
    Path(broker.data_dir).mkdir(parents=True, exist_ok=True)
    anonymous = dict(pattern_type=acls.PatternType.LITERAL, principal="User:ANONYMOUS", host="*",
                     permission=acls.PermissionType.ALLOW)
    acls.AclStore(Path(broker.data_dir)).add([
        acls.AclBinding(resource_type=acls.ResourceType.TOPIC, resource_name="t", operation=acls.AclOperation.ALL,
                        **anonymous),
        acls.AclBinding(resource_type=acls.ResourceType.CLUSTER, resource_name="kafka-cluster",
                        operation=acls.AclOperation.CREATE, **anonymous),
    ])
    broker.start()
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("t", partitions=1)
        conn.create_topic("u", partitions=1)  # CREATE on the cluster
        pid = conn.init_producer_id().producer_id  # WRITE on a topic is enough (KIP-679)
        transactional = make_batch([b"forged"], producer_id=pid, producer_epoch=0, base_sequence=0,
                                   transactional=True)
        assert conn.produce("t", 0, transactional, transactional_id="someone-elses").error_code == (
            ErrorCode.transactional_id_authorization_failed)
        assert conn.produce("t", 0, transactional).error_code == ErrorCode.transactional_id_authorization_failed
        assert conn.produce("u", 0, make_batch([b"x"])).error_code == ErrorCode.topic_authorization_failed
        idempotent = make_batch([b"fine"], producer_id=pid, producer_epoch=0, base_sequence=0)
        assert conn.produce("t", 0, idempotent).error_code == ErrorCode.none
        assert conn.fetch("t", 0, 0).high_watermark == 1
