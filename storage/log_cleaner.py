"""The log cleaner: runs cleanings (storage.compaction_cleaner) of the store's compacted
partitions, one at a time, in a thread of its own, and switches each result in on the event
loop; it keeps the progress ``rmqk topics describe``, the console and the metrics show."""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .compaction_cleaner import (
    KEY_MAP_ENTRY_BYTES,
    CleaningCancelled,
    CleanJob,
    CompactionSettings,
    DirtyBatch,
    run_job,
)
from .errors import StorageError

if TYPE_CHECKING:
    from .compaction_store import CompactedLog
    from .partition_log import PartitionLog
    from .store import MessageStore

log = logging.getLogger(__name__)

# dirty batches remembered across passes, over every partition (about 150 bytes each)
MAX_CACHED_SCAN = 200_000


@dataclass(slots=True)
class CleanerProgress:
    """What ``rmqk topics describe`` and the console show for one compacted partition."""

    cleaned_end: int = 0
    dirty_ratio: float = 0.0
    last_run_ms: int = -1  # the last cleaning that wrote a file
    last_check_ms: int = -1
    last_error: str = ""


class LogCleaner:
    """Runs cleanings of the store's compacted partitions, one at a time, in its own
    thread; switches their results in on the loop. ``settings_for(topic)`` (set by the
    adapter, which knows the topic configs) says whether a topic is compacted and how."""

    def __init__(self, store: MessageStore) -> None:
        self._store = store
        self.settings_for: Callable[[str], CompactionSettings | None] = lambda name: None
        self.progress: dict[tuple[str, int], CleanerProgress] = {}
        self.runs = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.bytes_reclaimed = 0
        self.failures = 0
        self.seconds = 0.0  # spent in cleanings that wrote a file (their thread's wall time)
        self._pool: ThreadPoolExecutor | None = None
        self._lock = asyncio.Lock()
        # per partition: (retention's batches_moved then, the dirty batches a pass found)
        self._scans: dict[PartitionLog, tuple[int, list[DirtyBatch]]] = {}
        self._cancel = threading.Event()

    @property
    def map_capacity(self) -> int:
        return max(1, self._store.config.cleaner_dedupe_buffer_bytes // KEY_MAP_ENTRY_BYTES)

    async def run(self) -> None:
        backoff = self._store.config.cleaner_backoff_ms / 1000
        while True:
            await asyncio.sleep(backoff)
            try:
                await self.clean_all()
            except Exception:  # a bug must not stop cleaning for good
                log.exception("log cleaner pass failed")

    async def clean_all(self, *, force: bool = False) -> int:
        """One pass over the compacted partitions; returns how many were cleaned."""
        cleaned = 0
        partitions = self._store.partitions()
        for key in [k for k in self.progress if k not in partitions]:  # deleted topics
            del self.progress[key]
        for (name, p), plog in sorted(partitions.items(), key=lambda kv: kv[0]):
            settings = self.settings_for(name)
            if settings is None:
                self.progress.pop((name, p), None)  # no longer compacted
                continue
            if await self.clean(name, p, plog, settings, force=force):
                cleaned += 1
        return cleaned

    async def clean(self, name: str, p: int, plog: PartitionLog, settings: CompactionSettings, *,
                    force: bool = False) -> bool:
        async with self._lock:
            return await self._clean(name, p, plog, settings, force)

    async def _clean(self, name: str, p: int, plog: PartitionLog, settings: CompactionSettings,
                     force: bool) -> bool:
        store = self._store
        now = store.clock.now_ms()
        progress = self.progress.setdefault((name, p), CleanerProgress())
        progress.last_check_ms = now
        previous = plog.compacted
        first_dirty = max(plog.log_start_offset, plog.cleaned_end)
        progress.cleaned_end = first_dirty
        if first_dirty >= plog.next_offset:
            return False
        job = CleanJob(
            plog.topic_id, p, plog.directory, plog.consume_queue.entries_per_file,
            [(s.base_position, s.path) for s in store.commitlog.segments],
            plog.log_start_offset, first_dirty, plog.next_offset, plog.last_stable_offset,
            # the dirty range's only: the compacted file holds no aborted batch
            plog.txn_index.aborted_ranges(first_dirty, plog.last_stable_offset),
            previous, settings, now, self.map_capacity, store.compaction_dir(plog), force, self._cancel,
            store.durable_position, self._known(plog, first_dirty),
        )
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="log-cleaner")
        began = store.clock.monotonic()
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._pool, run_job, job)
        except CleaningCancelled:
            return False
        except (OSError, ValueError, StorageError) as exc:
            self._scans.pop(plog, None)
            self._failed(name, p, progress, exc)
            return False
        self._keep_scan(plog, result.scanned)
        progress.dirty_ratio = result.plan.dirty_ratio
        writer = result.writer
        if writer is None:
            return False
        if not self._still_served(name, p, plog, previous):
            writer.discard()  # the topic was deleted
            return False
        # The rename and the directory fsync run in the thread too: a directory fsync waits
        # for a journal commit, which a loaded disk can make long.
        try:
            await loop.run_in_executor(self._pool, writer.commit)
            if not self._still_served(name, p, plog, previous):  # deleted meanwhile
                await loop.run_in_executor(self._pool, writer.discard)
                return False
            installed = writer.opened()
        except OSError as exc:
            writer.discard()
            self._failed(name, p, progress, exc)
            return False
        plog.compacted = installed
        plog.raise_commitlog_start(plog.cleaned_end)  # the commitlog below is not needed any more
        if previous is not None:
            previous.close()
            await loop.run_in_executor(self._pool, writer.remove, previous)
        self.seconds += store.clock.monotonic() - began
        self.runs += 1
        self.bytes_read += result.bytes_read
        self.bytes_written += result.bytes_written
        self.bytes_reclaimed += max(0, result.bytes_read - result.bytes_written)
        progress.cleaned_end = plog.cleaned_end
        progress.last_run_ms = now
        progress.last_error = ""
        log.info("%s-%d: cleaned up to offset %d: %d of %d records kept, %d -> %d bytes, %d keys",
                 name, p, plog.cleaned_end, result.records_kept, result.records_read, result.bytes_read,
                 result.bytes_written, result.keys)
        return True

    def _known(self, plog: PartitionLog, first_dirty: int) -> list[DirtyBatch]:
        """The dirty batches the last pass found, from the one at ``first_dirty`` on. They
        stay valid (a batch's offsets and bytes never change, and the dirty range only grows
        at its end) until retention moves batches, which re-points their entries: any move
        since, or a ``first_dirty`` that is not one of their starts (the log start moved
        inside a batch), and the scan starts afresh."""
        kept = self._scans.get(plog)
        if kept is None or kept[0] != self._store.retention.stats.batches_moved:
            return []
        scanned = kept[1]
        i = bisect.bisect_left(scanned, first_dirty, key=lambda b: b.base)
        return scanned[i:] if i < len(scanned) and scanned[i].base == first_dirty else []

    def _keep_scan(self, plog: PartitionLog, scanned: list[DirtyBatch]) -> None:
        """Remember ``scanned`` for the next pass, within MAX_CACHED_SCAN batches over every
        partition (a partition past that is scanned afresh at each pass, as before)."""
        self._scans.pop(plog, None)
        for gone in [p for p in self._scans if p.closed]:
            del self._scans[gone]
        if sum(len(v[1]) for v in self._scans.values()) + len(scanned) <= MAX_CACHED_SCAN:
            self._scans[plog] = (self._store.retention.stats.batches_moved, scanned)

    def _still_served(self, name: str, p: int, plog: PartitionLog, previous: CompactedLog | None) -> bool:
        served = self._store.partitions().get((name, p)) is plog and not plog.closed
        return served and plog.compacted is previous

    def _failed(self, name: str, p: int, progress: CleanerProgress, exc: Exception) -> None:
        self.failures += 1
        progress.last_error = str(exc)
        log.error("%s-%d: cleaning failed (%s); it is tried again later", name, p, exc)

    def close(self) -> None:
        self._cancel.set()  # a cleaning under way stops at its next batch, its file discarded
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
