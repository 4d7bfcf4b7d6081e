"""Every API the broker advertises has a handler (an advertised API without one would make
clients' connections close), and every handler's API is advertised."""

from rmqkafka.adapter.codec.versions import ADVERTISED_VERSIONS
from rmqkafka.adapter.handlers import HANDLERS


def test_every_advertised_api_has_a_handler_and_vice_versa():
    assert set(HANDLERS) == set(ADVERTISED_VERSIONS)
