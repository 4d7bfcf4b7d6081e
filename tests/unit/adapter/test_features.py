"""adapter.features: UpdateFeatures' validation (Kafka's FeatureControlManager) and what
ApiVersions reports, without a broker."""

from __future__ import annotations

import pytest

from kio.schema.errors import ErrorCode

from rmqkafka.adapter import features
from rmqkafka.adapter.features import SAFE_DOWNGRADE, UNSAFE_DOWNGRADE, UPGRADE, Refusal, apply_updates

NEW = features.finalized(False, {})


def refusal(updates, current=NEW) -> str:
    with pytest.raises(Refusal) as info:
        apply_updates(current, updates, node_id=3)
    assert info.value.code == ErrorCode.invalid_update_version
    return info.value.message


def test_a_new_cluster():
    assert NEW == {"metadata.version": 27, "eligible.leader.replicas.version": 1, "transaction.version": 0,
                   "kraft.version": 0, "group.version": 1, "share.version": 0, "streams.version": 0}
    assert features.finalized_keys(NEW) == [
        dict(name="eligible.leader.replicas.version", min_version_level=1, max_version_level=1),
        dict(name="group.version", min_version_level=1, max_version_level=1),
        dict(name="metadata.version", min_version_level=27, max_version_level=27),
    ]


@pytest.mark.parametrize("target, allowed", [
    (26, True), (24, True), (23, True),  # no level in 24..27 changed the metadata records
    (22, False), (20, False), (7, False),  # 23 (4.0-IV1, ELR records) did
])
def test_metadata_version_safe_downgrades(target, allowed):
    updates = [("metadata.version", target, SAFE_DOWNGRADE)]
    if allowed:
        assert apply_updates(NEW, updates, 3)["metadata.version"] == target
    else:
        assert refusal(updates) == (f"Unsupported metadata.version downgrade from 27 to {target}. Refusing to "
                                    "perform the requested downgrade because it might delete metadata information.")


def test_downgrades_from_a_lower_level():
    current = {**NEW, "metadata.version": 23}
    assert refusal([("metadata.version", 22, UNSAFE_DOWNGRADE)], current).endswith(
        "Unsafe metadata downgrade is not supported in this version.")
    current = {**NEW, "metadata.version": 22}
    assert apply_updates(current, [("metadata.version", 21, SAFE_DOWNGRADE)], 3)["metadata.version"] == 21


def test_refusals_name_the_local_controller():
    assert refusal([("metadata.version", 6, SAFE_DOWNGRADE)]) == (
        "Invalid update version 6 for feature metadata.version. Local controller 3 only supports versions 7-27")
    assert refusal([("streams.version", 1, UPGRADE)]) == (
        "Invalid update version 1 for feature streams.version. Local controller 3 does not support this feature.")
    assert refusal([("group.version", 2, UPGRADE)]) == (
        "Invalid update version 2 for feature group.version. Local controller 3 only supports versions 0-1")
    assert refusal([("nope", 0, UPGRADE)]) == "Invalid update version 0 for feature nope. Feature nope not found."


def test_level_zero_of_a_known_feature_changes_nothing():
    assert apply_updates(NEW, [("streams.version", 0, UPGRADE), ("kraft.version", 0, UPGRADE)], 3) == NEW


def test_group_version_gates_the_consumer_protocol():
    class Stored:
        def __init__(self, stored, levels):
            self.stored, self.levels = stored, levels

    assert features.consumer_protocol_enabled(Stored(False, {}))  # a new cluster: level 1
    downgraded = apply_updates(NEW, [("group.version", 0, SAFE_DOWNGRADE)], 3)
    assert not features.consumer_protocol_enabled(Stored(True, downgraded))
    assert not features.consumer_protocol_enabled(Stored(True, {"metadata.version": 27}))  # stored before it


@pytest.mark.parametrize("api_version, names", [
    (3, ["metadata.version"]),
    (4, ["eligible.leader.replicas.version", "group.version", "metadata.version", "transaction.version"]),
])
def test_supported_features_by_api_version(api_version, names):
    assert [key["name"] for key in features.supported_keys(api_version)] == names
