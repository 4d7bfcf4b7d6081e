"""Hypothesis: random interleavings of acquire / acknowledge / lock expiry / member leave /
restart against a simple per-record model of a share-partition."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from rmqkafka.rmqsemantics.share.config import ShareGroupSettings
from rmqkafka.rmqsemantics.share.errors import InvalidRecordState, InvalidShareRequest
from rmqkafka.rmqsemantics.share.partition import AckBatch, RecordState, SharePartition, StateUpdate
from rmqkafka.rmqsemantics.share.state_log import decode_value, encode_key, encode_value, replay
from rmqkafka.storage.clock import ManualClock

N = 130  # records in the log
MEMBERS = ("m1", "m2", "m3")
LOCK_MS = 1000
AVAILABLE, ACQUIRED, ACCEPTED, ARCHIVED = "available", "acquired", "accepted", "archived"


class Rec:
    __slots__ = ("state", "count", "member", "deadline", "due", "durable")

    def __init__(self) -> None:
        self.state, self.count, self.member, self.deadline, self.due = AVAILABLE, 0, "", 0, 0
        self.durable = (0, 0)  # (count, due) as last written: what a restart restores


class ShareModel(RuleBasedStateMachine):
    SETTINGS = ShareGroupSettings(record_lock_duration_ms=LOCK_MS, delivery_count_limit=3, max_record_locks=100)

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.log: list[tuple[bytes, bytes]] = [(encode_key(("g", "t", 0)), encode_value("s", StateUpdate(0, ())))]
        self.dead: list[tuple[int, int, str]] = []
        self.model = [Rec() for _ in range(N)]
        self.expected_dead: list[tuple[int, int, str]] = []
        self.sp = self._build()
        self.last_start = 0

    def _build(self) -> SharePartition:
        state = replay(self.log)[("g", "t", 0)].as_update()
        return SharePartition(self.SETTINGS, self.clock, state.start_offset, persist=self._persist,
                              dead_letter=lambda *a: self.dead.append(a), restored=state.batches)

    def _persist(self, update) -> None:
        raw = encode_value("u", update)
        assert decode_value(raw) == ("u", update)
        self.log.append((encode_key(("g", "t", 0)), raw))

    # -- the model's own rules ----------------------------------------------------------------
    def _settle(self, offset: int, backoff: bool) -> None:
        rec = self.model[offset]
        rec.member = ""
        if rec.count >= self.SETTINGS.delivery_limit:
            rec.state = ARCHIVED
            self.expected_dead.append((offset, rec.count, "exhausted"))
        else:
            rec.state = AVAILABLE
            delay = self.SETTINGS.retry_delay_ms(rec.count) if backoff else 0
            rec.due = self.clock.now_ms() + delay if delay else 0
        rec.durable = (rec.count, rec.due)

    def _expire(self) -> None:
        now = self.clock.now_ms()
        for offset, rec in enumerate(self.model):
            if rec.state == ACQUIRED and rec.deadline <= now:
                self._settle(offset, backoff=True)

    def _acquired_by(self, member) -> list[int]:
        """The offsets ``member`` holds, once the model's locks that are due have expired."""
        self._expire()
        return [o for o, rec in enumerate(self.model) if rec.state == ACQUIRED and rec.member == member]

    # -- rules ----------------------------------------------------------------------------------
    @rule(member=st.sampled_from(MEMBERS), n=st.integers(1, 80))
    def acquire(self, member, n):
        self._expire()
        got = self.sp.acquire(member, N, n)
        total = 0
        for r in got:
            for offset in range(r.first_offset, r.last_offset + 1):
                rec = self.model[offset]
                assert rec.state == AVAILABLE, (offset, rec.state)  # never two holders, never accepted
                assert rec.due <= self.clock.now_ms()
                assert r.delivery_count == rec.count + 1
                rec.state, rec.count, rec.member = ACQUIRED, rec.count + 1, member
                rec.deadline = self.clock.now_ms() + LOCK_MS
                total += 1
        assert total <= n

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge(self, member, data):
        mine = self._acquired_by(member)
        if not mine:
            return
        chosen = sorted(data.draw(st.sets(st.sampled_from(mine), min_size=1, max_size=10)))
        types = {o: data.draw(st.sampled_from((0, 1, 2, 3))) for o in chosen}
        self.sp.acknowledge(member, [AckBatch(o, o, (types[o],)) for o in chosen])
        for o in chosen:
            rec = self.model[o]
            if types[o] == 1:
                rec.state = ACCEPTED
            elif types[o] == 2:
                self._settle(o, backoff=True)
            else:
                rec.state = ARCHIVED
                if types[o] == 3:
                    self.expected_dead.append((o, rec.count, "rejected"))
            rec.member = ""
            rec.durable = (rec.count, rec.due)

    @rule(member=st.sampled_from(MEMBERS), data=st.data())
    def acknowledge_ranges(self, member, data):
        """Ranges with one type each (what clients send most: a fetch's records accepted
        together), ACCEPT, RELEASE or RENEW: a whole batch acquired together, part of one, or
        several, so the state kept per acquired batch is split, joined and passed by SPSO."""
        mine = self._acquired_by(member)
        if not mine:
            return
        runs: list[list[int]] = []  # the member's consecutive acquired offsets
        for o in mine:
            if runs and runs[-1][1] + 1 == o:
                runs[-1][1] = o
            else:
                runs.append([o, o])
        batches = []
        for i in sorted(data.draw(st.sets(st.sampled_from(range(len(runs))), min_size=1, max_size=4))):
            first, last = runs[i]
            if not data.draw(st.booleans()):  # part of it
                first = data.draw(st.integers(first, last))
                last = data.draw(st.integers(first, last))
            batches.append((first, last, data.draw(st.sampled_from((1, 1, 2, 4)))))
        self.sp.acknowledge(member, [AckBatch(f, l, (t,)) for f, l, t in batches])
        for f, l, t in batches:
            for o in range(f, l + 1):
                rec = self.model[o]
                if t == 1:
                    rec.state, rec.member = ACCEPTED, ""
                    rec.durable = (rec.count, rec.due)
                elif t == 2:
                    self._settle(o, backoff=True)
                else:  # RENEW: the lock starts again, nothing else changes
                    rec.deadline = self.clock.now_ms() + LOCK_MS

    @rule(member=st.sampled_from(MEMBERS), offset=st.integers(0, N - 1), t=st.sampled_from((1, 2, 3)))
    def acknowledge_someone_elses(self, member, offset, t):
        self._expire()
        rec = self.model[offset]
        if rec.state == ACQUIRED and rec.member == member:
            return
        try:
            self.sp.acknowledge(member, [AckBatch(offset, offset, (t,))])
        except (InvalidRecordState, InvalidShareRequest):
            pass
        else:
            # only an offset that is done and below SPSO is skipped without an error
            assert rec.state in (ACCEPTED, ARCHIVED) and offset < self.sp.start_offset

    @rule(ms=st.sampled_from((1, 500, 999, 1000, 5000, 60_000)))
    def advance(self, ms):
        self.clock.advance(ms)

    @rule(member=st.sampled_from(MEMBERS), undelivered=st.booleans())
    def leave(self, member, undelivered):
        self._expire()
        self.sp.release_member(member, undelivered=undelivered)
        for offset, rec in enumerate(self.model):
            if rec.state == ACQUIRED and rec.member == member:
                rec.count -= undelivered
                self._settle(offset, backoff=False)

    @rule()
    def restart(self):
        self._expire()
        self.sp.expire_locks()
        for rec in self.model:
            if rec.state == ACQUIRED:
                rec.state, rec.member = AVAILABLE, ""
                rec.count, rec.due = rec.durable
        self.sp = self._build()

    # -- invariants -------------------------------------------------------------------------------
    @invariant()
    def agrees_with_the_model(self):
        sp = self.sp
        self._expire()  # both expire locks now, so the states compare
        sp.expire_locks()
        assert sp.start_offset >= self.last_start
        self.last_start = sp.start_offset
        assert sp.in_flight_count() <= self.SETTINGS.max_record_locks
        assert sp.retry_count() <= self.SETTINGS.max_retry_records
        for offset, rec in enumerate(self.model):
            got = sp.record(offset)
            if got is None:
                assert rec.state in (ACCEPTED, ARCHIVED) or offset >= sp.end_offset, (offset, rec.state)
                continue
            if got.state == RecordState.ACQUIRED:
                assert rec.state == ACQUIRED and got.member_id == rec.member
            assert got.delivery_count == rec.count <= self.SETTINGS.delivery_limit
        assert sorted(self.dead) == sorted(self.expected_dead)

    def teardown(self):
        """Consumers that keep acking: every record ends accepted or archived."""
        for _ in range(200):
            if self.sp.start_offset == N and self.sp.retry_count() == 0:
                break
            self.clock.advance(10 * 3600 * 1000)
            self._expire()
            for r in self.sp.acquire("drain", N, 1000):
                self.sp.acknowledge("drain", [AckBatch(r.first_offset, r.last_offset, (1,))])
                for o in range(r.first_offset, r.last_offset + 1):
                    assert self.model[o].state == AVAILABLE
                    self.model[o].state = ACCEPTED
        assert self.sp.start_offset == N and self.sp.retry_count() == 0
        assert all(rec.state in (ACCEPTED, ARCHIVED) for rec in self.model)


class BackoffModel(ShareModel):
    SETTINGS = ShareGroupSettings(record_lock_duration_ms=LOCK_MS, max_reconsume_times=4, max_record_locks=100,
                                  redelivery_backoff="levels", delay_levels_ms=(100, 500, 1000, 5000),
                                  max_retry_records=5)


TestShareModel = ShareModel.TestCase
TestBackoffModel = BackoffModel.TestCase
for _case in (TestShareModel, TestBackoffModel):
    _case.settings = settings(max_examples=150, stateful_step_count=50, deadline=None,
                              suppress_health_check=[HealthCheck.too_slow])
