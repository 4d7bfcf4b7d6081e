"""Out-of-range configuration values stop ``rmqk serve`` at start (issue 20), as real processes.

Every integer key of server.properties (and the port flags): one past either end of its range
exits with status 2 and one stderr line naming the key and the value, before the data
directory is touched. The issue's cases are run to their consequence: the highest value that
is accepted works (Metadata with node.id 2^31-1, a produce at the longest delay level and
timer), the one above it is refused; timerRollWindowSlot=10^10 after a crash no longer tries
an 80 GB rebuild, and the largest accepted wheel is rebuilt after a crash and delivers.
The ranges themselves are pinned by tests/unit/adapter/test_config_ranges.py.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from rawkafka import ErrorCode, KafkaRaw, decode_records, make_batch, wait_until

from rmqkafka.adapter.properties import INTEGER_RANGES, LONG_MAX

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

MEMORY_LIMIT = 4 << 30  # a refused value must never get near an allocation this big
LARGEST_WHEEL = 7 * 86_400 * 10
TIMER_TOPIC = "rmq_sys_wheel_timer"


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def serve(tmp_path: Path, properties: str, *flags: str, data_dir: Path | None = None):
    config = tmp_path / "refused.properties"
    config.write_text(properties)
    data_dir = data_dir or tmp_path / "never-created"
    return subprocess.run(
        [sys.executable, "-m", "rmqkafka", "serve", "--config", str(config), "--port", "0",
         "--data-dir", str(data_dir), *flags],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        preexec_fn=_limit_memory,
    )


def assert_refused(result, key: str, value: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr[-2000:]
    line = lines[0]
    assert line.startswith("rmqk: error: ") and f"invalid value '{value}' for {key}: " in line, line
    assert result.stdout == ""
    return line


def refused_values() -> list[tuple[str, int]]:
    cases = []
    for key, bounds in sorted(INTEGER_RANGES.items()):
        if bounds.low > -LONG_MAX - 1:
            cases.append((key, bounds.low - 1))
        cases.append((key, bounds.high + 1))
    return cases


@pytest.mark.parametrize(("key", "value"), refused_values(), ids=lambda v: str(v))
def test_every_out_of_range_value_stops_serve_with_one_line(tmp_path, key, value):
    result = serve(tmp_path, f"{key}={value}\n")
    line = assert_refused(result, key, str(value))
    assert "must be in [" in line
    assert not (tmp_path / "never-created").exists()


@pytest.mark.parametrize(("flag", "value"), [("--port", "65536"), ("--port", "-1"), ("--metrics-port", "65536")])
def test_port_flags_out_of_range_stop_serve_with_one_line(tmp_path, flag, value):
    result = serve(tmp_path, "", flag, value)
    assert_refused(result, flag, value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("node.id", "3000000000"),
        ("timerRollWindowSlot", "10000000000"),
        ("timerRollWindowSlot", "1000000000000"),
        ("messageDelayLevel", "1s 1000000000000000d"),
        ("timerMaxDelaySec", "9223372036854775807"),
        ("log.segment.bytes", "200"),
    ],
)
def test_the_issues_values_stop_serve_with_one_line(tmp_path, key, value):
    assert_refused(serve(tmp_path, f"{key}={value}\n"), key, value)


# --------------------------------------------------------------------------- the highest accepted


def write(tmp_path: Path, name: str, **keys: str) -> Path:
    path = tmp_path / name
    path.write_text("".join(f"{k.replace('__', '.')}={v}\n" for k, v in keys.items()))
    return path


def test_node_id_at_int32_max_is_served_in_metadata(broker_factory, tmp_path):
    broker = broker_factory(config_file=write(tmp_path, "n.properties", node__id=str(2**31 - 1)))
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    metadata = admin.list_topics(timeout=30)
    assert list(metadata.brokers) == [2**31 - 1]
    assert metadata.controller_id == 2**31 - 1


def test_the_longest_delay_level_and_timer_are_accepted(broker_factory, tmp_path):
    """A produce at a level of 2^31-1 s and a timer of timerMaxDelaySec=2^31-1 s are parked
    (not UNKNOWN_SERVER_ERROR); a timer one second longer is INVALID_RECORD; a short level
    still delivers."""
    longest = str(2**31 - 1)
    config = write(tmp_path, "d.properties", messageDelayLevel=f"1s {longest}s",
                   timerMaxDelaySec=longest, timerPrecisionMs="100")
    broker = broker_factory(config_file=config)
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("far")
        for headers in ([("DELAY", b"2")], [("DELAY", b"99")], [("TIMER_DELAY_SEC", longest.encode())],
                        [("TIMER_DELAY_MS", b"%d" % (int(longest) * 1000))]):
            conn.produce_ok("far", 0, make_batch([b"parked"], headers=[headers]))
        entry = conn.produce("far", 0, make_batch([b"x"], headers=[[("TIMER_DELAY_SEC", b"%d" % (2**31))]]))
        assert entry.error_code == ErrorCode.invalid_record
        conn.produce_ok("far", 0, make_batch([b"soon"], headers=[[("DELAY", b"1")]]))

        def delivered() -> list[bytes | None]:
            entry = conn.fetch("far", 0, 0)
            return [r.value for r in decode_records(entry.records)]

        wait_until(lambda: delivered() == [b"soon"], timeout=30, message="the level-1 record")
        assert conn.high_watermark(TIMER_TOPIC) == 2


def test_segments_of_the_smallest_accepted_size_roll_and_read_back(broker_factory, tmp_path):
    broker = broker_factory(config_file=write(tmp_path, "s.properties", log__segment__bytes=str(1 << 20)))
    values = [bytes([i]) * 100_000 for i in range(30)]  # ~3 MB: at least three segments
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("big")
        for value in values:
            conn.produce_ok("big", 0, make_batch([value]))
        got, offset = [], 0
        while offset < len(values):
            records = decode_records(conn.fetch("big", 0, offset).records)
            got += [r.value for r in records if r.offset >= offset]
            offset = records[-1].offset + 1
    assert got == values
    assert len(list((broker.data_dir / "commitlog").iterdir())) >= 3


def test_a_crash_then_a_restart_with_a_huge_wheel_is_refused_and_the_largest_wheel_recovers(
        broker_factory, tmp_path):
    """The issue: timerRollWindowSlot=10^10 was accepted, and after a crash the broker never
    started again (the wheel is rebuilt in memory, 16 bytes a slot). Now that start is refused
    with one line and loses nothing; a restart with the largest accepted wheel (7 days of
    100 ms slots) rebuilds it after the crash and delivers the pending timer once."""
    data_dir = tmp_path / "data"
    first = broker_factory(data_dir=data_dir, config_file=write(tmp_path, "a.properties", timerPrecisionMs="100"))
    with KafkaRaw(first.host, first.port) as conn:
        conn.create_topic("timed")
        conn.produce_ok("timed", 0, make_batch([b"later"], headers=[[("TIMER_DELAY_MS", b"4000")]]))
        sent = time.time()
    first.kill()

    refused = serve(tmp_path, "timerPrecisionMs=100\ntimerRollWindowSlot=10000000000\n", data_dir=data_dir)
    assert_refused(refused, "timerRollWindowSlot", "10000000000")

    config = write(tmp_path, "b.properties", timerPrecisionMs="100", timerRollWindowSlot=str(LARGEST_WHEEL))
    second = broker_factory(data_dir=data_dir, config_file=config)
    print(f"restart with a {LARGEST_WHEEL}-slot wheel after a crash: {second.startup_seconds:.2f} s")
    with KafkaRaw(second.host, second.port) as conn:
        def delivered() -> list[bytes | None]:
            return [r.value for r in decode_records(conn.fetch("timed", 0, 0).records)]

        wait_until(lambda: delivered() == [b"later"], timeout=60, message="the timer's delivery")
        assert time.time() >= sent + 4.0 - 0.005, "delivered early"
        time.sleep(0.5)
        assert delivered() == [b"later"], "delivered twice"
    assert os.path.getsize(data_dir / "timerwheel" / "wheel") == LARGEST_WHEEL * 24
