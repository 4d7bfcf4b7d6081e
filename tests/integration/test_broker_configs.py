"""Broker configs at run time (issue 21): IncrementalAlterConfigs / AlterConfigs on the BROKER
resource, this node's id and the cluster-wide default "", applied without a restart, kept
across one, described with their sources, and refused with Kafka's codes and messages."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from rawkafka import EARLIEST, ErrorCode, KafkaRaw, make_batch, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ALTER_CONFIGS, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 33, 32, 44
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND = 0, 1, 2
WAIT = 15


def start(broker_factory, tmp_path, properties: str = "", **options):
    config = tmp_path / "server.properties"
    config.write_text(properties)
    return broker_factory(config_file=config, **options)


def incremental(conn: KafkaRaw, name: str, *ops, validate_only: bool = False) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of one broker resource: (error code, message)."""
    response = conn.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=validate_only, resources=[dict(
        resource_type=BROKER, resource_name=name,
        configs=[dict(name=k, config_operation=op, value=v) for k, op, v in ops])])
    (result,) = response.responses
    return result.error_code, result.error_message


def described(conn: KafkaRaw, name: str = "0", resource_type: int = BROKER) -> dict:
    """DescribeConfigs v4 with synonyms: name -> (value, source, read_only, sensitive, synonyms)."""
    response = conn.request(DESCRIBE_CONFIGS, 4, include_synonyms=True, include_documentation=False,
                            resources=[dict(resource_type=resource_type, resource_name=name,
                                            configuration_keys=None)])
    (result,) = response.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: (c.value, c.config_source, c.read_only, c.is_sensitive,
                     [(s.name, s.value, s.source) for s in c.synonyms]) for c in result.configs}


def set_config(admin: AdminClient, name: str, **configs: str) -> None:
    resource = ConfigResource(ResourceType.BROKER, name, incremental_configs=[
        ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()])
    admin.incremental_alter_configs([resource])[resource].result(WAIT)


def test_message_max_bytes_changes_live_is_described_and_survives_a_restart(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "message.max.bytes=200000\n")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("sized")
        big = make_batch([b"x" * 3000])
        assert conn.produce("sized", 0, big).error_code == ErrorCode.none
        set_config(admin, "0", message_max_bytes="1000")
        # the connection opened before the change sees it at its next request
        assert conn.produce("sized", 0, big).error_code == ErrorCode.message_too_large
        assert conn.produce("sized", 0, make_batch([b"small"])).error_code == ErrorCode.none
        entry = described(conn)["message.max.bytes"]
        assert entry[:3] == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value, False)
        assert entry[4] == [("message.max.bytes", "1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
                            ("message.max.bytes", "200000", ConfigSource.STATIC_BROKER_CONFIG.value),
                            ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG.value)]
        # a topic without an override inherits it, and says from where
        topic_entry = described(conn, "sized", TOPIC)["max.message.bytes"]
        assert topic_entry[:2] == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        assert topic_entry[4][0] == ("message.max.bytes", "1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        # read-only settings say so
        assert described(conn)["log.dirs"][2] is True
    broker.restart()
    with KafkaRaw(broker.host, broker.port) as conn:
        assert conn.produce("sized", 0, big).error_code == ErrorCode.message_too_large
        assert described(conn)["message.max.bytes"][:2] == ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
        # deleting the override brings the static value back, at once
        assert incremental(conn, "0", ("message.max.bytes", DELETE, None)) == (ErrorCode.none, None)
        assert conn.produce("sized", 0, big).error_code == ErrorCode.none
        assert described(conn)["message.max.bytes"][:2] == ("200000", ConfigSource.STATIC_BROKER_CONFIG.value)


def test_cluster_default_lower_retention_deletes_segments_at_the_next_check(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path, "internal.segment.bytes=4096\nlog.retention.check.interval.ms=200\n")
    with KafkaRaw(broker.host, broker.port) as conn:
        conn.create_topic("kept")
        for _ in range(20):
            conn.produce_ok("kept", 0, make_batch([b"v" * 1000]))
        time.sleep(1)  # several retention checks: nothing is deleted yet
        assert conn.list_offsets("kept", 0, EARLIEST).offset == 0
        assert incremental(conn, "", ("log.retention.bytes", SET, "8192")) == (ErrorCode.none, None)
        wait_until(lambda: conn.list_offsets("kept", 0, EARLIEST).offset > 0, timeout=30,
                   message="retention to delete old segments")
        assert described(conn, "")["log.retention.bytes"][:2] == ("8192", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert set(described(conn, "")) == {"log.retention.bytes"}  # "" lists the defaults only
        entry = described(conn, "kept", TOPIC)["retention.bytes"]
        assert entry[:2] == ("8192", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        # this node's own value beats the cluster default; with kafka-python's (legacy) AlterConfigs
        from kafka.admin import ConfigResource as KpResource
        from kafka.admin import ConfigResourceType, KafkaAdminClient

        client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            # kafka-python checks first that DescribeConfigs calls the key dynamic
            result = client.alter_configs([KpResource(ConfigResourceType.BROKER, "0",
                                                      configs={"log.retention.bytes": "-1"})], incremental=False)
            assert result == {"broker": {"0": "OK"}}
        finally:
            client.close()
        # by time: every segment but the one being written is older than 1 ms
        before = conn.list_offsets("kept", 0, EARLIEST).offset
        assert incremental(conn, "0", ("log.retention.bytes", SET, "-1"), ("log.retention.ms", SET, "1")) == (
            ErrorCode.none, None)
        wait_until(lambda: conn.list_offsets("kept", 0, EARLIEST).offset > before, timeout=30,
                   message="retention by time to delete old segments")
        assert described(conn)["log.retention.bytes"][4][:2] == [
            ("log.retention.bytes", "-1", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
            ("log.retention.bytes", "8192", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]


def served(broker) -> bool:
    with KafkaRaw(broker.host, broker.port) as conn:
        try:
            return bool(conn.metadata(None).brokers)
        except (ConnectionError, OSError):
            return False


def test_max_connections_and_per_ip_refuse_new_connections(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.list_topics(timeout=WAIT)  # the admin client's own connection(s) are open
    with KafkaRaw(broker.host, broker.port) as first:
        first.metadata(None)
        # (librdkafka and kafka-python cannot name the default resource ""; raw frames can)
        assert incremental(first, "", ("max.connections", SET, "3")) == (ErrorCode.none, None)
        opened = []
        try:
            # up to the limit connections work; the one above it is closed at once
            while True:
                conn = KafkaRaw(broker.host, broker.port)
                opened.append(conn)
                if not conn.wait_closed(0.5):
                    conn.metadata(None)
                    assert len(opened) < 5, "max.connections was not enforced"
                    continue
                break
            assert first.metadata(None).brokers  # connections already open are kept
            for conn in opened:
                conn.close()
            opened.clear()
            wait_until(lambda: served(broker), timeout=10, message="a connection below the limit to be served")
            set_config(admin, "0", max_connections="1000", max_connections_per_ip="2")
            opened = [KafkaRaw(broker.host, broker.port) for _ in range(3)]
            # first's and the admin's are from 127.0.0.1 too: every new one is over the limit
            assert all(conn.wait_closed(5) for conn in opened)
        finally:
            for conn in opened:
                conn.close()


def test_refusals_have_kafkas_codes_and_messages(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port) as conn:
        before = described(conn)
        assert incremental(conn, "0", ("log.dirs", SET, "/elsewhere")) == (
            ErrorCode.invalid_request, "Cannot update these configs dynamically: Set(log.dirs)")
        assert incremental(conn, "", ("connections.max.idle.ms", SET, "1000")) == (
            ErrorCode.invalid_request, "Cannot update these configs dynamically: Set(connections.max.idle.ms)")
        assert incremental(conn, "0", ("no.such.config", SET, "1")) == (
            ErrorCode.invalid_request, "Unknown broker configs: Set(no.such.config)")
        assert incremental(conn, "0", ("message.max.bytes", SET, "lots")) == (
            ErrorCode.invalid_request, "Invalid value lots for configuration message.max.bytes: expected an integer")
        assert incremental(conn, "0", ("max.connections", SET, "-1")) == (
            ErrorCode.invalid_request, "Invalid value -1 for configuration max.connections: "
            "must be in [0, 2147483647] (Kafka's range)")
        assert incremental(conn, "", ("sasl.jaas.config", SET, 'x required user_a="b";')) == (
            ErrorCode.invalid_request, "Cannot update these configs at default cluster level, broker id must be "
            "specified: Set(sasl.jaas.config)")
        assert incremental(conn, "0", ("ssl.keystore.location", SET, "/k.pem")) == (
            ErrorCode.invalid_request, "These security configs can be dynamically updated only per-listener using "
            "the listener prefix: Set(ssl.keystore.location)")
        assert incremental(conn, "7", ("message.max.bytes", SET, "1")) == (
            ErrorCode.invalid_request, "Unexpected broker id, expected 0, but received 7")
        assert incremental(conn, "zero", ("message.max.bytes", SET, "1")) == (
            ErrorCode.invalid_request, "Node id must be an integer, but it is: zero")
        assert incremental(conn, "0", ("max.connections", APPEND, "1"))[0] == ErrorCode.invalid_config
        # validate_only checks a good change and makes none
        assert incremental(conn, "0", ("message.max.bytes", SET, "1000"), validate_only=True) == (ErrorCode.none, None)
        assert incremental(conn, "0", ("log.dirs", SET, "/x"), validate_only=True)[0] == ErrorCode.invalid_request
        # legacy AlterConfigs: the same checks, and a null value is refused as in Kafka
        response = conn.request(ALTER_CONFIGS, 2, validate_only=False, resources=[dict(
            resource_type=BROKER, resource_name="0", configs=[dict(name="message.max.bytes", value=None)])])
        assert (response.responses[0].error_code, response.responses[0].error_message) == (
            ErrorCode.invalid_request, "Null value not supported for : message.max.bytes")
        assert described(conn) == before
        assert not (broker.data_dir / "broker_configs.json").exists()


AUTHORIZER = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer\nsuper.users=User:admin\n"


def sasl_login(conn: KafkaRaw, user: str, password: str):
    assert conn.request(17, 1, mechanism="PLAIN").error_code == ErrorCode.none
    return conn.request(36, 2, auth_bytes=f"\0{user}\0{password}".encode())


def test_jaas_users_change_per_listener_and_only_the_cluster_may_alter(broker_factory, tmp_path):
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret" user_alice="a";'
    broker = start(broker_factory, tmp_path, f"listeners=SASL_PLAINTEXT://127.0.0.1:9092\nsasl.enabled.mechanisms=PLAIN\n"
                   f"sasl.jaas.config={jaas}\n" + AUTHORIZER)
    with KafkaRaw(broker.host, broker.port) as alice:
        assert sasl_login(alice, "alice", "a").error_code == ErrorCode.none
        assert incremental(alice, "0", ("max.connections", SET, "5")) == (
            ErrorCode.cluster_authorization_failed, "Cluster authorization failed.")
        response = alice.request(DESCRIBE_CONFIGS, 4, include_synonyms=False, include_documentation=False,
                                 resources=[dict(resource_type=BROKER, resource_name="0", configuration_keys=None)])
        assert response.results[0].error_code == ErrorCode.cluster_authorization_failed
    with KafkaRaw(broker.host, broker.port) as carol:
        assert sasl_login(carol, "carol", "c").error_code == ErrorCode.sasl_authentication_failed
    with KafkaRaw(broker.host, broker.port) as admin:
        assert sasl_login(admin, "admin", "admin-secret").error_code == ErrorCode.none
        new_jaas = jaas.replace('user_alice="a"', 'user_carol="c"')
        key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
        assert incremental(admin, "0", (key, SET, new_jaas)) == (ErrorCode.none, None)
        entry = described(admin)[key]
        assert entry[:4] == (None, ConfigSource.DYNAMIC_BROKER_CONFIG.value, False, True)  # a password: hidden
        assert "user_carol" not in (broker.stderr or "")
    with KafkaRaw(broker.host, broker.port) as carol:
        assert sasl_login(carol, "carol", "c").error_code == ErrorCode.none
    with KafkaRaw(broker.host, broker.port) as alice:
        assert sasl_login(alice, "alice", "a").error_code == ErrorCode.sasl_authentication_failed
    # the listener's mechanisms change too (the broker-wide JAAS users cover SCRAM)
    with KafkaRaw(broker.host, broker.port) as conn:
        assert conn.request(17, 1, mechanism="SCRAM-SHA-256").error_code == ErrorCode.unsupported_sasl_mechanism
    with KafkaRaw(broker.host, broker.port) as admin:
        assert sasl_login(admin, "admin", "admin-secret").error_code == ErrorCode.none
        assert incremental(admin, "0", ("listener.name.sasl_plaintext.sasl.enabled.mechanisms", SET,
                                        "PLAIN,SCRAM-SHA-256")) == (ErrorCode.none, None)
    with KafkaRaw(broker.host, broker.port) as conn:
        assert conn.request(17, 1, mechanism="SCRAM-SHA-256").error_code == ErrorCode.none


trustme = pytest.importorskip("trustme")


def presented_by(broker, cafile) -> bool:
    """Whether a new TLS connection verifies against ``cafile``."""
    context = ssl.create_default_context(cafile=str(cafile))
    with socket.create_connection((broker.host, broker.port), timeout=10) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1"):
                return True
        except ssl.SSLCertVerificationError:
            return False


def test_a_listener_keystore_is_reloaded_for_new_connections(broker_factory, tmp_path):
    pems = {}
    for name in ("old", "new"):
        ca = trustme.CA()
        pems[f"{name}_ca"] = tmp_path / f"{name}-ca.pem"
        pems[name] = tmp_path / f"{name}.pem"
        ca.cert_pem.write_to_path(pems[f"{name}_ca"])
        ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(pems[name])
    broker = start(broker_factory, tmp_path, f"listeners=SSL://127.0.0.1:9092\nssl.keystore.type=PEM\n"
                   f"ssl.keystore.location={pems['old']}\n")
    assert presented_by(broker, pems["old_ca"]) and not presented_by(broker, pems["new_ca"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SSL",
                         "ssl.ca.location": str(pems["old_ca"])})
    key = "listener.name.ssl.ssl.keystore.location"
    bad = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
        ConfigEntry(key, str(tmp_path / "missing.pem"), incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(Exception, match="Invalid dynamic configuration"):
        admin.incremental_alter_configs([bad])[bad].result(WAIT)
    assert presented_by(broker, pems["old_ca"])  # a keystore that does not load changes nothing
    set_config(admin, "0", **{key.replace(".", "_"): str(pems["new"])})
    assert presented_by(broker, pems["new_ca"]) and not presented_by(broker, pems["old_ca"])
    broker.restart()
    assert presented_by(broker, pems["new_ca"])


def test_rocketmq_transaction_settings_change_live(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port) as conn:
        assert incremental(conn, "", ("transactionCheckMax", SET, "3"), ("transactionCheckInterval", SET, "500"),
                           ("maxReconsumeTimes", SET, "2")) == (ErrorCode.none, None)
        import json

        # what the half-message check service itself reports using
        status = json.loads(described(conn, "RMQ_SYS_TRANS_HALF_TOPIC", TOPIC)["rmq.transaction.half.status"][0])
        assert (status["transaction_check_max"], status["transaction_check_interval_ms"]) == (3, 500)
        assert described(conn)["maxReconsumeTimes"][:2] == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert incremental(conn, "0", ("messageDelayLevel", SET, "1s 2s")) == (
            ErrorCode.invalid_request, "Cannot update these configs dynamically: Set(messageDelayLevel)")


def rmqk(*args: str):
    from click.testing import CliRunner

    from rmqkafka.cli import main

    return CliRunner().invoke(main, list(args), catch_exceptions=False, prog_name="rmqk")


def test_rmqk_configs_sets_describes_and_deletes_at_both_levels(broker_factory, tmp_path):
    import json

    broker = start(broker_factory, tmp_path, "message.max.bytes=50000\n")
    bootstrap = ["-b", broker.bootstrap_servers]
    result = rmqk("configs", "alter", "--broker-defaults", "--add-config",
                  "log.retention.ms=60000,sasl.enabled.mechanisms=[PLAIN,SCRAM-SHA-256]", *bootstrap)
    assert (result.exit_code, result.stderr) == (1, (  # a per-broker key
        "rmqk: error: cannot alter configs of the cluster-wide defaults: Cannot update these configs at default "
        "cluster level, broker id must be specified: Set(sasl.enabled.mechanisms) (INVALID_REQUEST)\n"))
    result = rmqk("configs", "alter", "--broker-defaults", "--add-config", "log.retention.ms=60000", *bootstrap)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "altered the cluster-wide defaults: set log.retention.ms=60000\n"
    result = rmqk("configs", "alter", "--add-config", "message.max.bytes=4000",
                  "--add-config", "sasl.enabled.mechanisms=[PLAIN,SCRAM-SHA-256]", *bootstrap)
    assert result.exit_code == 0, result.stderr
    result = rmqk("configs", "describe", "--json", *bootstrap)
    shown = {c["name"]: (c["value"], c["source"]) for c in json.loads(result.stdout)["configs"]}
    assert shown == {"log.retention.ms": ("60000", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
                     "message.max.bytes": ("4000", "DYNAMIC_BROKER_CONFIG"),
                     "sasl.enabled.mechanisms": ("PLAIN,SCRAM-SHA-256", "DYNAMIC_BROKER_CONFIG")}
    result = rmqk("configs", "describe", "--broker-defaults", "--json", *bootstrap)
    assert [(c["name"], c["value"]) for c in json.loads(result.stdout)["configs"]] == [("log.retention.ms", "60000")]
    result = rmqk("configs", "alter", "--broker", "0", "--delete-config", "message.max.bytes", *bootstrap)
    assert result.exit_code == 0, result.stderr
    result = rmqk("configs", "describe", "--broker", "0", "--all", *bootstrap)
    row = next(line.split() for line in result.stdout.splitlines() if line.startswith("message.max.bytes "))
    assert row[1:] == ["50000", "STATIC_BROKER_CONFIG", "false"]
    result = rmqk("configs", "alter", "--add-config", "log.dirs=/x", *bootstrap)
    assert result.exit_code == 1
    assert result.stderr == ("rmqk: error: cannot alter configs of broker 0: Cannot update these configs "
                             "dynamically: Set(log.dirs) (INVALID_REQUEST)\n")


def test_broker_logger_levels_change_at_run_time_and_not_for_good(broker_factory, tmp_path):
    broker = start(broker_factory, tmp_path)
    logger = "rmqkafka.adapter.broker"

    def alter_loggers(conn, *ops, resource="0"):
        response = conn.request(INCREMENTAL_ALTER_CONFIGS, 1, validate_only=False, resources=[dict(
            resource_type=BROKER_LOGGER, resource_name=resource,
            configs=[dict(name=k, config_operation=op, value=v) for k, op, v in ops])])
        return response.responses[0].error_code, response.responses[0].error_message

    with KafkaRaw(broker.host, broker.port) as conn:
        levels = described(conn, "0", BROKER_LOGGER)
        assert levels["root"][:3] == ("INFO", 6, False) and levels[logger][0] == "INFO"  # DYNAMIC_BROKER_LOGGER_CONFIG
        assert alter_loggers(conn, (logger, SET, "DEBUG")) == (ErrorCode.none, None)
        assert described(conn, "0", BROKER_LOGGER)[logger][0] == "DEBUG"
        # a logger set to WARN drops its INFO lines, at once
        quiet = "rmqkafka.adapter.broker_configs"
        assert alter_loggers(conn, (quiet, SET, "WARN")) == (ErrorCode.none, None)
        assert incremental(conn, "0", ("max.connections", SET, "100")) == (ErrorCode.none, None)
        assert alter_loggers(conn, (quiet, SET, "INFO")) == (ErrorCode.none, None)
        assert incremental(conn, "0", ("max.connections", SET, "200")) == (ErrorCode.none, None)
        wait_until(lambda: "max.connections=200" in broker.stderr, message="the INFO line")
        assert "max.connections=100" not in broker.stderr
        assert alter_loggers(conn, (logger, DELETE, None)) == (ErrorCode.none, None)
        assert described(conn, "0", BROKER_LOGGER)[logger][0] == "INFO"  # root's again
        assert alter_loggers(conn, (logger, SET, "VERBOSE")) == (
            ErrorCode.invalid_config, f"Cannot set the log level of {logger} to VERBOSE as it is not a supported "
            "log level. Valid log levels are DEBUG,ERROR,FATAL,INFO,TRACE,WARN")
        assert alter_loggers(conn, ("no.such.logger", SET, "DEBUG")) == (
            ErrorCode.invalid_config, "Logger no.such.logger does not exist!")
        assert alter_loggers(conn, ("root", DELETE, None)) == (
            ErrorCode.invalid_request, "Removing the log level of the root logger is not allowed")
        assert alter_loggers(conn, (logger, APPEND, "DEBUG")) == (
            ErrorCode.invalid_request, "APPEND operation is not allowed for the BROKER_LOGGER resource")
        assert alter_loggers(conn, (logger, SET, "DEBUG"), resource="3") == (
            ErrorCode.invalid_request, "Unexpected broker id, expected 0, but received 3")
        assert alter_loggers(conn, ("root", SET, "WARN")) == (ErrorCode.none, None)
    broker.restart()  # not persisted, as in Kafka
    with KafkaRaw(broker.host, broker.port) as conn:
        assert described(conn, "0", BROKER_LOGGER)["root"][0] == "INFO"


def test_a_resource_named_thousands_of_times_is_described_once_and_answered_each_time(broker_factory, tmp_path):
    """Hostile sweep: a 48 KB DescribeConfigs naming the broker 10,000 times (with
    documentation) was described 10,000 times on the event loop: 14 s during which no other
    client was answered. Kafka answers every entry, so do we, but each distinct resource is
    described once and the loop turns between distinct ones."""
    broker = start(broker_factory, tmp_path)
    with KafkaRaw(broker.host, broker.port, timeout=120) as conn:
        conn.create_topic("t")
        resources = [dict(resource_type=BROKER, resource_name="0", configuration_keys=None),
                     dict(resource_type=2, resource_name="t", configuration_keys=["retention.ms"]),
                     dict(resource_type=2, resource_name="t", configuration_keys=None),
                     dict(resource_type=2, resource_name="missing", configuration_keys=None)] * 500
        answer = conn.request(32, 4, resources=resources, include_synonyms=True, include_documentation=True)
        assert len(answer.results) == 2000
        first = answer.results[:4]
        assert [r.resource_name for r in first] == ["0", "t", "t", "missing"]
        assert [r.error_code for r in first] == [ErrorCode.none] * 3 + [ErrorCode.unknown_topic_or_partition]
        assert [c.name for c in first[1].configs] == ["retention.ms"] and len(first[2].configs) > 10
        assert len(first[0].configs) > 20 and first[0].configs[0].documentation
        assert answer.results == first * 500
