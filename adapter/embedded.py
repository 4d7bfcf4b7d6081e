"""A real broker in a child process, for test suites: ``with EmbeddedBroker() as broker``.

    with EmbeddedBroker() as broker:
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)

Why a process and not an in-process server: clients under test often run their own event
loops or threads, crash tests must be able to SIGKILL the broker, and a separate process
is exactly what production runs. Start-up cost is one interpreter start plus recovery.

The child is ``sys.executable -m adapter serve --host 127.0.0.1 --port 0 --data-dir DIR``
in its own process group (session). Readiness is the single stdout line ``rmqk broker
started on HOST:PORT``; the bound port is taken from it, so there are no port races. Both
pipes are drained by daemon threads into bounded buffers, so a chatty broker can never block
on a full pipe; :attr:`EmbeddedBroker.stderr` returns the current process's log.

With ``args=["--metrics-port", "0"]`` (or ``metrics.port`` in the config file) the broker
also prints ``rmqk metrics on http://HOST:PORT``; :attr:`EmbeddedBroker.metrics_url` returns
that URL (/metrics, /ready, /healthz, the console).

The data directory is a fresh ``tempfile.mkdtemp()`` (removed by :meth:`close`) unless
``data_dir=`` is given (then it is kept). :meth:`restart` reuses it, which is how crash tests
check recovery: ``broker.kill(); broker.restart()``.

Safety net: every child is reaped by a ``weakref.finalize`` that also runs at interpreter
exit, so a failing test leaves neither zombies nor orphans (unless the test process itself
is SIGKILLed; the broker's process group id is its pid: ``kill -- -PID``).

Only the standard library is imported here, so a conftest can import it cheaply.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import IO, NoReturn

READY_PREFIX = "rmqk broker started on "  # must match rmqkafka.cli.serve.READY_PREFIX
METRICS_PREFIX = "rmqk metrics on "  # rmqkafka.cli.serve.METRICS_PREFIX, without "http://"
_STDERR_TAIL_LINES = 40


class EmbeddedBrokerError(RuntimeError):
    """The broker process could not be started (the message ends with its stderr tail)."""


class _Drain:
    """Read a pipe to EOF in a daemon thread, keeping at most ``limit`` trailing bytes.

    ``on_line`` (optional) sees each complete decoded line, then ``None`` at EOF.
    """

    def __init__(
        self, stream: IO[bytes], limit: int, on_line: Callable[[str | None], None] | None = None
    ) -> None:
        self._stream = stream
        self._limit = limit
        self._on_line = on_line
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="rmqk-embedded-drain", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        fd = self._stream.fileno()
        partial = b""
        try:
            while chunk := os.read(fd, 65536):
                with self._lock:
                    self._buffer += chunk
                    if len(self._buffer) > self._limit:
                        del self._buffer[: len(self._buffer) - self._limit]
                if self._on_line is not None:
                    *lines, partial = (partial + chunk).split(b"\n")
                    for line in lines:
                        self._on_line(line.decode("utf-8", "replace").rstrip("\r"))
        except OSError:
            pass  # the pipe was closed under us
        finally:
            if self._on_line is not None:
                self._on_line(None)

    def text(self) -> str:
        with self._lock:
            return self._buffer.decode("utf-8", "replace")

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._stream.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the child's whole process group and reap it (the finalizer; never raises)."""
    if proc.returncode is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


class EmbeddedBroker:
    """One broker child process with a data directory that survives restarts.

    Parameters: ``data_dir`` (default: a temporary directory owned and removed by this
    object), ``flush`` ("async" or "sync"), ``config_file`` (a server.properties),
    ``args`` (extra ``rmqk serve`` arguments, appended last so they win), ``env`` (extra
    environment variables for the child), ``host`` (bind address), ``startup_timeout``
    (seconds to wait for the ready line; default ``$RMQK_STARTUP_TIMEOUT`` or 15, so a test
    suite on a slow or busy machine can allow more for every broker it starts),
    ``stderr_limit`` (bytes of stderr kept).
    """

    def __init__(
        self,
        data_dir: Path | str | None = None,
        *,
        flush: str | None = None,
        config_file: Path | str | None = None,
        args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        startup_timeout: float | None = None,
        stderr_limit: int = 1 << 20,
    ) -> None:
        self._data_dir = None if data_dir is None else Path(data_dir).absolute()
        self._remove_dir: weakref.finalize[..., object] | None = None
        self._flush = flush
        self._config_file = None if config_file is None else Path(config_file).absolute()
        self._args = list(args)
        self._env = dict(env or {})
        self._bind_host = host
        self.startup_timeout = (float(os.environ.get("RMQK_STARTUP_TIMEOUT", 15.0))
                                if startup_timeout is None else startup_timeout)
        self._stderr_limit = stderr_limit
        self._proc: subprocess.Popen[bytes] | None = None
        self._last_command: list[str] = []
        self._reaper: weakref.finalize[..., object] | None = None
        self._stdout: _Drain | None = None
        self._stderr: _Drain | None = None
        self._host: str | None = None
        self._port: int | None = None
        self._startup_seconds: float | None = None
        self._closed = False

    # ------------------------------------------------------------------ properties

    @property
    def host(self) -> str:
        """The host from the ready line of the last start."""
        if self._host is None:
            raise EmbeddedBrokerError("broker has not been started")
        return self._host

    @property
    def port(self) -> int:
        """The bound port from the ready line of the last start."""
        if self._port is None:
            raise EmbeddedBrokerError("broker has not been started")
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """``HOST:PORT`` for Kafka clients (IPv6 hosts bracketed)."""
        host = self.host
        return f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"

    @property
    def metrics_url(self) -> str | None:
        """``http://HOST:PORT`` of the metrics port (/metrics, /ready, /healthz, the console)
        of the running broker; None when it was started without one (``args=["--metrics-port",
        "0"]`` or ``metrics.port`` in the config file turns it on)."""
        if not self.running or self._stdout is None:
            return None
        # rmqk serve writes it in one write with the ready line (atomic on a pipe), and the
        # drain buffers a chunk before it reports the ready line: it is here once started.
        for line in self._stdout.text().splitlines():
            if line.startswith(METRICS_PREFIX):
                return line[len(METRICS_PREFIX):].strip()
        return None

    @property
    def data_dir(self) -> Path:
        """The data directory (created on first start if it was not given)."""
        if self._data_dir is None:
            raise EmbeddedBrokerError("broker has not been started")
        return self._data_dir

    @property
    def pid(self) -> int | None:
        """The current (or last) child's pid; also its process group id."""
        return None if self._proc is None else self._proc.pid

    @property
    def returncode(self) -> int | None:
        """The last child's exit status (negative = killed by that signal); None if running."""
        return None if self._proc is None else self._proc.poll()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def startup_seconds(self) -> float | None:
        """Seconds from the last :meth:`start` call to the ready line."""
        return self._startup_seconds

    @property
    def stderr(self) -> str:
        """The current (or last) child's stderr, at most ``stderr_limit`` trailing bytes."""
        return "" if self._stderr is None else self._stderr.text()

    def command(self, port: int = 0) -> list[str]:
        """The child's command line."""
        cmd = [sys.executable, "-m", "rmqkafka", "serve", "--host", self._bind_host]
        cmd += ["--port", str(port), "--data-dir", str(self.data_dir)]
        if self._flush is not None:
            cmd += ["--flush", self._flush]
        if self._config_file is not None:
            cmd += ["--config", str(self._config_file)]
        return cmd + self._args

    # ------------------------------------------------------------------ lifecycle

    def start(self, port: int = 0) -> EmbeddedBroker:
        """Start the child and wait for its ready line; raises EmbeddedBrokerError."""
        if self._closed:
            raise EmbeddedBrokerError("broker is closed")
        if self.running:
            raise EmbeddedBrokerError(f"broker is already running (pid {self.pid})")
        self._finish()
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="rmqk-embedded-"))
            self._remove_dir = weakref.finalize(self, shutil.rmtree, self._data_dir, True)
        began = time.monotonic()
        events: queue.SimpleQueue[tuple[str, int] | None] = queue.SimpleQueue()
        self._last_command = self.command(port)
        proc = subprocess.Popen(
            self._last_command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._child_env(),
            start_new_session=True,
        )
        self._proc = proc
        self._reaper = weakref.finalize(self, _kill_group, proc)
        self._host = self._port = None
        assert proc.stdout is not None and proc.stderr is not None
        self._stderr = _Drain(proc.stderr, self._stderr_limit)
        self._stdout = _Drain(proc.stdout, 1 << 16, _ready_watcher(events))
        try:
            ready = events.get(timeout=self.startup_timeout)
        except queue.Empty:
            self._abort(f"broker did not report ready within {self.startup_timeout:g} s")
        if ready is None:
            proc.wait()
            self._abort(f"broker exited with status {proc.returncode} before it was ready")
        self._host, self._port = ready
        self._startup_seconds = time.monotonic() - began
        return self

    def stop(self, timeout: float = 5.0) -> int | None:
        """SIGTERM the broker and wait up to ``timeout`` s, then SIGKILL its group.

        Returns the exit status (0 after a clean shutdown); None if never started.
        """
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
        self._finish()
        return proc.returncode

    def kill(self) -> int | None:
        """SIGKILL the broker's process group (a crash, no clean-shutdown marker) and reap it."""
        proc = self._proc
        if proc is None:
            return None
        _kill_group(proc)
        self._finish()
        return proc.returncode

    def restart(self, *, same_port: bool = False) -> EmbeddedBroker:
        """Stop (cleanly) if running, then start on the same data directory.

        The new process binds a new ephemeral port unless ``same_port`` (then the old one,
        so that clients holding the old address reconnect to the new process).
        """
        port = self._port if same_port and self._port is not None else 0
        if self.running:
            self.stop()
        return self.start(port)

    def close(self) -> None:
        """Stop the broker and remove the data directory if this object created it."""
        if self._closed:
            return
        try:
            self.stop()
        finally:
            self._closed = True
            if self._remove_dir is not None:
                self._remove_dir()

    def __enter__(self) -> EmbeddedBroker:
        if not self.running:
            try:
                self.start()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "running" if self.running else f"exited {self.returncode}"
        address = f"{self._host}:{self._port}" if self._port is not None else "-"
        return f"<EmbeddedBroker pid={self.pid} {address} {state} data_dir={self._data_dir}>"

    # ------------------------------------------------------------------ internals

    def _child_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self._env)
        return env

    def _abort(self, reason: str) -> NoReturn:
        """Kill a child that failed to start and raise with its stderr tail."""
        assert self._proc is not None
        _kill_group(self._proc)
        self._finish()
        tail = "\n".join(self.stderr.splitlines()[-_STDERR_TAIL_LINES:])
        command = " ".join(self._last_command)
        raise EmbeddedBrokerError(
            f"{reason}; command: {command}\n--- broker stderr (tail) ---\n{tail}"
        )

    def _finish(self) -> None:
        """After the child has exited: collect the pipe readers and drop the finalizer."""
        if self._proc is None or self._proc.poll() is None:
            return
        for drain in (self._stdout, self._stderr):
            if drain is not None:
                drain.join(timeout=2.0)
        if self._reaper is not None:
            self._reaper.detach()
            self._reaper = None


def _ready_watcher(
    events: queue.SimpleQueue[tuple[str, int] | None],
) -> Callable[[str | None], None]:
    """A stdout line callback that posts (host, port) for the ready line and None at EOF."""

    def on_line(line: str | None) -> None:
        if line is None:
            events.put(None)
            return
        if line.startswith(READY_PREFIX):
            host, _, port = line[len(READY_PREFIX) :].strip().rpartition(":")
            if host and port.isdigit():
                events.put((host.strip("[]"), int(port)))

    return on_line
