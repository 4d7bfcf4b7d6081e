"""One installed namespace: the design card's folders install as ``rmqkafka.<folder>``.

A user's own ``storage`` or ``adapter`` package must never collide with ours, so nothing of
this project may be importable under the bare folder names once it is installed, and no module
(code, tests, benchmarks) may import them.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]
FOLDERS = ("adapter", "rmqsemantics", "storage", "spark_connector")


def installed_name(folder: Path) -> str:
    """The package name a source folder installs as, by pyproject's package-dir."""
    rel = folder.relative_to(ROOT).as_posix()
    for name, source in sorted(SETUPTOOLS["package-dir"].items(), key=lambda kv: -len(kv[1])):
        if rel == source or rel.startswith(source + "/"):
            return name + rel[len(source):].replace("/", ".")
    raise AssertionError(f"{rel} is not under any package-dir of pyproject.toml")


def source_packages() -> list[Path]:
    roots = [ROOT / "rmqkafka", *(ROOT / f for f in FOLDERS if (ROOT / f).is_dir())]
    return sorted(init.parent for root in roots for init in root.rglob("__init__.py"))


def test_every_package_folder_is_installed() -> None:
    listed = set(SETUPTOOLS["packages"])
    missing = [installed_name(p) for p in source_packages() if installed_name(p) not in listed]
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    assert all(name == "rmqkafka" or name.startswith("rmqkafka.") for name in listed)


def test_every_layer_folder_is_mapped_into_the_namespace() -> None:
    for folder in FOLDERS:
        if (ROOT / folder).is_dir():
            assert SETUPTOOLS["package-dir"][f"rmqkafka.{folder}"] == folder


def test_compose_images_install_the_project_wheel() -> None:
    # The images get the project as the wheel compose/build-offline.sh builds from the
    # repository root, so every package listed above is in them (no folder-by-folder COPY).
    dockerfile = (ROOT / "compose" / "Dockerfile").read_text()
    assert re.search(r"^COPY\s+wheels/project\s", dockerfile, re.MULTILINE)
    assert "pip install --no-index" in dockerfile
    script = (ROOT / "compose" / "build-offline.sh").read_text()
    assert "pip wheel" in script


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_no_module_imports_the_bare_folder_names() -> None:
    offenders = []
    for path in ROOT.rglob("*.py"):
        if any(part.startswith(".") or part in {"build", "dist"} for part in path.relative_to(ROOT).parts):
            continue
        for name in _imports(ast.parse(path.read_text(), str(path))):
            if name.split(".")[0] in FOLDERS:
                offenders.append(f"{path.relative_to(ROOT)}: import {name}")
    assert not offenders, "\n".join(offenders)


def _run_elsewhere(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with this interpreter outside the checkout: only what is installed counts."""
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          check=False, timeout=60)


def test_installed_namespace_exposes_the_public_api(tmp_path: Path) -> None:
    code = (
        "import sys, rmqkafka\n"
        "assert 'rmqkafka.adapter' not in sys.modules, 'importing rmqkafka must stay light'\n"
        "from rmqkafka import EmbeddedBroker\n"
        "import rmqkafka.storage.commitlog, rmqkafka.spark_connector, rmqkafka.cli\n"
        "print(EmbeddedBroker.__module__)\n"
    )
    result = _run_elsewhere(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "rmqkafka.adapter.embedded"


@pytest.mark.parametrize("folder", ["adapter", "storage", "spark_connector"])
def test_bare_folder_names_are_not_installed(tmp_path: Path, folder: str) -> None:
    result = _run_elsewhere(f"import {folder}", tmp_path)
    assert result.returncode != 0 and "ModuleNotFoundError" in result.stderr, result.stdout


def test_unknown_attribute_of_the_namespace_is_an_attribute_error() -> None:
    import rmqkafka

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rmqkafka.Nope  # noqa: B018
    assert "EmbeddedBroker" in dir(rmqkafka)


def test_test_modules_have_unique_basenames() -> None:
    """pytest imports test modules by basename (rootdir-relative "prepend" mode): two
    ``test_x.py`` in different folders make the second one fail to collect."""
    names = Counter(path.name for path in (ROOT / "tests").rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
