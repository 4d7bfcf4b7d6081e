"""``__share_group_state``: encoding, replay, and restarts of a real MessageStore."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqkafka.rmqsemantics.parked_records import build_batch
from rmqkafka.rmqsemantics.share.config import ShareGroupSettings
from rmqkafka.rmqsemantics.share.errors import StateLogError
from rmqkafka.rmqsemantics.share.partition import AckBatch, RecordState, SharePartition, StateBatch, StateUpdate
from rmqkafka.rmqsemantics.share.state_log import (
    TOPIC,
    decode_value,
    encode_key,
    encode_value,
    replay,
)
from rmqkafka.rmqsemantics.share.state_store import ShareStateStore
from rmqkafka.storage.clock import ManualClock
from rmqkafka.storage.config import StorageConfig
from rmqkafka.storage.store import MessageStore

KEY = ("g", "t", 0)
ACCEPT, RELEASE = 1, 2


class World:
    """A store on disk, its share state, and one share-partition, restartable."""

    def __init__(self, data_dir: Path, settings: ShareGroupSettings | None = None, snapshot_every: int = 500):
        self.data_dir, self.clock = data_dir, ManualClock()
        self.settings = settings or ShareGroupSettings()
        self.snapshot_every = snapshot_every
        self.start()

    def start(self) -> None:
        self.store = MessageStore(StorageConfig(data_dir=self.data_dir), self.clock)
        self.store.open()
        self.state = ShareStateStore(self.store, self.clock, self.snapshot_every)
        self.state.open()
        restored = self.state.restored(KEY)
        if restored is None:
            self.state.initialize(KEY, 0)
            restored = self.state.restored(KEY)
        self.sp = SharePartition(self.settings, self.clock, restored.start_offset,
                                 persist=self.state.persister(KEY), restored=restored.batches,
                                 dead_letters=restored.dead_letters or 0)

    def restart(self, clean: bool) -> None:
        if clean:
            self.store.close_sync()
        self.start()


@pytest.fixture
def world(tmp_path: Path):
    w = World(tmp_path / "data")
    yield w
    w.store.close_sync()


def delivered(sp: SharePartition, end: int) -> dict[int, int]:
    out = {}
    for r in sp.acquire("m", end, 10_000):
        for o in range(r.first_offset, r.last_offset + 1):
            out[o] = r.delivery_count
    return out


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
def test_accepted_never_again_the_rest_again_with_delivery_counts(world, clean):
    sp = world.sp
    assert delivered(sp, 10) == {o: 1 for o in range(10)}
    sp.acknowledge("m", [AckBatch(0, 9, (ACCEPT, RELEASE, ACCEPT, 3, ACCEPT, ACCEPT, RELEASE, RELEASE, ACCEPT, ACCEPT))])
    assert delivered(sp, 12) == {1: 2, 6: 2, 7: 2, 10: 1, 11: 1}
    sp.acknowledge("m", [AckBatch(6, 6, (ACCEPT,))])
    world.restart(clean)
    # 1 and 7: released once (count 1 written), acquired again (not written): count 2 again.
    # 10, 11: acquired only, beyond what was written: delivered as new.
    assert world.sp.start_offset == 1
    assert delivered(world.sp, 12) == {1: 2, 7: 2, 10: 1, 11: 1}


def test_replayed_state_equals_the_live_one(world):
    sp = world.sp
    for _ in range(5):
        got = delivered(sp, 40)
        offsets = sorted(got)
        sp.acknowledge("m", [AckBatch(o, o, (ACCEPT if o % 3 else RELEASE,)) for o in offsets])
    live = sp.snapshot()
    world.restart(clean=False)
    assert world.state.restored(KEY) == live
    assert world.sp.snapshot() == live


def test_snapshots_bound_the_replay_and_compaction_keeps_the_state(tmp_path):
    w = World(tmp_path / "d", snapshot_every=3)
    for _ in range(10):
        got = delivered(w.sp, 1000)
        w.sp.acknowledge("m", [AckBatch(o, o, (RELEASE if o == min(got) else ACCEPT,)) for o in got])
        w.clock.advance(1)
    live = w.sp.snapshot()
    plog = w.store.partition(TOPIC, 0)
    before = plog.next_offset
    assert w.state.compact(min_records=1)
    assert plog.log_start_offset == before
    w.restart(clean=True)
    assert w.sp.snapshot() == live
    w.store.close_sync()


def test_backoff_due_times_survive_a_restart(tmp_path):
    settings = ShareGroupSettings(redelivery_backoff="levels", delay_levels_ms=(1000, 1000, 10_000))
    w = World(tmp_path / "d", settings)
    delivered(w.sp, 3)
    w.sp.acknowledge("m", [AckBatch(0, 2, (RELEASE, ACCEPT, ACCEPT))])
    assert w.sp.start_offset == 3 and w.sp.retry_count() == 1
    w.restart(clean=False)
    assert w.sp.retry_count() == 1 and delivered(w.sp, 3) == {}
    w.clock.advance(10_000)
    assert delivered(w.sp, 3) == {0: 2}
    w.sp.acknowledge("m", [AckBatch(0, 0, (ACCEPT,))])
    w.restart(clean=False)
    assert w.sp.retry_count() == 0 and delivered(w.sp, 3) == {}
    w.store.close_sync()


def test_a_failed_append_undoes_the_acknowledgement(world, monkeypatch):
    delivered(world.sp, 2)

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(world.store, "append_built", full)
    with pytest.raises(OSError):
        world.sp.acknowledge("m", [AckBatch(0, 1, (ACCEPT,))])
    monkeypatch.undo()
    assert world.sp.record(0).state == RecordState.ACQUIRED
    world.sp.acknowledge("m", [AckBatch(0, 1, (ACCEPT,))])
    assert world.sp.start_offset == 2


def test_codec_round_trip_and_refusals():
    update = StateUpdate(7, (StateBatch(7, 9, RecordState.ACKNOWLEDGED, 1), StateBatch(3, 3, RecordState.AVAILABLE, 2, 99)))
    assert decode_value(encode_value("u", update)) == ("u", update)
    raw = encode_value("s", update)
    with pytest.raises(StateLogError, match="torn or unreadable"):
        decode_value(raw[: len(raw) // 2])
    with pytest.raises(StateLogError, match="version 2 is unknown"):
        decode_value(raw.replace(b'"v":1', b'"v":2'))
    with pytest.raises(StateLogError, match="malformed"):
        decode_value(raw.replace(b'"so":7', b'"so":-1'))
    with pytest.raises(StateLogError, match="malformed"):
        decode_value(b'{"v":1,"t":"s","so":0,"b":[[5,4,0,0,0]]}')
    with pytest.raises(StateLogError, match="malformed"):
        decode_value(b'{"v":1,"t":"s","so":0,"b":[[1,4,3,0,0]]}')  # 3 is no RecordState
    with pytest.raises(StateLogError):
        replay([(b"not json", raw)])
    with pytest.raises(StateLogError, match="more than 1010000 offsets"):
        decode_value(b'{"v":1,"t":"s","so":0,"b":[[0,999999999999,2,1,0]]}')


def test_replay_drops_done_records_below_spso_and_keeps_retries():
    records = [
        (encode_key(KEY), encode_value("s", StateUpdate(0, ()))),
        (encode_key(KEY), encode_value("u", StateUpdate(2, (StateBatch(0, 0, RecordState.AVAILABLE, 1, 50),
                                                            StateBatch(1, 1, RecordState.ACKNOWLEDGED, 1),
                                                            StateBatch(3, 3, RecordState.ARCHIVED, 1))))),
    ]
    state = replay(records)[KEY]
    assert state.start_offset == 2 and state.records == {0: (RecordState.AVAILABLE, 1, 50),
                                                           3: (RecordState.ARCHIVED, 1, 0)}
    records.append((encode_key(KEY), encode_value("u", StateUpdate(2, (StateBatch(0, 0, RecordState.ACKNOWLEDGED, 2),)))))
    assert replay(records)[KEY].records == {3: (RecordState.ARCHIVED, 1, 0)}


REJECT = 3


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "crash"])
@pytest.mark.parametrize("snapshot_every", [500, 2], ids=["updates", "snapshots"])
def test_the_dead_letter_count_survives_restarts(tmp_path, clean, snapshot_every):
    """Rejected and exhausted records count as dead letters, and the count is written with
    the change that archived them: a restart (clean or a crash, replaying updates or
    snapshots, after a compaction) starts from it, not from 0."""
    w = World(tmp_path / "d", ShareGroupSettings(delivery_count_limit=2), snapshot_every=snapshot_every)
    assert delivered(w.sp, 6) == {o: 1 for o in range(6)}
    w.sp.acknowledge("m", [AckBatch(0, 5, (REJECT, ACCEPT, RELEASE, REJECT, ACCEPT, ACCEPT))])
    assert w.sp.dead_letters == 2
    assert delivered(w.sp, 6) == {2: 2}
    w.sp.acknowledge("m", [AckBatch(2, 2, (RELEASE,))])  # the delivery limit: archived, exhausted
    assert w.sp.dead_letters == 3
    w.restart(clean)
    assert w.sp.dead_letters == 3
    assert w.state.dead_letters(KEY) == 3
    assert delivered(w.sp, 8) == {6: 1, 7: 1}
    w.sp.acknowledge("m", [AckBatch(6, 7, (ACCEPT, REJECT))])  # counting goes on from there
    w.restart(clean)
    assert w.sp.dead_letters == 4
    assert w.state.compact(min_records=1)
    w.restart(clean)
    assert (w.sp.dead_letters, w.state.restored(KEY).dead_letters) == (4, 4)
    w.state.initialize(KEY, 8)  # offsets altered: a state afresh, its count too
    w.restart(clean)
    assert w.sp.dead_letters == 0
    w.store.close_sync()


def test_dead_letter_counts_in_records_and_in_records_written_before_them():
    """``dl`` is a total: a snapshot without it (written before it existed) has 0, an update
    without it keeps the count; the count is checked like every field."""
    update = StateUpdate(4, (StateBatch(3, 3, RecordState.ARCHIVED, 1),), 7)
    assert decode_value(encode_value("u", update)) == ("u", update)
    assert b'"dl"' not in encode_value("s", StateUpdate(4, (), 0)), "0 is left out: the format stays as it was"
    old = [
        (encode_key(KEY), b'{"v":1,"t":"s","so":0,"b":[]}'),
        (encode_key(KEY), b'{"v":1,"t":"u","so":1,"b":[[0,0,4,1,0]]}'),
    ]
    assert replay(old)[KEY].dead_letters == 0
    counted = [*old, (encode_key(KEY), b'{"v":1,"t":"u","so":2,"b":[[1,1,4,1,0]],"dl":2}'),
               (encode_key(KEY), b'{"v":1,"t":"u","so":3,"b":[[2,2,2,1,0]]}')]
    state = replay(counted)[KEY]
    assert (state.start_offset, state.dead_letters) == (3, 2)
    assert state.as_update().dead_letters == 2
    assert replay([*counted, (encode_key(KEY), b'{"v":1,"t":"s","so":3,"b":[]}')])[KEY].dead_letters == 0
    for bad in (b'"dl":-1', b'"dl":"2"', b'"dl":1.5'):
        with pytest.raises(StateLogError, match="dead letters"):
            decode_value(b'{"v":1,"t":"u","so":0,"b":[],' + bad + b'}')


def test_a_failed_write_counts_no_dead_letter(world):
    """The count moves only with a change that was written: a refused write undoes both."""
    delivered(world.sp, 2)

    def refuse(update):
        raise OSError("disk full")

    persist, world.sp._persist = world.sp._persist, refuse
    with pytest.raises(OSError):
        world.sp.acknowledge("m", [AckBatch(0, 0, (REJECT,))])
    assert world.sp.dead_letters == 0
    world.sp._persist = persist
    world.sp.acknowledge("m", [AckBatch(0, 1, (REJECT,))])
    world.restart(clean=False)
    assert world.sp.dead_letters == 2


def test_replay_drops_many_done_ranges_among_many_retry_records():
    """An update naming a done range per gap between retry records (the records between
    released ones, accepted) drops exactly what the ranges name, by whichever walk is
    shorter."""
    import random

    rng = random.Random(23)
    for _ in range(20):
        kept = {o: (RecordState.AVAILABLE, 1, 5) for o in rng.sample(range(3000), rng.randrange(1, 1500))}
        first = [(encode_key(KEY), encode_value("s", StateUpdate(3000, tuple(
            StateBatch(o, o, s, c, d) for o, (s, c, d) in sorted(kept.items())))))]
        cuts = sorted(rng.sample(range(3000), rng.randrange(1, 400)))
        done = [(a, b) for a, b in zip(cuts, cuts[1:]) if rng.random() < 0.5]
        update = StateUpdate(3000, tuple(StateBatch(a, b - 1, RecordState.ACKNOWLEDGED, 1) for a, b in done if b > a))
        state = replay([*first, (encode_key(KEY), encode_value("u", update))])[KEY]
        assert state.records == {o: v for o, v in kept.items() if not any(a <= o < b for a, b in done)}


def test_a_torn_record_in_the_topic_refuses_the_start(tmp_path):
    w = World(tmp_path / "d")
    w.store.append_built(TOPIC, 0, build_batch([(0, encode_key(KEY), b'{"v":1,"t":"u","so":', [])]))
    w.store.close_sync()
    with pytest.raises(StateLogError, match="torn or unreadable"):
        w.start()
    w.store.close_sync()


CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_share_state import World, AckBatch
w = World(Path({data!r}))
got = w.sp.acquire("m", 1000, 1000)
offsets = [o for r in got for o in range(r.first_offset, r.last_offset + 1)]
for o in offsets:
    w.sp.acknowledge("m", [AckBatch(o, o, (1 if o % 7 else 2,))])
    if o == 600:
        print("acked", flush=True)
        time.sleep(60)
"""


def test_kill_9_in_the_middle_of_acknowledging(tmp_path):
    import signal
    import subprocess
    import sys

    data = tmp_path / "data"
    child = subprocess.Popen([sys.executable, "-c", CHILD.format(tests=str(Path(__file__).parent), data=str(data))],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "acked"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    w = World(data)
    again = delivered(w.sp, 1000)
    accepted = {o for o in range(601) if o % 7}
    assert not accepted & set(again)  # an accepted record is never delivered again
    assert set(again) == set(range(1000)) - accepted  # every other record is
    assert all(again[o] == 2 for o in range(601) if o % 7 == 0)  # released once: count kept
    assert all(again[o] == 1 for o in range(601, 1000))
    w.store.close_sync()
