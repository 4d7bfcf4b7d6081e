"""Where the built documentation site lives, for ``rmqk docs`` (which builds it there) and the
console (which serves it under /docs/ when it is there).

The site is built into a per-user cache directory, never into the installed package (which may
be read-only, and is shared by every user of an interpreter):
``$RMQK_DOCS_DIR`` when set and non-empty, else ``$XDG_CACHE_HOME/rmqkafka/docs`` (default
``~/.cache/rmqkafka/docs``). That directory holds ``site/`` (MkDocs' output) and ``site.stamp``
(the fingerprint of the sources it was built from). A site counts as built once
``site/index.html`` exists.

Serving: ``site_file`` maps a URL path below /docs/ to a file inside ``site/`` only. Whatever
the path, the answer is a regular file whose resolved path is inside the resolved site, or
None (a 404): ``..``, a symlink out (a directory's index.html too), a NUL byte, a path longer
than ``MAX_URL_PATH``, a symlink loop, a directory without index.html (no listings). Content
types come from ``CONTENT_TYPES`` (the kinds of file MkDocs writes), not from the machine's
/etc/mime.types, so a file is served the same everywhere; anything else is
application/octet-stream. A directory named without its slash is redirected to it
(``wants_slash``). The console's /docs/ and ``rmqk docs --serve`` both answer through
``answer``, on the same HTTP server (adapter.http_server).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from .http_server import Response

ENV_DIR = "RMQK_DOCS_DIR"
MAX_URL_PATH = 1024  # far longer than any page's path: a longer one is refused unresolved
_UTF8 = "; charset=utf-8"
CONTENT_TYPES = {
    ".html": "text/html" + _UTF8, ".css": "text/css" + _UTF8, ".js": "text/javascript" + _UTF8,
    ".json": "application/json", ".map": "application/json", ".txt": "text/plain" + _UTF8,
    ".xml": "application/xml", ".gz": "application/gzip", ".svg": "image/svg+xml", ".png": "image/png",
    ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp",
    ".ico": "image/x-icon", ".woff": "font/woff", ".woff2": "font/woff2", ".ttf": "font/ttf",
}


def docs_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get(ENV_DIR):
        return Path(env[ENV_DIR]).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(cache).expanduser() / "rmqkafka" / "docs"


def built_site(environ: Mapping[str, str] | None = None) -> Path | None:
    """The built site's directory, or None when ``rmqk docs`` has not built one."""
    site = docs_dir(environ) / "site"
    return site if (site / "index.html").is_file() else None


def site_file(site: Path, url_path: str) -> tuple[Path, str] | None:
    """The file for ``url_path`` (the part after /docs/) and its content type, or None.

    A directory means its index.html, as MkDocs' directory URLs expect."""
    if len(url_path) > MAX_URL_PATH or "\0" in url_path:
        return None
    try:
        root = site.resolve()
        target = _inside(root, root / url_path.lstrip("/"))
        if target is not None and target.is_dir():
            target = _inside(root, target / "index.html")  # which may be a symlink out, too
        if target is None or not target.is_file():
            return None
    except (OSError, RuntimeError):  # ENAMETOOLONG, EACCES; RuntimeError: a symlink loop
        return None
    return target, CONTENT_TYPES.get(target.suffix.lower(), "application/octet-stream")


def answer(site: Path | None, rest: str, prefix: str) -> Response:
    """The answer to a GET of ``prefix + rest`` where ``prefix`` (ending in /) is where the
    site is served; ``site`` None: not built."""
    found = site_file(site, rest) if site is not None else None
    if found is not None and wants_slash(rest, found[0]):
        return Response(301, b"", headers={"Location": f"{prefix}{quote(rest.lstrip('/'))}/"})
    try:
        body = found[0].read_bytes() if found is not None else None
    except OSError:  # gone since it was found: rmqk docs swapped a new site in
        body = None
    if body is None:
        return Response(404, b"not found (rmqk docs builds the documentation site)\n")
    return Response(200, body, found[1], headers={"X-Content-Type-Options": "nosniff"})


def wants_slash(url_path: str, found: Path) -> bool:
    """Whether ``url_path``, which ``site_file`` mapped to ``found``, names a directory without
    its trailing slash: the server redirects to the slash, or the page's relative links
    (``../assets/``) would resolve one level too high."""
    return bool(url_path) and not url_path.endswith("/") and found.name == "index.html" \
        and not url_path.endswith("index.html")


def _inside(root: Path, path: Path) -> Path | None:
    """``path`` resolved (symlinks followed), when that is ``root`` or below it."""
    target = path.resolve()
    return target if target.is_relative_to(root) else None
