"""Shared pieces of the client commands (``rmqk topics|produce|consume|groups``).

These commands are Kafka clients: they speak the Kafka protocol through confluent-kafka
(librdkafka) to whatever ``--bootstrap-server`` names, so they work against a real Kafka too.
confluent_kafka is imported only inside functions here and in the command modules, never at
module level: ``rmqkafka.cli`` imports every command module to register it, and ``rmqk serve``
start-up must not pay for librdkafka.

Conventions (see also ``rmqkafka.cli``):

- stdout carries results only: readable tables (plain, left-aligned columns separated by two
  spaces, upper-case headers) or, with ``--json``, one JSON document (``consume --json``
  writes JSON Lines, one object per record).
- An error is one line ``rmqk: error: ...`` on stderr. Exit status 2: the command line was
  wrong and nothing was sent (bad option value, malformed ``key=value``, conflicting
  options). Exit status 1: the broker could not be reached in time or refused the request
  (unknown topic, topic exists, invalid config, ...), or some records failed.
- Fail fast: every command first fetches metadata, in short slices up to ``--timeout``
  seconds (default 5), and gives up at once when librdkafka reports every bootstrap server
  down (connection refused, unresolvable name) instead of retrying until the timeout.
- Progress bars (``rmqkafka.cli.progress``, tqdm) go to stderr, only when stderr is a
  terminal or ``--progress`` / ``RMQK_PROGRESS=1`` is given (not by default while the
  terminal is also where records are typed or printed).
"""

from __future__ import annotations

import functools
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import click

# Progress bars live in their own module (tqdm is imported there only when a bar is drawn);
# re-exported because the commands take their helpers from this one.
from rmqkafka.cli.progress import Progress, progress_option  # noqa: F401

DEFAULT_BOOTSTRAP = "localhost:9092"
DEFAULT_TIMEOUT = 5.0
BOOTSTRAP_ENV = "RMQK_BOOTSTRAP_SERVER"
_PROBE_SLICE = 0.25  # seconds per metadata attempt while waiting for the cluster
_HOST_PORT = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^\s:\[\],]+)):(?P<port>\d{1,5})")


# ---------------------------------------------------------------------------------------------
# Errors and exit codes


class CliError(click.ClickException):
    """Shown as one line ``rmqk: error: MESSAGE`` on stderr; exit status 1 unless given."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(one_line(message))
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        stream = file if file is not None else sys.stderr
        stream.write(f"rmqk: error: {self.message}\n")
        stream.flush()


class CliUsageError(CliError):
    """The command line was wrong (exit status 2); nothing was sent to a broker."""

    def __init__(self, message: str) -> None:
        super().__init__(message, exit_code=2)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def warn(message: str) -> None:
    """A one-line notice on stderr (never stdout)."""
    sys.stderr.write(f"rmqk: {one_line(message)}\n")
    sys.stderr.flush()


def report_error(message: str) -> None:
    """An error line on stderr for a failure that does not end the command by itself."""
    sys.stderr.write(f"rmqk: error: {one_line(message)}\n")
    sys.stderr.flush()


def kafka_error_text(err: Any) -> str:
    """``message (CODE_NAME)`` for a confluent_kafka.KafkaError, without duplicate words."""
    try:
        name, text = err.name(), err.str()
    except AttributeError:
        return one_line(err)
    text = one_line(text) or name
    return text if name in text else f"{text} ({name})"


def error_from_exception(exc: BaseException, what: str) -> CliError:
    """A CliError for a confluent_kafka exception (or anything else) raised doing ``what``."""
    err = exc.args[0] if exc.args else None
    if err is not None and hasattr(err, "name") and hasattr(err, "str"):
        return CliError(f"{what}: {kafka_error_text(err)}")
    return CliError(f"{what}: {one_line(exc) or type(exc).__name__}")


def config_error(exc: BaseException) -> CliUsageError:
    """A usage error for a client that could not be created (bad ``-X`` property)."""
    return CliUsageError(error_from_exception(exc, "invalid client configuration").message)


def error_code(exc: BaseException) -> str | None:
    """The KafkaError code name inside a KafkaException, e.g. ``TOPIC_ALREADY_EXISTS``."""
    err = exc.args[0] if exc.args else None
    try:
        return err.name()  # type: ignore[union-attr]
    except AttributeError:
        return None


def future_result(future: Any, what: str) -> Any:
    """``future.result()`` of an AdminClient call; failures become a CliError about ``what``."""
    try:
        return future.result()
    except Exception as exc:  # noqa: BLE001 - KafkaException and ValueError alike
        raise error_from_exception(exc, what) from None


def handle_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn client exceptions, Ctrl-C and unexpected errors into one-line errors."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise CliError("interrupted", exit_code=130) from None
        except BrokenPipeError:
            raise  # click's main() exits quietly on EPIPE
        except Exception as exc:
            if os.environ.get("RMQK_DEBUG"):
                raise
            if type(exc).__module__.startswith("confluent_kafka") or type(exc).__name__ == "KafkaException":
                raise error_from_exception(exc, "request failed") from None
            raise CliError(f"unexpected {type(exc).__name__}: {one_line(exc)}") from None

    return wrapper


class _OneLineUsage:
    """Mixin: click usage errors become ``rmqk: error: ...`` (one line, status 2)."""

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)  # type: ignore[misc]
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise _one_line_usage(exc, info_name) from None

    def resolve_command(self, ctx: click.Context, args: list[str]) -> Any:
        try:
            return super().resolve_command(ctx, args)  # type: ignore[misc]
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as exc:
            raise _one_line_usage(exc, ctx.info_name) from None


def _one_line_usage(exc: click.UsageError, info_name: str | None) -> CliUsageError:
    path = exc.ctx.command_path if exc.ctx is not None else (info_name or "rmqk")
    return CliUsageError(f"{exc.format_message()} (see '{path} --help')")


class Command(_OneLineUsage, click.Command):
    """A click command whose usage errors are one line (``rmqk: error: ...``, status 2)."""


class Group(_OneLineUsage, click.Group):
    """A click group of :class:`Command` with one-line usage errors."""

    command_class = Command


# ---------------------------------------------------------------------------------------------
# Option parsing helpers


def parse_bootstrap(value: str) -> str:
    """Validate ``HOST:PORT[,HOST:PORT...]`` (IPv6 as ``[::1]:9092``); returns it normalised."""
    items = [item.strip() for item in value.split(",") if item.strip()]
    if not items:
        raise CliUsageError("--bootstrap-server is empty; expected HOST:PORT")
    for item in items:
        bare = item.split("://", 1)[1] if "://" in item else item  # PLAINTEXT://host:port
        match = _HOST_PORT.fullmatch(bare)
        if match is None or not 0 < int(match["port"]) < 65536:
            raise CliUsageError(f"invalid --bootstrap-server {item!r}: expected HOST:PORT")
    return ",".join(items)


def parse_key_values(values: Iterable[str], option: str, allow_empty_value: bool = True) -> list[tuple[str, str]]:
    """``k=v`` pairs in order (keys may repeat); usage error on a missing ``=`` or empty key."""
    pairs: list[tuple[str, str]] = []
    for raw in values:
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise CliUsageError(f"invalid {option} {raw!r}: expected KEY=VALUE")
        if not value and not allow_empty_value:
            raise CliUsageError(f"invalid {option} {raw!r}: the value is empty")
        pairs.append((key, value))
    return pairs


def parse_timestamp(value: str, option: str) -> int:
    """Milliseconds since the epoch from an integer or an ISO 8601 date-time.

    ISO values without a zone are local time (as in Kafka's ``--to-datetime``); ``Z`` and
    ``+hh:mm`` offsets are honoured; a date alone means its local midnight.
    """
    from datetime import datetime

    text = value.strip()
    if re.fullmatch(r"-?\d+", text):
        number = int(text)
        if number < 0:
            raise CliUsageError(f"invalid {option} {value!r}: must not be negative")
        return number
    try:
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in "zZ" and text else text)
    except ValueError:
        raise CliUsageError(
            f"invalid {option} {value!r}: expected milliseconds since the epoch or an ISO 8601 "
            "date-time such as 2024-05-01T12:00:00Z"
        ) from None
    return int(moment.timestamp() * 1000)  # naive -> local time, like datetime.timestamp()


# ---------------------------------------------------------------------------------------------
# Client options and connections


@dataclass(slots=True)
class ClientOptions:
    """``--bootstrap-server``, ``--timeout`` and ``-X key=value`` of one command."""

    bootstrap: str = DEFAULT_BOOTSTRAP
    timeout: float = DEFAULT_TIMEOUT
    properties: list[tuple[str, str]] = field(default_factory=list)

    def config(self, **extra: Any) -> dict[str, Any]:
        """A librdkafka config: defaults, then ``extra``, then the user's ``-X`` properties."""
        timeout_ms = max(1, int(self.timeout * 1000))
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "client.id": "rmqk",
            "socket.connection.setup.timeout.ms": max(1000, timeout_ms),
            "log_level": 0,  # librdkafka's own log lines would break the one-line error rule
        }
        conf.update(extra)
        conf.update(dict(self.properties))
        return conf


def client_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``-b/--bootstrap-server``, ``--timeout`` and ``-X`` to a command as ``client=``."""

    @functools.wraps(func)
    def wrapper(*args: Any, bootstrap_server: str, timeout: float, client_property: tuple[str, ...], **kwargs: Any) -> Any:
        opts = ClientOptions(
            bootstrap=parse_bootstrap(bootstrap_server),
            timeout=timeout,
            properties=parse_key_values(client_property, "-X"),
        )
        return func(*args, client=opts, **kwargs)

    options = [
        click.option(
            "-b", "--bootstrap-server", default=DEFAULT_BOOTSTRAP, envvar=BOOTSTRAP_ENV, show_default=True,
            metavar="HOST:PORT", help=f"Broker(s) to connect to, comma-separated (env {BOOTSTRAP_ENV}).",
        ),
        click.option(
            "--timeout", type=click.FloatRange(min=0, min_open=True), default=DEFAULT_TIMEOUT, show_default=True,
            metavar="SECONDS", help="Give up when the broker does not answer within this time.",
        ),
        click.option(
            "-X", "--client-property", multiple=True, metavar="KEY=VALUE",
            help="librdkafka client property (repeatable), e.g. -X security.protocol=SSL.",
        ),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--json", "as_json", is_flag=True, help="Machine-readable JSON on stdout.")(func)


class ErrorWatch:
    """An ``error_cb`` that remembers librdkafka's connection errors for :func:`wait_for_cluster`."""

    def __init__(self) -> None:
        self.all_down = False
        self.last_detail: str | None = None
        self.fatal: Any = None

    def __call__(self, err: Any) -> None:
        name = err.name()
        if name == "_ALL_BROKERS_DOWN":
            self.all_down = True
        elif name in ("_TRANSPORT", "_RESOLVE", "_BAD_MSG", "_SSL", "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"):
            self.last_detail = _transport_detail(err.str())
            if name in ("_SSL", "_AUTHENTICATION", "SASL_AUTHENTICATION_FAILED"):
                self.fatal = err
        elif err.fatal():
            self.fatal = err


def _transport_detail(text: str) -> str:
    # "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused (after 0ms in state CONNECT)"
    text = re.sub(r"^\S+/(?:bootstrap|\d+): ", "", text)
    text = re.sub(r"\s*\(after \d+ms in state \w+(?:, \d+ identical error\(s\) suppressed)?\)$", "", text)
    if "Invalid response size" in text:
        return "the server does not speak the Kafka protocol (is this a Kafka broker's address?)"
    return one_line(text)


def wait_for_cluster(client: Any, opts: ClientOptions, watch: ErrorWatch, topic: str | None = None) -> Any:
    """Cluster metadata (for ``topic`` only, if given) within ``opts.timeout`` seconds.

    Asks in short slices so that librdkafka's "all brokers are down" (reported through
    ``watch``) ends the wait at once. ``client`` is a Producer, Consumer or AdminClient.
    """
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + opts.timeout
    while True:
        remaining = deadline - time.monotonic()
        try:
            return client.list_topics(topic=topic, timeout=max(0.05, min(_PROBE_SLICE, remaining)))
        except KafkaException as exc:
            if error_code(exc) not in ("_TRANSPORT", "_TIMED_OUT", "_WAIT_COORD"):
                raise error_from_exception(exc, f"cannot get metadata from {opts.bootstrap}") from None
        client.poll(0)  # serves error_cb
        if watch.fatal is not None:
            raise CliError(f"cannot connect to {opts.bootstrap}: {kafka_error_text(watch.fatal)}")
        if watch.all_down:
            detail = f": {watch.last_detail}" if watch.last_detail else ""
            raise CliError(f"cannot reach broker at {opts.bootstrap}{detail}")
        if time.monotonic() >= deadline:
            detail = f" (last error: {watch.last_detail})" if watch.last_detail else ""
            raise CliError(f"broker at {opts.bootstrap} did not answer within {opts.timeout:g} s{detail}")


def admin_client(opts: ClientOptions) -> tuple[Any, Any]:
    """A connected AdminClient and the cluster metadata (all topics); fails fast."""
    from confluent_kafka.admin import AdminClient

    watch = ErrorWatch()
    try:
        admin = AdminClient(opts.config(error_cb=watch))
    except Exception as exc:  # noqa: BLE001 - bad -X properties surface here
        raise config_error(exc) from None
    metadata = wait_for_cluster(admin, opts, watch)
    return admin, metadata


def request_kwargs(opts: ClientOptions) -> dict[str, float]:
    return {"request_timeout": opts.timeout}


def topic_error(metadata: Any, topic: str) -> str | None:
    """Why ``topic`` is unusable according to ``metadata`` (None when it is fine)."""
    meta = metadata.topics.get(topic)
    if meta is None:
        return f"topic {topic!r} does not exist"
    if meta.error is not None:
        if meta.error.name() == "UNKNOWN_TOPIC_OR_PART":
            return f"topic {topic!r} does not exist"
        return f"topic {topic!r}: {kafka_error_text(meta.error)}"
    return None


def generated_group_id(purpose: str) -> str:
    import uuid

    return f"rmqk-{purpose}-{uuid.uuid4().hex[:12]}"


def kafka_uuid(value: Any) -> str | None:
    """A topic id as Kafka prints it (URL-safe base64 without padding); None for zero."""
    if value is None:
        return None
    try:
        msb, lsb = value.get_most_significant_bits(), value.get_least_significant_bits()
    except AttributeError:
        return str(value)
    number = ((msb & (2**64 - 1)) << 64) | (lsb & (2**64 - 1))
    if number == 0:
        return None
    import base64

    return base64.urlsafe_b64encode(number.to_bytes(16, "big")).rstrip(b"=").decode("ascii")


# ---------------------------------------------------------------------------------------------
# Output


def render_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Plain aligned columns, two spaces apart, no trailing spaces; None shows as ``-``."""
    cells = [[str(h) for h in headers]]
    cells += [["-" if value is None else str(value) for value in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        line = "  ".join(value.ljust(width) for value, width in zip(row, widths))
        lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def echo_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    sys.stdout.write(render_table(headers, rows))
    sys.stdout.flush()


def json_bytes(data: bytes | None) -> Any:
    """Bytes for a JSON document: a str when they are UTF-8, else {"base64": ...}; None stays
    None."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        import base64

        return {"base64": base64.b64encode(data).decode("ascii")}


def echo_json(document: Any) -> None:
    import json

    sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def echo(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def read_status_config(admin: Any, opts: ClientOptions, topic: str, name: str, what: str) -> dict[str, Any]:
    """The JSON object an rmqkafka broker reports as the read-only config ``name`` of its
    system topic ``topic`` (``what`` names it in errors); CliError when the broker has none
    (not an rmqkafka broker) or it is not a JSON object."""
    import json

    from confluent_kafka.admin import ConfigResource, ResourceType

    not_here = f"the broker at {opts.bootstrap} reports no {what} ({name} of {topic}); is it an rmqkafka broker?"
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)], **request_kwargs(opts))
    try:
        [entries] = [future.result() for future in futures.values()]
    except Exception as exc:  # noqa: BLE001
        if error_code(exc) == "UNKNOWN_TOPIC_OR_PART":
            raise CliError(not_here) from None
        raise error_from_exception(exc, f"cannot describe {topic}") from None
    entry = entries.get(name)
    if entry is None or not entry.value:
        raise CliError(not_here)
    try:
        status = json.loads(entry.value)
    except ValueError:
        raise CliError(f"{name} is not JSON: {entry.value[:80]!r}") from None
    if not isinstance(status, dict):
        raise CliError(f"{name} is not a JSON object")
    return status
