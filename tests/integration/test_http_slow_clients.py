"""The metrics port of a real broker process, and ``rmqk docs --serve``, against hundreds of
slow clients (adapter.http_server, adapter.http_connections).

Before: 64 connections that sent their request head a byte at a time (or nothing) held every
place of the port for 10 s each, and every other client, Prometheus and the console alike, was
answered 503 meanwhile; a client reconnecting as it was dropped held the port for good. Now a
new connection takes the place of the oldest one still waiting on its client, one address
holds at most a few places, and a request must arrive whole within a few seconds however it
trickles. Here 500 sockets trickle a head a byte at a time while /metrics and the console
page are asked for; they must be answered, and every slow socket must be closed by the broker.
``rmqk docs --serve`` gave each connection a thread of http.server for as long as it liked;
it now serves through the same code, and is put to the same test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
SLOW = 500
DEADLINE_S = 120.0  # a loaded two-core machine; the broker's own read timeout is 5 s
TRICKLE = b"ET /metrics HTTP/1.1\r\nX-Slow: " + b"y" * 4000  # after the first b"G"


class Trickler:
    """Sends the next byte of a request head to every open socket every 0.2 s, from a thread,
    and tells which sockets the broker closed (EOF or a reset)."""

    def __init__(self, sockets: list[socket.socket]) -> None:
        self.sockets = sockets
        self.closed: set[int] = set()
        self.answered_200 = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="trickler", daemon=True)

    def __enter__(self) -> Trickler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        for sock in self.sockets:
            sock.close()

    def closed_count(self) -> int:
        with self._lock:
            return len(self.closed)

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set():
            byte = TRICKLE[sent % len(TRICKLE):][:1]
            sent += 1
            for i, sock in enumerate(self.sockets):
                if i in self.closed:
                    continue
                try:
                    data = sock.recv(4096)  # EOF, or an answer before the close: done either way
                    if data.startswith(b"HTTP/1.1 200"):
                        self.answered_200 += 1
                    with self._lock:
                        self.closed.add(i)
                    continue
                except BlockingIOError:
                    pass
                except OSError:  # ECONNRESET: aborted by the broker
                    with self._lock:
                        self.closed.add(i)
                    continue
                try:
                    sock.send(byte)
                except BlockingIOError:
                    pass
                except OSError:
                    with self._lock:
                        self.closed.add(i)
            self._stop.wait(0.2)


def get(url: str) -> tuple[int, bytes, float]:
    started = time.monotonic()
    with urllib.request.urlopen(url, timeout=DEADLINE_S) as response:
        return response.status, response.read(), time.monotonic() - started


def open_slow(host: str, port: int) -> list[socket.socket]:
    """SLOW connections, each having sent the first byte of a request head."""
    slow = []
    for _ in range(SLOW):
        sock = socket.create_connection((host, port), timeout=DEADLINE_S)
        sock.setblocking(False)
        try:
            sock.send(b"G")
        except OSError:  # already displaced by the next ones: the trickler sees it closed
            pass
        slow.append(sock)
    return slow


def wait_all_closed(trickler: Trickler) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while trickler.closed_count() < SLOW and time.monotonic() < deadline:
        time.sleep(0.2)
    assert trickler.closed_count() == SLOW, f"{SLOW - trickler.closed_count()} slow sockets still open"
    assert trickler.answered_200 == 0  # none of them sent a whole head


def test_hundreds_of_slow_clients_never_keep_metrics_or_the_console_from_being_answered(
        broker_factory: Any, tmp_path: Path) -> None:
    config = tmp_path / "server.properties"
    config.write_text("metrics.port=0\n")
    broker = broker_factory(config_file=config)
    url = broker.metrics_url
    host, port = url.removeprefix("http://").rsplit(":", 1)
    with Trickler(open_slow(host, int(port))) as trickler:
        time.sleep(1)  # let the trickle run: the requests below come while it does
        metrics_status, metrics, metrics_s = get(url + "/metrics")
        page_status, page, page_s = get(url + "/")
        print(f"with {SLOW} slow clients: /metrics in {metrics_s:.3f} s, the console in {page_s:.3f} s")
        assert metrics_status == 200 and b"rmqk_" in metrics
        assert page_status == 200 and b"<html" in page.lower()
        wait_all_closed(trickler)
    assert get(url + "/ready")[:2] == (200, b"ready\n")


def test_hundreds_of_slow_clients_never_keep_rmqk_docs_serve_from_serving_a_page(tmp_path: Path) -> None:
    """A site of two pages, stamped as built from this checkout (so nothing is built)."""
    from rmqkafka.cli.docs import fingerprint

    site = tmp_path / "docs" / "site"
    (site / "guide").mkdir(parents=True)
    (site / "index.html").write_text("<html>the index</html>")
    (site / "guide" / "index.html").write_text("<html>the guide</html>")
    (tmp_path / "docs" / "site.stamp").write_text(fingerprint(ROOT) + "\n")
    child = subprocess.Popen([sys.executable, "-m", "rmqkafka", "docs", "--serve", "--port", "0"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RMQK_DOCS_DIR": str(tmp_path / "docs")})
    try:
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/"), (url, child.stderr.read() if not url else "")
        host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
        with Trickler(open_slow(host, int(port))) as trickler:
            time.sleep(1)
            status, page, page_s = get(url + "guide/")
            print(f"with {SLOW} slow clients: rmqk docs --serve's page in {page_s:.3f} s")
            assert status == 200 and page == b"<html>the guide</html>"
            wait_all_closed(trickler)
            assert child.poll() is None
        assert get(url)[:2] == (200, b"<html>the index</html>")
    finally:
        child.terminate()
        child.wait(timeout=30)
