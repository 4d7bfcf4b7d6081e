"""Kafka's cluster features (KIP-584): what this broker supports, what a new cluster starts
with, and UpdateFeatures' validation, as a one-node Kafka 4.1 cluster (combined broker and
controller, node id = ``node.id``) answers.

Supported ranges are what this broker implements, not what Kafka 4.1 does:

- ``metadata.version`` 7-27 (3.3-IV3 to 4.1-IV1); a new cluster starts at 27, the level of
  the Kafka release whose API versions the broker advertises. Advertised API versions do
  not follow a downgrade of it.
- ``transaction.version`` 0-1: level 1 changes nothing a client sees; level 2 (KIP-890
  part 2: EndTxn v5, an epoch per transaction) is not implemented, so it is not supported.
- ``eligible.leader.replicas.version`` 0-1, finalized 1 as Kafka 4.1 does for a new
  cluster: with one replica per partition there is never an eligible leader replica.
- ``group.version`` 0-1, finalized 1 as Kafka 4 does for a new cluster: level 1 enables the
  KIP-848 consumer protocol (and its online migration); at level 0 ConsumerGroupHeartbeat
  and ConsumerGroupDescribe answer UNSUPPORTED_VERSION, as Kafka's
  ``isConsumerGroupProtocolEnabled``. A data directory whose stored levels predate it has
  it at 0 until ``kafka-features.sh upgrade --feature group.version=1``, as a Kafka cluster
  upgraded from 3.x does.
- ``kraft.version`` (a static quorum of this node, no KIP-853 voter changes),
  ``share.version`` and ``streams.version``: only level 0, not implemented beyond it.

Reporting (Kafka's BrokerFeatures and ApiVersionsResponse): a feature supported only at
level 0 is not advertised; ApiVersions v3 and older leave out every feature whose supported
minimum is 0 (KAFKA-17492); a finalized level 0 is left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from kio.schema.errors import ErrorCode

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
GROUP_VERSION = "group.version"


class Range(NamedTuple):
    min: int
    max: int

    def __contains__(self, level: object) -> bool:  # type: ignore[override]
        return isinstance(level, int) and self.min <= level <= self.max

    def __str__(self) -> str:  # Kafka's VersionRange.toString
        return str(self.min) if self.min == self.max else f"{self.min}-{self.max}"


SUPPORTED: Mapping[str, Range] = {
    METADATA_VERSION: Range(7, 27),
    KRAFT_VERSION: Range(0, 0),
    "transaction.version": Range(0, 1),
    GROUP_VERSION: Range(0, 1),
    "eligible.leader.replicas.version": Range(0, 1),
    "share.version": Range(0, 0),
    "streams.version": Range(0, 0),
}

BOOTSTRAP: Mapping[str, int] = {
    METADATA_VERSION: 27,
    "eligible.leader.replicas.version": 1,
    GROUP_VERSION: 1,
}

# Kafka's MetadataVersion.didMetadataChange, levels 7-27: a downgrade across a level that
# changed the metadata records could lose metadata and is refused.
_METADATA_CHANGED = frozenset({7, 8, 11, 13, 14, 15, 17, 23})

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def finalized(stored: bool, levels: Mapping[str, int]) -> dict[str, int]:
    """Every feature's finalized level (0 for those not finalized)."""
    current = {name: 0 for name in SUPPORTED}
    current.update(levels if stored else BOOTSTRAP)
    return current


def level(stored: bool, levels: Mapping[str, int], name: str) -> int:
    """One feature's finalized level (0 when not finalized)."""
    return finalized(stored, levels)[name]


def consumer_protocol_enabled(stored_levels) -> bool:
    """Whether the finalized ``group.version`` enables KIP-848 (``stored_levels``: the
    store's FeatureLevels)."""
    return level(stored_levels.stored, stored_levels.levels, GROUP_VERSION) >= 1


def supported_keys(api_version: int) -> list[dict]:
    return [dict(name=name, min_version=low, max_version=high)
            for name, (low, high) in sorted(SUPPORTED.items())
            if high > 0 and (api_version >= 4 or low > 0)]


def finalized_keys(levels: Mapping[str, int]) -> list[dict]:
    return [dict(name=name, min_version_level=level, max_version_level=level)
            for name, level in sorted(levels.items()) if level >= 1]


class Refusal(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def apply_updates(current: Mapping[str, int], updates: list[tuple[str, int, int]], node_id: int) -> dict[str, int]:
    """The levels after ``updates`` [(feature, level, upgrade type)], validated as Kafka's
    FeatureControlManager.updateFeatures does: all or nothing, the first refusal wins
    (raised as Refusal, INVALID_UPDATE_VERSION with Kafka's message)."""
    new = dict(current)
    for name, level, upgrade_type in updates:
        _check(name, level, upgrade_type, current.get(name, 0), node_id)
        new[name] = level
    return new


def _check(name: str, level: int, upgrade_type: int, now: int, node_id: int) -> None:
    def refuse(reason: str) -> Refusal:
        return Refusal(ErrorCode.invalid_update_version,
                       f"Invalid update version {level} for feature {name}. {reason}")

    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise refuse("The controller does not support the given upgrade type.")
    if level < 0:
        raise refuse("A feature version cannot be less than 0.")
    supported = SUPPORTED.get(name, Range(0, 0))
    if level not in supported:
        if supported.max == 0:
            raise refuse(f"Local controller {node_id} does not support this feature.")
        raise refuse(f"Local controller {node_id} only supports versions {supported}")
    if level < now and upgrade_type == UPGRADE:
        raise refuse("Can't downgrade the version of this feature without setting the "
                     "upgrade type to either safe or unsafe downgrade.")
    if level > now and upgrade_type != UPGRADE:
        raise refuse("Can't downgrade to a newer version.")
    if name == METADATA_VERSION and level < now and any(v in _METADATA_CHANGED for v in range(level + 1, now + 1)):
        reason = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                  else "Refusing to perform the requested downgrade because it might delete metadata information.")
        raise Refusal(ErrorCode.invalid_update_version,
                      f"Unsupported metadata.version downgrade from {now} to {level}. {reason}")
    if name not in SUPPORTED:
        raise refuse(f"Feature {name} not found.")
