"""``rmqk docs``: the documentation site on this machine, built when needed, without network.

What a user who installed the package gets, least surprising first:

- ``rmqk docs`` prints the path of the built site's ``index.html`` (one line on stdout, for
  scripts and terminals that open paths), building it first when it was never built or its
  sources changed since. ``--open`` also opens it in the default browser; ``--serve`` serves
  it on ``http://127.0.0.1:PORT/`` until Ctrl-C (for browsers that will not open files).
- The site is built into a per-user cache directory (adapter.docs_site: ``$RMQK_DOCS_DIR``,
  else ``$XDG_CACHE_HOME/rmqkafka/docs``), never into the installed package. A broker with a
  metrics port serves that same directory under ``/docs/``, and its console links there.
- Building needs the sources, ``mkdocs.yml`` and ``docs/``, which live in the project's
  source tree, not in the wheel: they are found beside the installed package (a checkout
  installed with ``pip install -e``), else in the current directory or a parent (a checkout
  installed with ``pip install .``; only this project's, recognised by
  ``adapter/docs_site.py``: another MkDocs project there is not built), else at
  ``--source DIR``. And it needs the ``docs``
  extra (MkDocs, Material, mkdocs-click). Either missing is one line saying what to do, exit 2.
- Building is offline: the theme fetches no fonts (``font: false``) and no plugin fetches;
  ``mkdocs build --strict`` runs in a child process into a fresh directory that replaces the
  old site only once it succeeded, so a failed build leaves the previous site served.

Rebuilt when: the fingerprint of the sources (size and modification time of every file under
``docs/``, ``mkdocs.yml``, and the Python modules the generated references read) differs from
the one saved with the site, or ``--rebuild``.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import click

from rmqkafka.adapter import docs_site, http_hosts, http_server
from rmqkafka.cli.common import CliError, CliUsageError, Command

# The generated pages (rmqkafka.docs_gen, mkdocs-click) read these: a change to them changes
# the site even when no Markdown changed.
GENERATED_FROM = ("rmqkafka", "adapter/properties.py", "adapter/broker_configs.py", "adapter/codec/versions.py")
BUILD_TIMEOUT_S = 600.0
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the checkout, for an editable install
CHECKOUT_MARK = Path("adapter") / "docs_site.py"  # a file only this project's checkout has there
NEEDED_MODULES = {"mkdocs": "mkdocs", "material": "mkdocs-material", "mkdocs_click": "mkdocs-click"}


@click.command("docs", cls=Command)
@click.option("--open", "open_", is_flag=True, help="Also open the site in the default web browser.")
@click.option("--serve", is_flag=True, help="Serve the site on 127.0.0.1 until Ctrl-C, and print its URL.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port of --serve (0: any free port).")
@click.option("--rebuild", is_flag=True, help="Build again even when the sources did not change.")
@click.option("--source", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="The source checkout holding mkdocs.yml and docs/ (default: found beside the package or here).")
def docs(open_: bool, serve: bool, port: int, rebuild: bool, source: Path | None) -> None:
    """Build the documentation site (offline) if needed and print where it is."""
    root = docs_site.docs_dir()
    site = ensure_built(root, source, rebuild)
    index = site / "index.html"
    if serve:
        serve_site(site, port, open_)
        return
    click.echo(str(index))
    if open_:
        import webbrowser

        webbrowser.open(index.as_uri())


def ensure_built(root: Path, source: Path | None, rebuild: bool) -> Path:
    """The built site under ``root``, built (or built again) when needed."""
    site = root / "site"
    checkout = find_sources(source)
    if checkout is None:
        if (site / "index.html").is_file() and source is None:
            return site  # built earlier; the sources are gone, nothing to compare with
        raise CliUsageError(
            "the documentation sources (mkdocs.yml and docs/) are not installed with the package: "
            "run rmqk docs in a checkout of the project, or pass --source DIR")
    stamp = fingerprint(checkout)
    stamp_file = root / "site.stamp"
    if not rebuild and (site / "index.html").is_file() and stamp_file.is_file() \
            and stamp_file.read_text().strip() == stamp:
        return site
    build(checkout, root)
    stamp_file.write_text(stamp + "\n")
    return site


def find_sources(source: Path | None) -> Path | None:
    """``--source``, else a checkout of this project beside the package or around the current
    directory. Only this project's: another MkDocs project's mkdocs.yml may run hooks (Python),
    and its site is not these docs."""
    if source is not None:
        if not (source / "mkdocs.yml").is_file():
            raise CliUsageError(f"--source {source}: no mkdocs.yml there")
        return source.resolve()
    for candidate in (PACKAGE_ROOT, *[Path.cwd(), *Path.cwd().parents]):
        if (candidate / "mkdocs.yml").is_file() and (candidate / "docs").is_dir() \
                and (candidate / CHECKOUT_MARK).is_file():
            return candidate
    return None


def fingerprint(checkout: Path) -> str:
    """Size and mtime of every file the site is built from, and the package's version."""
    from rmqkafka import __version__

    digest = hashlib.sha256(__version__.encode())
    paths = [checkout / "mkdocs.yml", checkout / "docs", *(checkout / p for p in GENERATED_FROM)]
    for path in paths:
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and "__pycache__" not in file.parts:
                info = file.stat()
                digest.update(f"{file.relative_to(checkout)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def build(checkout: Path, root: Path) -> None:
    """``mkdocs build --strict`` into root/site.new, then swapped in for root/site."""
    missing = [package for module, package in NEEDED_MODULES.items() if importlib.util.find_spec(module) is None]
    if missing:
        raise CliUsageError(f"building the documentation needs {', '.join(missing)}: pip install 'rmqkafka[docs]'")
    root.mkdir(parents=True, exist_ok=True)
    fresh, old, site = root / "site.new", root / "site.old", root / "site"
    for leftover in (fresh, old):
        shutil.rmtree(leftover, ignore_errors=True)
    click.echo(f"rmqk: building the documentation site into {site} ...", err=True)
    started = time.monotonic()
    try:
        result = subprocess.run(  # not --quiet: it drops the warnings that --strict fails on
            [sys.executable, "-m", "mkdocs", "build", "--strict",
             "-f", str(checkout / "mkdocs.yml"), "-d", str(fresh)],
            cwd=checkout, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    except subprocess.TimeoutExpired as exc:
        shutil.rmtree(fresh, ignore_errors=True)
        raise CliError(f"mkdocs build did not finish within {BUILD_TIMEOUT_S:g} s") from exc
    if result.returncode != 0:
        shutil.rmtree(fresh, ignore_errors=True)
        sys.stderr.write(result.stdout + result.stderr)
        raise CliError(f"mkdocs build --strict failed (exit {result.returncode}); the previous site is kept")
    if site.exists():
        site.rename(old)
    fresh.rename(site)
    shutil.rmtree(old, ignore_errors=True)
    click.echo(f"rmqk: built in {time.monotonic() - started:.1f} s", err=True)


def serve_site(site: Path, port: int, open_: bool) -> None:
    """Serve until Ctrl-C on the broker's own HTTP server code (adapter.http_server), so the
    same bounds hold: slow or idle clients, however many, never keep a page from being served
    (before, http.server gave each connection a thread for as long as it liked)."""
    try:
        asyncio.run(_serve_site(site, port, open_))
    except KeyboardInterrupt:
        pass


async def _serve_site(site: Path, port: int, open_: bool) -> None:
    async def handle(request: http_server.Request) -> http_server.Response:
        return site_answer(site, request)

    try:
        server = await http_server.start("127.0.0.1", port, handle)
    except OSError as exc:
        raise CliError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc} (try --port 0)") from exc
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    click.echo(url)
    if open_:
        import webbrowser

        webbrowser.open(url)
    async with server:
        await server.serve_forever()


def site_answer(site: Path, request: http_server.Request) -> http_server.Response:
    """What the console's /docs/ answers, at the root: nothing outside the site, no directory
    listing (adapter.docs_site), and a browser's request by a name that is not this machine's
    refused (adapter.http_hosts: a page of another site reaching the port by DNS rebinding)."""
    if http_hosts.refused(request.headers, frozenset()):
        return http_server.Response(403, b"unknown Host header: open the site by 127.0.0.1 or localhost\n")
    if request.method not in ("GET", "HEAD"):
        return http_server.Response(405, b"method not allowed\n")
    return docs_site.answer(site, request.path.removeprefix("/"), "/")
