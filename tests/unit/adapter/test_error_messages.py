"""Kafka's default error messages, and where ``make`` puts them."""

from __future__ import annotations

import ast
import inspect

import kio.schema.errors
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse, DescribeConfigsResult
from kio.schema.describe_user_scram_credentials.v0.response import DescribeUserScramCredentialsResponse
from kio.schema.errors import ErrorCode

from rmqkafka.adapter.codec.entities import make
from rmqkafka.adapter.codec.error_messages import DEFAULT_MESSAGES, default_message


def kio_documented_messages() -> dict[int, str]:
    """kio's ErrorCode members with the docstring under each (Kafka's Errors.X.message())."""
    source = ast.parse(inspect.getsource(kio.schema.errors))
    enum = next(n for n in source.body if isinstance(n, ast.ClassDef) and n.name == "ErrorCode")
    documented = {}
    for node, following in zip(enum.body, enum.body[1:]):
        if (isinstance(node, ast.Assign) and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)):
            documented[int(getattr(ErrorCode, node.targets[0].id))] = following.value.value
    return documented


def test_the_table_holds_kafkas_message_for_every_error_code_kio_knows():
    assert {int(code): text for code, text in DEFAULT_MESSAGES.items()} == kio_documented_messages()
    assert default_message(ErrorCode.cluster_authorization_failed) == "Cluster authorization failed."
    assert default_message(ErrorCode.none) is None


def test_make_fills_the_default_message_of_an_error_without_one():
    refused = make(DescribeUserScramCredentialsResponse, throttle_time=0,
                   error_code=ErrorCode.cluster_authorization_failed, error_message=None, results=())
    assert refused.error_message == "Cluster authorization failed."
    nested = make(DescribeConfigsResponse, throttle_time=0, results=[
        dict(error_code=ErrorCode.topic_authorization_failed, error_message=None, resource_type=2,
             resource_name="t", configs=()),
        dict(error_code=ErrorCode.invalid_request, error_message="a specific reason", resource_type=2,
             resource_name="u", configs=()),
        dict(error_code=ErrorCode.none, error_message=None, resource_type=2, resource_name="v", configs=()),
    ])
    assert [r.error_message for r in nested.results] == ["Topic authorization failed.", "a specific reason", None]
    assert isinstance(nested.results[0], DescribeConfigsResult)


def test_make_cuts_a_message_to_what_a_legacy_string_holds():
    from kio.schema.alter_client_quotas.v0.response import AlterClientQuotasResponse as V0
    from kio.schema.alter_client_quotas.v1.response import AlterClientQuotasResponse as V1

    long = "é" * 20_000  # 40,000 UTF-8 bytes
    for cls, expected in [(V0, "é" * 16_383), (V1, long)]:
        response = make(cls, throttle_time=0, entries=[
            dict(error_code=ErrorCode.invalid_request, error_message=long, entity=())])
        assert response.entries[0].error_message == expected
