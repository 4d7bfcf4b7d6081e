"""JournaledMap: a small durable map (name -> JSON object) kept in two copies, a journal
always current and a snapshot at most ``snapshot_interval_ms`` behind it, so that damage to
one file costs nothing.

Files (for ``path`` = ``<dir>/topics.json``)::

    topics.json       the snapshot: ``{"#seq": N, "<name>": {...}, ...}``, replaced
                      atomically (temp file, fsync, rename, fsync dir) after a commit (see
                      ``snapshot_interval_ms`` below);
                      the version it replaced stays as ``topics.json.prev``. ``#seq`` (never
                      a legal name) is the last journal record it includes; a snapshot
                      without it (written by an older version, or by hand) is taken as it is.
    topics.journal    the journal: one line per record, ``<crc32 of the JSON, 8 hex> <JSON>``;
                      the first line is a base (``{"seq": N, "base": {whole map}}``; a
                      first change of seq 1 has the empty map as its base), every
                      later one a change (``{"seq": N, "put": {name: object}, "del": [name]}``)
                      with seq increasing by one. Appended and fsynced before the snapshot is
                      written; rewritten atomically as a new base when it holds more change
                      records than the map has entries (so it stays O(map)).

Invariants: the journal is never behind the snapshot (it is written first), and its base
plus its changes is the whole map. A commit is durable when ``commit`` returns (its journal
record fsynced). The snapshot is written by the commit too, except within
``snapshot_interval_ms`` of the last one (then ``write_snapshot_if_stale`` writes it): a
flood of small commits costs one O(map) write per interval, not per commit. Compaction
(a new base) costs O(map) once per O(map) commits.

Crash and damage: a crash leaves a torn last journal line (its CRC fails: it was never
acknowledged) and/or the snapshot before the commit, which the journal's later records bring
up to date. When the snapshot is damaged (truncated, random bytes, deleted), the map is the
journal's base plus its changes, with nothing lost; when the journal is damaged, the
snapshot and the journal's readable records after it are used and the journal is rewritten.
Only when both the snapshot and the journal's base are unusable does the map fall back to
``.prev`` plus the journal's readable changes after it, said loudly; with no usable copy at
all, ``DamagedFileError``. After a repair both files are written again at once; a start
never needs to write, though (a full disk): what it cannot write is written by the next
commit (the journal) or ``write_snapshot_if_stale`` (the snapshot).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .files import (
    PREVIOUS_SUFFIX,
    DamagedFileError,
    fsync_path,
    pwrite_all,
    read_json_with_fallback,
    write_json_atomically,
)

log = logging.getLogger(__name__)

SEQ_KEY = "#seq"  # '#' is in no legal topic or view name
JOURNAL_SUFFIX = ".journal"
_MIN_COMPACT_RECORDS = 64


@dataclass(slots=True)
class _Journal:
    """What a read of the journal found."""

    base: dict[str, dict] | None = None
    base_seq: int = 0
    changes: list[tuple[int, dict[str, dict], list[str]]] = field(default_factory=list)
    damaged_lines: int = 0
    exists: bool = False

    @property
    def last_seq(self) -> int:
        return self.changes[-1][0] if self.changes else self.base_seq


class JournaledMap:
    """See the module docstring. ``commit`` may be called from any thread (calls are
    serialized); ``entries`` is the durable map as of the last commit. ``check(name, object)``
    raises ValueError, KeyError or TypeError for an entry the owner cannot use: a file or
    journal line holding one counts as damaged."""

    def __init__(self, path: Path, check: Callable[[str, dict], object], *,
                 snapshot_interval_ms: int = 0, now_ms: Callable[[], int] | None = None) -> None:
        self._path = path
        self._check = check
        self._snapshot_interval_ms = snapshot_interval_ms
        self._now_ms = now_ms or (lambda: 0)
        self._snapshot_at: int | None = None  # when the snapshot was last written
        self._snapshot_stale = False
        self._needs_rewrite = False
        self._snapshot_failing = False  # write_snapshot_if_stale's last attempt failed (logged)
        self._journal_path = path.with_name(path.stem + JOURNAL_SUFFIX)
        self._lock = threading.Lock()
        self._seq = 0
        self._changes = 0  # change records in the journal since its base
        self.entries: dict[str, dict] = {}
        self._load()

    @property
    def path(self) -> Path:
        return self._path

    # -- reading -------------------------------------------------------------------------
    def _load(self) -> None:
        journal = self._read_journal()
        snapshot = self._read_snapshot(self._path)
        rewrite = journal.damaged_lines > 0 or not journal.exists  # the journal must be written again
        stale = False  # only the snapshot is behind
        if isinstance(snapshot, tuple):
            seq, entries = snapshot
            if seq is None:  # an older version's (or a hand-written) file: it is the truth
                self._seq, self.entries = journal.last_seq, entries
                rewrite = True
            elif journal.base is not None and journal.base_seq > seq:
                # a crash between a journal rewrite and the snapshot's: the journal is newer
                self.entries = dict(journal.base)
                _apply(self.entries, journal.changes)
                self._seq, stale = journal.last_seq, True
            else:
                self.entries = entries
                later = [c for c in journal.changes if c[0] > seq]
                _apply(self.entries, later)
                self._seq = max(seq, journal.last_seq)
                stale = bool(later)
        elif journal.base is not None:
            log.error("%s is %s: rebuilt from %s (nothing lost)", self._path, snapshot, self._journal_path)
            self.entries = dict(journal.base)
            _apply(self.entries, journal.changes)
            self._seq, stale = journal.last_seq, True
        else:
            self._load_previous(journal, snapshot)
            rewrite = True
        self._changes = len(journal.changes)
        if not (self.entries or journal.exists or snapshot != "missing"):
            return  # a new map: nothing to write yet
        # A start must not need to write (a full disk): what cannot be written now is
        # written by the next commit (the journal) or write_snapshot_if_stale (the snapshot).
        with self._lock:
            try:
                if rewrite:
                    self._rewrite()
                elif stale:
                    self._write_snapshot()
            except OSError as exc:
                log.error("could not write %s (%s); it is written again with the next change",
                          self._journal_path if rewrite else self._path, exc)
                self._needs_rewrite, self._snapshot_stale = rewrite, True

    def _load_previous(self, journal: _Journal, snapshot: str | tuple) -> None:
        previous = self._path.with_name(self._path.name + PREVIOUS_SUFFIX)
        prev = self._read_snapshot(previous)
        if not isinstance(prev, tuple):
            if snapshot == "missing" and prev == "missing" and not journal.exists:
                return  # a new map
            raise DamagedFileError(
                f"{self._path} is damaged and neither {self._journal_path} nor {previous} is usable; "
                "restore them from a backup, or move them away to start without them")
        seq, entries = prev
        later = [c for c in journal.changes if c[0] > (seq or 0)]
        _apply(entries, later)
        self.entries, self._seq = entries, max(seq or 0, journal.last_seq)
        log.error("%s and the base of %s are damaged: using %s and %d later journal record(s); "
                  "changes in damaged journal lines are lost", self._path, self._journal_path, previous,
                  len(later))

    def _read_snapshot(self, path: Path) -> str | tuple[int | None, dict[str, dict]]:
        """(seq or None, entries), or "missing" / "damaged"."""
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict):
                raise ValueError("not a JSON object")
            seq = raw.pop(SEQ_KEY, None)
            if seq is not None and not isinstance(seq, int):
                raise ValueError(f"{SEQ_KEY} is not a number")
            self._check_all(raw)
            return seq, raw
        except FileNotFoundError:
            return "missing"
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.error("%s is damaged (%s)", path, exc)
            return "damaged"

    def _read_journal(self) -> _Journal:
        journal = _Journal()
        try:
            data = self._journal_path.read_bytes()
        except FileNotFoundError:
            return journal
        except OSError as exc:
            log.error("%s is unreadable (%s)", self._journal_path, exc)
            journal.exists, journal.damaged_lines = True, 1
            return journal
        journal.exists = True
        expected: int | None = None
        for number, line in enumerate(data.split(b"\n")):
            if not line:
                continue
            record = self._parse_line(line)
            if record is None or (expected is not None and record.get("seq") != expected):
                journal.damaged_lines += 1
                if record is None:
                    continue
            seq = record.get("seq")
            if not isinstance(seq, int):
                continue
            if number == 0 and isinstance(record.get("base"), dict):
                journal.base, journal.base_seq = record["base"], seq
            elif isinstance(record.get("put"), dict) and isinstance(record.get("del"), list):
                if number == 0 and seq == 1:  # a journal begun on an empty map
                    journal.base, journal.base_seq = {}, 0
                journal.changes.append((seq, record["put"], [str(n) for n in record["del"]]))
            else:
                journal.damaged_lines += 1
                continue
            expected = seq + 1
        if journal.damaged_lines:
            log.error("%s: %d damaged line(s) skipped (a torn last line is an unacknowledged change)",
                      self._journal_path, journal.damaged_lines)
        return journal

    # -- writing -------------------------------------------------------------------------
    def commit(self, puts: Mapping[str, dict], deletes: Iterable[str] = ()) -> None:
        """Make ``puts`` (name -> object) and ``deletes`` durable: a journal record (appended,
        fsynced), then the snapshot. The change is durable once the journal record is: a
        snapshot that cannot be written then (a full disk) is logged and written again by
        the next commit or start. Raises OSError only when the journal record could not be
        written; it is cut off again and nothing changed."""
        deleted = list(deletes)
        with self._lock:
            if self._needs_rewrite:  # a damaged journal that a start could not replace
                self._rewrite()
            seq = self._seq + 1
            record = {"seq": seq, "put": dict(puts), "del": deleted}
            self._append_line(record)
            self._seq = seq
            self._changes += 1
            _apply(self.entries, [(seq, record["put"], deleted)])
            self._snapshot_stale = True
            now = self._now_ms()
            try:
                if self._changes > max(_MIN_COMPACT_RECORDS, len(self.entries)):
                    self._rewrite()
                elif self._snapshot_at is None or now - self._snapshot_at >= self._snapshot_interval_ms:
                    self._write_snapshot()
            except OSError as exc:
                log.error("%s could not be written (%s); %s holds the change", self._path, exc,
                          self._journal_path)

    def write_snapshot_if_stale(self) -> None:
        """Write the snapshot if a commit left it behind the journal (any thread)."""
        with self._lock:
            if self._snapshot_stale:
                try:
                    self._write_snapshot()
                except OSError as exc:  # the journal holds everything; retried next time
                    if not self._snapshot_failing:
                        log.error("could not write %s (%s); %s holds every change", self._path, exc,
                                  self._journal_path)
                    self._snapshot_failing = True
                    return
                if self._snapshot_failing:
                    log.warning("%s is written again", self._path)
                self._snapshot_failing = False

    def _append_line(self, record: dict) -> None:
        line = _encode_line(record)
        fd = os.open(self._journal_path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                pwrite_all(fd, line, size)  # commits are serialized: the end is ours
                os.fsync(fd)
            except OSError:
                # a partial line would glue the next record to it: cut it off (best effort;
                # a line left torn fails its CRC and is skipped)
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass
                raise
        finally:
            os.close(fd)
        if size == 0:
            fsync_path(self._journal_path.parent)

    def _rewrite(self) -> None:
        """The journal as one base record of the current map, then the snapshot."""
        tmp = self._journal_path.with_name(self._journal_path.name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(_encode_line({"seq": self._seq, "base": self.entries}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._journal_path)
        fsync_path(self._journal_path.parent)
        self._changes = 0
        self._needs_rewrite = False
        self._write_snapshot()

    def _write_snapshot(self) -> None:
        write_json_atomically(self._path, {SEQ_KEY: self._seq, **self.entries}, keep_previous=True)
        self._snapshot_at, self._snapshot_stale = self._now_ms(), False

    def _check_all(self, entries: object) -> None:
        if not isinstance(entries, dict):
            raise ValueError("not a JSON object")
        for name, entry in entries.items():
            if not isinstance(entry, dict):
                raise ValueError(f"entry {name!r} is not a JSON object")
            self._check(name, entry)

    def _parse_line(self, line: bytes) -> dict | None:
        crc, _, body = line.partition(b" ")
        try:
            if len(crc) != 8 or int(crc, 16) != zlib.crc32(body):
                return None
            record = json.loads(body)
            if not isinstance(record, dict):
                return None
            for key in ("base", "put"):
                if key in record:
                    self._check_all(record[key])
        except (ValueError, KeyError, TypeError):
            return None
        return record


def _apply(entries: dict[str, dict], changes: Iterable[tuple[int, Mapping[str, dict], list[str]]]) -> None:
    for _, puts, deletes in changes:
        for name in deletes:
            entries.pop(name, None)
        entries.update(puts)


def _encode_line(record: dict) -> bytes:
    body = json.dumps(record, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return b"%08x %s\n" % (zlib.crc32(body), body)


LEGACY_IMPORTED = "#legacy"  # the entry saying an older version's file was imported


def import_legacy_file(target: JournaledMap, legacy: Path, entries_of: Callable[[object], Mapping[str, dict]]) -> None:
    """Move what an older version kept in ``legacy`` (one JSON file replaced whole, with its
    ``.prev`` copy) into ``target``, once: its entries and the ``LEGACY_IMPORTED`` marker in
    one commit, then the old files are removed. A crash between the two leaves the marker,
    so the old files are only removed by the next start, never imported twice (which would
    bring back entries deleted since). If the commit cannot be written (a full disk), the
    old entries are used in memory and the import is tried again at the next start; owners'
    ``check`` functions must accept the marker entry."""
    previous = legacy.with_name(legacy.name + PREVIOUS_SUFFIX)
    if not (legacy.exists() or previous.exists()):
        return
    if LEGACY_IMPORTED not in target.entries:
        entries = dict(read_json_with_fallback(legacy, entries_of) or {})
        try:
            target.commit({**entries, LEGACY_IMPORTED: {"file": legacy.name}})
        except OSError as exc:
            log.error("could not import %s into %s (%s); using it as it is until the next start",
                      legacy, target.path, exc)
            target.entries.update(entries)
            return
        log.info("imported %d entries of %s into %s", len(entries), legacy, target.path)
    try:
        for path in (legacy, previous):
            path.unlink(missing_ok=True)
        fsync_path(legacy.parent)
    except OSError as exc:
        log.error("could not remove %s (%s); it is not read again", legacy, exc)
