"""The pending half-message table in columns: what HalfMessages keeps per pending half message.

A row per half message (its offset in ``RMQ_SYS_TRANS_HALF_TOPIC`` partition 0, its producer
group and ``UNIQ_KEY``, the partition it is for, when it was stored, when it is first due for
a check, and how many checks it had), kept in packed arrays rather than an object per
message: 100,000 pending cost about 36 bytes of arrays each, plus the key's string and its
entry in the group's key dict (about 20 MB in all, where a dict of dataclass objects and a
second dict by key took over 80 MB). Group names and (topic, partition) pairs are interned:
a row holds their index.

Invariants: rows are in ascending offset order (half offsets only grow, so an add is an
append; an older offset, which only a replay could bring, is inserted in its place); a row
removed is a tombstone (``checks`` -1, key None) until the dead outnumber the live, then the
arrays are rebuilt without them; ``_by_key[group][key]`` is the offset of the live row
with that group and key, and nothing else.

Bounds: times are kept within int64 and check counts within [0, int32] (a producer's
CHECK_IMMUNITY_TIME_IN_SECONDS can name a time past int64: such a message is never due);
a group or (topic, partition) no live row names any more is forgotten when the columns are
rebuilt, so the interned names stay within twice the live rows plus the rows added since the
last rebuild (which the tombstones bound), not every group ever seen.

The snapshot is the table packed (base64 of the arrays, the interned names and the keys),
one string per column: a checkpoint costs no object per row to encode or to compare, and
``restore`` reads this and the older format (a list of rows). A snapshot that does not hold
together (columns of different lengths, offsets out of order, an index past its names, not
base64) raises ValueError and leaves the table empty: the store then rebuilds it from the
commitlog (storage.store.DerivedState).
"""

from __future__ import annotations

import base64
import bisect
import sys
from array import array
from collections.abc import Iterator
from dataclasses import dataclass

REMOVED = -1  # checks of a tombstone row
_COMPACT_AT = 1024  # tombstones kept at least, before a rebuild is worth it
_MIN_MS, _MAX_MS = -(1 << 63), (1 << 63) - 1  # the time columns' range
_MAX_CHECKS = (1 << 31) - 1
_NAMES_SLACK = 64  # interned names kept beyond twice the live rows before they are re-interned


@dataclass(slots=True)
class Pending:
    """A pending half message, as read from the table (a copy: changes go through it)."""

    group: str
    key: str
    topic: str
    partition: int
    stored_ms: int
    first_check_ms: int  # stored time + max(transactionTimeOut, the message's immunity)
    checks: int = 0


class PendingHalves:
    """See the module docstring."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._offsets = array("q")
        self._stored = array("q")
        self._first_check = array("q")
        self._checks = array("i")
        self._group = array("I")
        self._dest = array("I")
        self._keys: list[str | None] = []
        self._groups: list[str] = []
        self._group_ids: dict[str, int] = {}
        self._dests: list[tuple[str, int]] = []
        self._dest_ids: dict[tuple[str, int], int] = {}
        self._by_key: dict[str, dict[str, int]] = {}
        self._live = 0

    # -- reading ---------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._live

    def __contains__(self, offset: object) -> bool:
        return isinstance(offset, int) and self._row(offset) is not None

    def offset_of(self, group: str, key: str) -> int | None:
        keys = self._by_key.get(group)
        return None if keys is None else keys.get(key)

    def get(self, offset: int) -> Pending | None:
        row = self._row(offset)
        return None if row is None else self._entry(row)

    def __getitem__(self, offset: int) -> Pending:
        entry = self.get(offset)
        if entry is None:
            raise KeyError(offset)
        return entry

    def items(self) -> Iterator[tuple[int, Pending]]:
        """(offset, entry) of each pending half message, oldest first."""
        checks = self._checks
        for row in range(len(self._offsets)):
            if checks[row] != REMOVED:
                yield self._offsets[row], self._entry(row)

    def due(self, now_ms: int) -> list[int]:
        """Offsets of the pending half messages first due for a check at ``now_ms``."""
        first, checks, offsets = self._first_check, self._checks, self._offsets
        return [offsets[row] for row in range(len(offsets)) if first[row] <= now_ms and checks[row] != REMOVED]

    def checked(self) -> int:
        """How many pending half messages had at least one check."""
        return sum(1 for checks in self._checks if checks > 0)

    def topic_of(self, offset: int) -> str | None:
        row = self._row(offset)
        return None if row is None else self._dests[self._dest[row]][0]

    # -- changing --------------------------------------------------------------------------
    def add(self, offset: int, group: str, key: str, topic: str, partition: int, stored_ms: int,
            first_check_ms: int, checks: int = 0) -> None:
        """Add (or replace) the row of ``offset``; the group and key name it from now on."""
        stored_ms, first_check_ms, checks = _ms(stored_ms), _ms(first_check_ms), _checks(checks)
        offsets = self._offsets
        row = len(offsets)
        if offsets and offset <= offsets[-1]:
            row = bisect.bisect_left(offsets, offset)
            if offsets[row] == offset:  # replaced in place: offsets stay unique
                self._drop(row)
                for column in self._columns().values():
                    del column[row]
                del self._keys[row]
        self._insert(row, offset, group, key, topic, partition, stored_ms, first_check_ms, checks)

    def add_run(self, base: int, groups_and_keys: list[tuple[str, str]], topic: str, partition: int,
                stored_ms: int, first_checks: list[int]) -> None:
        """``add`` for offsets ``base``, ``base`` + 1, ... (a parked batch), with the columns
        extended once rather than a row at a time."""
        if self._offsets and base <= self._offsets[-1]:
            for offset, ((group, key), first) in enumerate(zip(groups_and_keys, first_checks), base):
                self.add(offset, group, key, topic, partition, stored_ms, first)
            return
        count = len(groups_and_keys)
        stored_ms, first_checks = _ms(stored_ms), [_ms(first) for first in first_checks]
        dest_id = self._intern_dest((topic, partition))
        group_ids = []
        for offset, (group, key) in enumerate(groups_and_keys, base):
            group_id = self._group_ids.get(group)
            if group_id is None:
                group_id = self._intern_group(group)
            group_ids.append(group_id)
            keys = self._by_key.get(group)
            if keys is None:
                keys = self._by_key[group] = {}
            keys[key] = offset
        self._offsets.extend(range(base, base + count))
        self._stored.extend([stored_ms] * count)
        self._first_check.extend(first_checks)
        self._checks.extend([0] * count)
        self._group.extend(group_ids)
        self._dest.extend([dest_id] * count)
        self._keys.extend([key for _, key in groups_and_keys])
        self._live += count

    def remove(self, offset: int) -> Pending | None:
        row = self._row(offset)
        if row is None:
            return None
        entry = self._entry(row)
        self._drop(row)
        self._compact_if_sparse()
        return entry

    def discard(self, offset: int) -> tuple[str, str] | None:
        """``remove`` for a caller that needs only the (group, key) the row had."""
        row = self._row(offset)
        if row is None:
            return None
        named = self._groups[self._group[row]], self._keys[row]
        self._drop(row)
        self._compact_if_sparse()
        return named  # type: ignore[return-value]

    def set_checks(self, offset: int, checks: int) -> None:
        row = self._row(offset)
        if row is not None:
            self._checks[row] = _checks(checks)

    def raise_checks(self, offset: int, checks: int) -> None:
        row = self._row(offset)
        if row is not None and checks > self._checks[row]:
            self._checks[row] = _checks(checks)

    # -- snapshot --------------------------------------------------------------------------
    def snapshot(self) -> dict:
        self._compact()
        return {"groups": list(self._groups), "dests": [list(d) for d in self._dests],
                "keys": list(self._keys), **{name: _pack(column) for name, column in self._columns().items()}}

    def restore(self, state: dict | None, rows: list | None) -> None:
        """From a ``snapshot``, or from rows of the older format ([offset, group, key,
        topic, partition, stored, first check, checks])."""
        self.clear()
        try:
            if state is not None:
                self._restore_columns(state)
            for offset, group, key, topic, partition, stored, first_check, checks in sorted(rows or ()):
                if not all(isinstance(name, str) for name in (group, key, topic)):
                    raise TypeError(f"row {offset}: names must be strings")
                self.add(int(offset), group, key, topic, int(partition), int(stored), int(first_check), int(checks))
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError) as exc:
            self.clear()
            raise ValueError(f"the pending half-message table in the checkpoint does not read: {exc!r}") from exc

    def _restore_columns(self, state: dict) -> None:
        """The table from a ``snapshot`` (compacted: no tombstones), checked whole first."""
        columns = {name: _unpack(state[name], column.typecode) for name, column in self._columns().items()}
        keys, groups = list(state["keys"]), [str(g) for g in state["groups"]]
        dests = [(str(topic), int(partition)) for topic, partition in state["dests"]]
        offsets, count = columns["offsets"], len(columns["offsets"])
        if len(keys) != count or any(len(column) != count for column in columns.values()):
            raise ValueError("columns of different lengths")
        if not all(isinstance(key, str) for key in keys):
            raise ValueError("a key that is not a string")
        if any(later <= earlier for earlier, later in zip(offsets, offsets[1:])):
            raise ValueError("offsets not in ascending order")
        if count and (max(columns["group"]) >= len(groups) or max(columns["dest"]) >= len(dests)
                      or min(columns["checks"]) < 0):
            raise ValueError("a group or partition index past its names, or a negative check count")
        for name, column in columns.items():
            setattr(self, "_" + name, column)
        self._keys = keys
        self._groups, self._dests = groups, dests
        self._group_ids = {group: i for i, group in enumerate(groups)}
        self._dest_ids = {dest: i for i, dest in enumerate(dests)}
        by_key = self._by_key
        for offset, group_id, key in zip(offsets, columns["group"], keys):
            by_key.setdefault(groups[group_id], {})[key] = offset  # later rows name the key, as add does
        self._live = count
        self._reintern()

    # -- inside ----------------------------------------------------------------------------
    def _columns(self) -> dict[str, array]:
        return {"offsets": self._offsets, "stored": self._stored, "first_check": self._first_check,
                "checks": self._checks, "group": self._group, "dest": self._dest}

    def _row(self, offset: int) -> int | None:
        offsets = self._offsets
        if not offsets:
            return None
        # offsets are unique and ascending, so a row is at most its offset's distance from
        # the first; half offsets are dense until rows are compacted away: often exactly there
        guess = offset - offsets[0]
        if guess < 0:
            return None
        if guess < len(offsets) and offsets[guess] == offset:
            row = guess
        else:
            row = bisect.bisect_left(offsets, offset, 0, min(len(offsets), guess + 1))
            if row >= len(offsets) or offsets[row] != offset:
                return None
        return row if self._checks[row] != REMOVED else None

    def _entry(self, row: int) -> Pending:
        topic, partition = self._dests[self._dest[row]]
        return Pending(self._groups[self._group[row]], self._keys[row], topic, partition,  # type: ignore[arg-type]
                       self._stored[row], self._first_check[row], self._checks[row])

    def _insert(self, row: int, offset: int, group: str, key: str, topic: str, partition: int,
                stored_ms: int, first_check_ms: int, checks: int) -> None:
        group_id = self._group_ids.get(group)
        if group_id is None:
            group_id = self._intern_group(group)
        dest_id = self._intern_dest((topic, partition))
        self._by_key.setdefault(group, {})[key] = offset  # the key names this row from now on
        for column, value in ((self._offsets, offset), (self._stored, stored_ms),
                              (self._first_check, first_check_ms), (self._checks, checks),
                              (self._group, group_id), (self._dest, dest_id)):
            column.insert(row, value)
        self._keys.insert(row, key)
        self._live += 1

    def _intern_group(self, group: str) -> int:
        group_id = self._group_ids.get(group)
        if group_id is None:
            group_id = self._group_ids[group] = len(self._groups)
            self._groups.append(group)
        return group_id

    def _intern_dest(self, dest: tuple[str, int]) -> int:
        dest_id = self._dest_ids.get(dest)
        if dest_id is None:
            dest_id = self._dest_ids[dest] = len(self._dests)
            self._dests.append(dest)
        return dest_id

    def _drop(self, row: int) -> None:
        if self._checks[row] == REMOVED:
            return
        group = self._groups[self._group[row]]
        keys = self._by_key.get(group)
        key = self._keys[row]
        if keys is not None and keys.get(key) == self._offsets[row]:  # type: ignore[arg-type]
            del keys[key]  # type: ignore[arg-type]
            if not keys:
                del self._by_key[group]
        self._checks[row] = REMOVED
        self._keys[row] = None
        self._live -= 1

    def _compact_if_sparse(self) -> None:
        dead = len(self._offsets) - self._live
        if dead > _COMPACT_AT and dead > self._live:
            self._compact()

    def _compact(self) -> None:
        """Rebuild the columns without tombstones (the by-key dicts hold offsets, not rows,
        so they stay). Ends come mostly oldest first: often the dead are just a prefix."""
        dead = len(self._offsets) - self._live
        if not dead:
            return
        checks = self._checks
        first_live = next(row for row in range(len(checks)) if checks[row] != REMOVED) if self._live else len(checks)
        if first_live == dead:
            for column in self._columns().values():
                del column[:dead]
            del self._keys[:dead]
        else:
            live = [row for row in range(len(checks)) if checks[row] != REMOVED]
            for name, column in self._columns().items():
                setattr(self, "_" + name, array(column.typecode, [column[row] for row in live]))
            self._keys = [self._keys[row] for row in live]
        if len(self._groups) + len(self._dests) > 2 * self._live + _NAMES_SLACK:
            self._reintern()

    def _reintern(self) -> None:
        """Forget the groups and (topic, partition) pairs no row names (each half message of a
        new group interned one, and an end does not take it back), renumbering the rest."""
        for column_name, names_name, ids_name in (("_group", "_groups", "_group_ids"),
                                                  ("_dest", "_dests", "_dest_ids")):
            column, names = getattr(self, column_name), getattr(self, names_name)
            used = sorted(set(column))
            if len(used) == len(names):
                continue
            renumber = {old: new for new, old in enumerate(used)}
            setattr(self, column_name, array(column.typecode, [renumber[i] for i in column]))
            kept = [names[i] for i in used]
            setattr(self, names_name, kept)
            setattr(self, ids_name, {name: i for i, name in enumerate(kept)})


def _ms(value: int) -> int:
    return min(max(value, _MIN_MS), _MAX_MS)


def _checks(value: int) -> int:
    return min(max(value, 0), _MAX_CHECKS)


def _pack(column: array) -> str:
    if sys.byteorder == "big":  # the checkpoint is little-endian on every machine
        column = array(column.typecode, column)
        column.byteswap()
    return base64.b64encode(column.tobytes()).decode("ascii")


def _unpack(text: str, typecode: str) -> array:
    column = array(typecode, base64.b64decode(text))
    if sys.byteorder == "big":
        column.byteswap()
    return column
