"""Issue 13, "Watching it": the console page, loaded in headless Chromium from a real broker.

The page is static HTML and JavaScript from the metrics port, filled from the broker's JSON
API. Chromium (Debian's ``chromium`` package; the test skips, saying so, where it is not
installed) loads it with ``--dump-dom`` (the DOM after the scripts ran: virtual time lets the
page's fetches finish) and ``--screenshot``; the DOM must show watch_seed.py's data: the
topics with their offsets, both groups with members and lag per partition, the share group
with its members per share-partition, the view, the
delay level, the timer, the half message, the open Kafka transaction and the dead letters
with their Resend button. A second test produces and consumes and checks that the charts of
the last minutes (uPlot, vendored) draw points and the RATE column shows a number, and that
the header links to the documentation site once one is built.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import watch_seed
from confluent_reads import read_and_commit

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


def attribute(dom: str, element_id: str, name: str) -> str:
    match = re.search(rf'<[^>]*id="{element_id}"[^>]*>', dom)
    assert match, f"no element {element_id}"
    found = re.search(rf'{name}="([^"]*)"', match.group(0))
    return html.unescape(found.group(1)) if found else ""


def test_console_charts_rates_and_lag_over_time(broker_factory: Any, tmp_path: Path) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    chromium()
    site = tmp_path / "docs" / "site"  # as rmqk docs leaves it (adapter.docs_site)
    site.mkdir(parents=True)
    (site / "index.html").write_text("<!doctype html><title>rmqkafka docs</title><h1>the docs</h1>")
    broker = broker_factory(args=["--metrics-port", "0"], env={"RMQK_DOCS_DIR": str(tmp_path / "docs")})
    url = broker.metrics_url

    def history() -> dict:
        with urllib.request.urlopen(url + "/api/history", timeout=60) as response:
            return json.load(response)

    def wait_for(ready: Any, what: str) -> dict:
        deadline = time.monotonic() + 120  # a sample every 5 s, on a loaded machine
        while not ready(document := history()):
            assert time.monotonic() < deadline, f"{what}: {document}"
            time.sleep(0.5)
        return document

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic("charted", 2, 1)]).values():
        future.result(30)
    # a sample with the topic at 0, so that the records below are growth on the chart
    wait_for(lambda h: (h["produced"].get("charted") or [None])[-1] == 0, "the topic never sampled")
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(200):
        producer.produce("charted", f"r{i}".encode(), partition=i % 2)
    assert producer.flush(60) == 0
    read = read_and_commit(broker.bootstrap_servers, "charted", "charters", 150)
    assert read >= 150
    lag = 200 - read

    def known(series: list | None) -> int:
        return sum(v is not None for v in series or [])

    # the growth sampled, and each line at least two points long (a line needs two)
    wait_for(lambda h: any(h["produced"]["charted"][1:]) and any(h["consumed"]["charted"][1:])
             and h["lag"].get("charters", [None])[-1] == lag
             and min(known(h["produced"]["charted"]), known(h["consumed"]["charted"]), known(h["lag"].get("charters"))) >= 2,
             "the growth never sampled")

    result = run_chromium(tmp_path, "--dump-dom", url + "/")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = result.stdout
    screenshot = tmp_path / "charts.png"
    shot = run_chromium(tmp_path, "--hide-scrollbars", "--window-size=1280,900", f"--screenshot={screenshot}", url + "/")
    assert shot.returncode == 0, shot.stderr[-2000:]

    assert '<body data-loaded="true">' in dom, "the page never finished loading its data"
    assert re.search(r'id="error"[^>]*hidden', dom), "the page reports an error"
    for chart, series in (("chart-produced", "charted"), ("chart-consumed", "charted"), ("chart-lag", "charters")):
        assert series in attribute(dom, chart, "data-series").split(","), chart
        assert int(attribute(dom, chart, "data-points")) >= 2, chart
    # uPlot drew into the containers: its root element and a canvas in each
    assert dom.count('class="uplot') >= 3 and dom.count("<canvas") >= 3
    [row] = [r for r in rows(dom, "topics") if r[0] == "charted"]
    assert re.fullmatch(r"[\d,]+(\.\d)? msg/s", row[6]), row
    # the docs link shows (a site is built) and /docs/ serves it
    assert not re.search(r'id="docs-link"[^>]*hidden', dom)
    with urllib.request.urlopen(url + "/docs/", timeout=30) as response:
        assert b"the docs" in response.read()
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
