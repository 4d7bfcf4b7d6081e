"""``rmqk delays``: what the broker's delay scheduler holds (delay levels and timers).

Records produced with a ``DELAY`` header wait in the system topic ``SCHEDULE_TOPIC_XXXX``
(partition n-1 for level n), records with a ``TIMER_*`` header in ``rmq_sys_wheel_timer``
(see ``rmqsemantics/scheduler.py`` on the broker). There is no Kafka API for this, so the
broker answers it as a read-only topic config: DescribeConfigs of ``SCHEDULE_TOPIC_XXXX``
returns ``rmq.scheduler.status``, a JSON document::

    {"levels": [{"level": 1, "delay_ms": 1000, "depth": 0, "next_due_ms": null,
                 "delivered_up_to": 0}, ...],
     "timers_pending": 3, "timers_by_hour": {"<epoch hour>": 3, ...},
     "timers_done_before_ms": ..., "delivered": ..., "dropped": ..., "dead_lettered": ...,
     "cancelled": ...}

``--json`` prints that document as the broker sent it. The table shows per level its delay,
depth (records waiting), the next due time (local time, and how far away by this machine's
clock) and the offset of ``SCHEDULE_TOPIC_XXXX`` delivered up to; then the timers pending,
per due hour (``--by day``: per local day, each hour counted on the day it starts), and the
counters, which count since the broker process started.

confluent_kafka is imported inside the command (see ``rmqkafka.cli.common``).
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

import click

from rmqkafka.cli.common import (
    ClientOptions,
    Command,
    admin_client,
    client_options,
    echo,
    echo_json,
    echo_table,
    handle_errors,
    json_option,
    read_status_config,
)

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
STATUS = "rmq.scheduler.status"
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


@click.command("delays", cls=Command)
@click.option("--by", "by", type=click.Choice(["hour", "day"]), default="hour", show_default=True,
              help="Group pending timers by due hour or by (local) day.")
@json_option
@client_options
@handle_errors
def delays(by: str, as_json: bool, client: ClientOptions) -> None:
    """Delay levels (depth, next due time) and pending timers of the broker's scheduler."""
    admin, _ = admin_client(client)
    status = fetch_status(admin, client)
    if as_json:
        echo_json(status)
        return
    now_ms = int(time.time() * 1000)
    echo_table(
        ["LEVEL", "DELAY", "DEPTH", "NEXT-DUE", "DELIVERED-UP-TO"],
        [
            (
                lv.get("level"),
                human_duration(lv.get("delay_ms") or 0),
                lv.get("depth"),
                _due_text(lv.get("next_due_ms"), now_ms),
                lv.get("delivered_up_to"),
            )
            for lv in status.get("levels", [])
        ],
    )
    echo()
    pending = status.get("timers_pending", 0)
    done = status.get("timers_done_before_ms")
    done_text = f" (all due before {local_time(done)} are delivered)" if isinstance(done, int) else ""
    echo(f"timers pending: {pending}{done_text}")
    buckets = timer_buckets(status.get("timers_by_hour", {}), by)
    if buckets:
        echo_table([f"DUE-{by.upper()}", "TIMERS"], buckets)
    echo()
    echo(
        "since the broker started: "
        + ", ".join(f"{status.get(key, 0)} {label}" for key, label in (
            ("delivered", "delivered"), ("dropped", "dropped"),
            ("dead_lettered", "dead-lettered"), ("cancelled", "cancelled")))
    )


def fetch_status(admin: Any, client: ClientOptions) -> dict[str, Any]:
    """The broker's ``rmq.scheduler.status`` document; CliError when it has none."""
    return read_status_config(admin, client, SCHEDULE_TOPIC, STATUS, "scheduler status")


def timer_buckets(by_hour: dict[str, int], by: str) -> list[tuple[str, int]]:
    """(local hour ``YYYY-MM-DDTHH:MM`` or day ``YYYY-MM-DD``, pending timers), in time order."""
    totals: dict[str, int] = {}
    for hour, count in sorted(((int(h), int(n)) for h, n in by_hour.items())):
        start = datetime.fromtimestamp(hour * 3600)
        label = start.strftime("%Y-%m-%d") if by == "day" else start.strftime("%Y-%m-%dT%H:%M")
        totals[label] = totals.get(label, 0) + count
    return list(totals.items())


def human_duration(ms: int, max_units: int | None = None) -> str:
    """``1s``, ``2m``, ``1h30m``, ``1d2h``; below a second ``250ms``; at most ``max_units``
    units (largest first, the rest dropped)."""
    if ms < 1000:
        return f"{ms}ms"
    parts = []
    rest = ms
    for unit, size in _UNITS:
        if rest >= size:
            parts.append(f"{rest // size}{unit}")
            rest %= size
    if max_units is not None:
        parts = parts[:max_units]
    return "".join(parts)


def local_time(ms: int) -> str:
    """Local ISO 8601 time to the second, without a zone."""
    return datetime.fromtimestamp(ms / 1000).isoformat(timespec="seconds")


def _due_text(due_ms: int | None, now_ms: int) -> str | None:
    if due_ms is None:
        return None
    ahead = due_ms - now_ms
    if ahead >= 1000:
        relative = f"in {human_duration(ahead, max_units=2)}"
    elif ahead >= 0:
        relative = "in <1s"
    elif ahead > -1000:
        relative = "due now"
    else:
        relative = f"{human_duration(-ahead, max_units=2)} overdue"
    return f"{local_time(due_ms)} ({relative})"
