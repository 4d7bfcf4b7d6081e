"""Where the built documentation site lives, for ``rmqk docs`` (which builds it there) and the
console (which serves it under /docs/ when it is there).

The site is built into a per-user cache directory, never into the installed package (which may
be read-only, and is shared by every user of an interpreter):
``$RMQK_DOCS_DIR`` when set and non-empty, else ``$XDG_CACHE_HOME/rmqkafka/docs`` (default
``~/.cache/rmqkafka/docs``). That directory holds ``site/`` (MkDocs' output) and ``site.stamp``
(the fingerprint of the sources it was built from). A site counts as built once
``site/index.html`` exists.

Serving: ``site_file`` maps a URL path below /docs/ to a file inside ``site/`` only; a path
that leaves it (``..``, a symlink out) is refused, so no request reaches anything else.
"""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path

ENV_DIR = "RMQK_DOCS_DIR"


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
    root = site.resolve()
    target = (root / url_path.lstrip("/")).resolve()
    if target != root and root not in target.parents:
        return None
    if target.is_dir():
        target = target / "index.html"
    if not target.is_file():
        return None
    kind = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind in ("application/javascript", "application/json"):
        kind += "; charset=utf-8"
    return target, kind
