"""Classic groups' metadata on disk: Kafka's GroupMetadata record (GroupMetadataManager's
``groupMetadataValue``), so that members keep their generation across a broker restart.

One entry per classic group in a JournaledMap (``storage.journaled_map``) at
``offsets/groups.json`` (+ ``offsets/groups.journal``) beside the committed offsets; the latest
entry of a group wins, a deletion is the tombstone. An entry is a JSON object::

    {"generation": N, "protocol_type": str|null, "protocol": str|null, "leader": str|null,
     "members": [{"id", "instance": str|null, "client_id", "client_host", "session_ms",
                  "rebalance_ms", "subscription": base64, "assignment": base64}, ...]}

holding, as Kafka's record does, only the selected protocol's metadata of each member.

Why a file of its own and not a record kind of the offsets journal: a broker of an earlier
version reading an offsets journal stops at the first record of a kind it does not know and
cuts the journal there as a torn tail, which would drop every offset committed after it. It
never opens ``groups.json``: a downgraded broker simply starts with no members, as before
(members get UNKNOWN_MEMBER_ID and rejoin), and keeps every committed offset.

Invariant: an entry is written (a) when the leader's SyncGroup completes a generation, before
any member is answered, (b) when a group becomes Empty, and a tombstone (c) when the group is
deleted, expires, or becomes a consumer-protocol group. Consumer-protocol (KIP-848) and share
groups are not persisted here.

Damage: the map keeps two copies (``storage.journaled_map``); when neither is usable,
``open_metadata`` sets the files aside as ``*.damaged``, says so at ERROR and starts with no
persisted groups: their members get UNKNOWN_MEMBER_ID and rejoin (a rebalance, as before this
file existed), and the committed offsets, kept elsewhere, are untouched. Refusing to start
would cost far more than what was lost.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rmqkafka.storage.files import DamagedFileError
from rmqkafka.storage.journaled_map import JournaledMap

from .group import ConsumerGroup, GroupState, Member

log = logging.getLogger(__name__)

FILE_NAME = "groups.json"
DAMAGED_SUFFIX = ".damaged"


def open_metadata(offsets_dir: Path, now_ms: Callable[[], int]) -> JournaledMap:
    """The persisted groups' map in ``offsets_dir``; damaged beyond repair, a new empty one
    (the damaged files set aside)."""
    path = offsets_dir / FILE_NAME

    def open_map() -> JournaledMap:
        return JournaledMap(path, check, snapshot_interval_ms=60_000, now_ms=now_ms)

    try:
        return open_map()
    except DamagedFileError as exc:
        aside = sorted(p for p in offsets_dir.glob(FILE_NAME.removesuffix(".json") + ".*")
                       if not p.name.endswith(DAMAGED_SUFFIX))
        for p in aside:
            p.replace(p.with_name(p.name + DAMAGED_SUFFIX))
        log.error("%s; set aside as %s, starting without persisted classic groups "
                  "(their members rejoin; committed offsets are kept)",
                  exc, ", ".join(p.name + DAMAGED_SUFFIX for p in aside))
        return open_map()


@dataclass(frozen=True, slots=True)
class PersistedGroup:
    """A validated entry, ready to become a ConsumerGroup."""

    generation: int
    protocol_type: str | None
    protocol: str | None
    leader: str | None
    members: tuple[dict, ...]


def encode(group: ConsumerGroup, assignments: dict[str, bytes] | None = None) -> dict:
    """The entry for ``group``; ``assignments`` (member id -> bytes) replace the members' own."""
    protocol = group.protocol_name or ""
    return {
        "generation": group.generation_id,
        "protocol_type": group.protocol_type,
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        "members": [
            {
                "id": m.member_id,
                "instance": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "session_ms": m.session_timeout_ms,
                "rebalance_ms": m.rebalance_timeout_ms,
                "subscription": _b64(m.metadata_for(protocol)),
                "assignment": _b64(m.assignment if assignments is None else assignments.get(m.member_id, b"")),
            }
            for m in group.members.values()
        ],
    }


def check(group_id: str, entry: dict) -> PersistedGroup:
    """The entry, validated; raises ValueError, KeyError or TypeError if it is not one."""
    generation = entry["generation"]
    if type(generation) is not int or generation < 0:
        raise ValueError(f"group {group_id!r}: bad generation {generation!r}")
    for key in ("protocol_type", "protocol", "leader"):
        if entry[key] is not None and not isinstance(entry[key], str):
            raise TypeError(f"group {group_id!r}: bad {key}")
    members = entry["members"]
    if not isinstance(members, list):
        raise TypeError(f"group {group_id!r}: members is not a list")
    ids = set()
    for m in members:
        for key in ("id", "client_id", "client_host"):
            if not isinstance(m[key], str):
                raise TypeError(f"group {group_id!r}: bad member {key}")
        if m["instance"] is not None and not isinstance(m["instance"], str):
            raise TypeError(f"group {group_id!r}: bad member instance")
        for key in ("session_ms", "rebalance_ms"):
            if type(m[key]) is not int or m[key] < 0:
                raise ValueError(f"group {group_id!r}: bad member {key}")
        base64.b64decode(m["subscription"], validate=True)
        base64.b64decode(m["assignment"], validate=True)
        ids.add(m["id"])
    if members and (entry["leader"] not in ids or entry["protocol"] is None):
        raise ValueError(f"group {group_id!r}: members without a leader or a protocol")
    return PersistedGroup(generation, entry["protocol_type"], entry["protocol"], entry["leader"], tuple(members))


def restore(group_id: str, entry: dict, now: float) -> ConsumerGroup:
    """The group as Kafka loads it: Stable with its members (Empty without), each member's
    session starting afresh at ``now`` (clock.monotonic())."""
    persisted = check(group_id, entry)
    group = ConsumerGroup(group_id, GroupState.STABLE if persisted.members else GroupState.EMPTY,
                          persisted.generation, persisted.protocol_type, persisted.protocol, persisted.leader)
    for m in persisted.members:
        member = Member(m["id"], m["instance"], m["client_id"], m["client_host"], m["session_ms"],
                        m["rebalance_ms"], persisted.protocol_type or "",
                        [(persisted.protocol or "", base64.b64decode(m["subscription"]))], now,
                        assignment=base64.b64decode(m["assignment"]))
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
    return group


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
