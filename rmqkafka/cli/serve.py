"""``rmqk serve``: run one broker in the foreground until SIGTERM or SIGINT.

Sequence: configure logging (stderr only), build the configs (file, then flags), create the
data directory, check it is writable and lock it (``broker.lock``, so that two brokers can
never share one commitlog), start :class:`rmqkafka.adapter.broker.Broker` on a fresh asyncio loop, print
the line ``rmqk broker started on HOST:PORT`` to stdout (the *bound* port, so
``--port 0`` is usable; IPv6 hosts are bracketed), wait for a signal, stop the broker (which
flushes and writes the clean-shutdown marker) and exit 0.

With a metrics port (``--metrics-port`` / ``metrics.port``, off by default) a second line
follows in the same write: ``rmqk metrics on http://HOST:PORT`` (the bound port again).

Scripts and :class:`rmqkafka.adapter.embedded.EmbeddedBroker` wait for that stdout line, so
nothing else (but the metrics line) is ever written to stdout. A second signal during
shutdown exits at once with status 1 and no clean-shutdown marker (the next start runs
crash recovery).

Exit status: 0 after a clean stop; 2 for errors the user can fix (bad configuration,
unreadable config file, data directory not writable or in use by another broker, address
in use), reported as one line ``rmqk: error: ...`` without a traceback; 1 for an unexpected
failure (logged with its traceback); 74 when an fsync failed while serving (the store
refused every write from then on; the broker stops without a clean-shutdown marker, so the
next start recovers from what is really on disk). A fatal signal (SIGSEGV, SIGBUS, SIGABRT)
leaves "Fatal Python error" and every thread's Python stack on stderr (faulthandler).
"""

from __future__ import annotations

import asyncio
import faulthandler
import fcntl
import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from collections.abc import Callable
from typing import NoReturn

import click

from rmqkafka.adapter.properties import ConfigError, ServerConfig, load_config

logger = logging.getLogger("rmqk")

READY_PREFIX = "rmqk broker started on "
METRICS_PREFIX = "rmqk metrics on http://"  # the second line, only with a metrics port
LOCK_NAME = "broker.lock"  # in the data directory; holds the owner's pid
EXIT_STORAGE_FAILED = 74  # EX_IOERR: an fsync failed (see storage.store)
ANSWER_AFTER_FAILURE_S = 1.0  # for the produces that waited for the failed fsync (KAFKA_STORAGE_ERROR)
LOG_LEVELS = ["DEBUG", "INFO", "WARNING", "ERROR"]


@click.command("serve")
@click.option("--host", default=None, help="Address to bind; '' = all interfaces. [default: 127.0.0.1]")
@click.option(
    "--port", type=int, default=None,  # range-checked with the config: one error line
    help="Port to bind; 0 = any free port. [default: 9092]",
)
@click.option(
    "--data-dir", type=click.Path(path_type=Path), default=None,
    help="Data directory. [default: log.dirs, else $RMQK_DATA_DIR, else ~/.rmqkafka/data]",
)
@click.option(
    "--config", type=click.Path(path_type=Path), default=None,
    help="A Kafka server.properties file; flags override it.",
)
@click.option(
    "--flush", type=click.Choice(["async", "sync"], case_sensitive=False), default=None,
    help="Flush policy. [default: async]",
)
@click.option(
    "--metrics-port", type=int, default=None,
    help="HTTP port of /metrics, /ready, /healthz and the console; 0 = any free port. "
    "[default: metrics.port, else off]",
)
@click.option(
    "--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="INFO",
    show_default=True, help="Log level (stderr).",
)
def serve(
    host: str | None,
    port: int | None,
    data_dir: Path | None,
    config: Path | None,
    flush: str | None,
    metrics_port: int | None,
    log_level: str,
) -> None:
    """Run the broker in the foreground until SIGTERM or SIGINT."""
    _configure_logging(log_level.upper())
    # A fatal signal (SIGSEGV, SIGBUS, SIGABRT, from a C extension or a mapped file) would
    # end the process without a word; this writes every thread's stack to stderr first.
    faulthandler.enable(file=sys.stderr, all_threads=True)
    try:
        server_config = load_config(
            config, host=host, port=port, data_dir=data_dir, flush=flush.lower() if flush else None,
            metrics_port=metrics_port,
        )
        _check_tls(server_config)
        lock_fd = prepare_data_dir(server_config.storage.data_dir)
    except ConfigError as exc:
        _fail(str(exc))
    if server_config.unknown_keys:
        logger.warning("ignoring unknown config keys: %s", ", ".join(server_config.unknown_keys))
    for warning in server_config.warnings:
        logger.warning("%s", warning)
    try:
        status = run(server_config)
    finally:
        os.close(lock_fd)
    sys.exit(status)


def prepare_data_dir(path: Path) -> int:
    """Create ``path`` if needed, prove it writable, and lock it against a second broker.

    Returns the descriptor of ``path/broker.lock``, which holds an exclusive ``flock`` for as
    long as it stays open (the kernel drops it when the process dies, even by SIGKILL). Two
    brokers on one data directory would both recover and append to the same commitlog.
    Raises ConfigError when the directory is unusable or locked (naming the owner's pid).
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".rmqk-write-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
        fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(f"data directory {path} is not usable: {reason}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        who = f" (pid {owner})" if owner else ""
        raise ConfigError(f"data directory {path} is in use by another broker{who}") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:
        os.close(fd)
        raise ConfigError(f"data directory {path} is not usable: {exc.strerror}") from exc
    return fd


def _check_tls(server_config: ServerConfig) -> None:
    """Load the TLS keys once before anything starts, so that a key that does not load is a
    one-line configuration error (the broker loads them again when it binds)."""
    from rmqkafka.adapter.security.tls import TlsConfigError, server_context

    security = server_config.adapter.security
    for tls in [security.tls, *(listener.tls for listener in security.listeners)]:
        if tls is None:
            continue
        try:
            server_context(tls)
        except TlsConfigError as exc:
            raise ConfigError(str(exc)) from None


def _tune_collector() -> None:
    """What start-up and recovery made lives as long as the process: kept out of the cyclic
    collector's passes (gc.freeze), which otherwise walk all of it on every full pass. The
    young generation is collected every GC_YOUNG_THRESHOLD allocations instead of 700: a
    produce request allocates a record object per record (aiokafka's parser), freed by
    reference counting, so the frequent passes found nothing to collect (py-spy, produce of
    100-byte records: gc_collect_main was a quarter of the broker's CPU; four produce runs of
    800,000 records each way: 1.98 us of CPU a record against 2.24). Only the serving process is tuned; an embedded
    broker leaves its host's collector alone."""
    import gc

    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


GC_YOUNG_THRESHOLD = 50_000

# glibc's mallopt parameters (malloc.h) and the values the serving process sets
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD_BYTES = 32 << 20  # glibc's own ceiling for its adaptive threshold on 64-bit
TRIM_THRESHOLD_BYTES = 64 << 20


def _tune_allocator() -> bool:
    """Keep the memory of read batches for the next reads (glibc only; True when set).

    A Fetch reads each batch into a new bytes object, and glibc served the larger ones
    from fresh mappings or from heap it had just returned to the kernel: every page of every
    batch read was faulted in anew (236 minor faults per MB consumed, one per 4 KiB page;
    py-spy --native: ``pread`` a third of the event loop's samples). With a fixed mmap
    threshold of 32 MiB and up to 64 MiB of free heap kept, a freed batch's pages serve the
    next read: no faults on 1 KiB records, and broker CPU per GB consumed 0.61-0.98 against
    1.22-1.59 CPU-s (two runs each of 80,000 x 1 KiB), for an RSS up to the trim threshold
    higher (80-90 MB against 45-60 after bench.cost's workload)."""
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (musl has no tunable thresholds)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


OPEN_FILES_CEILING = 1 << 20  # Linux's default fs.nr_open, the most an unlimited hard limit allows


def _raise_open_files_limit() -> tuple[int, int] | None:
    """Raise the soft limit of open files to the hard one, as the JVM does for Kafka
    (HotSpot's MaxFDLimit, on by default); returns (before, after), None when unchanged.

    The broker holds two descriptors per partition it has used (its consume queue and time
    index files, kept open) and, while a checkpoint syncs them, one more per partition
    written since the last: 1,000 busy partitions need some 4,000. The usual soft limit is
    1,024 while the hard one is far higher, and at the soft limit appends, checkpoints and
    accepts fail with EMFILE."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = OPEN_FILES_CEILING if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft >= target:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        logger.warning("could not raise the open files limit from %d to %d: %s", soft, target, exc)
        return None
    return soft, target


def run(server_config: ServerConfig) -> int:
    """Run the broker until a signal; returns the process exit status."""
    from rmqkafka.adapter.security.tls import TlsConfigError
    from rmqkafka.storage.files import DamagedFileError

    try:
        loop_factory, loop_name = event_loop()
    except ConfigError as exc:
        _fail(str(exc))
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            return runner.run(_serve(server_config, loop_name))
    except (OSError, DamagedFileError, TlsConfigError) as exc:
        _fail(_one_line(exc))
    except Exception as exc:  # noqa: BLE001 - report anything unexpected, with its traceback
        logger.error("broker failed", exc_info=True)
        _fail(f"broker failed: {_one_line(exc)}", status=1)


EVENT_LOOP_ENV = "RMQK_EVENT_LOOP"


def event_loop(environ: dict[str, str] | None = None) -> tuple[Callable[[], asyncio.AbstractEventLoop] | None, str]:
    """(loop factory, name) of the event loop ``rmqk serve`` runs on: asyncio's own, or uvloop
    when ``RMQK_EVENT_LOOP=uvloop`` and it is installed (ConfigError when it is not).

    asyncio's is the default because uvloop measured no better here: bench.cost, two
    alternating runs each at load average 6.8-7.4, broker CPU per record, produce 100 B
    2.08 / 2.13 us on uvloop against 1.98 / 2.25 on asyncio, produce 1 KiB 4.25 / 3.25 against
    3.25 / 3.75, consume within the 10 ms ticks of the measurement; py-spy puts the loop's own
    share of the serving thread under 10 %, the rest being the handlers and the kernel's
    socket writes, which a faster loop does not change. The broker runs on either (the tests
    of tests/integration/test_cli_serve.py start it on both)."""
    choice = (os.environ if environ is None else environ).get(EVENT_LOOP_ENV, "").strip().lower()
    if choice not in ("", "asyncio", "uvloop"):
        raise ConfigError(f"{EVENT_LOOP_ENV}={choice!r}: expected asyncio or uvloop")
    if choice == "uvloop":
        try:
            import uvloop
        except ImportError:
            raise ConfigError(f"{EVENT_LOOP_ENV}=uvloop, but uvloop is not installed") from None
        return uvloop.new_event_loop, f"uvloop {uvloop.__version__}"
    return None, "asyncio"


async def _serve(server_config: ServerConfig, loop_name: str = "asyncio") -> int:
    # kio registers hypothesis strategies whenever hypothesis is importable (it is, wherever
    # the test extra is installed), which costs ~0.2 s of start-up; the broker never needs it.
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    from rmqkafka.adapter.broker import Broker  # imported late: config errors and --help stay fast

    loop = asyncio.get_running_loop()
    stop_requested = asyncio.Event()

    def on_signal(signum: int) -> None:
        name = signal.Signals(signum).name
        if stop_requested.is_set():
            logger.warning("%s again: exiting without a clean shutdown", name)
            logging.shutdown()
            os._exit(1)
        logger.info("%s received, stopping", name)
        stop_requested.set()

    # Installed before start(), so a signal during start-up stops the broker right after.
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal, signum)

    raised = _raise_open_files_limit()  # before recovery opens every used partition's files
    if raised is not None:
        logger.info("open files limit raised from %d to %d", *raised)
    adapter_config, storage_config = server_config.adapter, server_config.storage
    logger.info(
        "starting: data dir %s, flush %s, listener %s:%s",
        storage_config.data_dir,
        storage_config.flush,
        adapter_config.host,
        adapter_config.port,
    )
    from rmqkafka.storage import batch_scan

    logger.info("event loop: %s; %s", loop_name, batch_scan.describe())
    broker = Broker(server_config)
    host, port = await broker.start()
    lines = f"{READY_PREFIX}{_shown(host)}:{port}\n"
    if broker.metrics_address is not None:
        metrics_host, metrics_port = broker.metrics_address
        lines += f"{METRICS_PREFIX}{_shown(metrics_host)}:{metrics_port}\n"
    sys.stdout.write(lines)  # one write: the metrics line is there when the first is read
    sys.stdout.flush()
    _tune_collector()
    _tune_allocator()

    stopping = asyncio.create_task(stop_requested.wait())
    storage_failed = asyncio.create_task(broker.store.failed.wait())
    await asyncio.wait((stopping, storage_failed), return_when=asyncio.FIRST_COMPLETED)
    for task in (stopping, storage_failed):
        task.cancel()
    await broker.stop(answer_within=ANSWER_AFTER_FAILURE_S if broker.store.failure is not None else 0.0)
    if broker.store.failure is not None:
        # No clean-shutdown marker was written: the next start recovers from what is on disk.
        logger.critical("stopped after a storage failure: %s", broker.store.failure)
        return EXIT_STORAGE_FAILED
    logger.info("stopped cleanly")
    return 0


def _configure_logging(level: str) -> None:
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        force=True,
    )


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _fail(message: str, status: int = 2) -> NoReturn:
    sys.stderr.write(f"rmqk: error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    sys.exit(status)
