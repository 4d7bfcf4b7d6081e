"""kafkajs (Node.js) against a real broker process, as kafkajs's own integration tests drive it.

The scenarios live in ``tests/integration/kafkajs/scenarios.js`` (one node process each); they
return what they observed as JSON, and the assertions are made here. kafkajs is pinned by
``tests/integration/kafkajs/package.json`` and its ``package-lock.json``; the module installs
it once with ``npm ci`` into that folder (``node_modules`` is gitignored). Without node, npm or
the npm registry the module skips and prints why.

What kafkajs relies on beyond what Kafka promises is noted at the assertion concerned.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rmqkafka.adapter.embedded import EmbeddedBroker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PACKAGE = Path(__file__).resolve().parent / "kafkajs"
SCENARIOS = PACKAGE / "scenarios.js"
NODE = shutil.which("node")
NPM = shutil.which("npm")
SUPER = ("admin", "admin-secret")
USERS = 'user_admin="admin-secret" user_alice="alice-secret"'
SASL_PROPERTIES = (
    "listeners=SASL_PLAINTEXT://127.0.0.1:9092\n"
    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
    f"{USERS};\n"
)


def _installed() -> bool:
    """Whether node_modules holds exactly the locked kafkajs (npm writes its own copy of the lock)."""
    try:
        wanted = json.loads((PACKAGE / "package-lock.json").read_text())["packages"]["node_modules/kafkajs"]
        have = json.loads((PACKAGE / "node_modules" / "kafkajs" / "package.json").read_text())
    except (OSError, KeyError, ValueError):
        return False
    return have.get("version") == wanted["version"]


@pytest.fixture(scope="module", autouse=True)
def _kafkajs() -> None:
    """Skip (saying why) without node/npm; otherwise ``npm ci`` once, unless already installed."""
    if NODE is None or NPM is None:
        reason = "node and npm are not on PATH: skipping the kafkajs tests"
        print(f"\n{reason}")
        pytest.skip(reason)
    if _installed():
        return
    done = subprocess.run(
        [NPM, "ci", "--no-audit", "--no-fund"], cwd=PACKAGE, capture_output=True, text=True,
        timeout=300, check=False,
    )
    if done.returncode != 0 or not _installed():
        reason = f"npm ci could not install kafkajs (no registry?): {done.stderr.strip()[-500:]}"
        print(f"\n{reason}")
        pytest.skip(reason)


def run(broker: EmbeddedBroker, scenario: str, sasl: dict[str, str] | None = None, timeout: float = 180) -> Any:
    """Run one scenario in node; its result. An error the scenario did not expect fails the
    test with kafkajs's error and its log."""
    spec = {"scenario": scenario, "brokers": [broker.bootstrap_servers], "sasl": sasl}
    assert NODE is not None
    done = subprocess.run(
        [NODE, str(SCENARIOS), json.dumps(spec)], cwd=PACKAGE, capture_output=True, text=True,
        timeout=timeout, check=False, env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )
    if done.stderr.strip():
        sys.stderr.write(f"--- kafkajs log ({scenario}) ---\n{done.stderr}\n")
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "{}"
    answer = json.loads(last)
    assert answer.get("ok"), f"scenario {scenario} failed: {json.dumps(answer.get('error'), indent=1)}"
    return answer["result"]


def kafka_errors(refusal: dict[str, Any]) -> list[str]:
    """The Kafka error types (kafkajs's names) inside a refusal, through kafkajs's wrappers
    (retries exceeded, non-retriable, aggregate, per-partition and per-group errors)."""
    assert refusal["refused"], f"expected a refusal, got {refusal}"
    found: list[str] = []

    def walk(error: dict[str, Any] | None) -> None:
        if not error:
            return
        if error.get("type"):
            found.append(error["type"])
        for part in (error.get("partitions") or []) + (error.get("groups") or []):
            if part.get("type"):
                found.append(part["type"])
        walk(error.get("cause"))
        for inner in error.get("errors") or []:
            walk(inner)

    walk(refusal["error"])
    return found


def _watched(broker: EmbeddedBroker) -> Iterator[EmbeddedBroker]:
    """The broker; afterwards its new log lines are shown, and an ERROR or traceback fails the test."""
    seen = len(broker.stderr)
    yield broker
    time.sleep(0.05)
    new = broker.stderr[seen:]
    if new.strip():
        sys.stderr.write(f"--- broker log during this test ---\n{new}\n")
    bad = [line for line in new.splitlines() if " ERROR " in line or " CRITICAL " in line or "Traceback" in line]
    assert not bad, f"the broker logged errors: {bad}"


@pytest.fixture(scope="module")
def shared_broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(data_dir=None, flush="async") as broker:
        yield broker


@pytest.fixture
def broker(shared_broker: EmbeddedBroker) -> Iterator[EmbeddedBroker]:
    yield from _watched(shared_broker)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """SASL_PLAINTEXT (PLAIN and SCRAM for the same users) with the standard authorizer."""
    config = tmp_path_factory.mktemp("sasl") / "server.properties"
    config.write_text(
        SASL_PROPERTIES
        + "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
        + "super.users=User:admin\n"
    )
    with EmbeddedBroker(data_dir=None, flush="async", config_file=config) as broker:
        yield broker


def login(mechanism: str, user: str = SUPER[0], password: str = SUPER[1]) -> dict[str, str]:
    return {"mechanism": mechanism, "username": user, "password": password}


# --------------------------------------------------------------------------- producer


def test_acks_all_one_and_none_are_written_and_acks_zero_is_answered_with_nothing(broker):
    result = run(broker, "producer_acks")
    assert result["values"] == ["acks -1", "acks 1", "acks 0"]
    assert result["offsets"] == ["0", "1", "2"]
    for acks, offset in (("-1", "0"), ("1", "1")):
        [meta] = result["answers"][acks]
        assert (meta["errorCode"], meta["baseOffset"], meta["partition"]) == (0, offset, 0)
    assert result["answers"]["0"] == []  # no response is expected for acks=0


def test_gzip_keys_headers_timestamps_and_nulls_round_trip(broker):
    result = run(broker, "producer_message_shapes")
    got = result["got"]
    assert len(got) == 31
    by_key = {m["key"]: m for m in got}
    for i in range(30):
        message = by_key[f"key-{i}"]
        assert message["value"] == f"value-{i}"
        assert message["timestamp"] == str(1600000000000 + i)
        assert message["headers"] == {"h": f"h{i}", "many": [f"a{i}", f"b{i}"]}
    nulls = [m for m in got if m["key"] is None]
    assert [(m["value"], m["headers"]) for m in nulls] == [(None, {})]
    assert all(meta["errorCode"] == 0 for meta in result["sent"])
    # keys are spread over the partitions by kafkajs's murmur2 partitioner
    assert len({meta["partition"] for meta in result["sent"]}) > 1


def test_the_idempotent_producer_writes_each_batch_once_and_insists_on_acks_all(broker):
    result = run(broker, "idempotent_producer")
    assert result["baseOffsets"] == ["0", "2", "4", "6", "8"]
    assert result["values"] == [f"{p}{i}" for i in range(5) for p in "ab"]
    # kafkajs itself refuses acks != -1 for an idempotent producer, before any request
    assert result["refusedAcks"]["refused"]
    assert "requiring ack for all messages" in result["refusedAcks"]["error"]["message"]


def test_send_batch_writes_to_many_topics_in_one_request(broker):
    result = run(broker, "send_batch_many_topics")
    assert len(result["sent"]) == 6  # 3 topics x 2 partitions with records
    assert all(meta["errorCode"] == 0 for meta in result["sent"])
    assert len(result["got"]) == 12


def test_transactions_commit_abort_and_send_offsets_for_a_read_committed_consumer(broker):
    result = run(broker, "transactions")
    # kafkajs consumers read committed by default
    assert result["committed"] == ["committed-1", "committed-2", "committed-3"]
    # the aborted record and the two commit markers keep their offsets
    assert result["committedOffsets"] == ["0", "1", "5"]
    assert sorted(result["uncommitted"]) == ["aborted-1", "committed-1", "committed-2", "committed-3"]
    [source] = result["offsets"]
    assert source["partitions"] == [{"partition": 0, "offset": "7", "metadata": None}]


# --------------------------------------------------------------------------- consumers


def test_auto_commit_and_each_batch_with_manual_commits(broker):
    result = run(broker, "consumer_commits")
    assert sorted(result["autoValues"], key=lambda v: int(v[1:])) == [f"v{i}" for i in range(20)]
    [auto] = result["afterAuto"]
    # kafkajs commits what was resolved when the consumer disconnects
    assert sorted((p["partition"], p["offset"]) for p in auto["partitions"]) == [(0, "10"), (1, "10")]
    values = sorted(v for batch in result["batches"] for v in batch["values"])
    assert values == sorted(f"w{i}" for i in range(10))  # the group resumed after its commits
    [manual] = result["afterManual"]
    assert sorted((p["partition"], p["offset"]) for p in manual["partitions"]) == [(0, "15"), (1, "15")]
    for batch in result["batches"]:
        assert batch["highWatermark"] == "15"


def test_a_group_of_three_rebalances_as_members_come_and_go(broker):
    result = run(broker, "group_rebalance", timeout=220)
    snapshots = result["snapshots"]
    assert [sorted(len(a) for a in snapshots[k]) for k in ("one", "two", "three", "twoAgain", "oneAgain")] == [
        [6], [3, 3], [2, 2, 2], [3, 3], [6]]
    assert result["seen"] == result["sent"] == 42
    assert result["described"] == [{"state": "Stable", "protocol": "RoundRobinAssigner",
                                     "protocolType": "consumer", "members": 1}]


def test_seek_pause_and_resume(broker):
    result = run(broker, "seek_pause_resume")
    assert result["p0"][:10] == [f"p0-{i}" for i in range(10)]
    assert result["p0"][10:13] == ["p0-7", "p0-8", "p0-9"]  # the seek read them again
    assert result["p1"][:10] == [f"p1-{i}" for i in range(10)]
    assert result["paused"] == [{"topic": result["paused"][0]["topic"], "partitions": [1]}]
    assert not result["whilePaused"]
    assert result["p1"][-1] == "p1-paused"


def test_from_beginning_and_offsets_out_of_range(broker):
    result = run(broker, "from_beginning_and_out_of_range")
    old = [f"old-{i}" for i in range(5)]
    assert result["fromBeginning=true,outOfRange=false"] == old + ["new-true-false"]
    assert result["fromBeginning=false,outOfRange=false"] == ["new-false-false"]
    # a committed offset beyond the log end is OFFSET_OUT_OF_RANGE; kafkajs then resets by
    # its auto.offset.reset (fromBeginning)
    assert result["fromBeginning=true,outOfRange=true"] == old + ["new-true-true"]
    assert result["fromBeginning=false,outOfRange=true"] == ["new-false-true"]


# --------------------------------------------------------------------------- admin


def test_admin_topics_configs_partitions_and_metadata(broker):
    out = run(broker, "admin_topics")
    assert out["validateOnly"] is True and out["listedAfterValidateOnly"] is False
    assert out["created"] is True
    assert out["createdAgain"] is False  # kafkajs turns TOPIC_ALREADY_EXISTS into false
    assert kafka_errors(out["invalidPartitions"]) == ["INVALID_PARTITIONS"]
    assert kafka_errors(out["invalidConfig"]) == ["INVALID_CONFIG"]
    assert out["listed"]
    [described] = out["configs"]
    assert described["errorCode"] == 0
    assert sorted(described["entries"]) == [["cleanup.policy", "compact", False], ["retention.ms", "123456", False]]
    assert out["alter"]["resources"][0]["errorCode"] == 0
    assert sorted(out["configsAfterAlter"]) == [["cleanup.policy", "delete", True], ["retention.ms", "999999", False]]
    assert kafka_errors(out["alterUnknown"]) == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert out["brokerConfigs"][0]["errorCode"] == 0 and out["brokerConfigs"][0]["count"] > 10
    assert kafka_errors(out["fewerPartitions"]) == ["INVALID_PARTITIONS"]
    assert kafka_errors(out["samePartitions"]) == ["INVALID_PARTITIONS"]
    assert kafka_errors(out["partitionsOfUnknown"]) == ["UNKNOWN_TOPIC_OR_PARTITION"]
    [topic] = out["metadata"]
    assert [p[:2] for p in topic["partitions"]] == [[0, 0], [1, 0], [2, 0], [3, 0]]
    node = out["cluster"]["brokers"][0]["nodeId"]
    assert all(p[2:] == [node, [node], [node]] for p in topic["partitions"])
    assert kafka_errors(out["metadataUnknown"]) == ["UNKNOWN_TOPIC_OR_PARTITION"]
    cluster = out["cluster"]
    assert len(cluster["brokers"]) == 1 and cluster["controller"] == node and cluster["clusterId"]
    assert out["listedAfterDelete"] is False
    # retriable, so kafkajs retries it before giving up
    assert set(kafka_errors(out["deleteUnknown"])) == {"UNKNOWN_TOPIC_OR_PARTITION"}


def test_admin_offsets_by_time_set_reset_and_delete_records(broker):
    out = run(broker, "admin_offsets")

    def low_high(offsets):
        return [(o["partition"], o["low"], o["high"], o["offset"]) for o in offsets]

    assert low_high(out["topicOffsets"]) == [(0, "0", "10", "10"), (1, "0", "4", "4")]
    assert [(o["partition"], o["offset"]) for o in out["byTimestamp"]] == [(0, "6"), (1, "4")]
    # no record at or after the time: the high watermark (kafkajs asks for latest then)
    assert [(o["partition"], o["offset"]) for o in out["byTimestampPast"]] == [(0, "10"), (1, "4")]
    assert [(o["partition"], o["offset"]) for o in out["byTimestampNone"]] == [(0, "10"), (1, "4")]

    def committed(answer):
        [topic] = answer
        return sorted((p["partition"], p["offset"]) for p in topic["partitions"])

    assert committed(out["offsetsNoGroup"]) == [(0, "-1"), (1, "-1")]
    assert committed(out["afterSet"]) == [(0, "3"), (1, "2")]
    assert committed(out["afterResetEarliest"]) == [(0, "-2"), (1, "-2")]  # kafkajs's EARLIEST marker
    assert committed(out["afterResetLatest"]) == [(0, "-1"), (1, "-1")]
    assert kafka_errors(out["setOffsetsUnknownTopic"]) == ["UNKNOWN_TOPIC_OR_PARTITION"]
    assert not out["deleteRecords"]["refused"]
    assert kafka_errors(out["deleteRecordsBeyond"]) == ["OFFSET_OUT_OF_RANGE"]
    assert not out["deleteRecordsAll"]["refused"]
    assert low_high(out["afterDeleteRecords"]) == [(0, "4", "10", "10"), (1, "0", "4", "4")]
    assert low_high(out["afterDeleteAll"]) == [(0, "4", "10", "10"), (1, "4", "4", "4")]
    assert out["fromStart"] == [f"v{i}" for i in range(4, 10)]


def test_admin_groups_list_describe_and_delete(broker):
    out = run(broker, "admin_groups")
    assert [(g["protocolType"]) for g in out["listed"]] == ["consumer", "consumer"]
    live, empty, missing = out["described"]
    assert (live["errorCode"], live["state"], live["protocolType"], live["protocol"]) == (
        0, "Stable", "consumer", "RoundRobinAssigner")
    assert live["members"] == [{"clientId": "rmqk-kafkajs", "hasAssignment": True, "hasMetadata": True}]
    assert (empty["errorCode"], empty["state"], empty["members"]) == (0, "Empty", [])
    assert (missing["errorCode"], missing["state"], missing["members"]) == (0, "Dead", [])
    assert kafka_errors(out["deleteLive"]) == ["NON_EMPTY_GROUP"]
    assert not out["deleteEmpty"]["refused"]
    assert kafka_errors(out["deleteMissing"]) == ["GROUP_ID_NOT_FOUND"]
    assert len(out["listedAfter"]) == 1


def test_a_missing_topic_is_refused_to_a_producer_that_may_not_create_it(broker):
    out = run(broker, "errors_unknown_topic")
    assert set(kafka_errors(out["produce"])) == {"UNKNOWN_TOPIC_OR_PARTITION"}


# --------------------------------------------------------------------------- SASL and ACLs


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-256", "scram-sha-512"])
def test_sasl_logins(sasl_broker, mechanism):
    result = run(sasl_broker, "sasl_roundtrip", sasl=login(mechanism))
    assert result["values"] == ["over sasl"]
    wrong = run(sasl_broker, "sasl_login_only", sasl=login(mechanism, password="wrong"))["login"]
    assert wrong["refused"]
    assert wrong["error"]["name"] == "KafkaJSSASLAuthenticationError"
    assert "Authentication failed" in wrong["error"]["message"]


def test_acls_are_created_described_and_deleted(sasl_broker):
    out = run(sasl_broker, "acls", sasl=login("scram-sha-256"))
    assert out["create"] is True
    [resource] = out["describe"]["resources"]
    assert sorted((a["operation"], a["permissionType"]) for a in resource["acls"]) == [(3, 3), (4, 2)]
    assert set(kafka_errors(out["aliceWrite"])) == {"TOPIC_AUTHORIZATION_FAILED"}
    [filtered] = out["delete"]["filterResponses"]
    assert filtered["errorCode"] == 0 and len(filtered["matchingAcls"]) == 2
    assert out["describeAfter"]["resources"] == []


# --------------------------------------------------------------------------- kafkajs's broker specs


def test_broker_produce_and_fetch_answer_what_kafkajs_s_broker_specs_expect(broker):
    out = run(broker, "broker_produce_fetch")
    for answer, base in ((out["produce1"], "0"), (out["produce2"], "3")):
        [topic] = answer["topics"]
        assert topic["partitions"] == [
            {"partition": 0, "errorCode": 0, "baseOffset": base, "logAppendTime": "-1", "logStartOffset": "0"}]
        assert answer["throttleTime"] == 0
    assert (out["fetch"]["errorCode"], out["fetch"]["sessionId"]) == (0, 0)
    [[partition]] = [r["partitions"] for r in out["fetch"]["responses"]]
    messages = partition.pop("messages")
    assert partition == {"partition": 0, "errorCode": 0, "highWatermark": "6", "lastStableOffset": "6",
                         "lastStartOffset": "0", "abortedTransactions": [], "preferredReadReplica": -1}
    assert [(m["offset"], m["key"], m["value"], m["headers"]) for m in messages] == [
        ("0", "key-0", "value-0", {"h0": "v0"}), ("1", "key-1", "value-1", {"h1": "v1"}),
        ("2", "key-2", "value-2", {"h2": "v2"}),
        ("3", "key-0", "value-0", {}), ("4", "key-1", "value-1", {}), ("5", "key-2", "value-2", {})]
    for m in messages:
        assert (m["magicByte"], m["attributes"], m["timestamp"], m["isControlRecord"]) == (2, 0, "1509827900073", False)
        context = m["batchContext"]
        assert (context["producerId"], context["producerEpoch"], context["timestampType"], context["magicByte"],
                context["inTransaction"], context["isControlBatch"], context["lastOffsetDelta"]) == (
            "-1", 0, 0, 2, False, False, 2)
        assert context["firstOffset"] == ("0" if int(m["offset"]) < 3 else "3")
    # an idempotent producer's sequence numbers: 1 and 5 after 0..2 are out of order, 3 is right
    assert not out["sequence0"]["refused"]
    assert kafka_errors(out["sequenceTooSmall"]) == ["OUT_OF_ORDER_SEQUENCE_NUMBER"]
    assert kafka_errors(out["sequenceTooBig"]) == ["OUT_OF_ORDER_SEQUENCE_NUMBER"]
    assert out["sequenceRight"]["value"]["topics"][0]["partitions"][0]["baseOffset"] == "3"


def test_broker_group_and_transaction_requests_as_kafkajs_s_broker_specs_send_them(broker):
    out = run(broker, "broker_group_and_txn")
    assert out["coordinator"]["errorCode"] == 0
    assert out["coordinator"]["coordinator"]["port"] == broker.port
    assert out["join"] == {"generationId": 1, "leaderIsMe": True, "members": 1, "groupProtocol": "AssignerName"}
    assert out["sync"]["assignment"] == {next(iter(out["sync"]["assignment"])): [0]}
    assert out["heartbeat"]["errorCode"] == 0
    assert kafka_errors(out["heartbeatOldGeneration"]) == ["ILLEGAL_GENERATION"]
    assert kafka_errors(out["heartbeatUnknownMember"]) == ["UNKNOWN_MEMBER_ID"]
    assert out["commit"]["responses"][0]["partitions"] == [{"partition": 0, "errorCode": 0}]
    assert kafka_errors(out["commitOldGeneration"]) == ["ILLEGAL_GENERATION"]
    assert out["fetchOffsets"]["responses"][0]["partitions"] == [
        {"partition": 0, "offset": "2", "metadata": "", "errorCode": 0},
        {"partition": 1, "offset": "-1", "metadata": "", "errorCode": 0}]
    assert out["leave"]["errorCode"] == 0
    assert [p["errorCode"] for e in out["addPartitions"]["errors"] for p in e["partitionErrors"]] == [0, 0]
    assert out["addOffsets"]["errorCode"] == 0
    assert [p["errorCode"] for t in out["txnOffsetCommit"]["topics"] for p in t["partitions"]] == [0, 0]
    assert out["endTxn"]["errorCode"] == 0
    # EndTxn v1 with an epoch the coordinator never gave: Kafka's PRODUCER_FENCED, which it
    # answers to versions before 2 as INVALID_PRODUCER_EPOCH
    assert kafka_errors(out["endTxnAgain"]) == ["INVALID_PRODUCER_EPOCH"]


# --------------------------------------------------------------------------- edge cases


def test_admin_refusals_synonyms_recreated_topics_and_topic_limits(broker):
    out = run(broker, "admin_edge_cases")
    assert kafka_errors(out["replicationFactor"]) == ["INVALID_REPLICATION_FACTOR"]
    assert kafka_errors(out["badName"]) == ["INVALID_TOPIC_EXCEPTION"]
    assert out["replicaAssignment"] is True and out["assignedPartitions"] == 2 and out["allTopics"]
    retention = out["synonyms"]["retention.ms"]
    assert (retention["value"], retention["isDefault"], retention["source"]) == ("86400000", False, 1)  # TOPIC_CONFIG
    assert retention["synonyms"][0] == ["retention.ms", 1]
    assert all(source == 5 for _, source in retention["synonyms"][1:])  # then the broker's defaults
    segment = out["synonyms"]["segment.bytes"]
    assert (segment["isDefault"], segment["source"], segment["synonyms"]) == (True, 5, [["log.segment.bytes", 5]])
    assert out["alterValidateOnly"]["resources"][0]["errorCode"] == 0
    assert out["afterValidateOnly"] == ["86400000"]  # validateOnly changed nothing
    assert kafka_errors(out["alterInvalid"]) == ["INVALID_CONFIG"]
    assert out["recreatedOffsets"] == [{"partition": 0, "offset": "0", "high": "0", "low": "0"}]
    assert out["recreatedValues"] == ["second life"]
    assert kafka_errors(out["tooLarge"]) == ["MESSAGE_TOO_LARGE"]
    [stamped] = out["appendTime"]
    low, high = out["appendTimeWindow"]
    assert low <= int(stamped["logAppendTime"]) <= high  # the broker's clock, not the record's "1000"
    assert out["appendTimeRead"] == [stamped["logAppendTime"]]
    assert out["resolved"] == ["0", "0"]


def test_regex_subscriptions_big_records_trimmed_logs_and_transactions_between_records(broker):
    out = run(broker, "consumer_edge_cases")
    assert len(out["regex"]) == 2 and all(t.endswith(("-a", "-b")) for t in out["regex"])
    assert out["sizes"] == [20000, 5]  # a record above maxBytes still comes back (KIP-74)
    assert out["trimmed"] == ["t4", "t5"]  # the committed offset 1 was below the new log start 4
    assert out["mixed"] == ["plain-1", "plain-2", "plain-3"]
    # 2 aborted records, 3 plain ones and the abort marker
    assert out["mixedOffsets"] == [{"partition": 0, "offset": "6", "high": "6", "low": "0"}]
    assert out["ctpOutput"] == ["out-in0", "out-in1", "out-in2", "out-in3"]
    [offsets] = out["ctpOffsets"]
    assert offsets["partitions"] == [{"partition": 0, "offset": "4", "metadata": None}]


@pytest.mark.parametrize("mechanism", ["plain", "scram-sha-512"])
def test_kafkajs_re_authenticates_before_its_session_ends(tmp_path, mechanism):
    config = tmp_path / "server.properties"
    config.write_text(SASL_PROPERTIES + "connections.max.reauth.ms=2000\n")
    with EmbeddedBroker(data_dir=None, flush="async", config_file=config, args=["--metrics-port", "0"]) as reauth:
        out = run(reauth, "sasl_reauth", sasl=login(mechanism))
        assert out["sent"] == ["0", "1", "2", "3"]
        metrics = _metrics(reauth)
    upper = mechanism.upper()
    assert metrics.get(f'rmqk_successful_reauthentication_total{{listener="SASL_PLAINTEXT",mechanism="{upper}"}}', 0) >= 2
    assert metrics.get('rmqk_expired_sessions_closed_total{listener="SASL_PLAINTEXT"}', 0) == 0


def _metrics(broker: EmbeddedBroker) -> dict[str, float]:
    import urllib.request

    assert broker.metrics_url is not None
    text = urllib.request.urlopen(broker.metrics_url + "/metrics", timeout=10).read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


def test_an_open_transaction_holds_read_committed_back_and_a_new_producer_fences_the_old(broker):
    out = run(broker, "transaction_visibility_and_fencing")
    assert out["whileOpen"] == []  # the plain record after the open transaction waits too
    # kafkajs's admin lists offsets read_committed: the last stable offset
    assert out["offsetsWhileOpen"] == [{"partition": 0, "offset": "0", "high": "0", "low": "0"}]
    assert out["afterCommit"] == ["in-txn", "after-txn"]
    # AddPartitionsToTxn v1 from the fenced producer: Kafka's PRODUCER_FENCED, as
    # INVALID_PRODUCER_EPOCH for versions before 2
    assert kafka_errors(out["fencedSend"]) == ["INVALID_PRODUCER_EPOCH"]
    assert out["finalValues"] == ["in-txn", "after-txn", "from the new producer"]


def test_a_member_that_dies_is_removed_after_its_session_timeout(broker):
    out = run(broker, "group_member_crash")
    history = out["history"]
    assert len(history[0]) == 2 and history[-1] == [0, 1, 2, 3]
    assert out["tookMs"] >= 7000  # not before the dead member's 8 s session ended (kafkajs's clock)


def test_prefixed_acls_match_filters_and_a_group_alice_may_not_use(sasl_broker):
    out = run(sasl_broker, "acl_patterns", sasl=login("plain"))
    prefixed, literal = 4, 3  # kafkajs's ResourcePatternTypes
    read, describe = 3, 8
    [(prefix, p_type, p_ops), (topic, l_type, l_ops)] = out["match"]
    assert (p_type, p_ops, l_type, l_ops) == (prefixed, [read], literal, [describe])
    assert topic.startswith(prefix)
    assert out["literal"] == [[topic, literal]]
    # FindCoordinator refused with GROUP_AUTHORIZATION_FAILED, which kafkajs's coordinator
    # lookup turns into "not found"
    assert out["aliceCrash"]["name"] == "KafkaJSGroupCoordinatorNotFound"
    assert out["aliceResponseErrors"] == ["Response GroupCoordinator: Not authorized to access group: Group authorization failed"]
    assert out["deleted"] == [[0, 2]]


def test_a_consumer_with_max_bytes_170_passes_a_transaction_s_commit_marker(broker):
    out = run(broker, "control_batches")
    assert out["consumed"] == [f"t{i}" for i in range(20)] + ["p0", "p1"]


def test_members_without_partitions_and_a_topic_that_grows(broker):
    empty = run(broker, "empty_assignment")
    assert sorted(empty["assignments"]) == [[], [], [0]]
    [holder] = [name for name, assignment in zip("abc", empty["assignments"]) if assignment]
    assert empty["got"] == [[holder, "only one reads me"]]
    grown = run(broker, "partition_changes")
    assert grown["history"][0] == [0] and grown["history"][-1] == [0, 1, 2]
    assert grown["got"] == ["0:p0", "1:p1", "2:p2"]


def test_auto_created_topics_seeking_past_the_end_concurrent_partitions_and_broker_configs(broker):
    out = run(broker, "misc")
    assert out["autoCreated"][0]["errorCode"] == 0 and out["autoConsumed"] == ["created by use"]
    assert out["seekBeforeRun"]["refused"]  # kafkajs's own rule
    # partition 0 read once, then again from its start after the seek past its end was
    # answered OFFSET_OUT_OF_RANGE
    assert out["perPartition"] == [20, 10, 10]
    assert out["maxActive"] == 3  # partitionsConsumedConcurrently
    assert out["brokerLoggers"]["refused"] is False and out["brokerLoggers"]["errorCode"] == 0
    assert out["brokerLoggers"]["count"] > 0
    assert out["alterBroker"]["value"]["resources"][0]["errorCode"] == 0
    assert [g["errorCode"] for g in out["deleteTwo"]] == [0, 0]
    assert out["listedAfterDelete"] == []


def test_partition_reassignments_on_one_broker(broker):
    out = run(broker, "reassignments")
    assert out["listed"] == {"topics": []}
    assert not out["same"]["refused"]
    assert kafka_errors(out["noSuchBroker"]) == ["INVALID_REPLICA_ASSIGNMENT"]
    assert kafka_errors(out["noSuchTopic"]) == ["UNKNOWN_TOPIC_OR_PARTITION"]


@pytest.mark.parametrize("how", ["clean", "kill-9"])
def test_a_group_and_a_producer_live_through_a_broker_restart(broker_factory, how):
    """errorRecovery: kafkajs reconnects to the restarted broker (same port, same data) and
    the group goes on from its committed offsets."""
    restarting = broker_factory(flush="sync")
    spec = {"scenario": "across_a_restart", "brokers": [restarting.bootstrap_servers], "sasl": None,
            "topic": "restart", "groupId": "restart-group"}
    assert NODE is not None
    node = subprocess.Popen(
        [NODE, str(SCENARIOS), json.dumps(spec)], cwd=PACKAGE, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "KAFKAJS_NO_PARTITIONER_WARNING": "1"},
    )
    try:
        assert node.stdout is not None and node.stdin is not None
        first = node.stdout.readline()
        assert first == "ready\n", f"the scenario did not get ready: {first!r} {node.stderr.read() if node.poll() is not None else ''}"
        if how == "kill-9":
            restarting.kill()
        restarting.restart(same_port=True)
        node.stdin.write("go\n")
        node.stdin.flush()
        stdout, stderr = node.communicate(timeout=150)
    finally:
        if node.poll() is None:
            node.kill()
            node.communicate()
    if stderr.strip():
        sys.stderr.write(f"--- kafkajs log ---\n{stderr}\n")
    answer = json.loads(stdout.strip().splitlines()[-1])
    assert answer["ok"], answer
    got = answer["result"]["got"]
    # while the broker is down kafkajs may give up connecting (a retriable crash); it then
    # restarts the consumer by itself (restartOnFailure)
    crashed = answer["result"]["crashed"]
    assert crashed is None or crashed["retriable"], crashed
    assert got[:5] == [f"before-{i}" for i in range(5)]  # committed before the restart: not read again
    # The broker keeps the group's membership across a restart, as Kafka does (its persisted
    # group metadata): kafkajs goes on heartbeating and committing as the same member of the
    # same generation, so nothing is read twice. Only a kafkajs that gave up while the broker
    # was down (a retriable crash) rejoins as a new member; then records read but not yet
    # committed come again once (at-least-once): one step back, then in order.
    after = [int(value.removeprefix("after-")) for value in got[5:]]
    if crashed is None:
        assert after == [0, 1, 2, 3, 4], got
    else:
        assert sorted(set(after)) == [0, 1, 2, 3, 4] and after[-1] == 4, got
        assert sum(1 for a, b in zip(after, after[1:]) if b <= a) <= 1, got


def test_a_waiting_read_committed_fetch_ends_at_a_record_and_at_a_commit(broker):
    out = run(broker, "long_poll_latency")
    # the Fetch waits up to 10 s; on a loaded machine a wake-up still takes well under 5
    assert out["plainMs"] < 5000, out
    assert out["commitMs"] < 5000, out
