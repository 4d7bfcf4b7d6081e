"""Whose Host header an HTTP port answers a browser by (DNS rebinding), for the metrics port
(adapter.watch_port) and ``rmqk docs --serve``.

A page on evil.example whose name is made to resolve to our address is same-origin with our
pages to the browser, and its requests carry ``Host: evil.example``. So a request from a
browser (``BROWSER_HEADERS``, which a page's script cannot remove, or a ``Mozilla/``
User-Agent) is answered only when its Host header is an IP literal, ``localhost`` (or below
it), or one of the names allowed; ``*`` allows any. A request without Host, or from a client
that is no browser (Prometheus, probes, curl), is no such threat and is answered whatever
its Host.
"""

from __future__ import annotations

import ipaddress

# Sent by browsers (Fetch Metadata, Origin) and never removable by a page's script.
BROWSER_HEADERS = ("sec-fetch-mode", "sec-fetch-site", "sec-fetch-dest", "origin")


def from_browser(headers: dict[str, str]) -> bool:
    """``headers``: lower-case names (adapter.http_server.Request)."""
    return any(name in headers for name in BROWSER_HEADERS) or "mozilla/" in headers.get("user-agent", "").lower()


def host_allowed(host: str | None, allowed: frozenset[str]) -> bool:
    if host is None or "*" in allowed:  # no Host: not a browser's request
        return True
    name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host  # drop the port
    name = name.removeprefix("[").split("]", 1)[0].lower().rstrip(".")  # [v6]:port
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return name == "localhost" or name.endswith(".localhost") or name in allowed


def refused(headers: dict[str, str], allowed: frozenset[str]) -> bool:
    """Whether a request with these headers is a browser's by a name not allowed."""
    return from_browser(headers) and not host_allowed(headers.get("host"), allowed)
