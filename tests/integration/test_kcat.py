"""Issue #2: kcat (librdkafka's command-line client) against a real broker process.

Produce key:value lines with ``kcat -P -K:`` under every codec, read them back with
``kcat -C -e`` (from the beginning, from the middle of a batch, the last two), list
metadata with ``kcat -L`` and look up offsets by time with ``kcat -Q``. Skipped, with the
reason printed, when ``kcat`` is not on PATH.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from rmqkafka.adapter.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

KCAT = shutil.which("kcat")
N = 200
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# Several records per batch (the consume-from-the-middle case needs that).
BATCHING = ("-X", "linger.ms=20", "-X", "batch.num.messages=50")


@pytest.fixture(scope="module", autouse=True)
def _require_kcat() -> None:
    if KCAT is None:
        print("\nkcat is not on PATH: skipping the kcat tests")
        pytest.skip("kcat is not on PATH")


@pytest.fixture(scope="module")
def kcat_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, flush="async") as broker:
        yield broker


@pytest.fixture
def bootstrap(kcat_broker: EmbeddedBroker) -> Iterator[str]:
    """The broker's address; afterwards its new log lines are shown, and an ERROR or a
    traceback it logged during the test fails the test."""
    seen = len(kcat_broker.stderr)
    yield kcat_broker.bootstrap_servers
    time.sleep(0.05)
    new = kcat_broker.stderr[seen:]
    if new.strip():
        sys.stderr.write(f"--- broker log during this test ---\n{new}\n")
    bad = [line for line in new.splitlines() if " ERROR " in line or "Traceback" in line]
    assert not bad, f"the broker logged errors: {bad}"


def kcat(bootstrap: str, *args: str, stdin: str | None = None, timeout: float = 30.0) -> str:
    """Run kcat; returns stdout (kcat's own progress messages go to stderr)."""
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, "-b", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,  # the assertion below shows kcat's stderr
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def lines(n: int = N) -> list[tuple[str, str]]:
    """(key, value) pairs; values contain the delimiter and some are empty."""
    out = []
    for i in range(n):
        value = "" if i % 10 == 8 else f"value-{i}:with:colons {'x' * (i % 17)}"
        out.append((f"key-{i:03d}", value))
    return out


def produce(bootstrap: str, topic: str, pairs: list[tuple[str, str]], codec: str) -> None:
    kcat(
        bootstrap,
        "-P",
        "-t",
        topic,
        "-K:",
        "-z",
        codec,
        "-H",
        "origin=kcat",
        "-H",
        "empty=",
        *BATCHING,
        stdin="".join(f"{k}:{v}\n" for k, v in pairs),
    )


def consume_json(bootstrap: str, topic: str, *args: str) -> list[dict]:
    out = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", *args)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce_consume(bootstrap: str, codec: str) -> None:
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:10]}"
    pairs = lines()
    before = int(time.time() * 1000)
    produce(bootstrap, topic, pairs, codec)
    after = int(time.time() * 1000)

    # -f output equals the input, byte for byte.
    out = kcat(bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%k:%s\n")
    assert out == "".join(f"{k}:{v}\n" for k, v in pairs)

    # The JSON envelope: offsets 0..N-1, headers, CreateTime stamped by the producer.
    records = consume_json(bootstrap, topic, "-o", "beginning")
    assert [r["offset"] for r in records] == list(range(N))
    assert [(r["key"], r["payload"]) for r in records] == pairs
    assert all(r["headers"] == ["origin", "kcat", "empty", ""] for r in records)
    assert all(r["tstype"] == "create" and before - 1000 <= r["ts"] <= after + 1000 for r in records)

    # From an offset in the middle of a batch (batches hold <= 50 records).
    middle = consume_json(bootstrap, topic, "-o", "137")
    assert [r["offset"] for r in middle] == list(range(137, N))
    assert [(r["key"], r["payload"]) for r in middle] == pairs[137:]

    # The last two.
    last = consume_json(bootstrap, topic, "-o", "-2")
    assert [(r["offset"], r["key"], r["payload"]) for r in last] == [
        (N - 2, *pairs[-2]),
        (N - 1, *pairs[-1]),
    ]


def test_kcat_list_metadata(bootstrap: str) -> None:
    topic = f"kcat-list-{uuid.uuid4().hex[:10]}"
    produce(bootstrap, topic, lines(3), "none")

    everything = json.loads(kcat(bootstrap, "-L", "-J"))
    assert topic in {t["topic"] for t in everything["topics"]}
    assert [b["id"] for b in everything["brokers"]] == [0]
    assert everything["brokers"][0]["name"] == bootstrap

    one = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic))
    (entry,) = one["topics"]
    assert entry["topic"] == topic
    assert entry["partitions"] == [
        {"partition": 0, "leader": 0, "replicas": [{"id": 0}], "isrs": [{"id": 0}]}
    ]

    plain = kcat(bootstrap, "-L")
    assert f'topic "{topic}" with 1 partitions:' in plain


def test_kcat_query_offsets_by_time(bootstrap: str) -> None:
    topic = f"kcat-query-{uuid.uuid4().hex[:10]}"
    produce(bootstrap, topic, lines(10), "lz4")
    records = consume_json(bootstrap, topic, "-o", "beginning")
    assert len(records) == 10

    def query(ts: int) -> int:
        out = kcat(bootstrap, "-Q", "-t", f"{topic}:0:{ts}")
        # "<topic> [0] offset <n>"
        return int(out.split("offset")[-1].split()[0])

    assert query(0) == 0
    assert query(records[-1]["ts"]) == min(r["offset"] for r in records if r["ts"] >= records[-1]["ts"])
    assert query(records[-1]["ts"] + 60_000) == -1
