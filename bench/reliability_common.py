"""Shared pieces of the reliability suite: the raw protocol client, brokers, memory figures.

The raw client is ``tests/integration/rawkafka.py`` itself, imported rather than copied, so
the suite and the integration tests speak the same bytes. Its directory is appended (not
prepended) to ``sys.path`` so that nothing there can shadow an installed module.

Memory is read from ``/proc/<pid>/status`` (VmRSS now, VmHWM the process's peak) instead of
psutil, which is not a dependency of the broker.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Self

from rmqkafka.adapter.embedded import EmbeddedBroker

_RAWKAFKA_DIR = str(Path(__file__).resolve().parents[1] / "tests" / "integration")
if _RAWKAFKA_DIR not in sys.path:
    sys.path.append(_RAWKAFKA_DIR)

import rawkafka as raw  # found through the path appended above

__all__ = ["BackgroundThread", "RssSampler", "broker", "memory_mb", "raw", "restart_same_port"]

QUIET = {"log_level": 0}  # librdkafka: no connection-refused chatter while a broker is down


def broker(data_dir: Path, *, config: dict[str, str] | None = None, flush: str | None = None,
           log_level: str = "warning") -> EmbeddedBroker:
    """A started broker process on ``data_dir``; ``config`` becomes its server.properties."""
    config_file = None
    if config:
        data_dir.mkdir(parents=True, exist_ok=True)
        config_file = data_dir.with_name(data_dir.name + ".properties")
        config_file.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
    instance = EmbeddedBroker(data_dir=data_dir, flush=flush, config_file=config_file,
                              args=["--log-level", log_level])
    return instance.start()


def restart_same_port(instance: EmbeddedBroker, attempts: int = 50) -> None:
    """Start a stopped broker again on its old port, so that clients reconnect by themselves.

    Right after a SIGKILL the port can still be held for a moment; retry briefly.
    """
    for attempt in range(attempts):
        try:
            instance.restart(same_port=True)
            return
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(0.1)


def memory_mb(pid: int, field: str = "VmRSS") -> float:
    """``field`` (VmRSS, VmHWM, ...) of ``/proc/<pid>/status`` in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise LookupError(f"{field} not in /proc/{pid}/status")


class BackgroundThread:
    """A daemon thread running ``_run`` from the ``with`` block's start to its end, when
    ``_stop`` is set and the thread joined."""

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class RssSampler(BackgroundThread):
    """Samples a process's VmRSS every ``interval`` s in a thread; ``peak_mb`` is the highest.

    VmHWM alone would not do for a fault check: it is the peak since the process started,
    not since the fault was sent.
    """

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        super().__init__("rss-sampler")
        self.pid = pid
        self.start_mb = self.peak_mb = memory_mb(pid)
        self._interval = interval

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.peak_mb = max(self.peak_mb, memory_mb(self.pid))
            except (OSError, LookupError):
                return  # the process is gone; the caller finds out from the broker

    @property
    def grown_mb(self) -> float:
        return self.peak_mb - self.start_mb
