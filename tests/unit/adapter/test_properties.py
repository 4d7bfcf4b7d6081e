"""rmqkafka.adapter.properties: the properties format, server.properties keys, precedence, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqkafka.adapter.config import AdapterConfig, ExtraListener
from rmqkafka.adapter.properties import (
    DATA_DIR_ENV,
    ConfigError,
    build_config,
    default_data_dir,
    load_config,
    parse_properties,
    read_properties,
)
from rmqkafka.storage.config import StorageConfig

NO_ENV: dict[str, str] = {}


JAAS = 'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_a="pa";\n'


def build(text: str = "", **overrides):
    overrides.setdefault("environ", NO_ENV)
    return build_config(parse_properties(text), **overrides)


def error_of(text: str = "", **overrides) -> str:
    with pytest.raises(ConfigError) as info:
        build(text, **overrides)
    return str(info.value)


# --------------------------------------------------------------------------- format


class TestParseProperties:
    def test_separators_equals_colon_and_whitespace(self):
        props = parse_properties("a=1\nb: 2\nc 3\nd\t=\t4\ne   :   5\n")
        assert props == {"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"}

    def test_surrounding_whitespace_trimmed(self):
        props = parse_properties("   key =  value with  spaces   \n")
        assert props == {"key": "value with  spaces"}

    def test_only_the_first_separator_splits(self):
        props = parse_properties("listeners=PLAINTEXT://h:9092\nx=a=b:c\n")
        assert props == {"listeners": "PLAINTEXT://h:9092", "x": "a=b:c"}

    def test_comments_and_blank_lines(self):
        text = "# comment\n  ! also a comment\n\n   \n\t\nkey=value # not a comment\n"
        assert parse_properties(text) == {"key": "value # not a comment"}

    def test_key_without_value_is_empty(self):
        assert parse_properties("lonely\nalso=\n") == {"lonely": "", "also": ""}

    def test_later_duplicate_wins(self):
        assert parse_properties("a=1\na=2\n") == {"a": "2"}

    def test_line_continuation_drops_leading_whitespace(self):
        text = "log.dirs=/a,\\\n        /b,\\\n\t/c\nnext=1\n"
        assert parse_properties(text) == {"log.dirs": "/a,/b,/c", "next": "1"}

    def test_continuation_line_that_looks_like_a_comment_is_data(self):
        assert parse_properties("a=x\\\n#y\n") == {"a": "x#y"}

    def test_even_number_of_backslashes_does_not_continue(self):
        assert parse_properties("a=x\\\\\nb=y\n") == {"a": "x\\", "b": "y"}

    def test_comment_line_ending_in_backslash_does_not_continue(self):
        assert parse_properties("# comment \\\na=1\n") == {"a": "1"}

    def test_continuation_at_end_of_input(self):
        assert parse_properties("a=1\\") == {"a": "1"}

    @pytest.mark.parametrize("eol", ["\n", "\r\n", "\r"])
    def test_line_endings(self, eol):
        assert parse_properties(f"a=1{eol}b=2{eol}c=x\\{eol}  y{eol}") == {
            "a": "1",
            "b": "2",
            "c": "xy",
        }

    def test_escapes(self):
        text = "tab=a\\tb\nuni=\\u0041\\u00e9\nlit=\\q\\\\\nkey\\=with\\:seps\\ x=v\n"
        props = parse_properties(text)
        assert props["tab"] == "a\tb"
        assert props["uni"] == "Aé"
        assert props["lit"] == "q\\"
        assert props["key=with:seps x"] == "v"

    def test_escaped_trailing_space_is_kept(self):
        assert parse_properties("a=x\\ \n") == {"a": "x "}

    def test_malformed_unicode_escape(self):
        with pytest.raises(ConfigError, match=r"line 2: malformed \\uXXXX"):
            parse_properties("ok=1\nbad=\\u12G4\n")

    def test_utf8_values(self):
        assert parse_properties("name=ĉu é 数据\n") == {"name": "ĉu é 数据"}


class TestReadProperties:
    def test_reads_file(self, tmp_path: Path):
        path = tmp_path / "server.properties"
        path.write_text("num.partitions=3\n", encoding="utf-8")
        assert read_properties(path) == {"num.partitions": "3"}

    def test_missing_file(self, tmp_path: Path):
        path = tmp_path / "nope.properties"
        with pytest.raises(ConfigError, match="cannot read config file .*nope.properties"):
            read_properties(path)

    def test_directory(self, tmp_path: Path):
        with pytest.raises(ConfigError, match="cannot read config file"):
            read_properties(tmp_path)

    def test_format_error_names_the_file(self, tmp_path: Path):
        path = tmp_path / "server.properties"
        path.write_text("a=1\nb=\\u00\n")
        with pytest.raises(ConfigError, match=f"^{path}: line 2: malformed"):
            read_properties(path)

    def test_not_utf8(self, tmp_path: Path):
        path = tmp_path / "latin1.properties"
        path.write_bytes(b"name=\xe9t\xe9\n")
        with pytest.raises(ConfigError, match="not UTF-8"):
            read_properties(path)


# --------------------------------------------------------------------------- defaults


class TestDefaults:
    def test_empty_file_gives_the_dataclass_defaults(self):
        config = build()
        assert config.adapter == AdapterConfig()
        expected = StorageConfig(data_dir=Path("~/.rmqkafka/data").expanduser().absolute())
        assert config.storage == expected
        assert config.unknown_keys == ()
        assert config.warnings == ()

    def test_data_dir_from_environment(self, tmp_path: Path):
        config = build(environ={DATA_DIR_ENV: str(tmp_path / "env-dir")})
        assert config.storage.data_dir == tmp_path / "env-dir"

    def test_empty_environment_variable_is_ignored(self):
        assert default_data_dir({DATA_DIR_ENV: ""}) == Path("~/.rmqkafka/data").expanduser()

    def test_environment_tilde_is_expanded(self):
        assert default_data_dir({DATA_DIR_ENV: "~/x"}) == Path("~/x").expanduser()

    def test_default_reads_os_environ(self, monkeypatch, tmp_path: Path):
        monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
        assert default_data_dir() == tmp_path
        assert build_config({}).storage.data_dir == tmp_path


# --------------------------------------------------------------------------- listeners


class TestListeners:
    def test_host_and_port(self):
        adapter = build("listeners=PLAINTEXT://10.1.2.3:19092").adapter
        assert (adapter.host, adapter.port) == ("10.1.2.3", 19092)

    def test_empty_host_means_all_interfaces(self):
        adapter = build("listeners=PLAINTEXT://:9092").adapter
        assert (adapter.host, adapter.port) == ("0.0.0.0", 9092)

    def test_hostname_ipv6_and_port_zero(self):
        assert build("listeners=PLAINTEXT://localhost:0").adapter.host == "localhost"
        adapter = build("listeners=PLAINTEXT://[::1]:9093").adapter
        assert (adapter.host, adapter.port) == ("::1", 9093)

    def test_listener_name_is_case_insensitive(self):
        assert build("listeners=plaintext://h:1").adapter.host == "h"

    def test_kafka_stock_kraft_file(self):
        text = """
            process.roles=broker,controller
            node.id=1
            controller.quorum.voters=1@localhost:9093
            listeners=PLAINTEXT://:9092,CONTROLLER://:9093
            inter.broker.listener.name=PLAINTEXT
            advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
            controller.listener.names=CONTROLLER
            listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
            num.network.threads=3
            log.dirs=/tmp/kraft-combined-logs
            num.partitions=1
            log.retention.hours=168
            log.segment.bytes=1073741824
            log.retention.check.interval.ms=300000
        """
        config = build(text)
        assert config.adapter == AdapterConfig(
            host="0.0.0.0", port=9092, advertised_host="localhost", advertised_port=9092, node_id=1
        )
        assert config.storage.data_dir == Path("/tmp/kraft-combined-logs")
        assert config.unknown_keys == (
            "controller.quorum.voters",
            "inter.broker.listener.name",
            "num.network.threads",
            "process.roles",
        )

    def test_several_client_listeners_the_first_is_primary(self):
        config = build_config(
            parse_properties(
                "listeners=INTERNAL://:9092,EXTERNAL://127.0.0.1:19092\n"
                "advertised.listeners=INTERNAL://broker:9092,EXTERNAL://localhost:19092\n"
                "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT\n"
            )
        )
        a = config.adapter
        assert (a.host, a.port, a.advertised_host, a.advertised_port) == ("0.0.0.0", 9092, "broker", 9092)
        assert a.extra_listeners == (ExtraListener("EXTERNAL", "127.0.0.1", 19092, "localhost", 19092),)

    def test_an_extra_listener_without_advertised_address_advertises_where_it_binds(self):
        config = build_config(parse_properties("listeners=PLAINTEXT://:9092,OTHER://:9093\nlistener.security.protocol.map=OTHER:PLAINTEXT"))
        assert config.adapter.extra_listeners == (ExtraListener("OTHER", "0.0.0.0", 9093, None, None),)

    def test_listener_names_must_differ(self):
        assert "its own name" in error_of("listeners=PLAINTEXT://:9092,PLAINTEXT://:9093")

    def test_a_tls_listener_needs_a_keystore(self):
        assert "ssl.keystore.location" in error_of("listeners=PLAINTEXT://:9092,SSL://:9093")

    def test_custom_name_mapped_to_plaintext(self):
        text = "listeners=CLIENT://h:1\nlistener.security.protocol.map=CLIENT:PLAINTEXT"
        assert build(text).adapter.host == "h"

    @pytest.mark.parametrize(
        "text, primary, extra",
        [
            ("listeners=SSL://h:9093\nssl.keystore.location=/k.pem", "SSL", None),
            ("listeners=SASL_PLAINTEXT://h:9093\n" + JAAS, "SASL_PLAINTEXT", None),
            ("listeners=CLIENT://h:1,B://h:2\nlistener.security.protocol.map=CLIENT:SSL,B:SASL_SSL\n"
             "ssl.keystore.location=/k.pem\n" + JAAS, "SSL", "SASL_SSL"),
        ],
    )
    def test_security_protocols(self, text, primary, extra):
        adapter = build(text).adapter
        assert adapter.security_protocol == primary
        assert [x.security_protocol for x in adapter.extra_listeners] == ([extra] if extra else [])

    def test_a_listener_name_without_a_protocol_is_refused(self):
        message = error_of("listeners=CLIENT://h:1")
        assert "listeners" in message and "no known security protocol (CLIENT)" in message

    @pytest.mark.parametrize(
        "value",
        [
            "127.0.0.1:9092",
            "PLAINTEXT://127.0.0.1",
            "PLAINTEXT://h:port",
            "PLAINTEXT://h:-1",
            "PLAINTEXT://::1:9092",
            "PLAINTEXT//h:1",
            "PLAINTEXT://h:65536",
        ],
    )
    def test_bad_listener_url(self, value):
        message = error_of(f"listeners={value}")
        assert "listeners" in message and repr(value) in message

    def test_empty_listeners(self):
        assert "no client listener" in error_of("listeners=")

    def test_only_controller_listeners(self):
        message = error_of("listeners=CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER")
        assert "no client listener" in message

    def test_bad_protocol_map_entry(self):
        text = "listeners=PLAINTEXT://h:1\nlistener.security.protocol.map=PLAINTEXT"
        message = error_of(text)
        assert "listener.security.protocol.map" in message and "'PLAINTEXT'" in message


class TestAdvertisedListeners:
    def test_advertised_host_and_port(self):
        text = "listeners=PLAINTEXT://:9092\nadvertised.listeners=PLAINTEXT://kafka.example:19092"
        adapter = build(text).adapter
        assert (adapter.advertised_host, adapter.advertised_port) == ("kafka.example", 19092)

    def test_without_listeners(self):
        adapter = build("advertised.listeners=PLAINTEXT://h:1").adapter
        assert (adapter.host, adapter.port) == ("127.0.0.1", 9092)
        assert (adapter.advertised_host, adapter.advertised_port) == ("h", 1)

    def test_empty_host_means_the_bound_host(self):
        adapter = build("advertised.listeners=PLAINTEXT://:9999").adapter
        assert (adapter.advertised_host, adapter.advertised_port) == (None, 9999)

    def test_empty_value_means_unset(self):
        adapter = build("advertised.listeners=").adapter
        assert (adapter.advertised_host, adapter.advertised_port) == (None, None)

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("advertised.listeners=PLAINTEXT://0.0.0.0:9092", "non-routable"),
            ("advertised.listeners=PLAINTEXT://[::]:9092", "non-routable"),
            ("advertised.listeners=PLAINTEXT://h:0", "port 0"),
            ("advertised.listeners=OTHER://h:1", "does not match"),
            ("advertised.listeners=PLAINTEXT://a:1,B://b:2", "does not match"),
            ("advertised.listeners=PLAINTEXT://a:1,PLAINTEXT://b:2", "advertised twice"),
            ("advertised.listeners=nonsense", "expected NAME://HOST:PORT"),
        ],
    )
    def test_errors(self, text, reason):
        message = error_of(text)
        assert "advertised.listeners" in message and reason in message


# --------------------------------------------------------------------------- other keys


class TestLogDirs:
    def test_log_dirs_first_entry_with_a_warning(self):
        config = build("log.dirs=/data/a, /data/b,/data/c")
        assert config.storage.data_dir == Path("/data/a")
        assert len(config.warnings) == 1
        assert "/data/b" in config.warnings[0] and "/data/c" in config.warnings[0]

    def test_log_dir(self):
        assert build("log.dir=/data/x").storage.data_dir == Path("/data/x")

    def test_log_dirs_beats_log_dir_and_both_are_known(self):
        config = build("log.dir=/data/x\nlog.dirs=/data/y")
        assert config.storage.data_dir == Path("/data/y")
        assert config.unknown_keys == ()

    def test_file_beats_environment(self, tmp_path: Path):
        config = build("log.dirs=/data/f", environ={DATA_DIR_ENV: str(tmp_path)})
        assert config.storage.data_dir == Path("/data/f")

    def test_tilde_and_relative_paths(self, monkeypatch, tmp_path: Path):
        monkeypatch.chdir(tmp_path)
        assert build("log.dirs=~/k").storage.data_dir == Path("~/k").expanduser()
        assert build("log.dirs=rel/d").storage.data_dir == tmp_path / "rel" / "d"

    @pytest.mark.parametrize("key", ["log.dirs", "log.dir"])
    def test_empty(self, key):
        message = error_of(f"{key}= , ")
        assert key in message and "no directory" in message


INT_KEYS = {
    "num.partitions": ("adapter", "num_partitions"),
    "message.max.bytes": ("adapter", "message_max_bytes"),
    "socket.request.max.bytes": ("adapter", "socket_request_max_bytes"),
    "node.id": ("adapter", "node_id"),
    "broker.id": ("adapter", "node_id"),
    "log.segment.bytes": ("storage", "segment_bytes"),
    "log.retention.check.interval.ms": ("storage", "retention_check_interval_ms"),
    "log.flush.interval.ms": ("storage", "flush_interval_ms"),
    "log.retention.bytes": ("storage", "retention_bytes"),
    "log.retention.ms": ("storage", "retention_ms"),
}


class TestIntegers:
    @pytest.mark.parametrize("key", sorted(INT_KEYS))
    def test_value_is_used(self, key):
        layer, field = INT_KEYS[key]
        value = 4242 if key != "log.segment.bytes" else 4_242_424  # Kafka's minimum is 1 MiB
        config = build(f"{key}=+{value}")
        assert getattr(getattr(config, layer), field) == value

    @pytest.mark.parametrize("key", sorted(INT_KEYS))
    @pytest.mark.parametrize("value", ["abc", "1.5", "1_000", "0x10", "12abc", "1e3", "٣"])
    def test_non_integer(self, key, value):
        message = error_of(f"{key}={value}")
        assert key in message and repr(value) in message and "expected an integer" in message

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("num.partitions", "0"),
            ("message.max.bytes", "-1"),
            ("socket.request.max.bytes", "-5"),
            ("log.segment.bytes", "0"),
            ("log.segment.bytes", "-1"),
            ("log.retention.check.interval.ms", "0"),
            ("log.flush.interval.ms", "0"),
            ("log.retention.bytes", "-2"),
            ("log.retention.ms", "-2"),
            ("log.retention.minutes", "-2"),
            ("log.retention.hours", "-100"),
            ("node.id", "-1"),
            ("broker.id", "-1"),
        ],
    )
    def test_out_of_range(self, key, value):
        message = error_of(f"{key}={value}")
        assert key in message and repr(value) in message and "must be in [" in message

    def test_error_names_the_file(self, tmp_path: Path):
        path = tmp_path / "server.properties"
        path.write_text("num.partitions=many\n")
        with pytest.raises(ConfigError) as info:
            load_config(path, environ=NO_ENV)
        assert str(info.value).startswith(f"{path}: ")
        assert "num.partitions" in str(info.value) and "'many'" in str(info.value)


class TestRetention:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("", 168 * 3_600_000),
            ("log.retention.hours=2", 2 * 3_600_000),
            ("log.retention.minutes=3", 3 * 60_000),
            ("log.retention.ms=1234", 1234),
            ("log.retention.hours=2\nlog.retention.minutes=3", 3 * 60_000),
            ("log.retention.hours=2\nlog.retention.minutes=3\nlog.retention.ms=5", 5),
            ("log.retention.hours=-1", None),
            ("log.retention.minutes=-1\nlog.retention.hours=5", None),
            ("log.retention.ms=-1\nlog.retention.minutes=5", None),
            ("log.retention.ms=0", 0),
        ],
    )
    def test_time_precedence(self, text, expected):
        assert build(text).storage.retention_ms == expected

    @pytest.mark.parametrize(("value", "expected"), [("-1", None), ("0", 0), ("1048576", 1048576)])
    def test_bytes(self, value, expected):
        assert build(f"log.retention.bytes={value}").storage.retention_bytes == expected


class TestNodeId:
    def test_broker_id_alone(self):
        assert build("broker.id=7").adapter.node_id == 7

    def test_both_agree(self):
        assert build("broker.id=7\nnode.id=7").adapter.node_id == 7

    def test_both_differ(self):
        message = error_of("broker.id=7\nnode.id=8")
        assert "broker.id" in message and "'7'" in message and "node.id=8" in message


class TestBooleans:
    @pytest.mark.parametrize(
        ("value", "expected"), [("true", True), ("FALSE", False), ("True", True)]
    )
    def test_auto_create(self, value, expected):
        assert build(f"auto.create.topics.enable={value}").adapter.auto_create_topics is expected

    @pytest.mark.parametrize("value", ["yes", "1", "", "on"])
    def test_bad(self, value):
        message = error_of(f"auto.create.topics.enable={value}")
        assert "auto.create.topics.enable" in message and repr(value) in message


class TestCompressionType:
    @pytest.mark.parametrize("value", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
    def test_values(self, value):
        assert build(f"compression.type={value}").adapter.compression_type == value

    def test_default_is_producer(self):
        assert build("").adapter.compression_type == "producer"

    @pytest.mark.parametrize("value", ["none", "GZIP", ""])
    def test_bad(self, value):
        message = error_of(f"compression.type={value}")
        assert "compression.type" in message and repr(value) in message


class TestFlushPolicy:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("", "async"),
            ("flush.policy=sync", "sync"),
            ("flush.policy=ASYNC", "async"),
            ("flushDiskType=SYNC_FLUSH", "sync"),
            ("flushDiskType=ASYNC_FLUSH", "async"),
            ("flush.policy=sync\nflushDiskType=SYNC_FLUSH", "sync"),
        ],
    )
    def test_values(self, text, expected):
        assert build(text).storage.flush == expected

    @pytest.mark.parametrize(
        ("text", "key", "value"),
        [
            ("flush.policy=fsync", "flush.policy", "fsync"),
            ("flush.policy=", "flush.policy", ""),
            ("flushDiskType=SYNC", "flushDiskType", "SYNC"),
            ("flush.policy=async\nflushDiskType=SYNC_FLUSH", "flushDiskType", "SYNC_FLUSH"),
        ],
    )
    def test_errors(self, text, key, value):
        message = error_of(text)
        assert key in message and repr(value) in message


# --------------------------------------------------------------------------- overrides


class TestOverrides:
    FILE = "listeners=PLAINTEXT://10.0.0.1:9000\nlog.dirs=/file/dir\nflush.policy=sync\n"

    def test_every_override_beats_the_file(self, tmp_path: Path):
        config = build(self.FILE, host="127.0.0.2", port=0, data_dir=tmp_path, flush="async")
        assert (config.adapter.host, config.adapter.port) == ("127.0.0.2", 0)
        assert config.storage.data_dir == tmp_path
        assert config.storage.flush == "async"

    def test_file_used_where_not_overridden(self):
        config = build(self.FILE, port=1234)
        assert (config.adapter.host, config.adapter.port) == ("10.0.0.1", 1234)
        assert config.storage.data_dir == Path("/file/dir")
        assert config.storage.flush == "sync"

    def test_override_beats_environment(self, tmp_path: Path):
        config = build(data_dir=tmp_path / "cli", environ={DATA_DIR_ENV: str(tmp_path / "env")})
        assert config.storage.data_dir == tmp_path / "cli"

    def test_data_dir_override_is_expanded_and_absolute(self, monkeypatch, tmp_path: Path):
        monkeypatch.chdir(tmp_path)
        assert build(data_dir="d").storage.data_dir == tmp_path / "d"
        assert build(data_dir="~/d").storage.data_dir == Path("~/d").expanduser()

    def test_empty_host_means_all_interfaces(self):
        assert build(host="").adapter.host == "0.0.0.0"

    @pytest.mark.parametrize("port", [-1, 65536])
    def test_bad_port(self, port):
        message = error_of(port=port)
        assert "--port" in message and str(port) in message

    def test_bad_flush(self):
        message = error_of(flush="fast")
        assert "--flush" in message and "'fast'" in message

    def test_empty_data_dir(self):
        assert "--data-dir" in error_of(data_dir="")

    def test_overrides_do_not_hide_file_errors(self):
        message = error_of("listeners=junk", host="h", port=1)
        assert "listeners" in message and "'junk'" in message

    def test_load_config_without_a_file(self, tmp_path: Path):
        config = load_config(None, port=5, data_dir=tmp_path, environ=NO_ENV)
        assert config.adapter.port == 5 and config.storage.data_dir == tmp_path


class TestUnknownKeys:
    def test_collected_and_sorted(self):
        config = build("zeta=1\nnum.partitions=2\nalpha=3\nlog.flush.interval.messages=9")
        assert config.unknown_keys == ("alpha", "log.flush.interval.messages", "zeta")
        assert config.adapter.num_partitions == 2

    def test_unknown_values_are_not_validated(self):
        assert build("num.network.threads=lots").unknown_keys == ("num.network.threads",)


class TestGroupSettings:
    def test_group_keys_reach_the_adapter_config(self):
        config = build_config(
            parse_properties(
                "group.initial.rebalance.delay.ms=3000\n"
                "group.min.session.timeout.ms=1000\n"
                "group.max.session.timeout.ms=60000\n"
                "offset.metadata.max.bytes=100\n"
            )
        )
        assert config.adapter.group_initial_rebalance_delay_ms == 3000
        assert config.adapter.group_min_session_timeout_ms == 1000
        assert config.adapter.group_max_session_timeout_ms == 60000
        assert config.adapter.offset_metadata_max_bytes == 100
        assert config.unknown_keys == ()

    def test_defaults_suit_test_suites(self):
        config = build_config(parse_properties(""))
        assert config.adapter.group_initial_rebalance_delay_ms == 0
        assert config.adapter.group_min_session_timeout_ms == 6000

    def test_negative_delay_is_refused(self):
        with pytest.raises(ConfigError, match="group.initial.rebalance.delay.ms"):
            build_config(parse_properties("group.initial.rebalance.delay.ms=-1\n"))


class TestShareGroupSettings:
    def test_share_keys_reach_the_adapter_config(self):
        config = build("group.share.session.timeout.ms=50000\ngroup.share.heartbeat.interval.ms=6000\n"
                       "group.share.min.session.timeout.ms=40000\ngroup.share.max.heartbeat.interval.ms=20000\n"
                       "group.share.max.size=7\n")
        adapter = config.adapter
        assert (adapter.group_share_session_timeout_ms, adapter.group_share_heartbeat_interval_ms) == (50_000, 6000)
        assert (adapter.group_share_min_session_timeout_ms, adapter.group_share_max_heartbeat_interval_ms) == (
            40_000, 20_000)
        assert adapter.group_share_max_size == 7
        assert config.unknown_keys == ()

    def test_defaults_are_kafkas(self):
        adapter = build().adapter
        assert (adapter.group_share_session_timeout_ms, adapter.group_share_min_session_timeout_ms,
                adapter.group_share_max_session_timeout_ms) == (45_000, 45_000, 60_000)
        assert (adapter.group_share_heartbeat_interval_ms, adapter.group_share_min_heartbeat_interval_ms,
                adapter.group_share_max_heartbeat_interval_ms) == (5000, 5000, 15_000)
        assert adapter.group_share_max_size == 200

    @pytest.mark.parametrize(("text", "message"), [
        ("group.share.session.timeout.ms=30000\n",
         "must be between group.share.min.session.timeout.ms (45000) and group.share.max.session.timeout.ms (60000)"),
        ("group.share.max.heartbeat.interval.ms=4000\n",
         "must be greater than or equal to group.share.min.heartbeat.interval.ms"),
        ("group.share.heartbeat.interval.ms=45000\ngroup.share.max.heartbeat.interval.ms=50000\n",
         "must be less than group.share.session.timeout.ms"),
        ("group.share.max.size=1001\n", "must be in [1, 1000]"),
    ])
    def test_kafkas_relations_are_checked(self, text, message):
        assert message in error_of(text)


class TestTransactionSettings:
    def test_transaction_keys_reach_the_adapter_config(self):
        config = build_config(parse_properties(
            "transaction.max.timeout.ms=5000\ntransactional.id.expiration.ms=60000\n"))
        assert config.adapter.transaction_max_timeout_ms == 5000
        assert config.adapter.transactional_id_expiration_ms == 60000
        assert config.unknown_keys == ()

    def test_defaults_are_kafkas(self):
        config = build_config(parse_properties(""))
        assert config.adapter.transaction_max_timeout_ms == 900_000
        assert config.adapter.transactional_id_expiration_ms == 604_800_000


# --------------------------------------------------------------------------- listener security


class TestListenerSecurity:
    TLS = "ssl.keystore.location=/k.pem\nssl.truststore.location=/ca.pem\n"

    def listener(self, text: str, name: str):
        config = build(text)
        return next(x for x in config.adapter.security.listeners if x.name == name), config

    def test_broker_wide_ssl_client_auth_does_not_apply_to_sasl_ssl(self):
        # KIP-684: only listener.name.<name>.ssl.client.auth asks SASL_SSL clients for certificates
        text = "listeners=SASL_SSL://:9093,SSL://:9094\nssl.client.auth=required\n" + self.TLS + JAAS
        sasl_ssl, config = self.listener(text, "SASL_SSL")
        ssl_listener, _ = self.listener(text, "SSL")
        assert sasl_ssl.tls.client_auth == "none"
        assert ssl_listener.tls.client_auth == "required"
        assert any("applied only to SSL listeners" in w for w in config.warnings)
        sasl_ssl, config = self.listener(text + "listener.name.sasl_ssl.ssl.client.auth=requested\n", "SASL_SSL")
        assert sasl_ssl.tls.client_auth == "requested"
        assert config.warnings == ()

    def test_a_listener_key_wins_over_the_broker_wide_one(self):
        text = ("listeners=SASL_SSL://:9093,OTHER://:9094\nlistener.security.protocol.map=OTHER:SASL_PLAINTEXT\n"
                + self.TLS + JAAS + "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n"
                "listener.name.sasl_ssl.ssl.keystore.location=/own.pem\n"
                "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512\n"
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=x required user_b=\"pb\";\n"
                "listener.name.sasl_ssl.ssl.enabled.protocols=TLSv1.3\n"
                "connections.max.reauth.ms=5000\n"
                "listener.name.other.plain.connections.max.reauth.ms=700\n")
        own, config = self.listener(text, "SASL_SSL")
        other, _ = self.listener(text, "OTHER")
        assert (own.tls.keystore_location, own.tls.min_version) == ("/own.pem", "TLSv1.3")
        assert own.sasl_mechanisms == ("SCRAM-SHA-512",)
        assert own.users_of("SCRAM-SHA-512") == {"b": "pb"}
        assert own.reauth_ms("SCRAM-SHA-512") == 5000
        assert other.sasl_mechanisms == ("PLAIN", "SCRAM-SHA-256")
        assert other.users_of("PLAIN") == {"a": "pa"}  # the broker-wide sasl.jaas.config
        assert (other.reauth_ms("PLAIN"), other.reauth_ms("SCRAM-SHA-256")) == (700, 5000)
        assert config.unknown_keys == ()
        assert dict(config.adapter.security.users) == {"a": "pa", "b": "pb"}

    def test_listener_names_in_keys_are_case_insensitive_and_kafkas_spelling_wins(self):
        text = ("listeners=SASL_PLAINTEXT://:9093\n" + JAAS + "listener.name.SASL_PLAINTEXT.sasl.enabled.mechanisms=PLAIN\n")
        assert self.listener(text, "SASL_PLAINTEXT")[0].sasl_mechanisms == ("PLAIN",)
        both = text + "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256\n"
        assert self.listener(both, "SASL_PLAINTEXT")[0].sasl_mechanisms == ("SCRAM-SHA-256",)

    def test_errors_name_the_listener_key(self):
        text = "listeners=SSL://:9093\n" + self.TLS + "listener.name.ssl.ssl.client.auth=always\n"
        assert "for listener.name.ssl.ssl.client.auth" in error_of(text)

    def test_a_sasl_listener_without_users_refuses_to_start(self):
        message = error_of("listeners=SASL_PLAINTEXT://:9092")
        assert "listener SASL_PLAINTEXT" in message
        assert "listener.name.sasl_plaintext.plain.sasl.jaas.config" in message
        assert "\n" not in message

    def test_a_scram_listener_with_a_jaas_config_and_no_users_starts_as_in_kafka(self):
        text = ("listeners=SASL_PLAINTEXT://:9092\nsasl.enabled.mechanisms=SCRAM-SHA-256\n"
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
                "org.apache.kafka.common.security.scram.ScramLoginModule required;\n")
        listener, config = self.listener(text, "SASL_PLAINTEXT")
        assert listener.users_of("SCRAM-SHA-256") == {}
        assert config.warnings == ()

    def test_a_plain_jaas_config_without_users_starts_with_a_warning(self):
        _, config = self.listener("listeners=SASL_PLAINTEXT://:9092\nsasl.jaas.config=x required;\n", "SASL_PLAINTEXT")
        assert any("every PLAIN login will fail" in w for w in config.warnings)

    def test_failed_authentication_delay_and_reauthentication(self):
        security = build("connection.failed.authentication.delay.ms=0\nconnections.max.reauth.ms=1500").adapter.security
        assert (security.failed_authentication_delay_ms, security.connections_max_reauth_ms) == (0, 1500)
        assert build().adapter.security.failed_authentication_delay_ms == 100
        assert "must be in [0, 2147483647]" in error_of("connection.failed.authentication.delay.ms=-1")
        message = error_of("connection.failed.authentication.delay.ms=600000")
        assert "less than connections.max.idle.ms" in message
