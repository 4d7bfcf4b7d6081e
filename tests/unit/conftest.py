"""Fixtures shared by the unit tests of every layer.

``clock``   a :class:`ManualClock` (tests advance it; nothing sleeps). A test module that
            needs another clock defines its own ``clock`` fixture, which wins.
``stores``  a ``StoreFactory`` (tests/unit/storage/storage_helpers.py) on ``tmp_path/data``
            with that clock; every store still open at teardown is dropped as in a crash.
``docs_checkout``  a copy of the documentation sources (mkdocs.yml, docs/) in
            ``tmp_path/checkout``, for tests that damage them: ``.root``,
            ``.add_a_broken_link()``.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

# The storage helper modules sit next to the storage tests; the other layers' tests build
# stores with them too, whatever pytest's import mode.
sys.path.insert(0, str(Path(__file__).parent / "storage"))

from rmqkafka.storage.clock import ManualClock  # noqa: E402
from storage_helpers import StoreFactory  # noqa: E402


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def stores(tmp_path: Path, clock: ManualClock):
    factory = StoreFactory(tmp_path / "data", clock)
    yield factory
    factory.close_all()


ROOT = Path(__file__).resolve().parents[2]
MISSING_PAGE = "no-such-page.md"


@dataclass(frozen=True)
class DocsCheckout:
    root: Path

    def add_a_broken_link(self) -> str:
        """A link to a page that does not exist, on a page of the guides; the missing page's
        name (what a strict build names in its error)."""
        page = self.root / "docs" / "guides" / "views.md"
        page.write_text(page.read_text() + f"\nSee [nowhere]({MISSING_PAGE}).\n")
        return MISSING_PAGE


@pytest.fixture
def docs_checkout(tmp_path: Path) -> DocsCheckout:
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", root / "docs")
    return DocsCheckout(root)
