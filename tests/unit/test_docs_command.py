"""``rmqk docs`` (rmqkafka.cli.docs): builds the site offline into the cache directory when
needed, prints where it is, serves it, and says in one line what is missing when it cannot."""

from __future__ import annotations

import os
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
