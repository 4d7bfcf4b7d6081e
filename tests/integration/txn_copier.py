"""A transactional consume-transform-produce copier in its own process, for
tests/integration/test_transactions_copier.py (the shape of Apache Kafka's
TransactionalMessageCopier, driven by its system test ``TransactionsTest``).

    python txn_copier.py BOOTSTRAP INPUT OUTPUT GROUP TXN_ID TOTAL [--batch 750]
        [--debug eos,protocol] [--skip-offsets]

A confluent-kafka Consumer (group GROUP, static member, read_committed, no auto commit,
earliest) subscribes to INPUT; a transactional Producer (transactional.id TXN_ID, so a
restarted copier fences its predecessor and aborts its open transaction) copies each record's
key and value to OUTPUT, same partition number. Every ``--batch`` records, or when the input
is idle, it sends the consumer's positions with ``send_offsets_to_transaction`` and commits.
On an abortable error it aborts and rewinds the consumer to the group's committed offsets
(TransactionalMessageCopier's ``resetToLastCommittedPositions``); on a fatal error it exits 3.
It exits 0 once the group's committed offsets (as far as it knows: read at every rewind,
then those it commits itself) add up to TOTAL; so it is meant to be the group's only member.
Positions still OFFSET_INVALID (a partition it has not consumed from since its start) are
left out of the offsets it sends: the group's committed offset stays as it was.

The consumer and producer set ``metadata.recovery.strategy=none`` (see the comment there):
with librdkafka's default, a broker restart can hang send_offsets_to_transaction() forever.

Everything it does is one JSON object per line on stdout, flushed at once (a SIGKILL loses
nothing already reported); ``ev`` is one of:

    started                                   the producer finished init_transactions
    assigned / revoked / lost {"parts": [...]}
    committed {"txn": k, "records": n, "offsets": {partition: next offset},
               "sum": sum of the group's committed offsets over all partitions}
    aborted   {"reason": "...", "rewound": {partition: offset}}
    retry     {"op": "...", "error": "..."}   a retriable error; the operation is repeated
    error     {"error": "..."}                error_cb (informational)
    fatal     {"error": "..."}                then exit 3
    done      {"sum": s}                      then exit 0

Option ``--skip-offsets`` (for the test's own sanity check only) commits transactions
without their offsets, so a restarted copier copies records again: duplicates.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
import time

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)


def emit(ev: str, **fields) -> None:
    sys.stdout.write(json.dumps({"ev": ev, "t": time.time(), **fields}) + "\n")
    sys.stdout.flush()


class Abort(Exception):
    """The current transaction must be aborted and the consumer rewound."""


class Fatal(Exception):
    pass


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("bootstrap")
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("group")
    parser.add_argument("txn_id")
    parser.add_argument("total", type=int)
    parser.add_argument("--batch", type=int, default=750)
    parser.add_argument("--skip-offsets", action="store_true")
    parser.add_argument("--debug", default="", help="librdkafka debug contexts (to stderr)")
    args = parser.parse_args()
    faulthandler.register(signal.SIGUSR1)  # the test dumps a stuck copier's stacks to stderr

    def on_error(err) -> None:
        emit("error", error=str(err), fatal=err.fatal())

    common = {
        "bootstrap.servers": args.bootstrap,
        "error_cb": on_error,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "socket.timeout.ms": 10000,
        "topic.metadata.refresh.interval.ms": 2000,
        # librdkafka >= 2.10 re-bootstraps when every broker is down, which decommissions
        # the broker objects; send_offsets_to_transaction() then waits forever for the
        # decommissioned group coordinator, past its timeout (librdkafka issues #5511,
        # #5456). With one broker, every broker restart is "all brokers down": opt out.
        "metadata.recovery.strategy": "none",
        **({"debug": args.debug} if args.debug else {}),
    }
    producer = Producer({
        **common,
        "transactional.id": args.txn_id,
        "transaction.timeout.ms": 30000,
        "linger.ms": 5,
        "message.timeout.ms": 30000,
        "request.timeout.ms": 10000,
        "retry.backoff.ms": 50,
        "retry.backoff.max.ms": 500,
    })
    consumer = Consumer({
        **common,
        "group.id": args.group,
        "group.instance.id": f"{args.txn_id}-member",
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        "isolation.level": "read_committed",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
    })

    state = {"epoch": 0, "in_txn": False}
    # The group's committed offset per partition, as far as this copier knows: from
    # committed() at each rewind, then from each transaction it commits. (position() is
    # OFFSET_INVALID for a partition this copier has not consumed from yet.)
    known: dict[int, int] = {}

    def parts(partitions) -> list[list]:
        return [[tp.topic, tp.partition] for tp in partitions]

    def on_assign(c, partitions) -> None:
        state["epoch"] += 1
        emit("assigned", parts=parts(partitions))

    def on_revoke(c, partitions) -> None:
        state["epoch"] += 1
        emit("revoked", parts=parts(partitions))

    def on_lost(c, partitions) -> None:
        state["epoch"] += 1
        emit("lost", parts=parts(partitions))

    def call(op: str, fn, *fargs):
        """Run a transactional API call; retriable errors are retried (bounded)."""
        deadline = time.monotonic() + 120
        while True:
            try:
                return fn(*fargs)
            except KafkaException as exc:
                err = exc.args[0]
                if err.fatal():
                    raise Fatal(f"{op}: {err}") from exc
                if err.txn_requires_abort():
                    raise Abort(f"{op}: {err}") from exc
                if err.retriable() and time.monotonic() < deadline:
                    emit("retry", op=op, error=str(err))
                    time.sleep(0.2)
                    continue
                raise Fatal(f"{op}: unexpected {err}") from exc

    def rewind(reason: str) -> None:
        """Abort the open transaction and seek every assigned partition to its committed offset."""
        if state["in_txn"]:
            call("abort_transaction", producer.abort_transaction, 30)
            state["in_txn"] = False
        rewound = {}
        assignment = consumer.assignment()
        if assignment:
            deadline = time.monotonic() + 120
            while True:
                try:
                    committed = consumer.committed(assignment, 10)
                    break
                except KafkaException as exc:
                    if time.monotonic() > deadline:
                        raise
                    emit("retry", op="committed", error=str(exc.args[0]))
                    time.sleep(0.2)
            for tp in committed:
                offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
                consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
                rewound[tp.partition] = tp.offset
                known[tp.partition] = max(tp.offset, 0)
        emit("aborted", reason=reason, rewound=rewound)

    call("init_transactions", producer.init_transactions, 60)
    emit("started")
    consumer.subscribe([args.input], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)

    txns = 0
    pending = 0  # records produced in the open transaction
    try:
        while True:
            try:
                epoch = state["epoch"]
                msgs = consumer.consume(max(1, args.batch - pending), 0.5)
                if state["epoch"] != epoch:
                    # A rebalance inside consume(): the batch may straddle it; drop it, abort
                    # what this transaction copied and start again from the committed offsets.
                    rewind("rebalance")
                    pending = 0
                    continue
                copied = 0
                for msg in msgs:
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        if err.fatal():
                            raise Fatal(f"consume: {err}")
                        emit("error", error=f"consume: {err}", fatal=False)
                        continue
                    if not state["in_txn"]:
                        call("begin_transaction", producer.begin_transaction)
                        state["in_txn"] = True
                    while True:
                        try:
                            producer.produce(args.output, msg.value(), msg.key(),
                                             partition=msg.partition())
                            break
                        except BufferError:
                            producer.poll(0.05)
                    copied += 1
                producer.poll(0)
                pending += copied
                if not pending and not msgs and known and sum(known.values()) >= args.total:
                    # Idle with nothing open: a copier restarted after the last commit is done.
                    emit("done", sum=sum(known.values()))
                    return 0
                if pending and (pending >= args.batch or not msgs):
                    positions = [tp for tp in consumer.position(consumer.assignment())
                                 if tp.offset >= 0]
                    if not args.skip_offsets:
                        call("send_offsets_to_transaction", producer.send_offsets_to_transaction,
                             positions, consumer.consumer_group_metadata(), 30)
                    call("commit_transaction", producer.commit_transaction, 30)
                    state["in_txn"] = False
                    txns += 1
                    # (with --skip-offsets nothing was committed: progress as if it had been)
                    known.update({tp.partition: tp.offset for tp in positions})
                    total = sum(known.values())
                    emit("committed", txn=txns, records=pending,
                         offsets={tp.partition: tp.offset for tp in positions}, sum=total)
                    pending = 0
                    if total >= args.total:
                        emit("done", sum=total)
                        return 0
            except Abort as exc:
                rewind(str(exc))
                pending = 0
    except Fatal as exc:
        emit("fatal", error=str(exc))
        return 3


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # skip librdkafka's destructors: closing can wait on a dead broker
