"""Issue 13, "Watching it": the metrics port of a real broker process.

``--metrics-port`` / ``metrics.port`` opens one HTTP port (off by default) with /metrics
(Prometheus text: kafka_exporter's names for offsets and lag, ``rmqk_*`` for the broker and
its RocketMQ queues), /ready, /healthz and the console's JSON API. A broker seeded by
watch_seed.py (known offsets, two groups, a view, delayed records, a timer, a half message,
an open Kafka transaction, dead letters) is scraped and its numbers checked; then the
console's DLQ resend (``rmqk dlq resend`` in a child process) is driven over HTTP.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import watch_seed
from confluent_reads import read_and_commit
from watch_seed import DLQ_TOPIC, IDLE_COMMITS, IDLE_GROUP, LIVE_GROUP, TOPIC, VIEW

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def get(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, bytes, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("Content-Type", "")


def get_json(url: str) -> Any:
    status, body, kind = get(url)
    assert status == 200 and kind == "application/json", (status, body)
    return json.loads(body)


def scrape(url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of /metrics, by (name, labels)."""
    from prometheus_client.parser import text_string_to_metric_families

    status, body, kind = get(url + "/metrics")
    assert status == 200 and kind.startswith("text/plain"), (status, kind)
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(samples: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float:
    key = (name, frozenset(labels.items()))
    assert key in samples, f"no sample {name}{labels}; have: " + ", ".join(
        sorted(f"{n}{dict(ls)}" for n, ls in samples if n == name)[:20])
    return samples[key]


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """A broker with a metrics port (sync flush: every produce fsyncs) and watch_seed's data."""
    from rmqkafka.adapter.embedded import EmbeddedBroker

    broker = EmbeddedBroker(data_dir=tmp_path_factory.mktemp("metrics-broker"), flush="sync",
                            args=["--metrics-port", "0"])
    with broker:
        seeded = watch_seed.seed(broker.bootstrap_servers)
        try:
            assert broker.metrics_url is not None
            yield broker, broker.metrics_url
        finally:
            seeded.close()
    if broker.stderr:
        sys.stderr.write(f"--- broker stderr ---\n{broker.stderr}\n")


# -------------------------------------------------------------------------- the port itself

def test_off_by_default_and_on_from_the_config_file(broker_factory: Any, tmp_path: Path) -> None:
    plain = broker_factory()
    assert plain.metrics_url is None
    config = tmp_path / "server.properties"
    config.write_text("metrics.port=0\n")
    configured = broker_factory(config_file=config)
    url = configured.metrics_url
    assert url is not None and url.startswith("http://127.0.0.1:")
    assert get(url + "/ready")[:2] == (200, b"ready\n")
    assert get(url + "/healthz")[:2] == (200, b"ok\n")
    assert get(url + "/nothing-here")[0] == 404
    assert get(url + "/metrics", data=b"x", headers={"Content-Type": "application/json"})[0] == 405
    configured.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url + "/ready", timeout=5)


def test_the_console_answers_browsers_only_by_the_brokers_own_host_names(broker_factory: Any, tmp_path: Path) -> None:
    """DNS rebinding (adapter.watch_port): a page of another site reaching the port through a
    name made to resolve to it sends that name as Host, and is refused; the broker's own
    names, IP literals, localhost and metrics.allowed.hosts are answered. Clients that are no
    browser (Prometheus, rmqk) are answered whatever name they use."""
    import socket

    config = tmp_path / "server.properties"
    config.write_text("metrics.port=0\nmetrics.allowed.hosts=console.example\n")
    url = broker_factory(config_file=config).metrics_url
    port = url.rsplit(":", 1)[1]
    browser = {"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/131.0", "Sec-Fetch-Mode": "cors",
               "Sec-Fetch-Site": "same-origin"}
    status, body, _ = get(url + "/api/overview", headers={**browser, "Host": f"evil.example:{port}"})
    assert status == 403 and b"metrics.allowed.hosts" in body
    for path in ("/", "/metrics"):
        assert get(url + path, headers={**browser, "Host": f"evil.example:{port}"})[0] == 403, path
    assert get(url + "/api/dlq/resend", data=b'{"group": "g"}',
               headers={**browser, "Host": f"evil.example:{port}", "Content-Type": "application/json"})[0] == 403
    for name in ("console.example", socket.gethostname(), "localhost", "127.0.0.1"):
        assert get(url + "/api/overview", headers={**browser, "Host": f"{name}:{port}"})[0] == 200, name
    # urllib is no browser: what rmqk topics describe --metrics-url and scripts send
    assert get(url + "/api/topics", headers={"Host": f"rmqk.monitoring.svc:{port}"})[0] == 200
    assert get(url + "/metrics", headers={"Host": "rmqk.monitoring.svc"})[0] == 200


def test_serve_prints_the_metrics_line_after_the_started_line(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rmqkafka", "serve", "--port", "0", "--metrics-port", "0",
         "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        first = proc.stdout.readline()
        second = proc.stdout.readline()
        assert first.startswith("rmqk broker started on 127.0.0.1:"), first
        assert second.startswith("rmqk metrics on http://127.0.0.1:"), second
        url = second.split(" on ", 1)[1].strip()
        assert get(url + "/ready")[0] == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    assert proc.stdout.read() == ""  # nothing else on stdout


# -------------------------------------------------------------------------- /metrics

def test_kafka_exporter_offsets_and_lag(watched: tuple[Any, str]) -> None:
    _, url = watched
    samples = scrape(url)
    assert value(samples, "kafka_brokers") == 1
    assert value(samples, "kafka_topic_partitions", topic=TOPIC) == 3
    for p in range(3):
        assert value(samples, "kafka_topic_partition_current_offset", topic=TOPIC, partition=str(p)) == 10
        assert value(samples, "kafka_topic_partition_oldest_offset", topic=TOPIC, partition=str(p)) == 0
        labels = {"consumergroup": LIVE_GROUP, "topic": TOPIC, "partition": str(p)}
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == 10
        assert value(samples, "kafka_consumergroup_lag", **labels) == 0
        labels = {"consumergroup": IDLE_GROUP, "topic": TOPIC, "partition": str(p)}
        assert value(samples, "kafka_consumergroup_current_offset", **labels) == IDLE_COMMITS[p]
        assert value(samples, "kafka_consumergroup_lag", **labels) == 10 - IDLE_COMMITS[p]
    assert value(samples, "kafka_consumergroup_lag_sum", consumergroup=IDLE_GROUP, topic=TOPIC) == 16
    assert value(samples, "kafka_consumergroup_members", consumergroup=LIVE_GROUP) == 1
    # system topics (the schedule topic, the half-message topics) are not listed
    assert not any(n == "kafka_topic_partitions" and dict(ls)["topic"].startswith(("SCHEDULE", "RMQ_SYS"))
                   for n, ls in samples)


def test_broker_requests_bytes_connections_storage(watched: tuple[Any, str]) -> None:
    _, url = watched
    samples = scrape(url)
    for api in ("Produce", "Fetch", "Metadata", "JoinGroup", "OffsetCommit", "InitProducerId"):
        count = value(samples, "rmqk_request_duration_seconds_count", api=api)
        assert count >= 1, api
        assert value(samples, "rmqk_request_duration_seconds_bucket", api=api, le="+Inf") == count
        assert value(samples, "rmqk_request_duration_seconds_sum", api=api) > 0
    assert value(samples, "rmqk_network_received_bytes_total") > 1000
    assert value(samples, "rmqk_network_sent_bytes_total") > 1000
    assert value(samples, "rmqk_connections") >= 1  # the live consumer, the open transaction
    assert value(samples, "rmqk_connections_accepted_total") >= value(samples, "rmqk_connections")
    assert value(samples, "rmqk_commitlog_size_bytes") > 30 * 10
    assert value(samples, "rmqk_fsync_duration_seconds_count") >= 1  # flush=sync: produces fsync
    assert value(samples, "rmqk_storage_failed") == 0
    assert value(samples, "rmqk_disk_reserve_ready") == 1
    assert value(samples, "rmqk_index_repairs_total") == 0
    assert value(samples, "rmqk_retention_segments_deleted_total") == 0
    assert value(samples, "rmqk_retention_moved_bytes_total") == 0
    assert value(samples, "rmqk_ready") == 1
    assert value(samples, "process_resident_memory_bytes") > 0
    before = value(samples, "rmqk_request_duration_seconds_count", api="Metadata")
    from confluent_kafka.admin import AdminClient

    AdminClient({"bootstrap.servers": watched[0].bootstrap_servers}).list_topics(timeout=10)
    assert value(scrape(url), "rmqk_request_duration_seconds_count", api="Metadata") > before


def test_rocketmq_queues(watched: tuple[Any, str]) -> None:
    _, url = watched
    samples = scrape(url)
    assert value(samples, "rmqk_delay_level_depth", level="5", delay="1m") == 2
    assert value(samples, "rmqk_delay_level_depth", level="1", delay="1s") == 0
    due = value(samples, "rmqk_delay_level_next_due_timestamp_seconds", level="5", delay="1m")
    assert time.time() < due <= time.time() + 61
    assert value(samples, "rmqk_timers_pending") == 1
    assert value(samples, "rmqk_half_messages_pending") == 1
    assert value(samples, "rmqk_kafka_transactions_open") == 1
    assert value(samples, "rmqk_kafka_transactions", state="Ongoing") == 1
    assert value(samples, "rmqk_dlq_messages", consumergroup=LIVE_GROUP) == 3
    assert value(samples, "rmqk_dlq_appended_total", consumergroup=LIVE_GROUP) == 3
    assert value(samples, "rmqk_view_info", view=VIEW, source=TOPIC, kind="tags") == 1


def test_a_views_filtered_fraction(watched: tuple[Any, str]) -> None:
    # partition 0 of the source holds 10 records, one of them tagged A: reading it whole
    # through the view scans 10 offsets and passes 1
    broker, url = watched
    from rawkafka import KafkaRaw

    def counts() -> tuple[float, float]:
        samples = scrape(url)
        return (samples.get(("rmqk_view_scanned_records_total", frozenset({("view", VIEW)})), 0.0),
                samples.get(("rmqk_view_matched_records_total", frozenset({("view", VIEW)})), 0.0))

    scanned, matched = counts()
    with KafkaRaw(broker.host, broker.port) as conn:
        fetched = conn.fetch(VIEW, 0, 0)
        assert fetched.high_watermark == 10
    after_scanned, after_matched = counts()
    assert (after_scanned - scanned, after_matched - matched) == (10, 1)
    assert value(scrape(url), "rmqk_view_filtered_fraction", view=VIEW) == after_matched / after_scanned


# -------------------------------------------------------------------------- the JSON API

def test_console_api_documents(watched: tuple[Any, str]) -> None:
    broker, url = watched
    overview = get_json(url + "/api/overview")
    assert overview["ready"] and overview["healthy"] and overview["bootstrap"] == broker.bootstrap_servers

    topics = {t["name"]: t for t in get_json(url + "/api/topics")["topics"]}
    assert set(topics) >= {TOPIC, "later", DLQ_TOPIC} and VIEW not in topics
    orders = topics[TOPIC]
    assert [(p["partition"], p["start"], p["end"], p["messages"]) for p in orders["partitions"]] == [
        (0, 0, 10, 10), (1, 0, 10, 10), (2, 0, 10, 10)]
    assert orders["messages"] == 30 and all(p["size_bytes"] > 10 * 5 for p in orders["partitions"])

    groups = {g["group"]: g for g in get_json(url + "/api/groups")["groups"]}
    billing = groups[LIVE_GROUP]
    assert billing["state"] == "Stable" and billing["lag"] == 0
    [member] = billing["members"]
    assert member["client_id"] == "billing-worker"
    assert member["assignment"] == [{"topic": TOPIC, "partitions": [0, 1, 2]}]
    audit = groups[IDLE_GROUP]
    assert audit["state"] == "Empty" and audit["members"] == [] and audit["lag"] == 16
    assert [(o["partition"], o["committed"], o["end"], o["lag"]) for o in audit["offsets"]] == [
        (0, 10, 10, 0), (1, 4, 10, 6), (2, 0, 10, 10)]

    [view] = get_json(url + "/api/views")["views"]
    assert view == {"name": VIEW, "source": TOPIC, "kind": "tags", "expression": "A", "partitions": 3}

    delays = get_json(url + "/api/delays")
    level5 = delays["levels"][4]
    assert (level5["level"], level5["delay_ms"], level5["depth"]) == (5, 60_000, 2)
    assert delays["now_ms"] < level5["next_due_ms"] <= delays["now_ms"] + 60_000
    assert delays["timers_pending"] == 1

    txns = get_json(url + "/api/transactions")
    assert txns["half_messages"]["pending"] == 1
    assert [(h["group"], h["uniq_key"], h["topic"]) for h in txns["half_messages"]["oldest"]] == [("pg", "half-1", "later")]
    [open_txn] = txns["kafka_open"]
    assert open_txn["transactional_id"] == "txn-open" and open_txn["state"] == "Ongoing"
    assert open_txn["partitions"] == [{"topic": "later", "partitions": [0]}]

    [dlq] = get_json(url + "/api/dlq")["groups"]
    assert dlq == {"group": LIVE_GROUP, "topic": DLQ_TOPIC, "messages": 3, "appended": 3, "not_resent": 3}

    assert get(url + "/api/nothing")[0] == 404


def poll_json(url: str, ready: Any, timeout: float = 90.0) -> Any:
    """GET ``url`` until ``ready(document)`` holds (a sample comes every 5 s; generous for a
    loaded machine); the last document."""
    deadline = time.monotonic() + timeout
    while True:
        document = get_json(url)
        if ready(document) or time.monotonic() > deadline:
            return document
        time.sleep(0.5)


def test_topic_rates_and_their_history(watched: tuple[Any, str]) -> None:
    """The broker samples every 5 s (adapter.console_history): the chart's points add up to
    what was produced and consumed, and the RATE column shows a rate."""
    from confluent_kafka import Producer

    broker, url = watched
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce("rated", b"first")
    assert producer.flush(60) == 0  # generous: a loaded CI machine once took over 15 s
    # a sample that holds "rated" at 1, so that what follows is growth the chart shows
    poll_json(url + "/api/history", lambda h: (h["produced"].get("rated") or [None])[-1] is not None)
    for i in range(40):
        producer.produce("rated", str(i).encode())
    assert producer.flush(60) == 0
    assert read_and_commit(broker.bootstrap_servers, "rated", "rated-readers", 30) == 30

    rated = next(t for t in get_json(url + "/api/topics")["topics"] if t["name"] == "rated")
    assert rated["messages"] == 41
    # records over at least half a second (RATE_FIRST_SPAN_S), none before "first"
    assert rated["rate_per_s"] is not None and 0 <= rated["rate_per_s"] <= 41 / 0.5

    def area(history: dict, kind: str, name: str) -> float:
        """Records under a rate chart: rate x the seconds of its interval."""
        points, times = history[kind].get(name) or [], history["times_ms"]
        return sum(r * (times[i] - times[i - 1]) / 1000 for i, r in enumerate(points) if i and r is not None)

    history = poll_json(url + "/api/history", lambda h: round(area(h, "produced", "rated")) == 40
                        and round(area(h, "consumed", "rated")) == 30 and h["lag"].get("rated-readers", [None])[-1] == 11)
    assert round(area(history, "produced", "rated")) == 40, history["produced"].get("rated")
    assert round(area(history, "consumed", "rated")) == 30, history["consumed"].get("rated")
    assert history["lag"]["rated-readers"][-1] == 11  # 41 - 30 committed
    assert history["interval_s"] == 5 and history["window_s"] == 900
    assert len(history["times_ms"]) == len(history["produced"]["rated"]) <= 180


def test_dlq_resend_runs_rmqk_dlq_resend(watched: tuple[Any, str]) -> None:
    _, url = watched
    resend = url + "/api/dlq/resend"
    body = json.dumps({"group": LIVE_GROUP}).encode()
    assert get(resend, data=body, headers={"Content-Type": "text/plain"})[0] == 415  # no cross-site form posts
    assert get(resend, data=b"{}", headers={"Content-Type": "application/json"})[0] == 400
    status, answer, _ = get(resend, data=body, headers={"Content-Type": "application/json"})
    result = json.loads(answer)
    assert status == 200, result
    assert result["resent"] == 3 and result["status"] == 0
    assert {entry["to_topic"] for entry in result["result"]["resent"]} == {"rmq_retry." + LIVE_GROUP}
    [dlq] = get_json(url + "/api/dlq")["groups"]
    assert dlq["not_resent"] == 0 and dlq["messages"] == 3  # resending copies, it deletes nothing
    status, answer, _ = get(resend, data=body, headers={"Content-Type": "application/json"})
    assert status == 200 and json.loads(answer)["resent"] == 0  # the position moved: nothing new
    # the resent records wait in delay level 3 as a first retry
    assert value(scrape(url), "rmqk_delay_level_depth", level="3", delay="10s") == 3
    # a group name is the command's GROUP, never an option of it (before: --help printed the
    # usage and answered 200, as if resent)
    status, answer, _ = get(resend, data=json.dumps({"group": "--help"}).encode(),
                            headers={"Content-Type": "application/json"})
    result = json.loads(answer)
    assert "Usage:" not in answer.decode() and result["group"] == "--help"
    assert result["result"].get("group") == "--help" or "--help" in result["message"], result
