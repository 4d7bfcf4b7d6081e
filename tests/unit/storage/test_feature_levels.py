"""storage.feature_levels: the finalized feature levels and their epoch, kept across opens,
a damaged file answered by its previous copy, a failed write changing nothing."""

from __future__ import annotations

import pytest

from rmqkafka.storage.feature_levels import FeatureLevels


def test_nothing_set_yet(tmp_path):
    levels = FeatureLevels(tmp_path / "features.json")
    assert (levels.stored, levels.epoch, dict(levels.levels)) == (False, 0, {})
    assert not (tmp_path / "features.json").exists()  # opening writes nothing


def test_each_set_is_kept_with_the_next_epoch(tmp_path):
    path = tmp_path / "features.json"
    levels = FeatureLevels(path)
    assert levels.set({"metadata.version": 27, "transaction.version": 1}) == 1
    assert levels.set({"metadata.version": 26}) == 2
    again = FeatureLevels(path)
    assert (again.stored, again.epoch, dict(again.levels)) == (True, 2, {"metadata.version": 26})


def test_a_damaged_file_falls_back_to_its_previous_copy(tmp_path):
    path = tmp_path / "features.json"
    levels = FeatureLevels(path)
    levels.set({"metadata.version": 27})
    levels.set({"metadata.version": 25})
    path.write_text('{"epoch": 2, "lev')  # torn by an editor, say
    again = FeatureLevels(path)
    assert (again.epoch, dict(again.levels)) == (1, {"metadata.version": 27})


def test_a_failed_write_changes_nothing(tmp_path):
    levels = FeatureLevels(tmp_path / "gone" / "features.json")  # its directory does not exist
    with pytest.raises(OSError):
        levels.set({"metadata.version": 27})
    assert (levels.stored, levels.epoch, dict(levels.levels)) == (False, 0, {})
