"""Evaluating a SQL92 syntax tree against a record's properties, with RocketMQ's semantics.

Two evaluators over the same tree:

* :func:`interpret` builds one closure per node, each a direct transcription of the
  ``evaluate`` method of RocketMQ's expression class for that node (LogicExpression,
  ComparisonExpression, UnaryExpression, UnaryInExpression, PropertyExpression,
  ConstantExpression). It is the specification, and the oracle the tests hold the compiler to.
* :func:`compile_matcher` generates one Python function per expression (``compile()``), with
  the comparisons specialised on what the parser knows (a property compared with a string,
  an integer, ...). This is what filters records; ``python -m bench.filter_expressions``
  measures it against the closures.

The semantics, from those classes:

* Values are Java objects: a property is a ``String`` or null (absent), see :mod:`.java`.
* Every condition has three values, true, false and null (unknown), and only true matches.
  AND is false if its left side is false (the right side is then not evaluated), else false
  if its right side is false, else null if either side is null, else true; OR likewise with
  true; NOT null is null. So ``NOT (a = 1)`` does not match a record without ``a``.
* ``x = y``: if only ``y`` is null the result is false, if only ``x`` is null it is null, if
  both are null it is true; otherwise the values are compared after conversion (a property
  compared with ``1`` is read with Integer.valueOf, with ``1.5`` with Double.valueOf, with
  TRUE with Boolean.valueOf, with ``'1'`` as a string). ``x <> y`` is ``NOT (x = y)``.
  The asymmetry is RocketMQ's: ``a <> 'x'`` is null without ``a``, ``'x' <> a`` is true.
* ``>``, ``>=``, ``<``, ``<=`` are null if either side is null. Two strings (two properties)
  are both read with Double.valueOf; a property and a number are converted as for ``=``.
  BETWEEN is ``x >= low AND x <= high``, NOT BETWEEN is ``x < low OR x > high``.
* IN / NOT IN are null without the property, else string membership (no number conversion).
* CONTAINS / STARTSWITH / ENDSWITH and their NOT forms are false without the property or
  with an empty search string, else the string test (or its negation). They are never null.
* IS NULL / IS NOT NULL test presence; they are never null.
* A conversion that fails (``a > 5`` with ``a = 'abc'``, ``a > 5`` with ``a = '1.5'``, ``a = 5``
  with ``a = '99999999999'``, ``TRUE = a``) is a Java exception in RocketMQ, which aborts the
  whole evaluation and counts as no match, even under an OR whose other side is true.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from . import java
from .java import (
    EvaluationAborted,
    compare,
    double_compare,
    negate,
    parse_boolean,
    parse_double,
)
from .sql92 import (
    And,
    Between,
    BoolCast,
    Compare,
    Const,
    In,
    IsNull,
    Match,
    Neg,
    Node,
    Not,
    Or,
    Prop,
)

Properties = Mapping[str, "str | None"]
Matcher = Callable[[Properties], bool]

_SIGN_TESTS: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _equal(lv: object, rv: object) -> bool | None:
    """ComparisonExpression.doCreateEqual's evaluate, on evaluated operands."""
    if lv is None:
        return True if rv is None else None
    if rv is None:
        return False
    return compare(lv, rv) == 0


def _relate(lv: object, rv: object, test: Callable[[int], bool]) -> bool | None:
    """ComparisonExpression.evaluate for >, >=, <, <= once the left side is known non-null."""
    if rv is None:
        return None
    if type(lv) is str and type(rv) is str:
        return test(double_compare(parse_double(lv), parse_double(rv)))
    return test(compare(lv, rv))


def _match_text(value: object, op: str, text: str) -> bool:
    if op == "CONTAINS":
        return text in value  # type: ignore[operator]
    if op == "STARTSWITH":
        return value.startswith(text)  # type: ignore[attr-defined]
    return value.endswith(text)  # type: ignore[attr-defined]


def expand(node: Node) -> Node:
    """BETWEEN and <> as RocketMQ builds them (createBetween, createNotBetween, createNotEqual)."""
    if isinstance(node, Between):
        x, low, high = node.operand, node.low, node.high
        if node.negated:
            return Or(Compare("<", x, low), Compare(">", x, high))
        return And(Compare(">=", x, low), Compare("<=", x, high))
    if isinstance(node, Compare) and node.op == "<>":
        return Not(Compare("=", node.left, node.right))
    return node


# --------------------------------------------------------------------------- the specification


def interpret(tree: Node) -> Matcher:
    """A matcher built from one closure per node (RocketMQ's evaluate methods, one for one)."""
    evaluate = _closure(tree)

    def matches(properties: Properties) -> bool:
        try:
            return evaluate(properties) is True
        except EvaluationAborted:  # ExpressionMessageFilter.isMatchedByCommitLog: no match
            return False

    return matches


def _closure(node: Node) -> Callable[[Properties], Any]:
    node = expand(node)
    if isinstance(node, Prop):
        name = node.name
        return lambda p: p.get(name)
    if isinstance(node, Const):
        value = node.value
        return lambda p: value
    if isinstance(node, Neg):
        operand = _closure(node.operand)
        return lambda p: negate(operand(p))
    if isinstance(node, BoolCast):
        prop = _closure(node.operand)

        def boolean_cast(p: Properties) -> bool | None:
            value = prop(p)
            if value is None:
                return None
            return value if type(value) is bool else False

        return boolean_cast
    if isinstance(node, Not):
        operand = _closure(node.operand)

        def not_(p: Properties) -> bool | None:
            value = operand(p)
            return None if value is None else not value

        return not_
    if isinstance(node, And):
        left, right = _closure(node.left), _closure(node.right)

        def and_(p: Properties) -> bool | None:
            lv = left(p)
            if lv is False:
                return False
            rv = right(p)
            if rv is False:
                return False
            return None if lv is None or rv is None else True

        return and_
    if isinstance(node, Or):
        left, right = _closure(node.left), _closure(node.right)

        def or_(p: Properties) -> bool | None:
            lv = left(p)
            if lv is True:
                return True
            rv = right(p)
            if rv is True:
                return True
            return None if lv is None or rv is None else False

        return or_
    if isinstance(node, Compare):
        left, right = _closure(node.left), _closure(node.right)
        if node.op == "=":
            return lambda p: _equal(left(p), right(p))
        test = _SIGN_TESTS[node.op]

        def relate(p: Properties) -> bool | None:
            lv = left(p)
            if lv is None:
                return None
            return _relate(lv, right(p), test)

        return relate
    if isinstance(node, In):
        prop = _closure(node.operand)
        values, negated = frozenset(node.values), node.negated

        def in_(p: Properties) -> bool | None:
            value = prop(p)
            if value is None or type(value) is not str:
                return None
            return (value in values) != negated

        return in_
    if isinstance(node, Match):
        if not node.text:
            return lambda p: False
        operand, op, text, negated = _closure(node.operand), node.op, node.text, node.negated

        def match(p: Properties) -> bool:
            value = operand(p)
            if type(value) is not str:
                return False
            return _match_text(value, op, text) != negated

        return match
    if isinstance(node, IsNull):
        operand, negated = _closure(node.operand), node.negated
        return lambda p: (operand(p) is None) != negated
    raise TypeError(f"not a SQL92 node: {node!r}")


# --------------------------------------------------------------------------- the compiler


def compile_matcher(tree: Node) -> Matcher:
    """A matcher generated as one Python function; same results as :func:`interpret`."""
    return _compile(tree)[0]


def generated_source(tree: Node) -> str:
    """The Python source :func:`compile_matcher` generates (for reading and debugging)."""
    return _compile(tree)[1]


_CONVERTERS = {"int": "_pint", "long": "_plong", "double": "_pdbl"}
_HELPERS: dict[str, Any] = {
    "_Aborted": EvaluationAborted,
    "_pint": java.parse_int,
    "_plong": java.parse_long,
    "_pdbl": java.parse_double,
    "_pbool": parse_boolean,
    "_eq": _equal,
    "_rel": _relate,
    "_neg": negate,
    "_mt": _match_text,
    **{f"_{name}": test for name, test in zip(("gt", "ge", "lt", "le"), _SIGN_TESTS.values())},
}
_TEST_NAMES = {">": "_gt", ">=": "_ge", "<": "_lt", "<=": "_le"}


def _abort() -> None:
    raise EvaluationAborted("ClassCastException: Boolean is not a String")


_HELPERS["_abort"] = _abort


class _Code:
    """One node's generated code in three forms, each evaluating exactly what RocketMQ would.

    ``val`` is the node's value (a Java value, or True/False/None for a condition); ``truth``
    is truthy exactly when the value is True; ``falsity`` exactly when it is False.
    ``nullable``: the value can be None; ``aborts``: evaluating it can raise EvaluationAborted.
    """

    __slots__ = ("aborts", "falsity", "nullable", "truth", "val")

    def __init__(self, val: str, truth: str | None = None, falsity: str | None = None,
                 nullable: bool = True, aborts: bool = True) -> None:
        self.val = val
        self.truth = truth if truth is not None else f"({val}) is True"
        self.falsity = falsity if falsity is not None else f"({val}) is False"
        self.nullable = nullable
        self.aborts = aborts


class _Generator:
    def __init__(self) -> None:
        self.namespace: dict[str, Any] = dict(_HELPERS)
        self.temps = 0
        self.uses_properties = False

    def temp(self) -> str:
        self.temps += 1
        return f"_t{self.temps}"

    def constant(self, value: object) -> str:
        name = f"_c{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def prop(self, node: Prop) -> str:
        self.uses_properties = True
        return f"g({node.name!r})"

    def literal(self, const: Const) -> str:
        """A Python expression for a constant, keeping its Java class."""
        if const.kind in ("null", "bool", "string"):
            return repr(const.value)
        return self.constant(const.value)

    @staticmethod
    def number(const: Const) -> str:
        """A plain Python literal for a numeric constant, where its Java class is known."""
        return repr(float(const.value)) if const.kind == "double" else repr(int(const.value))  # type: ignore[arg-type]

    # -- nodes

    def code(self, node: Node) -> _Code:
        if isinstance(node, Between):
            special = _specialised_between(node)
            if special is not None:
                return self.between(special)
        node = _fold(expand(node))
        if isinstance(node, Prop):
            return _Code(self.prop(node), aborts=False)
        if isinstance(node, Const):
            text = self.literal(node)
            if node.kind in ("null", "bool"):
                return _Code(text, repr(node.value is True), repr(node.value is False),
                             nullable=node.kind == "null", aborts=False)
            return _Code(text, nullable=False, aborts=False)
        if isinstance(node, Neg):  # what _fold leaves: the negation of a condition, always null
            operand = self.code(node.operand)
            return _Code(f"_neg({operand.val})", aborts=operand.aborts)
        if isinstance(node, BoolCast):
            prop = self.prop(node.operand)
            return _Code(f"(None if {prop} is None else False)", "False", f"{prop} is not None",
                         aborts=False)
        if isinstance(node, Not):
            x = self.code(node.operand)
            t = self.temp()
            return _Code(f"(None if ({t} := {x.val}) is None else not {t})", x.falsity, x.truth,
                         nullable=x.nullable, aborts=x.aborts)
        if isinstance(node, And):
            return self.and_(self.code(node.left), self.code(node.right))
        if isinstance(node, Or):
            return self.or_(self.code(node.left), self.code(node.right))
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, In):
            prop, t = self.prop(node.operand), self.temp()
            values = "{" + ", ".join(repr(v) for v in node.values) + ",}"  # a frozenset constant
            member, absent = (f"{t} in {values}", f"{t} not in {values}")
            if node.negated:
                member, absent = absent, member
            present = f"({t} := {prop}) is not None"
            truth = f"({present} and {member})"
            falsity = f"({present} and {absent})"
            if not node.negated:  # None is in no set of strings
                truth = f"({prop} in {values})"
            else:
                falsity = f"({prop} in {values})"
            return _Code(f"(None if ({t} := {prop}) is None else {member})", truth, falsity,
                         aborts=False)
        if isinstance(node, Match):
            return self.match(node)
        if isinstance(node, IsNull):
            operand = _fold(node.operand)
            if isinstance(operand, Const):
                result = (operand.kind == "null") != node.negated
                return _Code(repr(result), repr(result), repr(not result), nullable=False,
                             aborts=False)
            x = self.code(operand)
            test = f"({x.val}) is {'not ' if node.negated else ''}None"
            opposite = f"({x.val}) is {'' if node.negated else 'not '}None"
            return _Code(test, test, opposite, nullable=False, aborts=x.aborts)
        raise TypeError(f"not a SQL92 node: {node!r}")

    def final_truth(self, node: Node) -> str:
        """``truth`` for a node whose not being true makes the whole filter not match.

        There an exception and a false value end the same way, so AND need not evaluate its
        right side after a null left side (only to find whether that would raise).
        """
        if not isinstance(node, Between):
            node = _fold(expand(node))
            if isinstance(node, And):
                return f"({self.final_truth(node.left)} and {self.final_truth(node.right)})"
            if isinstance(node, Or):
                return f"({self.code(node.left).truth} or {self.final_truth(node.right)})"
        return self.code(node).truth

    def and_(self, left: _Code, right: _Code) -> _Code:
        a, b = self.temp(), self.temp()
        if left.nullable:
            val = (f"(False if ({a} := {left.val}) is False else (False if ({b} := {right.val}) "
                   f"is False else (None if {a} is None or {b} is None else True)))")
        else:
            val = f"({left.truth} and {right.val})"
        if left.nullable and right.aborts:  # a null left side still evaluates the right side
            truth = f"(({a} := {left.val}) is not False and {right.truth} and {a} is True)"
        else:
            truth = f"({left.truth} and {right.truth})"
        falsity = f"({left.falsity} or {right.falsity})"
        return _Code(val, truth, falsity, left.nullable or right.nullable, left.aborts or right.aborts)

    def or_(self, left: _Code, right: _Code) -> _Code:
        a, b = self.temp(), self.temp()
        if left.nullable:
            val = (f"(True if ({a} := {left.val}) is True else (True if ({b} := {right.val}) "
                   f"is True else (None if {a} is None or {b} is None else False)))")
        else:
            val = f"({left.truth} or {right.val})"
        truth = f"({left.truth} or {right.truth})"
        if left.nullable and right.aborts:
            falsity = f"(({a} := {left.val}) is not True and {right.falsity} and {a} is False)"
        else:
            falsity = f"({left.falsity} and {right.falsity})"
        return _Code(val, truth, falsity, left.nullable or right.nullable, left.aborts or right.aborts)

    def present(self, prop: Prop, body: str, t: str, null_value: str = "None") -> _Code:
        """A test on a property's value ``t``: ``null_value`` without the property."""
        fetch = f"({t} := {self.prop(prop)})"
        val = f"({null_value} if {fetch} is None else {body})"
        if null_value == "None":
            return _Code(val, f"({fetch} is not None and {body})",
                         f"({fetch} is not None and not {body})")
        return _Code(val, f"({fetch} is not None and {body})", f"({fetch} is None or not {body})",
                     nullable=False)

    def compare(self, node: Compare) -> _Code:
        left, right, op = node.left, node.right, node.op
        t = self.temp()
        numeric = ("int", "long", "double")
        if isinstance(left, Prop) and isinstance(right, Const) and right.kind != "null":
            kind = right.kind
            if op == "=" and kind == "string":
                test = f"{t} == {right.value!r}"
                code = self.present(left, test, t)
                code.truth = f"({self.prop(left)} == {right.value!r})"
                code.aborts = False
                return code
            if op == "=" and kind == "bool":
                code = self.present(left, f"(_pbool({t}) is {right.value!r})", t)
                code.aborts = False
                return code
            if kind in numeric:
                value = self.number(right)
                x = self.temp()
                converted = f"({x} := {_CONVERTERS[kind]}({t}))"
                py_op = "==" if op == "=" else op
                test = f"({converted} {py_op} {value})"
                if kind == "double" and op in (">", ">="):  # Double.compare puts NaN on top
                    test = f"({test} or {x} != {x})"
                return self.present(left, test, t)
        if isinstance(left, Const) and isinstance(right, Prop) and left.kind != "null":
            kind = left.kind
            if op == "=":  # a null right side makes "=" false, not null
                if kind == "string":
                    test = f"({self.prop(right)} == {left.value!r})"
                    return _Code(test, test, f"({self.prop(right)} != {left.value!r})",
                                 nullable=False, aborts=False)
                if kind == "bool":  # RocketMQ casts the Boolean to String: ClassCastException
                    return _Code(f"(False if {self.prop(right)} is None else _abort())",
                                 nullable=False)
                if kind in numeric:
                    value = self.number(left)
                    return self.present(right, f"({value} == {_CONVERTERS[kind]}({t}))", t, "False")
            elif kind in numeric:
                value = self.number(left)
                x = self.temp()
                test = f"({value} {op} ({x} := {_CONVERTERS[kind]}({t})))"
                if kind == "double" and op in ("<", "<="):
                    test = f"({test} or {x} != {x})"
                return self.present(right, test, t)
        lv, rv = self.code(left), self.code(right)
        if op == "=":
            return _Code(f"_eq({lv.val}, {rv.val})")
        return _Code(f"(None if ({t} := {lv.val}) is None else _rel({t}, {rv.val}, "
                     f"{_TEST_NAMES[op]}))")

    def between(self, node: Between) -> _Code:
        low, high = node.low, node.high
        assert isinstance(low, Const) and isinstance(high, Const) and isinstance(node.operand, Prop)
        t, x = self.temp(), self.temp()
        converted = f"({x} := {_CONVERTERS[low.kind]}({t}))"
        test = f"({self.number(low)} <= {converted} <= {self.number(high)})"
        if node.negated:  # NOT (low <= x <= high) also gives RocketMQ's answer for NaN
            test = f"(not {test})"
        return self.present(node.operand, test, t)

    def match(self, node: Match) -> _Code:
        if not node.text:
            return _Code("False", "False", "True", nullable=False, aborts=False)
        operand, text, negated = node.operand, node.text, node.negated
        if isinstance(operand, Const):
            value = isinstance(operand.value, str) and (
                _match_text(operand.value, node.op, text) != negated)
            return _Code(repr(value), repr(value), repr(not value), nullable=False, aborts=False)
        if isinstance(operand, Prop):
            t = self.temp()
            test = {"CONTAINS": f"{text!r} in {t}", "STARTSWITH": f"{t}.startswith({text!r})",
                    "ENDSWITH": f"{t}.endswith({text!r})"}[node.op]
            if negated:
                test = f"not {test}"
            fetch = f"({t} := {self.prop(operand)})"
            value = f"({fetch} is not None and {test})"
            return _Code(value, value, f"({fetch} is None or not ({test}))", nullable=False,
                         aborts=False)
        x = self.code(operand)
        t = self.temp()
        value = f"(type({t} := {x.val}) is str and (_mt({t}, {node.op!r}, {text!r}) != {negated}))"
        return _Code(value, value, f"(not {value})", nullable=False, aborts=x.aborts)


def _fold(node: Node) -> Node:
    """Constant negations folded; BETWEEN kept only where one range test can replace it."""
    if isinstance(node, Neg):
        operand = _fold(node.operand)
        if isinstance(operand, Const):
            value = negate(operand.value)
            return Const(operand.kind, value) if value is not None else Const("null", None)
        if isinstance(operand, Prop):  # a property is a string: its negation is null
            return Const("null", None)
        return Neg(operand)
    if isinstance(node, Compare):
        return Compare(node.op, _fold(node.left), _fold(node.right))
    return node


def _specialised_between(node: Between) -> Between | None:
    low, high = _fold(node.low), _fold(node.high)
    if (isinstance(node.operand, Prop) and isinstance(low, Const) and isinstance(high, Const)
            and low.kind == high.kind and low.kind in _CONVERTERS):
        return Between(node.operand, low, high, node.negated)
    return None


def _compile(tree: Node) -> tuple[Matcher, str]:
    generator = _Generator()
    aborts = generator.code(tree).aborts
    generator = _Generator()
    body = generator.final_truth(tree)
    lines = ["def _match(p):"]
    if generator.uses_properties:
        lines.append("    g = p.get")
    if aborts:
        lines += ["    try:", f"        return {body}", "    except _Aborted:", "        return False"]
    else:
        lines.append(f"    return {body}")
    source = "\n".join(lines) + "\n"
    namespace = generator.namespace
    exec(compile(source, "<SQL92 filter>", "exec"), namespace)  # noqa: S102 - generated here
    return namespace["_match"], source
