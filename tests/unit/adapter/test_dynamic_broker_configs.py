"""Dynamic broker configs without a broker process: precedence, sources, validation in Kafka's
words, persistence (adapter/broker_configs.py)."""

from __future__ import annotations

import json

import pytest
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.broker_configs import (
    BROKER,
    CLUSTER,
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    FILE_NAME,
    PREFIX_ONLY,
    READ_ONLY,
    STATIC_BROKER_CONFIG,
    UNKNOWN,
    BrokerConfigs,
    ConfigRefused,
    update_mode,
)
from rmqkafka.adapter.properties import build_config


def static(tmp_path, text: str = ""):
    props = dict(line.split("=", 1) for line in text.splitlines() if line)
    return build_config(props, data_dir=tmp_path)


def refusal(configs: BrokerConfigs, resource: str, overrides: dict[str, str]) -> tuple[int, str]:
    with pytest.raises(ConfigRefused) as info:
        configs.alter(resource, overrides, validate_only=False)
    return info.value.code, str(info.value)


@pytest.mark.parametrize("name, mode", [
    ("log.retention.ms", CLUSTER), ("message.max.bytes", CLUSTER), ("transactionCheckMax", CLUSTER),
    ("sasl.jaas.config", BROKER), ("listener.name.ssl.ssl.keystore.location", BROKER),
    ("listener.name.SASL_SSL.SCRAM-SHA-256.sasl.jaas.config", BROKER),
    ("listener.name.sasl_ssl.plain.connections.max.reauth.ms", READ_ONLY),
    ("ssl.keystore.location", PREFIX_ONLY), ("ssl.key.password", PREFIX_ONLY),
    ("log.dirs", READ_ONLY), ("log.retention.hours", READ_ONLY), ("connections.max.idle.ms", READ_ONLY),
    ("messageDelayLevel", READ_ONLY), ("timerPrecisionMs", READ_ONLY), ("log.segment.bytes", READ_ONLY),
    ("no.such.key", UNKNOWN), ("listener.name.x.no.such", UNKNOWN),
])
def test_update_modes(name, mode):
    assert update_mode(name) == mode


def test_dynamic_beats_default_beats_static_beats_built_in(tmp_path):
    configs = BrokerConfigs(static(tmp_path, "message.max.bytes=2000"))
    assert configs.current.adapter.message_max_bytes == 2000
    assert configs.source("message.max.bytes") == STATIC_BROKER_CONFIG
    configs.alter("", {"message.max.bytes": "3000"}, validate_only=False)
    assert configs.current.adapter.message_max_bytes == 3000
    configs.alter("0", {"message.max.bytes": "4000"}, validate_only=False)
    assert configs.current.adapter.message_max_bytes == 4000
    assert configs.synonyms("message.max.bytes") == [
        ("message.max.bytes", "4000", DYNAMIC_BROKER_CONFIG),
        ("message.max.bytes", "3000", DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("message.max.bytes", "2000", STATIC_BROKER_CONFIG),
        ("message.max.bytes", "1048588", DEFAULT_CONFIG),
    ]
    configs.alter("0", {}, validate_only=False)
    assert configs.current.adapter.message_max_bytes == 3000
    assert configs.source("message.max.bytes") == DYNAMIC_DEFAULT_BROKER_CONFIG
    assert configs.source("num.partitions") == DEFAULT_CONFIG


def test_retention_ms_set_dynamically_beats_static_hours(tmp_path):
    configs = BrokerConfigs(static(tmp_path, "log.retention.hours=2"))
    assert configs.current.storage.retention_ms == 7_200_000
    configs.alter("", {"log.retention.ms": "5000"}, validate_only=False)
    assert configs.current.storage.retention_ms == 5000
    assert [s[:1] + s[2:] for s in configs.synonyms("log.retention.ms")] == [
        ("log.retention.ms", DYNAMIC_DEFAULT_BROKER_CONFIG), ("log.retention.hours", STATIC_BROKER_CONFIG),
        ("log.retention.ms", DEFAULT_CONFIG)]


def test_overrides_survive_a_restart_and_keep_a_previous_copy(tmp_path):
    configs = BrokerConfigs(static(tmp_path))
    configs.alter("", {"maxReconsumeTimes": "3"}, validate_only=False)
    configs.alter("0", {"log.flush.interval.ms": "250"}, validate_only=False)
    again = BrokerConfigs(static(tmp_path))
    assert (again.current.semantics.max_reconsume_times, again.current.storage.flush_interval_ms) == (3, 250)
    assert json.loads((tmp_path / (FILE_NAME + ".prev")).read_text())["default"] == {"maxReconsumeTimes": "3"}
    # another node id's overrides are kept but not applied
    other = BrokerConfigs(static(tmp_path, "node.id=5"))
    assert other.current.storage.flush_interval_ms == 1000
    other.alter("5", {"log.flush.interval.ms": "300"}, validate_only=False)
    assert BrokerConfigs(static(tmp_path)).current.storage.flush_interval_ms == 250


def test_a_stored_override_a_restart_no_longer_accepts_is_dropped(tmp_path, caplog):
    (tmp_path / FILE_NAME).write_text(json.dumps({"version": 1, "default": {
        "message.max.bytes": "lots", "maxReconsumeTimes": "4", "log.dirs": "/x"}, "brokers": {}}))
    configs = BrokerConfigs(static(tmp_path))
    assert configs.defaults == {"maxReconsumeTimes": "4"}
    assert configs.current.semantics.max_reconsume_times == 4
    assert "message.max.bytes" in caplog.text and "log.dirs" in caplog.text


def test_refusals_in_kafkas_words(tmp_path):
    configs = BrokerConfigs(static(tmp_path))
    invalid = ErrorCode.invalid_request
    assert refusal(configs, "0", {"log.dirs": "/x", "node.id": "3"}) == (
        invalid, "Cannot update these configs dynamically: Set(log.dirs, node.id)")
    assert refusal(configs, "0", {"ssl.truststore.location": "/t"}) == (
        invalid, "These security configs can be dynamically updated only per-listener using the listener "
        "prefix: Set(ssl.truststore.location)")
    assert refusal(configs, "", {"listener.name.ssl.ssl.keystore.location": "/k"}) == (
        invalid, "Cannot update these configs at default cluster level, broker id must be specified: "
        "Set(listener.name.ssl.ssl.keystore.location)")
    assert refusal(configs, "0", {"log.retention.bytes": "-2"}) == (
        invalid, "Invalid value -2 for configuration log.retention.bytes: must be in [-1, 9223372036854775807] "
        "(Kafka's type; -1 = unlimited)")
    assert refusal(configs, "1", {}) == (invalid, "Unexpected broker id, expected 0, but received 1")
    assert not (tmp_path / FILE_NAME).exists()


def test_validate_only_and_a_failed_prepare_change_nothing(tmp_path):
    configs = BrokerConfigs(static(tmp_path))
    configs.alter("0", {"message.max.bytes": "10"}, validate_only=True)
    assert configs.current.adapter.message_max_bytes == 1048588 and configs.broker == {}

    def refuse(new):
        raise ValueError("keystore does not load")

    configs.prepare = refuse
    assert refusal(configs, "0", {"message.max.bytes": "10"}) == (
        ErrorCode.invalid_request, "Invalid dynamic configuration: keystore does not load")
    assert configs.broker == {} and not (tmp_path / FILE_NAME).exists()


def test_a_change_is_stored_before_it_is_swapped_in(tmp_path):
    seen = []
    configs = BrokerConfigs(static(tmp_path))
    configs.prepare = lambda new: lambda: seen.append((new.adapter.max_connections,
                                                       json.loads((tmp_path / FILE_NAME).read_text())))
    configs.alter("", {"max.connections": "7"}, validate_only=False)
    assert seen == [(7, {"version": 1, "default": {"max.connections": "7"}, "brokers": {}})]
    # listener keys are stored in Kafka's spelling, whatever case the client used
    configs.alter("0", {"listener.name.SASL_PLAINTEXT.PLAIN.sasl.jaas.config": 'x required user_a="b";'},
                  validate_only=False)
    assert list(configs.broker) == ["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
