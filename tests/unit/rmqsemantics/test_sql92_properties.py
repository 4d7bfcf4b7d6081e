"""Property tests: random expressions and records.

* Random boolean combinations of simple comparisons, written out as text with random
  spelling, against an independent three-valued evaluator written here.
* Random expressions of the whole grammar: the compiled matcher agrees with the reference
  interpreter (a transcription of RocketMQ's evaluate methods) on random records, and the
  canonical text parses back to the same tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rmqkafka.rmqsemantics.filters import ExpressionError, compile_filter
from rmqkafka.rmqsemantics.filters.sql92 import parse, to_text
from rmqkafka.rmqsemantics.filters.sql92_eval import compile_matcher, interpret

# --------------------------------------------------------------------------- Kleene logic


@dataclass(frozen=True)
class Atom:
    """``p0 = 'x'``: true with p0 = 'x', false with p0 = 'y', null without p0; written the
    other way round (``'x' = p0``) it is false without p0, as RocketMQ's "=" has it."""

    name: str
    flipped: bool


@dataclass(frozen=True)
class Op:
    op: str  # AND, OR, NOT
    args: tuple


def kleene(tree, values: dict[str, bool | None]) -> bool | None:
    if isinstance(tree, Atom):
        value = values[tree.name]
        return False if value is None and tree.flipped else value
    if tree.op == "NOT":
        v = kleene(tree.args[0], values)
        return None if v is None else not v
    left, right = (kleene(arg, values) for arg in tree.args)
    if tree.op == "AND":
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if left is True or right is True:
        return True
    return None if left is None or right is None else False


_PRECEDENCE = {"OR": 1, "AND": 2}


def write(tree, draw, context: int = 0) -> str:
    """Text for ``tree``: random keyword case, parentheses where needed or at random."""
    def keyword(word: str) -> str:
        return draw(st.sampled_from([word, word.lower(), word.capitalize()]))

    if isinstance(tree, Atom):
        text = f"'x' = {tree.name}" if tree.flipped else draw(
            st.sampled_from([f"{tree.name} = 'x'", f"{tree.name}='x'"]))
        needs = context > 3
    elif tree.op == "NOT":
        text = f"{keyword('NOT')} ({write(tree.args[0], draw)})"
        needs = False
    else:
        level = _PRECEDENCE[tree.op]
        text = (f"{write(tree.args[0], draw, level)} {keyword(tree.op)} "
                f"{write(tree.args[1], draw, level + 1)}")
        needs = context > level
    if needs or draw(st.integers(0, 5)) == 0:
        text = f"({text})"
    return text


atoms = st.builds(Atom, st.sampled_from([f"p{i}" for i in range(4)]), st.booleans())
trees = st.recursive(
    atoms,
    lambda children: st.one_of(
        st.builds(lambda a: Op("NOT", (a,)), children),
        st.builds(lambda a, b: Op("AND", (a, b)), children, children),
        st.builds(lambda a, b: Op("OR", (a, b)), children, children),
    ),
    max_leaves=12,
)
truth_values = st.fixed_dictionaries({f"p{i}": st.sampled_from([True, False, None]) for i in range(4)})


@given(tree=trees, values=truth_values, data=st.data())
@settings(max_examples=400)
def test_boolean_combinations_follow_three_valued_logic(tree, values, data) -> None:
    text = write(tree, data.draw)
    record = {name: {True: "x", False: "y"}[v] for name, v in values.items() if v is not None}
    view = compile_filter("sql", text)
    assert view.matches(record) is (kleene(tree, values) is True), text
    assert compile_filter("sql", view.text).text == view.text


# --------------------------------------------------------------------------- whole grammar

PROPS = ("a", "b", "TAGS")
VALUES = ("x", "", "1", "5", "-2", "1.5", "NaN", "3000000000", "true", "abc", " 1", "it's", "xa")

literals = st.sampled_from(
    ["'x'", "''", "'1'", "'it''s'", "1", "5", "0", "2147483648", "1.5", ".5", "1e3", "TRUE",
     "FALSE", "NULL", "-1", "- -2", "+5", "-1.5"])
values_ = st.one_of(st.sampled_from(PROPS), literals)


@st.composite
def conditions(draw, depth: int = 0) -> str:
    choice = draw(st.integers(0, 13 if depth < 3 else 8))
    def v() -> str:
        return draw(values_)

    def op(*ops: str) -> str:
        return draw(st.sampled_from(ops))

    def string() -> str:
        return draw(st.sampled_from(["'x'", "''", "'a'", "'1'"]))

    if choice == 0:
        return f"{v()} {op('=', '<>')} {v()}"
    if choice == 1:
        return f"{v()} {op('>', '>=', '<', '<=')} {v()}"
    if choice == 2:
        return f"{v()} {op('BETWEEN', 'NOT BETWEEN')} {v()} AND {v()}"
    if choice == 3:
        items = ", ".join(draw(st.lists(st.sampled_from(["'x'", "'1'", "''", "'abc'"]), min_size=1, max_size=6)))
        return f"{draw(st.sampled_from(PROPS))} {op('IN', 'NOT IN')} ({items})"
    if choice == 4:
        return f"{v()} {op('', 'NOT ')}{op('CONTAINS', 'STARTSWITH', 'ENDSWITH')} {string()}"
    if choice == 5:
        return f"{v()} IS {op('', 'NOT ')}NULL"
    if choice == 6:
        return op("TRUE", "FALSE", "NULL", *PROPS)
    if choice == 7:
        return f"NOT {v()}"
    if choice == 8:
        return f"{v()} = {v()}"
    if choice in (9, 10):
        return f"{draw(conditions(depth + 1))} {op('AND', 'OR')} {draw(conditions(depth + 1))}"
    if choice == 11:
        return f"NOT ({draw(conditions(depth + 1))})"
    if choice == 12:
        return f"({draw(conditions(depth + 1))}) {op('=', '<>')} {op('TRUE', 'FALSE', *PROPS)}"
    return f"({draw(conditions(depth + 1))})"


records = st.dictionaries(st.sampled_from(PROPS), st.sampled_from(VALUES) | st.none(), max_size=3)


@pytest.mark.filterwarnings("error::SyntaxWarning")  # generated code must be clean
@given(text=conditions(), samples=st.lists(records, min_size=1, max_size=8))
@settings(max_examples=600)
def test_compiled_matcher_agrees_with_the_reference(text: str, samples) -> None:
    try:
        tree = parse(text)
    except ExpressionError:
        assume(False)
        return
    compiled, reference = compile_matcher(tree), interpret(tree)
    for record in samples:
        assert compiled(record) is reference(record), (text, record)
    canonical = to_text(tree)
    assert parse(canonical) == tree, (text, canonical)
    assert to_text(parse(canonical)) == canonical
