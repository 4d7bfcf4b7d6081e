"""The layers import only downwards: adapter -> rmqsemantics -> storage.

``storage`` must not import the adapter or rmqsemantics, and ``rmqsemantics`` must not import
the adapter. Every ``import``, ``from ... import`` (relative ones resolved against the file's
installed package name), ``importlib.import_module("...")`` and ``__import__("...")`` with a
literal name counts, wherever it is (inside functions and ``if TYPE_CHECKING:`` too).
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_DIRS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"][
    "setuptools"]["package-dir"]
SCANNED = ("adapter", "rmqsemantics", "storage", "spark_connector", "rmqkafka")

# installed package -> installed packages it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "rmqkafka.storage": ("rmqkafka.adapter", "rmqkafka.rmqsemantics"),
    "rmqkafka.rmqsemantics": ("rmqkafka.adapter",),
}


def module_name(path: Path) -> tuple[str, bool]:
    """The installed module name of a source file, and whether it is a package's __init__."""
    rel = path.relative_to(ROOT).with_suffix("").as_posix()
    for name, source in sorted(PACKAGE_DIRS.items(), key=lambda kv: -len(kv[1])):
        if rel == source or rel.startswith(source + "/"):
            dotted = name + rel[len(source):].replace("/", ".")
            if dotted.endswith(".__init__"):
                return dotted[: -len(".__init__")], True
            return dotted, False
    raise AssertionError(f"{path} is under no package-dir of pyproject.toml")


def resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` inside ``module``."""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) - 1:
        raise AssertionError(f"relative import beyond the top package in {module}")
    base = parts[: len(parts) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imported_names(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) for everything the file imports."""
    module, is_package = module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "") if node.level == 0 else resolve(
                module, is_package, node.level, node.module)
            yield node.lineno, base
            for alias in node.names:  # "from rmqkafka import adapter" imports a submodule
                if alias.name != "*":
                    yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0]
            if (called in ("import_module", "__import__") and isinstance(first, ast.Constant)
                    and isinstance(first.value, str)):
                yield node.lineno, first.value


def source_files() -> list[Path]:
    return sorted(p for folder in SCANNED if (ROOT / folder).is_dir()
                  for p in (ROOT / folder).rglob("*.py"))


def violations() -> list[str]:
    found: dict[tuple[Path, int, str], str] = {}  # one message per import statement and rule
    for path in source_files():
        module, _ = module_name(path)
        for layer, forbidden in FORBIDDEN.items():
            if module != layer and not module.startswith(layer + "."):
                continue
            for line, name in imported_names(path):
                for banned in forbidden:
                    if name == banned or name.startswith(banned + "."):
                        found.setdefault((path, line, banned), (
                            f"{path.relative_to(ROOT)}:{line}: {layer} imports {name} "
                            f"({layer} must never import {banned})"))
    return list(found.values())


def test_layers_import_only_downwards() -> None:
    found = violations()
    assert not found, "layer rule broken:\n" + "\n".join(found)


def test_every_scanned_folder_is_mapped() -> None:
    for folder in SCANNED:
        if (ROOT / folder).is_dir():
            assert folder in PACKAGE_DIRS.values(), folder


@pytest.mark.parametrize(
    ("module", "is_package", "level", "target", "expected"),
    [
        ("rmqkafka.storage.commitlog", False, 1, "files", "rmqkafka.storage.files"),
        ("rmqkafka.storage.commitlog", False, 2, "adapter", "rmqkafka.adapter"),
        ("rmqkafka.storage", True, 1, "tag_code", "rmqkafka.storage.tag_code"),
        ("rmqkafka.storage", True, 2, None, "rmqkafka"),
        ("rmqkafka.rmqsemantics.filters.sql92", False, 3, "adapter.x", "rmqkafka.adapter.x"),
    ],
)
def test_relative_imports_resolve(module: str, is_package: bool, level: int, target: str | None,
                                  expected: str) -> None:
    assert resolve(module, is_package, level, target) == expected


def test_the_check_catches_each_kind_of_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake checkout whose storage breaks the rule in every way the check knows."""
    (tmp_path / "storage").mkdir()
    (tmp_path / "rmqsemantics").mkdir()
    (tmp_path / "storage" / "__init__.py").write_text("")
    (tmp_path / "storage" / "bad.py").write_text(
        "import rmqkafka.adapter.broker\n"
        "from rmqkafka.rmqsemantics import filters\n"
        "from .. import adapter\n"
        "from ..rmqsemantics.filters import compile_filter\n"
        "def f():\n"
        "    import importlib\n"
        "    importlib.import_module('rmqkafka.adapter.embedded')\n"
        "from . import tag_code\n"
        "import rmqkafka.storage.files\n"
    )
    (tmp_path / "rmqsemantics" / "__init__.py").write_text("from ..adapter import config\n")
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    found = violations()
    assert [v.split(": ", 1)[0] for v in found] == [
        "rmqsemantics/__init__.py:1",
        "storage/bad.py:1",
        "storage/bad.py:2",
        "storage/bad.py:3",
        "storage/bad.py:4",
        "storage/bad.py:7",
    ], found
    assert "storage/bad.py:3: rmqkafka.storage imports rmqkafka.adapter (rmqkafka.storage must " \
           "never import rmqkafka.adapter)" in found
