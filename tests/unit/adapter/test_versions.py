"""The advertised version table: exact values, and that kio can serve every version in it."""

from __future__ import annotations

import pytest

from kio.index import load_request_schema
from kio.index import load_response_schema

from rmqkafka.adapter.codec.versions import ADVERTISED_VERSIONS
from rmqkafka.adapter.codec.versions import REJECTED_VERSIONS
from rmqkafka.adapter.codec.versions import ApiKey
from rmqkafka.adapter.codec.versions import VersionRange
from rmqkafka.adapter.codec.versions import advertised_range
from rmqkafka.adapter.codec.versions import is_advertised
from rmqkafka.adapter.codec.versions import is_rejected
from rmqkafka.adapter.codec.versions import is_supported
from rmqkafka.adapter.codec.versions import supported_versions


def test_table_is_exactly_the_agreed_one() -> None:
    assert dict(ADVERTISED_VERSIONS) == {
        0: (0, 11),
        1: (4, 17),
        2: (1, 10),
        3: (0, 13),
        8: (2, 9),
        9: (1, 9),
        10: (0, 6),
        11: (0, 9),
        12: (0, 4),
        13: (0, 5),
        14: (0, 5),
        15: (0, 6),
        16: (0, 5),
        17: (0, 1),
        18: (0, 4),
        19: (2, 7),
        20: (1, 6),
        21: (0, 2),
        22: (0, 5),
        23: (2, 4),
        24: (0, 3),
        25: (0, 4),
        26: (0, 4),
        27: (1, 2),
        28: (0, 4),
        29: (1, 3),
        30: (1, 3),
        31: (1, 3),
        32: (1, 4),
        33: (0, 2),
        34: (1, 2),
        35: (1, 4),
        36: (0, 2),
        37: (0, 3),
        42: (0, 2),
        43: (0, 2),
        44: (0, 1),
        45: (0, 1),
        46: (0, 0),
        47: (0, 0),
        48: (0, 1),
        49: (0, 1),
        50: (0, 0),
        51: (0, 0),
        55: (0, 2),
        57: (0, 2),
        60: (0, 1),
        61: (0, 0),
        65: (0, 0),
        66: (0, 2),
        68: (0, 1),
        69: (0, 1),
        74: (0, 1),
        75: (0, 0),
        76: (1, 1),
        77: (1, 1),
        78: (1, 2),
        79: (1, 2),
        90: (0, 1),
        91: (0, 0),
        92: (0, 0),
    }
    assert {key: set(versions) for key, versions in REJECTED_VERSIONS.items()} == {
        0: {0, 1, 2}
    }


def test_table_is_read_only() -> None:
    with pytest.raises(TypeError):
        ADVERTISED_VERSIONS[99] = VersionRange(0, 0)  # type: ignore[index]
    with pytest.raises(TypeError):
        REJECTED_VERSIONS[1] = frozenset({4})  # type: ignore[index]


def test_every_table_key_has_a_name() -> None:
    assert set(ADVERTISED_VERSIONS) == set(ApiKey)
    assert all(isinstance(key, ApiKey) for key in ADVERTISED_VERSIONS)


def test_rejected_versions_are_advertised() -> None:
    for api_key, versions in REJECTED_VERSIONS.items():
        for version in versions:
            assert is_advertised(api_key, version)
            assert is_rejected(api_key, version)
            assert not is_supported(api_key, version)


def test_produce_range_and_rejections() -> None:
    assert advertised_range(ApiKey.PRODUCE) == VersionRange(min=0, max=11)
    assert supported_versions(ApiKey.PRODUCE) == tuple(range(3, 12))
    assert [is_supported(0, v) for v in (-1, 0, 2, 3, 11, 12)] == [
        False, False, False, True, True, False
    ]


def test_unknown_key() -> None:
    assert advertised_range(9999) is None
    assert supported_versions(9999) == ()
    assert not is_advertised(9999, 0)
    assert not is_supported(9999, 0)
    assert not is_rejected(9999, 0)


def test_supported_versions_are_the_range_minus_rejections() -> None:
    for api_key, (low, high) in ADVERTISED_VERSIONS.items():
        expected = [v for v in range(low, high + 1) if v not in REJECTED_VERSIONS.get(api_key, ())]
        assert list(supported_versions(api_key)) == expected
        assert not is_advertised(api_key, low - 1)
        assert not is_advertised(api_key, high + 1)


@pytest.mark.parametrize("api_key", sorted(ADVERTISED_VERSIONS))
def test_kio_has_schemas_for_every_supported_version(api_key: int) -> None:
    for version in supported_versions(api_key):
        request = load_request_schema(api_key, version)
        response = load_response_schema(api_key, version)
        assert request.__api_key__ == response.__api_key__ == api_key
        assert request.__version__ == response.__version__ == version
        # Request and response flexibility coincide, which the header rules rely on.
        assert request.__flexible__ == response.__flexible__


def test_kio_has_no_schema_for_rejected_produce_versions() -> None:
    # Why Produce v0-2 are answered by hand-written code in messages.py.
    from kio.index import UnknownEntity

    for version in REJECTED_VERSIONS[ApiKey.PRODUCE]:
        with pytest.raises(UnknownEntity):
            load_request_schema(ApiKey.PRODUCE, version)
