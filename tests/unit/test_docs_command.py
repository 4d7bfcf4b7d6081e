"""``rmqk docs`` (rmqkafka.cli.docs): builds the site offline into the cache directory when
needed, prints where it is, serves it, and says in one line what is missing when it cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600  # a strict build on a loaded two-core machine


def rmqk_docs(docs_dir: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rmqkafka", "docs", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=TIMEOUT, env={**os.environ, "RMQK_DOCS_DIR": str(docs_dir)})


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    docs_dir = tmp_path_factory.mktemp("docs-cache")
    result = rmqk_docs(docs_dir)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{docs_dir / 'site' / 'index.html'}\n"  # stdout: the path, nothing else
    assert "building the documentation site" in result.stderr
    return docs_dir


def test_builds_once_then_prints_the_path_at_once(built: Path) -> None:
    index = built / "site" / "index.html"
    assert "rmqkafka" in index.read_text()
    assert (built / "site" / "reference" / "cli" / "index.html").is_file()
    started = time.monotonic()
    again = rmqk_docs(built)
    assert again.returncode == 0 and again.stdout == f"{index}\n"
    assert again.stderr == "", again.stderr  # nothing built
    assert time.monotonic() - started < 30


def test_a_failed_build_keeps_the_previous_site(built: Path, docs_checkout) -> None:
    missing = docs_checkout.add_a_broken_link()
    before = (built / "site" / "index.html").read_text()
    result = rmqk_docs(built, "--source", str(docs_checkout.root))
    assert result.returncode == 1
    assert "rmqk: error: mkdocs build --strict failed" in result.stderr and missing in result.stderr
    assert (built / "site" / "index.html").read_text() == before
    assert not (built / "site.new").exists()


def test_serve_prints_its_url_and_serves_the_site(built: Path) -> None:
    child = subprocess.Popen([sys.executable, "-m", "rmqkafka", "docs", "--serve", "--port", "0"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RMQK_DOCS_DIR": str(built)})
    try:
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/"), url
        with urllib.request.urlopen(url + "reference/cli/", timeout=30) as response:
            assert b"rmqk docs" in response.read()
    finally:
        child.terminate()
        child.wait(timeout=30)


def test_missing_sources_or_extra_are_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqkafka.cli import docs, main

    monkeypatch.setenv("RMQK_DOCS_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    result = runner.invoke(main, ["docs", "--source", str(tmp_path)])
    assert result.exit_code == 2 and "no mkdocs.yml there" in result.output

    monkeypatch.setattr(docs, "find_sources", lambda source: None)
    result = runner.invoke(main, ["docs"])
    assert result.exit_code == 2
    assert "rmqk: error: the documentation sources (mkdocs.yml and docs/) are not installed" in result.output
    assert len(result.output.strip().splitlines()) == 1

    monkeypatch.setattr(docs, "find_sources", lambda source: ROOT)
    monkeypatch.setattr(docs, "NEEDED_MODULES", {**docs.NEEDED_MODULES, "no_such_module_here": "mkdocs-missing"})
    result = runner.invoke(main, ["docs"])
    assert result.exit_code == 2 and "pip install 'rmqkafka[docs]'" in result.output
    assert not (tmp_path / "cache" / "site").exists()


def test_the_console_serves_only_files_of_the_built_site(tmp_path: Path) -> None:
    from rmqkafka.adapter.docs_site import built_site, docs_dir, site_file

    assert docs_dir({"RMQK_DOCS_DIR": str(tmp_path)}) == tmp_path
    assert docs_dir({"XDG_CACHE_HOME": "/c"}) == Path("/c/rmqkafka/docs")
    assert docs_dir({"HOME": "/h"}) == Path("/h/.cache/rmqkafka/docs")
    assert built_site({"RMQK_DOCS_DIR": str(tmp_path)}) is None  # nothing built yet
    site = tmp_path / "site"
    (site / "guides").mkdir(parents=True)
    (site / "index.html").write_text("home")
    (site / "guides" / "index.html").write_text("guides")
    (tmp_path / "secret.txt").write_text("no")
    assert built_site({"RMQK_DOCS_DIR": str(tmp_path)}) == site
    assert site_file(site, "")[0] == (site / "index.html").resolve()
    assert site_file(site, "guides/") == ((site / "guides" / "index.html").resolve(), "text/html; charset=utf-8")
    for escape in ("../secret.txt", "guides/../../secret.txt", "/../secret.txt", "missing.html"):
        assert site_file(site, escape) is None, escape


def test_the_fingerprint_changes_with_a_page_or_a_module_the_references_read(tmp_path: Path) -> None:
    from rmqkafka.cli.docs import fingerprint

    (tmp_path / "docs").mkdir()
    (tmp_path / "adapter").mkdir()
    (tmp_path / "mkdocs.yml").write_text("site_name: x\n")
    (tmp_path / "docs" / "index.md").write_text("# x\n")
    (tmp_path / "adapter" / "properties.py").write_text("A = 1\n")
    first = fingerprint(tmp_path)
    assert fingerprint(tmp_path) == first
    (tmp_path / "docs" / "index.md").write_text("# x, longer\n")
    second = fingerprint(tmp_path)
    assert second != first
    (tmp_path / "adapter" / "properties.py").write_text("A = 22\n")
    assert fingerprint(tmp_path) != second


def test_the_site_serves_nothing_outside_it_whatever_the_path(tmp_path: Path) -> None:
    """A hostile path is a 404, never a file outside the site nor an exception (which answered
    500 and logged a traceback per request). Before: an index.html that is a symlink out was
    served; a NUL byte raised ValueError; a long path OSError (ENAMETOOLONG)."""
    from rmqkafka.adapter.docs_site import site_file

    site = tmp_path / "site"
    (site / "guides").mkdir(parents=True)
    (site / "assets").mkdir()
    (site / "assets" / "app.js").write_text("x")
    (site / "index.html").write_text("home")
    (tmp_path / "secret.txt").write_text("no")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "index.html").write_text("no")
    (site / "guides" / "index.html").symlink_to(tmp_path / "secret.txt")
    (site / "out").symlink_to(tmp_path / "outside")
    (site / "etc").symlink_to("/etc")
    (site / "home.html").symlink_to(site / "index.html")  # a link inside the site is fine
    (site / "loop").symlink_to(site / "loop")
    for hostile in ("guides/", "guides", "out/", "out/index.html", "etc/passwd", "/etc/passwd", "//etc/passwd",
                    "index.html\x00.png", "\x00", "a/" * 3000, "x" * 300, "assets/", "assets", "loop", "loop/x"):
        assert site_file(site, hostile) is None, hostile[:40]
    assert site_file(site, "home.html")[0] == (site / "index.html").resolve()
    # content types are the site's, not whatever /etc/mime.types says on this machine
    assert site_file(site, "assets/app.js")[1] == "text/javascript; charset=utf-8"


def test_the_console_answers_hostile_docs_paths_404(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from rmqkafka.adapter.http_server import Request
    from rmqkafka.adapter.request_stats import RequestStats
    from rmqkafka.adapter.watch_port import WatchPort

    monkeypatch.setenv("RMQK_DOCS_DIR", str(tmp_path))
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("home")
    watch = WatchPort(RequestStats(), lambda: None, lambda: None, lambda: 0, lambda: None)

    def ask(path: str):
        return asyncio.run(watch.handle(Request("GET", path, {}, {})))

    page = ask("/docs/")
    assert page.status == 200 and page.headers.get("X-Content-Type-Options") == "nosniff"
    for hostile in ("/docs/index.html\x00", "/docs/" + "a/" * 3000, "/docs/../site.stamp", "/docs/" + "x" * 300):
        assert ask(hostile).status == 404, hostile[:40]
    # a directory without its slash is redirected: its index.html's relative links (../assets/)
    # would otherwise resolve one level too high, and the page come without its styles
    (tmp_path / "site" / "guides").mkdir()
    (tmp_path / "site" / "guides" / "index.html").write_text("guides")
    moved = ask("/docs/guides")
    assert moved.status == 301 and moved.headers["Location"] == "/docs/guides/"
    assert ask("/docs/guides/").body == b"guides"


def test_serve_lists_no_directory_and_follows_no_link_out(built: Path, tmp_path: Path) -> None:
    """``rmqk docs --serve`` serves what the console serves: before, http.server listed every
    directory without an index.html and followed symlinks anywhere."""
    import urllib.error

    site = tmp_path / "docs" / "site"
    shutil.copytree(built / "site", site, symlinks=True)
    shutil.copy(built / "site.stamp", tmp_path / "docs" / "site.stamp")  # built: no second build
    (tmp_path / "secret.txt").write_text("no")
    (site / "leak.txt").symlink_to(tmp_path / "secret.txt")
    child = subprocess.Popen([sys.executable, "-m", "rmqkafka", "docs", "--serve", "--port", "0"], cwd=ROOT,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "RMQK_DOCS_DIR": str(tmp_path / "docs")})
    try:
        url = child.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        with urllib.request.urlopen(url + "reference/cli/", timeout=30) as response:
            assert b"rmqk docs" in response.read()
        request = urllib.request.Request(url + "reference/cli", method="HEAD")
        with urllib.request.urlopen(request, timeout=30) as response:  # follows the redirect
            assert response.url == url + "reference/cli/"
        for path in ("assets/", "leak.txt", "reference/../../secret.txt"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(url + path, timeout=30).close()
            assert refused.value.code == 404, path
    finally:
        child.terminate()
        child.wait(timeout=30)


def test_sources_are_only_this_projects_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``rmqk docs`` from inside another MkDocs project (a wheel install, so the package has no
    checkout beside it) must not build that project: before, any mkdocs.yml with a docs/ in
    the current directory or a parent was built (running its hooks, which are Python) and
    served as rmqkafka's documentation."""
    from rmqkafka.cli import docs

    foreign = tmp_path / "other-project"
    (foreign / "docs").mkdir(parents=True)
    (foreign / "mkdocs.yml").write_text("site_name: other\nhooks: [hooks.py]\n")
    (foreign / "sub").mkdir()
    monkeypatch.setattr(docs, "PACKAGE_ROOT", tmp_path / "site-packages")
    monkeypatch.chdir(foreign / "sub")
    assert docs.find_sources(None) is None
    # a checkout of this project, found from inside it
    checkout = tmp_path / "rmqkafka-checkout"
    shutil.copytree(foreign, checkout)
    (checkout / "adapter").mkdir()
    (checkout / "adapter" / "docs_site.py").write_text("")
    monkeypatch.chdir(checkout / "sub")
    assert docs.find_sources(None) == checkout
    monkeypatch.setattr(docs, "PACKAGE_ROOT", ROOT)  # an editable install: the checkout beside it
    assert docs.find_sources(None) == ROOT


def test_encoded_traversal_through_the_metrics_port_is_a_404(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole way, socket to file: the HTTP server decodes %2e%2e, %2f and %00 once, and the
    decoded path still cannot leave the site."""
    import asyncio

    from rmqkafka.adapter.request_stats import RequestStats
    from rmqkafka.adapter.watch_port import WatchPort

    monkeypatch.setenv("RMQK_DOCS_DIR", str(tmp_path))
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "index.html").write_text("home")
    (tmp_path / "site.stamp").write_text("secret stamp")

    async def scenario() -> dict[str, bytes]:
        watch = WatchPort(RequestStats(), lambda: None, lambda: None, lambda: 0, lambda: None)
        host, port = await watch.start("127.0.0.1", 0)
        answers = {}
        try:
            for target in ("/docs/", "/docs/%2e%2e/site.stamp", "/docs/%2E%2E%2Fsite.stamp", "/docs/..%2fsite.stamp",
                           "/docs/index.html%00.png", "/docs/%252e%252e/site.stamp", "/docs//" + str(tmp_path / "site.stamp"),
                           "/docs/" + "%2e%2e/" * 20 + "etc/passwd"):
                reader, writer = await asyncio.open_connection(host, port)
                writer.write(f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
                answers[target] = await asyncio.wait_for(reader.read(), 60)
                writer.close()
        finally:
            watch.close()
        return answers

    answers = asyncio.run(scenario())
    assert answers.pop("/docs/").endswith(b"\r\n\r\nhome")
    for target, answer in answers.items():
        assert answer.startswith(b"HTTP/1.1 404") and b"secret" not in answer and b"root:" not in answer, target


def test_serve_answers_as_the_console_does_and_refuses_a_browser_by_another_name(tmp_path: Path) -> None:
    """``rmqk docs --serve`` (now on adapter.http_server): the console's /docs/ answers at the
    root, and a browser's request by a name that is not this machine's (DNS rebinding) is 403;
    before, http.server answered any Host."""
    from rmqkafka.adapter.http_server import Request
    from rmqkafka.cli.docs import site_answer

    site = tmp_path / "site"
    (site / "guide").mkdir(parents=True)
    (site / "index.html").write_text("index")
    (site / "guide" / "index.html").write_text("guide")
    (tmp_path / "secret.txt").write_text("no")
    (site / "leak.txt").symlink_to(tmp_path / "secret.txt")
    browser = {"user-agent": "Mozilla/5.0 Chrome/131.0", "sec-fetch-mode": "navigate"}

    def ask(path: str, method: str = "GET", **headers: str) -> tuple[int, bytes, dict[str, str]]:
        answer = site_answer(site, Request(method, path, {}, headers))
        return answer.status, answer.body, answer.headers

    assert ask("/")[:2] == (200, b"index")
    assert ask("/guide/", **browser, host="127.0.0.1:8765")[:2] == (200, b"guide")
    assert ask("/guide/", **browser, host="localhost:8765")[:2] == (200, b"guide")
    assert ask("/guide", **browser, host="localhost")[::2] == (301, {"Location": "/guide/"})
    assert ask("/guide/", **browser, host="evil.example:8765")[0] == 403
    assert ask("/guide/", host="evil.example:8765")[0] == 200  # curl: no browser, no threat
    for path in ("/leak.txt", "/../secret.txt", "/guide/../../secret.txt", "/nothing"):
        assert ask(path)[0] == 404, path
    assert ask("/", "POST")[0] == 405
