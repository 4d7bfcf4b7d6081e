"""The metrics port: /metrics, /ready, /healthz, the console page and its JSON API.

One HTTP port (adapter.http_server) on the broker's event loop, opened only when
``metrics.port`` / ``--metrics-port`` is set (a broker started for a test suite opens the one
Kafka port and nothing else). It is bound before the store recovers, so a probe sees the
process while it starts:

- ``/ready``: 200 once the broker serves Kafka clients, 503 before (recovery) and after
  (shutting down). For a load balancer or a container orchestrator's readiness probe.
- ``/healthz``: 200 while the process is healthy, 503 once the store failed (an fsync error:
  writes are refused until a restart, see storage.store). For a liveness probe.
- ``/metrics``: Prometheus text format (adapter.metrics).
- ``/`` and ``/console/``: the console page (static files shipped in adapter/console/);
  ``/api/...``: its JSON (adapter.console_api). ``POST /api/dlq/resend`` with a JSON body
  ``{"group": "G"}`` resends G's dead letters; only ``Content-Type: application/json`` is
  accepted, which a cross-site form cannot send, and no CORS header is ever given.
  ``/api/history``: the last 15 minutes of produce and consume rates per topic and lag per
  group, which a task of this port samples every 5 s (adapter.console_history); the page
  charts them with uPlot, vendored in adapter/console/vendor/ (nothing is loaded from
  elsewhere).
- ``/docs/``: the documentation site, when ``rmqk docs`` has built it (adapter.docs_site);
  404 otherwise, and the page shows no link to it.

The port has no authentication: bind it where only operators reach it (``metrics.host``;
the default is the primary listener's address). That alone does not keep out a web page an
operator's browser opens: a page on evil.example whose name is made to resolve to the
broker's address (DNS rebinding) is same-origin with the console to the browser. Its requests
carry ``Host: evil.example``, so a request from a browser is answered only when its Host
header is an IP literal, ``localhost``, or one of ``allowed_hosts`` (the broker's own names
and ``metrics.allowed.hosts``; ``*`` = any), else 403, whatever the path (adapter.http_hosts).
Other clients (Prometheus, probes, curl, ``rmqk topics describe --metrics-url``) often name
the broker by a DNS name nobody configured here and are no such threat: they are answered
whatever their Host.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from importlib import resources

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import docs_site, http_hosts, http_server
from .console_api import ConsoleApi
from .console_history import pause_after
from .context import BrokerContext
from .http_server import Request, Response
from .metrics import BrokerCollector, new_registry
from .request_stats import RequestStats

log = logging.getLogger(__name__)

STATIC = {"index.html": "text/html; charset=utf-8", "console.js": "text/javascript; charset=utf-8",
          "console.css": "text/css; charset=utf-8",
          "vendor/uPlot.iife.min.js": "text/javascript; charset=utf-8",
          "vendor/uPlot.min.css": "text/css; charset=utf-8"}


class WatchPort:
    """``context`` returns the broker's context while it serves clients, else None;
    ``failure`` the store's failure (None while healthy); ``connections`` the number of open
    client connections; ``bootstrap`` a PLAINTEXT listener's HOST:PORT (for DLQ resends)."""

    def __init__(self, stats: RequestStats, context: Callable[[], BrokerContext | None],
                 failure: Callable[[], BaseException | None], connections: Callable[[], int],
                 bootstrap: Callable[[], str | None], allowed_hosts: frozenset[str] = frozenset()) -> None:
        self._context = context
        self._allowed_hosts = allowed_hosts
        self._failure = failure
        self.registry = new_registry(BrokerCollector(stats, context, connections, lambda: context() is not None))
        self.api = ConsoleApi(context, bootstrap)
        self._server: asyncio.Server | None = None
        self._sampler: asyncio.Task[None] | None = None
        self._docs_dir = docs_site.docs_dir()  # the environment is read once, at start
        self._documents = {"/api/topics": self.api.topics, "/api/groups": self.api.groups,
                           "/api/views": self.api.views, "/api/delays": self.api.delays,
                           "/api/transactions": self.api.transactions, "/api/dlq": self.api.dlq,
                           "/api/quotas": self.api.quotas, "/api/history": self.api.history_document}

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind; returns the bound (host, port)."""
        self._server = await http_server.start(host, port, self.handle)
        self._sampler = asyncio.create_task(self._sample_forever(), name="console-history")
        bound = self._server.sockets[0].getsockname()
        return bound[0], bound[1]

    def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None
        if self._server is not None:
            self._server.close()
            self._server = None

    async def _sample_forever(self) -> None:
        """A sample at once when the broker serves, then every SAMPLE_INTERVAL_S (none while
        it recovers or shuts down: there is no state to read).

        A sample reads every partition and committed offset, so its cost grows with what
        clients created: console_history.pause_after keeps it under 1 % of the loop."""
        while True:
            ctx = self._context()
            pause = 0.2
            if ctx is not None:
                started = ctx.clock.monotonic()
                try:
                    self.api.sample(ctx)
                except Exception:  # a bug here must not stop the charts for good, nor the broker
                    log.exception("console history: a sample failed")
                pause = pause_after(ctx.clock.monotonic() - started)
            await asyncio.sleep(pause)

    async def handle(self, request: Request) -> Response:
        path = request.path
        if http_hosts.refused(request.headers, self._allowed_hosts):
            return Response(403, b"unknown Host header: open the console by the broker's address, or add the "
                                 b"name to metrics.allowed.hosts\n")
        if request.method == "POST":
            if path != "/api/dlq/resend":
                return Response(405, b"method not allowed\n")
            return await self._resend(request)
        if request.method not in ("GET", "HEAD"):
            return Response(405, b"method not allowed\n")
        if path == "/metrics":
            return Response(200, generate_latest(self.registry), CONTENT_TYPE_LATEST)
        if path == "/ready":
            ready = self._context() is not None
            return Response(200 if ready else 503, b"ready\n" if ready else b"not ready\n")
        if path == "/healthz":
            failure = self._failure()
            if failure is None:
                return Response(200, b"ok\n")
            return Response(503, f"storage failed: {failure}\n".encode())
        if path in ("/", "/console", "/console/"):
            return _static("index.html")
        if path.startswith("/console/"):
            return _static(path[len("/console/"):])
        if path == "/docs":
            return Response(302, b"", headers={"Location": "/docs/"})
        if path.startswith("/docs/"):
            return self._docs(path[len("/docs/"):])
        if path == "/api/overview":
            return _json(200, self._overview())
        document = self._documents.get(path)
        if document is None:
            return Response(404, b"not found\n")
        ctx = self._context()
        if ctx is None:
            return _json(503, {"error": "the broker is not serving"})
        return _json(200, document(ctx))

    def _overview(self) -> dict:
        ctx = self._context()
        failure = self._failure()
        document = {"ready": ctx is not None, "healthy": failure is None,
                    "failure": None if failure is None else str(failure),
                    "docs": "/docs/" if docs_site.built_site({docs_site.ENV_DIR: str(self._docs_dir)}) else None}
        if ctx is not None:
            document.update({
                "node_id": ctx.config.node_id, "bootstrap": f"{ctx.advertised_host}:{ctx.advertised_port}",
                "data_dir": str(ctx.storage_config.data_dir), "flush": ctx.storage_config.flush,
                "commitlog_bytes": ctx.store.commitlog.size_bytes(), "now_ms": ctx.clock.now_ms(),
            })
        return document

    def _docs(self, rest: str) -> Response:
        return docs_site.answer(docs_site.built_site({docs_site.ENV_DIR: str(self._docs_dir)}), rest, "/docs/")

    async def _resend(self, request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return Response(415, b"send application/json\n")
        try:
            group = json.loads(request.body or b"{}").get("group")
        except (ValueError, AttributeError):
            group = None
        if not isinstance(group, str) or not group.strip():
            return _json(400, {"error": 'expected {"group": "GROUP"}'})
        if self._context() is None:
            return _json(503, {"error": "the broker is not serving"})
        status, document = await self.api.resend(group)
        return _json(status, document)


def _json(status: int, document: object) -> Response:
    return Response(status, json.dumps(document).encode(), "application/json")


def _static(name: str) -> Response:
    kind = STATIC.get(name)
    if kind is None:  # only the files listed: no path ever reaches the file system
        return Response(404, b"not found\n")
    data = resources.files("rmqkafka.adapter").joinpath("console", name).read_bytes()
    return Response(200, data, kind)
