"""The metrics port without a broker: /ready and /healthz before serving and after a storage
failure (states a real process passes through too quickly to catch), the request counters'
histogram buckets, the metrics.port key, and the HTTP server's bounds."""

from __future__ import annotations

import asyncio

import pytest
from rmqkafka.adapter.http_server import Request
from rmqkafka.adapter.metrics import api_name
from rmqkafka.adapter.properties import ConfigError, build_config
from rmqkafka.adapter.request_stats import BUCKETS, RequestStats
from rmqkafka.adapter.watch_port import WatchPort


def port(failure: BaseException | None = None) -> WatchPort:
    return WatchPort(RequestStats(), lambda: None, lambda: failure, lambda: 0, lambda: None)


def ask(watch: WatchPort, path: str, method: str = "GET", body: bytes = b"", **headers: str):
    return asyncio.run(watch.handle(Request(method, path, {}, headers, body)))


def test_not_ready_before_the_broker_serves_but_healthy() -> None:
    watch = port()
    assert ask(watch, "/ready").status == 503
    assert ask(watch, "/healthz").status == 200
    assert ask(watch, "/api/topics").status == 503
    metrics = ask(watch, "/metrics")
    assert metrics.status == 200 and b"rmqk_ready 0.0" in metrics.body
    assert b"kafka_topic_partition_current_offset" not in metrics.body  # no state to read yet


def test_unhealthy_once_the_store_failed() -> None:
    response = ask(port(OSError(5, "Input/output error")), "/healthz")
    assert response.status == 503 and b"storage failed" in response.body


def test_console_files_are_shipped_and_nothing_else_is_served() -> None:
    watch = port()
    page = ask(watch, "/")
    assert page.status == 200 and page.content_type.startswith("text/html") and b"/console/console.js" in page.body
    assert ask(watch, "/console/console.js").status == 200
    assert ask(watch, "/console/console.css").status == 200
    assert ask(watch, "/console/../watch_port.py").status == 404
    assert ask(watch, "/console/__init__.py").status == 404


def test_resend_wants_json() -> None:
    watch = port()
    assert ask(watch, "/api/dlq/resend", "POST", b'{"group": "g"}', **{"content-type": "text/plain"}).status == 415
    assert ask(watch, "/api/dlq/resend", "POST", b"[]", **{"content-type": "application/json"}).status == 400
    assert ask(watch, "/metrics", "POST").status == 405


def test_latency_buckets_are_cumulative_with_prometheus_le() -> None:
    stats = RequestStats()
    for seconds in (0.0001, BUCKETS[0], 0.003, 100.0):
        stats.observe(0, seconds)
    buckets = dict(stats.apis[0].cumulative())
    assert buckets[repr(BUCKETS[0])] == 2  # le is inclusive
    assert buckets["0.005"] == 3 and buckets["30.0"] == 3 and buckets["+Inf"] == 4
    assert stats.apis[0].count == 4


def test_api_names_are_kafkas() -> None:
    assert (api_name(0), api_name(2), api_name(11)) == ("Produce", "ListOffsets", "JoinGroup")
    assert api_name(9999) == "9999"


def test_metrics_port_key_and_flag() -> None:
    assert build_config({}).adapter.metrics_port is None
    assert build_config({"metrics.port": "9404"}).adapter.metrics_port == 9404
    assert build_config({"metrics.port": "9404"}, metrics_port=0).adapter.metrics_port == 0
    assert build_config({"metrics.host": "0.0.0.0"}).adapter.metrics_host == "0.0.0.0"
    for bad in ("-1", "65536", "x"):
        with pytest.raises(ConfigError, match="metrics.port"):
            build_config({"metrics.port": bad})
    with pytest.raises(ConfigError, match="--metrics-port"):
        build_config({}, metrics_port=70000)


def test_http_server_bounds() -> None:
    from rmqkafka.adapter import http_server

    async def scenario() -> list[bytes]:
        async def handler(request: Request) -> http_server.Response:
            return http_server.Response(200, request.method.encode() + b" " + request.path.encode() + b" " + request.body)

        server = await http_server.start("127.0.0.1", 0, handler)
        host, bound = server.sockets[0].getsockname()[:2]
        answers = []
        for raw in (b"GET /a%20b?x=1 HTTP/1.1\r\nHost: x\r\n\r\n",
                    b"POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
                    b"POST /p HTTP/1.1\r\nContent-Length: 9999999\r\n\r\n",
                    b"nonsense\r\n\r\n"):
            reader, writer = await asyncio.open_connection(host, bound)
            writer.write(raw)
            answers.append(await reader.read())
            writer.close()
        server.close()
        return answers

    ok, posted, too_large, bad = asyncio.run(scenario())
    assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and ok.endswith(b"GET /a b ")
    assert posted.endswith(b"POST /p abc")
    assert too_large.startswith(b"HTTP/1.1 413")
    assert bad.startswith(b"HTTP/1.1 400")


def test_the_vendored_chart_library_is_served_and_the_history_waits_for_the_broker() -> None:
    watch = port()
    script = ask(watch, "/console/vendor/uPlot.iife.min.js")
    assert script.status == 200 and script.content_type.startswith("text/javascript") and b"uPlot" in script.body
    assert ask(watch, "/console/vendor/uPlot.min.css").status == 200
    assert ask(watch, "/console/vendor/uPlot.LICENSE").status == 404  # shipped, not served
    assert b"/console/vendor/uPlot.iife.min.js" in ask(watch, "/").body
    assert ask(watch, "/api/history").status == 503


def test_docs_are_served_only_once_built(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("RMQK_DOCS_DIR", str(tmp_path))
    watch = port()
    redirect = ask(watch, "/docs")
    assert redirect.status == 302 and redirect.headers["Location"] == "/docs/"
    assert ask(watch, "/docs/").status == 404
    assert json.loads(ask(watch, "/api/overview").body)["docs"] is None
    (tmp_path / "site" / "guides").mkdir(parents=True)
    (tmp_path / "site" / "index.html").write_text("<h1>docs</h1>")
    (tmp_path / "site" / "guides" / "index.html").write_text("guides")
    (tmp_path / "secret").write_text("no")
    page = ask(watch, "/docs/")
    assert page.status == 200 and page.body == b"<h1>docs</h1>" and page.content_type == "text/html; charset=utf-8"
    assert ask(watch, "/docs/guides/").body == b"guides"
    assert ask(watch, "/docs/../secret").status == 404
    assert json.loads(ask(watch, "/api/overview").body)["docs"] == "/docs/"


def test_a_browser_page_of_another_site_cannot_read_the_console_through_dns_rebinding() -> None:
    """A page on evil.example whose name is made to resolve to the broker's address is, to the
    browser, same-origin with the console: it could read /api/* and /metrics (topic and group
    names) and POST /api/dlq/resend. Its requests carry ``Host: evil.example``, so a browser's
    request is answered only for a Host that is an IP literal, localhost, or a name the broker
    knows for itself (metrics.allowed.hosts adds more). Before, every Host was served."""
    watch = WatchPort(RequestStats(), lambda: None, lambda: None, lambda: 0, lambda: None,
                      allowed_hosts=frozenset({"broker-1.internal"}))
    firefox = {"user-agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"}
    # what a page's script cannot take off its requests, whatever User-Agent it sets
    fetch = {"user-agent": "curl/8.5.0", "sec-fetch-mode": "cors", "sec-fetch-site": "same-origin"}

    def status(path: str, host: str | None, browser: dict[str, str], method: str = "GET") -> int:
        headers = {**browser, **({"host": host} if host is not None else {})}
        if method == "POST":
            headers["content-type"] = "application/json"
        return asyncio.run(watch.handle(Request(method, path, {}, headers, b'{"group": "g"}'))).status

    for browser in (firefox, fetch, {"origin": "http://evil.example:9404"}):
        for path in ("/", "/console/console.js", "/api/overview", "/api/topics", "/docs/", "/metrics"):
            assert status(path, "evil.example:9404", browser) == 403, (path, browser)
            assert status(path, "evil.example", browser) == 403, (path, browser)
        assert status("/api/dlq/resend", "evil.example:9404", browser, "POST") == 403
    refused = asyncio.run(watch.handle(Request("GET", "/", {}, {**firefox, "host": "evil.example:9404"})))
    assert b"metrics.allowed.hosts" in refused.body
    for host in ("127.0.0.1:9404", "[::1]:9404", "10.0.0.7", "localhost:9404", "LocalHost.", "broker-1.internal:9404",
                 "BROKER-1.INTERNAL", None):
        assert status("/", host, firefox) == 200, host
    # other clients (Prometheus, probes, curl, rmqk) often use a name nobody configured here
    for client in ({}, {"user-agent": "Prometheus/2.53.0"}, {"user-agent": "kube-probe/1.30"},
                   {"user-agent": "Python-urllib/3.11"}):
        assert status("/metrics", "rmqk.monitoring.svc:9404", client) == 200
        assert status("/api/overview", "rmqk.monitoring.svc:9404", client) == 200
    anything = WatchPort(RequestStats(), lambda: None, lambda: None, lambda: 0, lambda: None,
                         allowed_hosts=frozenset({"*"}))
    assert asyncio.run(anything.handle(Request("GET", "/", {}, {**firefox, "host": "evil.example"}))).status == 200


def test_metrics_allowed_hosts_key() -> None:
    assert build_config({}).adapter.metrics_allowed_hosts == ()
    config = build_config({"metrics.allowed.hosts": " Console.Example , broker-1.internal,"})
    assert config.adapter.metrics_allowed_hosts == ("console.example", "broker-1.internal")
