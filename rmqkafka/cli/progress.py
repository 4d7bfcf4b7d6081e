"""Progress bars of the long client commands (``rmqk produce``, ``consume``, ``groups reset-offsets``).

Why this module: a bar must never cost the commands that do not draw one. ``rmqk --help``,
``--version`` and every quick command stay as fast as before because tqdm is imported only
when a bar is really drawn: with ``--progress`` (or ``RMQK_PROGRESS=1``) at once, and on a
terminal only once the work has taken longer than ``delay`` seconds (0.5 by default), so a
command that finishes quickly never imports it.

Rules (the same for every command):

- Bars go to stderr, never stdout, so records and summaries on stdout stay byte-for-byte
  what scripts read.
- Shown by default only when stderr is a terminal; ``--progress`` forces a bar (into a pipe
  or a log file too: then it is redrawn at most once a second and its last state is kept on
  its own line), ``--no-progress`` (or ``RMQK_PROGRESS=0``) turns it off.
- ``total`` known: a bar with percentage and remaining time (produce of a file: bytes;
  consume with ``--exit-at-end``: offsets to read; ``--max-messages``: records;
  reset-offsets: offset look-ups). Unknown: a counter with rate.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import click

PROGRESS_ENV = "RMQK_PROGRESS"
AUTO_DELAY = 0.5  # seconds of work before an automatic (terminal) bar appears


def progress_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """``--progress/--no-progress`` (env ``RMQK_PROGRESS=1|0``) as ``progress: bool | None``."""
    return click.option(
        "--progress/--no-progress", default=None, envvar=PROGRESS_ENV,
        help=f"Draw a progress bar on stderr (env {PROGRESS_ENV}=1|0). [default: when stderr is a terminal]",
    )(func)


def isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _columns(stream: Any) -> int:
    """The terminal's width, 0 when it does not say (a pseudo-terminal nobody sized)."""
    import os

    try:
        return os.get_terminal_size(stream.fileno()).columns
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return 0


class Progress:
    """A progress bar on ``stream`` (stderr) counting records, drawn with tqdm when enabled.

    ``enabled``: True forces it, False disables it, None = when ``stream`` is a terminal.
    ``add(records, advance)`` counts ``records`` and moves the bar by ``advance`` (default:
    ``records``); when the bar's unit is not records (bytes, offsets) the record count is
    shown after the rate. ``done()`` removes the bar from a terminal (the command's own
    summary follows) and ends it with a newline elsewhere.
    """

    def __init__(
        self,
        enabled: bool | None,
        verb: str,
        stream: TextIO | None = None,
        *,
        total: int | None = None,
        unit: str = "records",
        unit_scale: bool = False,
        delay: float | None = None,
    ) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = isatty(self.stream)
        self.enabled = self.tty if enabled is None else bool(enabled)
        self.verb = verb
        self.total = total
        self.unit = unit
        self.unit_scale = unit_scale
        self.delay = (AUTO_DELAY if enabled is None else 0.0) if delay is None else delay
        self.count = 0  # records
        self.position = 0  # the bar's position (records, bytes or offsets)
        self.start = time.monotonic()
        self._interval = 0.1 if self.tty else 1.0
        self._next = self.start + self.delay
        self._shown = 0  # position already passed to the bar
        self._bar: Any = None  # opened by the first draw, so total and unit may still change

    def add(self, records: int = 1, advance: int | None = None) -> None:
        self.count += records
        self.position += records if advance is None else advance
        if self.enabled:
            now = time.monotonic()
            if now >= self._next:
                self._next = now + self._interval
                self._draw()

    def set_total(self, total: int | None, unit: str | None = None) -> None:
        self.total = total
        if unit is not None and self._bar is None:
            self.unit = unit
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def _open(self) -> None:
        from tqdm import tqdm  # ~40 ms, paid only by commands that draw a bar

        width = _columns(self.stream) if self.tty else None
        self._bar = tqdm(
            total=self.total,
            desc=self.verb,
            unit=self.unit if self.unit_scale else f" {self.unit}",
            unit_scale=self.unit_scale,
            file=self.stream,
            leave=not self.tty,
            dynamic_ncols=bool(width),  # follows resizes
            # a terminal of unknown size (0x0, e.g. an unsized pseudo-terminal): tqdm would draw nothing
            ncols=None if width is None or width else 80,
            nrows=None if width is None or width else 24,
            mininterval=0,  # add() already limits redraws to ~10 a second (1 off a terminal)
            miniters=1,
            smoothing=0.1,
            delay=1e-6,  # no draw of the empty bar here: the caller draws the real state next
        )
        self._bar.start_t = self._bar.last_print_t = self._bar._time() - (time.monotonic() - self.start)

    def _draw(self) -> None:
        if self._bar is None:
            self._open()
        bar = self._bar
        if self.unit != "records":
            bar.set_postfix_str(f"{self.count:,} records", refresh=False)
        step = self.position - self._shown
        self._shown = self.position
        if self.total is not None and self.position > self.total:
            bar.total = self.position  # e.g. records appended while consuming
        if step:
            bar.update(step)
        else:
            bar.refresh()

    def done(self) -> None:
        """Draw the final state and close the bar (a forced bar is drawn even if nothing came)."""
        if self._bar is None and not (self.enabled and self.delay <= 0):
            return
        self._draw()
        self._bar.close()
        self._bar = None
        self.stream.flush()
