"""Issue 13, "Watching it": the console page, loaded in headless Chromium from a real broker.

The page is static HTML and JavaScript from the metrics port, filled from the broker's JSON
API. Chromium (Debian's ``chromium`` package; the test skips, saying so, where it is not
installed) loads it with ``--dump-dom`` (the DOM after the scripts ran: virtual time lets the
page's fetches finish) and ``--screenshot``; the DOM must show watch_seed.py's data: the
topics with their offsets, both groups with members and lag per partition, the share group
with its members per share-partition, the view, the
delay level, the timer, the half message, the open Kafka transaction and the dead letters
with their Resend button.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import watch_seed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

WINDOW = (1280, 1500)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    reason = "no chromium on PATH (apt-get install chromium): the console page is not tested in a browser"
    print(reason)
    pytest.skip(reason)


def run_chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}",
               "--virtual-time-budget=5000", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=False,
                          env={**os.environ, "HOME": str(tmp_path)})


def rows(dom: str, table: str) -> list[list[str]]:
    """The cell texts of each body row of ``<table id=table>``."""
    match = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', dom, re.DOTALL)
    assert match, f"no table {table}"
    return [[html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()
             for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", match.group(1), re.DOTALL)]


def text_of(dom: str, element_id: str) -> str:
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</', dom, re.DOTALL)
    assert match, f"no element {element_id}"
    return html.unescape(match.group(1)).strip()


def test_console_page_shows_the_broker(broker_factory: Any, tmp_path: Path) -> None:
    chromium()  # skip early, before starting a broker, where there is none
    broker = broker_factory(args=["--metrics-port", "0"])
    seeded = watch_seed.seed(broker.bootstrap_servers)
    try:
        url = broker.metrics_url + "/"
        result = run_chromium(tmp_path, "--dump-dom", url)
        assert result.returncode == 0, result.stderr[-2000:]
        dom = result.stdout
        screenshot = tmp_path / "console.png"
        shot = run_chromium(tmp_path, "--hide-scrollbars", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                            f"--screenshot={screenshot}", url)
        assert shot.returncode == 0, shot.stderr[-2000:]
    finally:
        seeded.close()

    assert '<body data-loaded="true">' in dom, "the page never finished loading its data"
    assert text_of(dom, "ready") == "ready" and text_of(dom, "healthy") == "healthy"
    assert text_of(dom, "bootstrap") == f"bootstrap {broker.bootstrap_servers}"
    assert re.search(r'id="error"[^>]*hidden', dom), "the page reports an error"

    topics = rows(dom, "topics")
    # topic, partition, oldest, next offset, messages, size, rate
    orders = [r for r in topics if r[0] == watch_seed.TOPIC or (r[0] == "" and r[1] in "12")][:3]
    assert [r[1:5] for r in orders] == [["0", "0", "10", "10"], ["1", "0", "10", "10"], ["2", "0", "10", "10"]]
    assert all(r[5].endswith("B") and r[5] != "0 B" for r in orders)
    assert {r[0] for r in topics} >= {"later", watch_seed.DLQ_TOPIC, watch_seed.RETRY_TOPIC}

    groups = rows(dom, "groups")
    # group, state, members, topic, partition, committed, end, lag, owner
    assert groups[0][:3] == [watch_seed.IDLE_GROUP, "Empty", "0"]
    assert [(r[4], r[5], r[7]) for r in groups[:3]] == [("0", "10", "0"), ("1", "4", "6"), ("2", "0", "10")]
    assert groups[3][:3] == [watch_seed.LIVE_GROUP, "Stable", "1"]
    assert [(r[4], r[7], r[8]) for r in groups[3:6]] == [(str(p), "0", "billing-worker") for p in range(3)]
    # a share group: a row per share-partition with its readers; the seed's member never
    # fetched, so no share-partition has a state yet: its start offset (SPSO) and lag are "–"
    first = [r[0] for r in groups].index(watch_seed.SHARE_GROUP)
    share = groups[first:first + 3]
    assert share[0][:3] == [watch_seed.SHARE_GROUP, "Stable (share group, epoch 1)", "1"]
    assert [(r[3], r[4], r[5], r[7], r[8]) for r in share] == [(watch_seed.TOPIC, str(p), "–", "–", "queue-worker")
                                                               for p in range(3)]

    assert rows(dom, "views") == [[watch_seed.VIEW, watch_seed.TOPIC, "tags", "A", "3"]]
    [level] = rows(dom, "delays")
    assert level[:3] == ["5", "1 min", "2"] and "UTC (in " in level[3]
    assert text_of(dom, "timers").startswith("1 timer pending")
    assert rows(dom, "retries") == [[watch_seed.LIVE_GROUP, "0", "0"]]
    assert text_of(dom, "half-summary").startswith("1 half message pending")
    [half] = rows(dom, "half-messages")
    assert half[:4] == ["pg", "half-1", "later", "0"]
    [txn] = rows(dom, "kafka-transactions")
    assert (txn[0], txn[1], txn[4]) == ("txn-open", "Ongoing", "later [0]")
    [dlq] = rows(dom, "dlq")
    assert dlq[:5] == [watch_seed.LIVE_GROUP, watch_seed.DLQ_TOPIC, "3", "3", "Resend"]

    png = screenshot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == WINDOW
    assert len(png) > 30_000, "the screenshot looks blank"
