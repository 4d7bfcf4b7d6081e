"""One consumer-group member in its own process, for tests/integration/test_groups.py.

    python group_member.py --client {aiokafka,kafka-python,confluent} --bootstrap HOST:PORT
        --group G --topics T1[,T2] --client-id ID [--instance-id I] [--strategy range]
        [--session-ms 6000] [--heartbeat-ms 1000] [--max-records 50] [--protocol classic]

It subscribes with a group id, auto-commit off, and after each batch it reports what it
consumed and then commits exactly that batch synchronously (offset = last + 1 per
partition). Everything it does is one JSON object per line on stdout (flushed at once, so a
SIGKILL loses nothing already reported); ``ev`` is one of:

    started                                  the consumer object exists
    assigned   {"parts": [[t, p], ...]}      the rebalance callback gave these partitions
    revoked    {"parts": [...]}              ... took these away
    lost       {"parts": [...]}              ... lost these (librdkafka on_lost)
    member     {"member_id", "generation"}   after each assignment, where the client says
    consumed   {"batch": k, "recs": [[t, p, offset], ...]}
    committed  {"batch": k, "offsets": [[t, p, next offset], ...]}
    commit_failed {"batch": k, "error": "..."}
    recommitted {"offsets": [...]}               (confluent) failed commits retried in on_revoke
    nocommit                                 from here on it stops committing
    closed                                   close() returned (dynamic members: LeaveGroup)

``--protocol consumer`` (confluent only) runs the KIP-848 protocol: the session timeout,
heartbeat interval and assignor are then the broker's, so those options are not passed.

Commands on stdin, one per line: ``nocommit`` (stop committing: what it consumes from then
on is uncommitted, so a crash must re-deliver it) and ``close`` (close cleanly and exit).
Commands are applied between batches. Every line has ``t`` (time.time()).

Rebalance safety: kafka-python and confluent-kafka run rebalance callbacks inside
poll()/consume() on this thread, so a batch is always committed before its partitions can
be revoked. aiokafka rebalances in a background task (and getmany() waits for a rebalance in
progress): its ``on_partitions_revoked`` waits for the batch being processed (a lock held
from the end of getmany() to the end of the commit), and a batch whose partitions were
revoked between getmany() and that lock is dropped unprocessed (the next owner starts from
the committed offsets).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import sys
import threading
import time
import traceback

_out_lock = threading.Lock()


def emit(ev: str, **fields) -> None:
    line = json.dumps({"ev": ev, "t": time.time(), **fields})
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def stdin_commands() -> queue.SimpleQueue[str]:
    commands: queue.SimpleQueue[str] = queue.SimpleQueue()

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                commands.put(line.strip())
        commands.put("close")  # the test went away: leave

    threading.Thread(target=read, name="stdin", daemon=True).start()
    return commands


class Control:
    def __init__(self) -> None:
        self.commands = stdin_commands()
        self.committing = True
        self.closing = False
        self.batch = 0

    def check(self) -> None:
        while True:
            try:
                command = self.commands.get_nowait()
            except queue.Empty:
                return
            if command == "nocommit":
                self.committing = False
                emit("nocommit")
            elif command == "close":
                self.closing = True


def next_offsets(recs: list[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in recs:
        out[(topic, partition)] = max(out.get((topic, partition), 0), offset + 1)
    return out


def parts(tps) -> list[list]:
    return sorted([tp.topic, tp.partition] for tp in tps)


# --------------------------------------------------------------------------- kafka-python


def run_kafka_python(args, control: Control) -> None:
    from kafka import (
        ConsumerRebalanceListener,
        KafkaConsumer,
        OffsetAndMetadata,
        TopicPartition,
    )
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import (
        StickyPartitionAssignor,
    )
    from kafka.errors import KafkaConnectionError

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }
    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        group_instance_id=args.instance_id,
        client_id=args.client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=args.heartbeat_ms,
        partition_assignment_strategy=[assignors[s] for s in args.strategy.split(",")],
        max_poll_records=args.max_records,
        fetch_max_wait_ms=100,
    )
    emit("started")

    def report_member() -> None:
        generation = getattr(consumer._coordinator, "_generation", None)
        emit(
            "member",
            member_id=getattr(generation, "member_id", None),
            generation=getattr(generation, "generation_id", None),
        )

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            emit("revoked", parts=parts(revoked))

        def on_partitions_assigned(self, assigned):
            emit("assigned", parts=parts(assigned))
            report_member()

    consumer.subscribe(args.topics.split(","), listener=Listener())
    try:
        while not control.closing:
            control.check()
            if control.closing:
                break
            # A long poll: kafka-python 3.0.12 can lose a rebalance that completes in the very
            # poll() whose timeout expires (join_group_async returns early, then finds
            # need_rejoin() false and never finishes the join: no assignment, no heartbeats).
            # The longer the timeout, the rarer a rebalance straddles its end.
            try:
                polled = consumer.poll(timeout_ms=1000)
            except KafkaConnectionError as exc:  # the broker is restarting: keep trying
                emit("client_error", error=repr(exc))
                time.sleep(0.1)
                continue
            recs = [(tp.topic, tp.partition, r.offset) for tp, rs in polled.items() for r in rs]
            if not recs:
                continue
            control.batch += 1
            emit("consumed", batch=control.batch, recs=recs)
            if control.committing:
                offsets = next_offsets(recs)
                try:
                    consumer.commit(
                        {TopicPartition(t, p): OffsetAndMetadata(o, "", -1) for (t, p), o in offsets.items()}
                    )
                except Exception as exc:
                    emit("commit_failed", batch=control.batch, error=repr(exc))
                else:
                    emit("committed", batch=control.batch, offsets=[[t, p, o] for (t, p), o in offsets.items()])
    finally:
        consumer.close()
        emit("closed")


# --------------------------------------------------------------------------- aiokafka


def run_aiokafka(args, control: Control) -> None:
    import asyncio

    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import (
        StickyPartitionAssignor,
    )
    from aiokafka.structs import OffsetAndMetadata

    assignors = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "sticky": StickyPartitionAssignor,
    }

    async def main() -> None:
        lock = asyncio.Lock()
        revocations = [0]
        consumer = AIOKafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            group_instance_id=args.instance_id,
            client_id=args.client_id,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=args.heartbeat_ms,
            partition_assignment_strategy=tuple(assignors[s] for s in args.strategy.split(",")),
            max_poll_records=args.max_records,
            fetch_max_wait_ms=100,
        )

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked):
                async with lock:  # the batch in progress is committed first
                    revocations[0] += 1
                    emit("revoked", parts=parts(revoked))

            async def on_partitions_assigned(self, assigned):
                emit("assigned", parts=parts(assigned))
                coordinator = consumer._coordinator
                emit("member", member_id=getattr(coordinator, "member_id", None),
                     generation=getattr(coordinator, "generation", None))

        consumer.subscribe(args.topics.split(","), listener=Listener())
        await consumer.start()
        emit("started")
        try:
            while not control.closing:
                control.check()
                if control.closing:
                    break
                polled = await consumer.getmany(timeout_ms=200)
                epoch = revocations[0]  # (no await since getmany returned)
                async with lock:
                    if revocations[0] != epoch:
                        continue  # revoked before we could process it: the next owner will
                    recs = [(tp.topic, tp.partition, r.offset) for tp, rs in polled.items() for r in rs]
                    if not recs:
                        continue
                    control.batch += 1
                    emit("consumed", batch=control.batch, recs=recs)
                    if control.committing:
                        offsets = next_offsets(recs)
                        try:
                            await consumer.commit(
                                {TopicPartition(t, p): OffsetAndMetadata(o, "") for (t, p), o in offsets.items()}
                            )
                        except Exception as exc:
                            emit("commit_failed", batch=control.batch, error=repr(exc))
                        else:
                            emit("committed", batch=control.batch,
                                 offsets=[[t, p, o] for (t, p), o in offsets.items()])
        finally:
            await consumer.stop()
            emit("closed")

    asyncio.run(main())


# --------------------------------------------------------------------------- confluent-kafka


def run_confluent(args, control: Control) -> None:
    from confluent_kafka import Consumer, TopicPartition

    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        "topic.metadata.refresh.interval.ms": 2000,
    }
    if args.protocol == "consumer":
        conf["group.protocol"] = "consumer"  # librdkafka refuses the classic-only settings
    else:
        conf.update({"session.timeout.ms": args.session_ms, "heartbeat.interval.ms": args.heartbeat_ms,
                     "partition.assignment.strategy": args.strategy})
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    emit("started")

    def on_assign(c, partitions):
        emit("assigned", parts=parts(partitions))
        emit("member", member_id=c.memberid(), generation=None)

    # A commit can fail with REBALANCE_IN_PROGRESS when the batch was consumed just as a
    # rebalance began (Kafka answers so while the group completes a rebalance). Those offsets
    # stay pending and are committed once more just before their partitions are given up
    # (on_revoke: still owned, so never behind a new owner's commits), so the next owner
    # starts after them, as KIP-429 expects of a cooperative member. The batch still counts
    # as uncommitted in the events (the tests' bound on re-reads stays conservative).
    pending: dict[tuple[str, int], int] = {}

    def commit(c, offsets: dict[tuple[str, int], int]) -> None:
        try:
            result = c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()],
                              asynchronous=False)
            errors = [str(tp.error) for tp in result or () if tp.error is not None]
            if errors:
                raise RuntimeError(errors)
        except Exception as exc:
            pending.update(offsets)
            emit("commit_failed", batch=control.batch, error=repr(exc))
        else:
            for tp in offsets:
                pending.pop(tp, None)
            emit("committed", batch=control.batch, offsets=[[t, p, o] for (t, p), o in offsets.items()])

    def on_revoke(c, partitions):
        emit("revoked", parts=parts(partitions))
        revoked = {(tp.topic, tp.partition) for tp in partitions}
        mine = {tp: pending.pop(tp) for tp in list(pending) if tp in revoked}
        if mine and control.committing:
            try:
                c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in mine.items()], asynchronous=False)
            except Exception as exc:
                emit("commit_failed", batch=control.batch, error=repr(exc))
            else:
                emit("recommitted", offsets=[[t, p, o] for (t, p), o in mine.items()])

    def on_lost(c, partitions):
        for tp in partitions:  # taken away already: committing them now could go backwards
            pending.pop((tp.topic, tp.partition), None)
        emit("lost", parts=parts(partitions))

    consumer.subscribe(args.topics.split(","), on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    try:
        while not control.closing:
            control.check()
            if control.closing:
                break
            messages = consumer.consume(num_messages=args.max_records, timeout=0.2)
            recs = []
            for m in messages:
                if m.error() is not None:
                    emit("client_error", error=str(m.error()))
                    continue
                recs.append((m.topic(), m.partition(), m.offset()))
            if not recs:
                continue
            control.batch += 1
            emit("consumed", batch=control.batch, recs=recs)
            if control.committing:
                commit(consumer, next_offsets(recs))
    finally:
        consumer.close()
        emit("closed")


RUNNERS = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent": run_confluent}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", required=True, choices=sorted(RUNNERS))
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topics", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--strategy", default="range")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--heartbeat-ms", type=int, default=1000)
    parser.add_argument("--max-records", type=int, default=50)
    parser.add_argument("--protocol", choices=("classic", "consumer"), default="classic")
    args = parser.parse_args()
    if os.environ.get("GROUP_MEMBER_DEBUG"):
        import logging

        logging.basicConfig(level=logging.DEBUG, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if args.protocol == "consumer" and args.client != "confluent":
        parser.error("--protocol consumer needs --client confluent")
    control = Control()
    try:
        RUNNERS[args.client](args, control)
    except BaseException:
        emit("error", error=traceback.format_exc())
        raise


if __name__ == "__main__":
    main()
