"""Hostile clients at the connection level (the request-level sweep is test_hostile_sweep):
many connections stalled mid-request, a client that pipelines requests and never reads the
answers, SASL exchanges abandoned half-way. The Kafka port must stay usable for everyone
else all along, the broker must bound what it holds for such clients, and close them once
``request.read.timeout.ms`` / ``connections.max.idle.ms`` say so."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from rawkafka import ErrorCode, KafkaRaw, encode_request, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

READ_TIMEOUT_MS = 2000  # request.read.timeout.ms of these brokers
IDLE_MS = 8000  # connections.max.idle.ms (also how long a client may not read)
PROMPT_S = 3.0  # another client's ApiVersions is answered within this, even on a loaded machine
USERS = 'user_alice="alice-secret"'
JAAS = f"sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required {USERS};\n"
DESCRIBE_CONFIGS = 32


def _broker(broker_factory, tmp_path, extra: str = ""):
    config = tmp_path / "server.properties"
    config.write_text(f"connections.max.idle.ms={IDLE_MS}\nrequest.read.timeout.ms={READ_TIMEOUT_MS}\n{extra}")
    return broker_factory(config_file=config)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _closed(sock: socket.socket) -> bool:
    """Whether the broker has closed ``sock`` (what it sent before is discarded)."""
    sock.setblocking(False)
    try:
        while True:
            if sock.recv(65536) == b"":
                return True
    except BlockingIOError:
        return False
    except OSError:  # reset
        return True


def _prompt(conn: KafkaRaw) -> float:
    began = time.monotonic()
    assert conn.api_versions().error_code == ErrorCode.none
    took = time.monotonic() - began
    assert took < PROMPT_S, f"ApiVersions took {took:.1f} s"
    return took


def test_hundreds_of_stalled_partial_requests_leave_the_port_usable(broker_factory, tmp_path):
    broker = _broker(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port) as before:
        rss = _rss_mb(broker.pid)
        stalled = []
        for i in range(300):
            sock = socket.create_connection((broker.host, broker.port), timeout=10)
            # a frame announcing 100 KB (or just its size prefix, half of it) then nothing
            sock.sendall(struct.pack(">i", 100_000) + b"\0" * 10 if i % 2 else struct.pack(">i", 100_000)[:2])
            stalled.append(sock)
        _prompt(before)
        with KafkaRaw(broker.host, broker.port) as after:
            _prompt(after)
        wait_until(lambda: all(_closed(s) for s in stalled), timeout=60, interval=0.5,
                   message="the broker to close every stalled connection")
        _prompt(before)  # it sent nothing for longer than the idle time, but only just now
        assert _rss_mb(broker.pid) - rss < 50
    for sock in stalled:
        sock.close()
    assert "Traceback" not in broker.stderr


def test_pipelined_requests_never_read_are_bounded(broker_factory, tmp_path):
    """A client sends DescribeConfigs (a large answer) as fast as the socket takes them and
    reads nothing: the broker stops reading it (64 requests in flight, a full socket), so the
    client cannot push more than a bounded number of requests in, nor grow the broker's
    memory; others are served meanwhile; the connection is closed for not reading."""
    broker = _broker(broker_factory, tmp_path)
    frame = encode_request(DESCRIBE_CONFIGS, 4, 1, _describe_broker_configs())
    hog = socket.create_connection((broker.host, broker.port), timeout=10)
    hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    hog.setblocking(False)
    rss = _rss_mb(broker.pid)
    sent = 0
    with KafkaRaw(broker.host, broker.port) as other:
        deadline = time.monotonic() + 6
        asked = time.monotonic()
        stream = frame * 16  # sent from any point of a frame, it continues the stream
        while time.monotonic() < deadline:
            if time.monotonic() - asked > 0.5:
                _prompt(other)
                asked = time.monotonic()
            try:
                sent += hog.send(stream[sent % len(frame) :])
            except BlockingIOError:
                time.sleep(0.1)
            except OSError:  # closed for not reading (connections.max.idle.ms)
                break
        requests_in = sent // len(frame)
        grown = _rss_mb(broker.pid) - rss
        _prompt(other)
        print(f"{requests_in} requests ({sent} bytes) taken before the broker stopped reading; RSS +{grown:.0f} MB")
        # 64 in flight, plus what the kernel buffers on both sides (a few MB each)
        assert requests_in < 64 + (16 << 20) // len(frame)
        assert grown < 100
        # (reading the socket to see its end would make the hog a reader: the log says it)
        wait_until(lambda: "not reading its responses" in broker.stderr, timeout=60, interval=0.5,
                   message="the broker to close the connection that reads nothing")
    with KafkaRaw(broker.host, broker.port) as late:
        _prompt(late)
    hog.close()
    assert "Traceback" not in broker.stderr


def _describe_broker_configs():
    from kio.index import load_request_schema
    from rawkafka import build

    return build(load_request_schema(DESCRIBE_CONFIGS, 4), resources=[
        dict(resource_type=4, resource_name="0", configuration_keys=None)],
        include_synonyms=True, include_documentation=True)


def _sasl_handshake(sock: socket.socket, version: int) -> None:
    frame = encode_request(17, version, 1, _build(17, version, mechanism="PLAIN"))
    sock.sendall(frame)
    (size,) = struct.unpack(">i", _recv_exactly(sock, 4))
    answer = _recv_exactly(sock, size)
    assert struct.unpack_from(">h", answer, 4)[0] == 0, "SaslHandshake refused"


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "closed"
        data += chunk
    return data


def _build(api_key: int, version: int, **fields):
    from kio.index import load_request_schema
    from rawkafka import build

    return build(load_request_schema(api_key, version), **fields)


def test_sasl_exchanges_abandoned_half_way(broker_factory, tmp_path):
    """Connections that stop after the SaslHandshake (v1, and v0 with its bare tokens), or
    in the middle of a SaslAuthenticate frame or a bare token: others log in and are served
    meanwhile, and every abandoned one is closed (idle, or its frame incomplete) without a
    traceback and without counting as a login."""
    broker = _broker(broker_factory, tmp_path, "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n" + JAAS)
    abandoned = []
    for i in range(60):
        sock = socket.create_connection((broker.host, broker.port), timeout=10)
        _sasl_handshake(sock, version=i % 2)
        if i % 3 == 1:  # half a SaslAuthenticate (v1) or half a bare token (v0)
            token = b"\0alice\0alice-secret"
            if i % 2:
                whole = encode_request(36, 2, 2, _build(36, 2, auth_bytes=token))
            else:
                whole = struct.pack(">i", len(token)) + token
            sock.sendall(whole[: len(whole) // 2])
        elif i % 3 == 2:  # only part of the next frame's size
            sock.sendall(b"\0\0")
        abandoned.append(sock)
    began = time.monotonic()
    while time.monotonic() - began < 3:
        with KafkaRaw(broker.host, broker.port) as good:
            good.sasl_plain("alice", "alice-secret")
            started = time.monotonic()
            assert good.metadata([]).brokers
            assert time.monotonic() - started < PROMPT_S
        time.sleep(0.2)
    wait_until(lambda: all(_closed(s) for s in abandoned), timeout=60, interval=0.5,
               message="the broker to close every abandoned SASL exchange")
    for sock in abandoned:
        sock.close()
    assert "Traceback" not in broker.stderr
