"""The documentation site (mkdocs.yml, docs/) builds strictly, and its references match the code.

``mkdocs build --strict`` fails on a broken link and on a page missing from the navigation
(mkdocs.yml's ``validation``); the generated references (rmqkafka.docs_gen, mkdocs-click) must
name every broker config key, every advertised API and every ``rmqk`` command, so adding one to
the code without it reaching the site fails here.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT = 300  # seconds: a loaded two-core machine, the Material theme's assets copied


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(root / "mkdocs.yml"), "-d", str(site)],
        cwd=root, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    result = build(ROOT, out)
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    return out


def page_text(site: Path, page: str) -> str:
    return html.unescape((site / page / "index.html").read_text())


def test_every_page_is_built(site: Path) -> None:
    sources = sorted(p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md")
                     if "examples" not in p.parts)
    assert len(sources) > 25
    for source in sources:
        target = site / ("" if source.name == "index" else source) / "index.html"
        assert target.is_file(), f"docs/{source}.md was not built"


def test_every_broker_config_key_is_in_the_configuration_reference(site: Path) -> None:
    from rmqkafka.adapter.properties import INTEGER_RANGES, KNOWN_KEYS

    text = page_text(site, "reference/configuration")
    included = re.sub(r"<[^>]+>", "", page_text(site, "getting-started/pytest"))
    assert "next(consumer).value" in included and "--8<--" not in included  # the example file
    missing = sorted(key for key in KNOWN_KEYS if f"<code>{key}</code>" not in text)
    assert not missing, f"config keys missing from docs/reference/configuration.md: {missing}"
    for key, bounds in INTEGER_RANGES.items():
        assert re.search(rf"<code>{re.escape(key)}</code></td>\s*<td>[^<]*{re.escape(bounds.why)}", text), key


def test_every_advertised_api_is_in_the_api_reference(site: Path) -> None:
    from rmqkafka.adapter.codec.versions import ADVERTISED_VERSIONS

    text = page_text(site, "reference/apis")
    for key, (low, high) in ADVERTISED_VERSIONS.items():
        assert re.search(rf"<td>{int(key)}</td>\s*<td>{low}-{high}</td>", text), f"api key {int(key)} {low}-{high}"


def _command_paths(command: click.Command, prefix: str) -> list[str]:
    real = command.real() if hasattr(command, "real") else command  # rmqkafka.cli._Lazy
    paths = [prefix]
    if isinstance(real, click.Group):
        for name, sub in real.commands.items():
            paths += _command_paths(sub, f"{prefix} {name}")
    return paths


def test_every_cli_command_is_in_the_cli_reference(site: Path) -> None:
    from rmqkafka.cli import main

    text = page_text(site, "reference/cli")
    commands = [p for name, cmd in main.commands.items() for p in _command_paths(cmd, f"rmqk {name}")]
    assert "rmqk topics create" in commands
    missing = [c for c in commands if not re.search(rf"<h[2-6] id=\"{c.replace(' ', '-')}\"", text)]
    assert not missing, f"add a ::: mkdocs-click block to docs/reference/cli.md for: {missing}"
    # the options themselves come from the commands, not from text written by hand
    assert "--if-not-exists" in text and "--bootstrap-server" in text


@pytest.mark.parametrize("damage", ["broken link", "page not in the navigation"])
def test_a_strict_build_fails_on(damage: str, docs_checkout, tmp_path: Path) -> None:
    if damage == "broken link":
        named = docs_checkout.add_a_broken_link()
    else:
        (docs_checkout.root / "docs" / "guides" / "orphan.md").write_text("# Orphan\n\nIn no navigation.\n")
        named = "orphan.md"
    result = build(docs_checkout.root, tmp_path / "site")
    assert result.returncode != 0
    assert named in result.stdout + result.stderr


def test_the_readme_is_a_front_page_whose_links_lead_into_the_site() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    # .ci/run runs the line marked so; it must stay among the first lines
    assert "# install and run the tests" in "\n".join(readme.splitlines()[:6])
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert len(links) > 20
    missing = sorted({link for link in links if not (ROOT / link).is_file()})
    assert not missing, missing
    built = {f"docs/{p.relative_to(ROOT / 'docs').as_posix()}" for p in (ROOT / "docs").rglob("*.md")}
    assert {"docs/getting-started/pytest.md", "docs/reference/cli.md"} <= built & set(links)
