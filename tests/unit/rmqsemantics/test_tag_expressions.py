"""Tag expressions: RocketMQ's FilterAPI.buildSubscriptionData rules, and hash collisions."""

from __future__ import annotations

import pytest

from rmqkafka.rmqsemantics.filters import ExpressionError, compile_filter
from rmqkafka.rmqsemantics.filters.tags import parse_tags
from rmqkafka.storage.tag_code import java_string_hash, tag_code


@pytest.mark.parametrize("expression", ["*", "", None])
def test_star_empty_and_null_mean_every_record(expression: str | None) -> None:
    compiled = parse_tags(expression)
    assert compiled.matches_all and compiled.tags is None and compiled.codes is None
    assert compiled.text == "*"
    view = compile_filter("tags", expression)
    assert view.matches_code(0) and view.matches_code(12345)
    assert view.matches({}) and view.matches({"TAGS": "anything"})


@pytest.mark.parametrize(
    "expression",
    ["TagA || TagB", "TagA||TagB", "  TagA ||TagB  ", "TagA || || TagB", "|| TagA || TagB ||",
     "TagA || TagB || TagA", "\tTagA\x00||\x1fTagB\r\n"],
)
def test_split_trim_and_skip_empty_pieces(expression: str) -> None:
    compiled = parse_tags(expression)
    assert compiled.tags == {"TagA", "TagB"}
    assert compiled.codes == {java_string_hash("TagA"), java_string_hash("TagB")}
    assert compiled.text == "TagA || TagB"


def test_only_a_bare_star_means_everything() -> None:
    assert parse_tags(" * ").tags == {"*"}
    assert parse_tags("TagA || *").tags == {"TagA", "*"}
    assert not compile_filter("tags", " * ").matches({"TAGS": "TagA"})


def test_java_trim_is_not_unicode_strip() -> None:
    # String.trim removes chars <= U+0020 only; a no-break space stays part of the tag
    assert parse_tags("\u00a0TagA").tags == {"\u00a0TagA"}
    assert parse_tags("Tag A").tags == {"Tag A"}


def test_a_single_bar_is_part_of_a_tag() -> None:
    assert parse_tags("TagA|TagB").tags == {"TagA|TagB"}
    assert parse_tags("TagA|||TagB").tags == {"TagA", "|TagB"}


@pytest.mark.parametrize("expression", ["||", " || ", "  ", "|| ||", "\t"])
def test_an_expression_without_tags_is_an_error(expression: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_filter("tags", expression)
    assert str(info.value).startswith("invalid tag expression: it names no tag")


def test_hash_collision_is_resolved_by_the_exact_tag() -> None:
    assert java_string_hash("Aa") == java_string_hash("BB")
    view = compile_filter("tags", "Aa")
    code_of_bb = tag_code(b"BB")
    assert view.matches_code(code_of_bb)  # the consume queue cannot tell them apart...
    assert not view.matches({"TAGS": "BB"})  # ...the exact check does
    assert view.matches({"TAGS": "Aa"})
    both = compile_filter("tags", "Aa || BB")
    assert both.codes == {java_string_hash("Aa")}
    assert both.matches({"TAGS": "BB"}) and both.matches({"TAGS": "Aa"})


def test_codes_agree_with_the_consume_queue() -> None:
    for tag in ("TagA", "订单", "emoji 😀", "x" * 300):
        view = compile_filter("tags", tag)
        assert view.matches_code(tag_code(tag.encode()))
        assert view.matches({"TAGS": tag})


def test_records_without_a_tag_do_not_match_a_tag_list() -> None:
    view = compile_filter("tags", "TagA")
    assert not view.matches_code(tag_code(None))
    assert not view.matches({})
    assert not view.matches({"TAGS": None})
    assert not view.matches({"TAGS": ""})
    assert not view.matches({"tags": "TagA"})  # the header name is case-sensitive


def test_tags_are_case_sensitive() -> None:
    view = compile_filter("tags", "TagA")
    assert not view.matches({"TAGS": "taga"})
    assert not view.matches_code(java_string_hash("taga"))
