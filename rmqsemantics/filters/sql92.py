"""RocketMQ's SQL92 filter language: syntax tree, parser, and canonical text.

The grammar is RocketMQ's ``filter/.../parser/SelectorParser.jj`` (itself ActiveMQ's JMS
selector grammar without LIKE, arithmetic, hex and octal literals), from the loosest to the
tightest binding::

    expression  := or
    or          := and (OR and)*
    and         := equality (AND equality)*
    equality    := comparison ( = comparison | <> comparison | IS NULL | IS NOT NULL )*
    comparison  := unary ( > unary | >= unary | < unary | <= unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN ( 'string' {, 'string'} )
                         | [NOT] CONTAINS 'string' | [NOT] STARTSWITH 'string'
                         | [NOT] ENDSWITH 'string' )*
    unary       := + unary | - unary | NOT unary | primary
    primary     := literal | property | ( or )
    literal     := 'string' | integer | decimal | TRUE | FALSE | NULL

Note where NOT sits: it is a unary operator, so ``NOT a = 1`` means ``(NOT a) = 1`` (which
never matches), and ``NOT (a = 1)`` is what one usually wants. Keywords are case-insensitive;
property names are case-sensitive and match ``[A-Za-z_$][A-Za-z0-9_$]*`` (no dots), so a
property named like a keyword (``in``, ``is``...) cannot be used. Strings are single-quoted
with ``''`` for a quote. Integers are ``0`` or ``[1-9][0-9]*`` with an optional ``L``,
decimals ``1.5``, ``1.``, ``.5``, ``1e3``, ``1.5E-3``; there are no negative literals (``-5`` is
the negation of ``5``). Blanks are space, tab, CR, LF and form feed; ``-- ...`` and
``/* ... */`` are comments.

The checks that RocketMQ makes while building the tree are made here too, so the same
expressions are refused: ``>``, ``>=``, ``<``, ``<=`` and BETWEEN take only numbers and
properties (not strings, booleans, NULL or conditions); ``=`` and ``<>`` refuse NULL (use IS
NULL) and a TRUE/FALSE literal on the left of a literal of another type (``TRUE = 1``, while
``1 = TRUE`` is accepted and false); IN needs a property on its left; BETWEEN with two literal bounds needs low <= high; integers must fit a Java long;
decimal literals must be between Double.MIN_VALUE and Double.MAX_VALUE (so ``0.0`` is refused:
write ``0``); AND, OR, NOT and the whole expression need conditions (a property alone counts
as one, which is true only if its value is the Boolean true, which a string property never is).

Deviation: RocketMQ's parser stops after the first complete expression and silently ignores
anything after it (``a = 1 b = 2`` is accepted as ``a = 1``); here the rest must be empty, so
such a typo is an error. A ``--`` comment may end the expression without a line break.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NoReturn

from . import java
from .errors import ExpressionError
from .java import JInt, JLong

KIND = "SQL92"

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS",
                      "CONTAINS", "STARTSWITH", "ENDSWITH"})
MATCH_OPERATORS = ("CONTAINS", "STARTSWITH", "ENDSWITH")
RELATIONAL = (">", ">=", "<", "<=")
# Bounds on what a client's expression may cost before anything is paid for it: the parser,
# the canonical text and the generated matcher all recurse once per level of the tree (and
# Python refuses source nested deeper than 200 parentheses).
MAX_LENGTH = 16384  # characters
MAX_DEPTH = 64  # levels of the syntax tree; a chain of n ORs (or ANDs) is n levels


# --------------------------------------------------------------------------- syntax tree
# ``pos`` (offset of the node's first character) serves error messages only.


@dataclass(frozen=True, slots=True)
class Prop:
    """A message property (a Kafka header); its value is a string or null."""

    name: str
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Const:
    """A literal; ``kind`` is its Java class: null, bool, int, long, double or string."""

    kind: str
    value: object
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Neg:
    """Unary minus: a number changes sign, anything else (a property's string) gives null."""

    operand: Node
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class BoolCast:
    """A property used as a condition: null if absent, else true only for a Boolean true."""

    operand: Prop
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class And:
    left: Node
    right: Node
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Or:
    left: Node
    right: Node
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Compare:
    """``=``, ``<>``, ``>``, ``>=``, ``<``, ``<=`` (``a <> b`` is ``NOT (a = b)`` in RocketMQ)."""

    op: str
    left: Node
    right: Node
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Between:
    """``BETWEEN`` is ``x >= low AND x <= high``; ``NOT BETWEEN`` is ``x < low OR x > high``."""

    operand: Node
    low: Node
    high: Node
    negated: bool
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class In:
    operand: Prop
    values: tuple[str, ...]
    negated: bool
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class Match:
    """CONTAINS / STARTSWITH / ENDSWITH a string literal, or their NOT forms."""

    op: str
    operand: Node
    text: str
    negated: bool
    pos: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class IsNull:
    operand: Node
    negated: bool
    pos: int = field(default=0, compare=False)


Node = Prop | Const | Neg | Not | BoolCast | And | Or | Compare | Between | In | Match | IsNull

_CONDITIONS = (Not, BoolCast, And, Or, Compare, Between, In, Match, IsNull)


def is_condition(node: Node) -> bool:
    """RocketMQ's ``instanceof BooleanExpression``: comparisons, logic, TRUE/FALSE/NULL."""
    return isinstance(node, _CONDITIONS) or (isinstance(node, Const) and node.kind in ("bool", "null"))


def property_names(node: Node) -> frozenset[str]:
    """The names of the properties an expression reads."""
    if isinstance(node, Prop):
        return frozenset((node.name,))
    names: frozenset[str] = frozenset()
    for name in ("operand", "left", "right", "low", "high"):
        child = getattr(node, name, None)
        if child is not None:
            names |= property_names(child)
    return names


# --------------------------------------------------------------------------- text

_OR, _AND, _EQUALITY, _COMPARISON, _UNARY, _PRIMARY = range(1, 7)


def _level(node: Node) -> int:
    if isinstance(node, Or):
        return _OR
    if isinstance(node, And):
        return _AND
    if isinstance(node, IsNull) or (isinstance(node, Compare) and node.op in ("=", "<>")):
        return _EQUALITY
    if isinstance(node, (Compare, Between, In, Match)):
        return _COMPARISON
    if isinstance(node, Not):
        # Printed in parentheses wherever it is an operand of a comparison, so that the
        # canonical text shows how tightly NOT binds: "(NOT a) = 1".
        return _AND
    if isinstance(node, Neg):
        return _UNARY
    return _PRIMARY


def quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def to_text(node: Node, context: int = _OR) -> str:
    """Canonical text: upper-case keywords, single spaces, only the needed parentheses.

    Parsing the text gives the same tree back.
    """
    body = _text(node)
    return f"({body})" if _level(node) < context else body


def _text(node: Node) -> str:
    if isinstance(node, Prop):
        return node.name
    if isinstance(node, BoolCast):
        return node.operand.name
    if isinstance(node, Const):
        kind, value = node.kind, node.value
        if kind == "null":
            return "NULL"
        if kind == "bool":
            return "TRUE" if value else "FALSE"
        if kind == "string":
            return quote(value)  # type: ignore[arg-type]
        if kind == "double":
            return java.java_double_text(value)  # type: ignore[arg-type]
        return str(int(value))  # type: ignore[call-overload]
    if isinstance(node, Neg):
        operand = to_text(node.operand, _UNARY)
        return "- " + operand if operand.startswith("-") else "-" + operand
    if isinstance(node, Not):
        return "NOT " + to_text(node.operand, _UNARY)
    if isinstance(node, Or):
        return f"{to_text(node.left, _OR)} OR {to_text(node.right, _AND)}"
    if isinstance(node, And):
        return f"{to_text(node.left, _AND)} AND {to_text(node.right, _EQUALITY)}"
    if isinstance(node, Compare):
        if node.op in ("=", "<>"):
            return f"{to_text(node.left, _EQUALITY)} {node.op} {to_text(node.right, _COMPARISON)}"
        return f"{to_text(node.left, _COMPARISON)} {node.op} {to_text(node.right, _UNARY)}"
    if isinstance(node, IsNull):
        return f"{to_text(node.operand, _EQUALITY)} IS {'NOT ' if node.negated else ''}NULL"
    if isinstance(node, Between):
        return (f"{to_text(node.operand, _COMPARISON)} {'NOT ' if node.negated else ''}BETWEEN "
                f"{to_text(node.low, _UNARY)} AND {to_text(node.high, _UNARY)}")
    if isinstance(node, In):
        values = ", ".join(quote(v) for v in node.values)
        return f"{node.operand.name} {'NOT ' if node.negated else ''}IN ({values})"
    if isinstance(node, Match):
        return (f"{to_text(node.operand, _COMPARISON)} {'NOT ' if node.negated else ''}"
                f"{node.op} {quote(node.text)}")
    raise TypeError(f"not a SQL92 node: {node!r}")


# --------------------------------------------------------------------------- tokens

_BLANKS = " \t\n\r\f"
_LINE_END = re.compile(r"[\r\n]")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DECIMAL = re.compile(r"0|[1-9][0-9]*[lL]?")
_FLOAT = re.compile(
    r"[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+"
)
_PUNCTUATION = ("<>", "<=", ">=", "=", "<", ">", "(", ")", ",", "+", "-")


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # a keyword, a punctuation mark, ID, INTEGER, DECIMAL, STRING, ERROR or EOF
    text: str
    pos: int
    value: object = None  # the decoded string of a STRING; the message of an ERROR


def tokenize(source: str) -> list[Token]:
    """The tokens of ``source``, ending with EOF, or with ERROR at the first lexical error."""
    tokens: list[Token] = []
    pos, end = 0, len(source)
    while True:
        while pos < end:  # blanks and comments
            char = source[pos]
            if char in _BLANKS:
                pos += 1
            elif source.startswith("--", pos):
                newline = _LINE_END.search(source, pos)
                pos = end if newline is None else newline.end()
            elif source.startswith("/*", pos):
                close = source.find("*/", pos + 2)
                if close < 0:
                    tokens.append(Token("ERROR", "/*", pos, "this /* comment is never closed"))
                    return tokens
                pos = close + 2
            else:
                break
        if pos >= end:
            tokens.append(Token("EOF", "", end))
            return tokens
        char = source[pos]
        if char == "'":
            chunks, scan = [], pos + 1
            while True:
                quote_at = source.find("'", scan)
                if quote_at < 0:
                    tokens.append(Token("ERROR", "'", pos, "this string is never closed (a quote inside a string is written '')"))
                    return tokens
                chunks.append(source[scan:quote_at])
                if source.startswith("''", quote_at):
                    chunks.append("'")
                    scan = quote_at + 2
                else:
                    tokens.append(Token("STRING", source[pos:quote_at + 1], pos, "".join(chunks)))
                    pos = quote_at + 1
                    break
            continue
        if char.isascii() and (char.isdigit() or char == "."):
            decimal = _DECIMAL.match(source, pos)
            floating = _FLOAT.match(source, pos)
            if floating and (decimal is None or floating.end() > decimal.end()):
                tokens.append(Token("DECIMAL", floating.group(), pos))
                pos = floating.end()
                continue
            if decimal:
                tokens.append(Token("INTEGER", decimal.group(), pos))
                pos = decimal.end()
                continue
        ident = _IDENT.match(source, pos)
        if ident:
            word = ident.group()
            upper = word.upper()
            tokens.append(Token(upper if upper in KEYWORDS else "ID", word, pos))
            pos = ident.end()
            continue
        for mark in _PUNCTUATION:
            if source.startswith(mark, pos):
                tokens.append(Token(mark, mark, pos))
                pos += len(mark)
                break
        else:
            tokens.append(Token("ERROR", char, pos, f"unexpected character {char!r}"))
            return tokens


# --------------------------------------------------------------------------- parser


def parse(source: str) -> Node:
    """The syntax tree of a SQL92 filter expression, or ExpressionError."""
    if len(source) > MAX_LENGTH:
        raise ExpressionError(KIND, source, f"the expression is longer than {MAX_LENGTH} characters")
    tree = _Parser(source).parse()
    if depth(tree) > MAX_DEPTH:
        raise ExpressionError(KIND, source, f"the expression is more than {MAX_DEPTH} levels deep (a chain of n ORs "
                              "or ANDs is n levels: compare a property with many values by IN ('x', 'y', ...))")
    return tree


def depth(tree: Node) -> int:
    """Levels of ``tree`` (a leaf is 1), without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        for name in ("operand", "left", "right", "low", "high"):
            child = getattr(node, name, None)
            if child is not None:
                stack.append((child, level + 1))
    return deepest


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0
        self.open = {"(": 0, "unary": 0}  # parentheses, unary operators open around the token

    # -- helpers

    @property
    def token(self) -> Token:
        return self.tokens[self.index]

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.tokens[self.index]
        if token.kind == "ERROR":
            self.fail(token.value, token.pos)  # type: ignore[arg-type]
        if token.kind != "EOF":
            self.index += 1
        return token

    def fail(self, detail: str, position: int) -> NoReturn:
        raise ExpressionError(KIND, self.source, detail, position)

    def expected(self, what: str) -> NoReturn:
        token = self.token
        if token.kind == "ERROR":
            self.fail(token.value, token.pos)  # type: ignore[arg-type]
        if token.kind == "EOF":
            found = "the end of the expression"
        else:
            text = token.text if len(token.text) <= 24 else token.text[:21] + "..."
            found = repr(text) if token.kind != "STRING" else text
        self.fail(f"expected {what} but found {found}", token.pos)

    def expect(self, kind: str, what: str) -> Token:
        if self.token.kind != kind:
            self.expected(what)
        return self.advance()

    def condition(self, node: Node, role: str) -> Node:
        """RocketMQ's asBooleanExpression: a condition, or a property read as one."""
        if isinstance(node, Prop):
            return BoolCast(node, node.pos)
        if not is_condition(node):
            self.fail(f"{to_text(node)} is not a condition ({role})", node.pos)
        return node

    # -- grammar

    def parse(self) -> Node:
        node = self.condition(self.or_expression(), "a filter must be a condition")
        if self.token.kind != "EOF":
            self.expected("an operator or the end of the expression")
        return node

    def or_expression(self) -> Node:
        left = self.and_expression()
        while self.token.kind == "OR":
            self.advance()
            right = self.and_expression()
            left = Or(self.condition(left, "OR joins conditions"),
                      self.condition(right, "OR joins conditions"), left.pos)
        return left

    def and_expression(self) -> Node:
        left = self.equality_expression()
        while self.token.kind == "AND":
            self.advance()
            right = self.equality_expression()
            left = And(self.condition(left, "AND joins conditions"),
                       self.condition(right, "AND joins conditions"), left.pos)
        return left

    def equality_expression(self) -> Node:
        left = self.comparison_expression()
        while True:
            kind = self.token.kind
            if kind in ("=", "<>"):
                self.advance()
                right = self.comparison_expression()
                self.check_equal(kind, left, right)
                left = Compare(kind, left, right, left.pos)
            elif kind == "IS":
                self.advance()
                negated = self.token.kind == "NOT"
                if negated:
                    self.advance()
                self.expect("NULL", "NULL" if negated else "NULL or NOT NULL after IS")
                left = IsNull(left, negated, left.pos)
            else:
                return left

    def comparison_expression(self) -> Node:
        left = self.unary_expression()
        while True:
            token = self.token
            kind = token.kind
            negated = False
            if kind == "NOT":
                if self.peek().kind not in ("BETWEEN", "IN", *MATCH_OPERATORS):
                    self.advance()
                    self.expected("BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT")
                self.advance()
                negated, kind = True, self.token.kind
            if kind in RELATIONAL and not negated:
                self.advance()
                right = self.unary_expression()
                self.check_relational(left, kind)
                self.check_relational(right, kind)
                left = Compare(kind, left, right, left.pos)
            elif kind == "BETWEEN":
                self.advance()
                low = self.unary_expression()
                self.expect("AND", "AND between the bounds of BETWEEN")
                high = self.unary_expression()
                for operand in (left, low, high):
                    self.check_relational(operand, "NOT BETWEEN" if negated else "BETWEEN")
                if not negated:
                    self.check_between_bounds(low, high)
                left = Between(left, low, high, negated, left.pos)
            elif kind == "IN":
                self.advance()
                self.expect("(", "'(' after IN")
                values = [self.expect("STRING", "a 'string' literal in the IN list").value]
                while self.token.kind == ",":
                    self.advance()
                    values.append(self.expect("STRING", "a 'string' literal after ','").value)
                self.expect(")", "',' or ')' in the IN list")
                if not isinstance(left, Prop):
                    self.fail(f"{'NOT IN' if negated else 'IN'} needs a property on its left, "
                              f"not {to_text(left)}", left.pos)
                left = In(left, tuple(values), negated, left.pos)  # type: ignore[arg-type]
            elif kind in MATCH_OPERATORS:
                self.advance()
                text = self.expect("STRING", f"a 'string' literal after {kind}").value
                left = Match(kind, left, text, negated, left.pos)  # type: ignore[arg-type]
            else:
                return left

    def nest(self, token: Token, kind: str, by: int = 1) -> None:
        """Count one more (``by`` -1: one less) of ``kind`` open: the parser recurses per
        level, so each kind is bounded."""
        self.open[kind] += by
        if self.open[kind] > MAX_DEPTH:
            what = "parentheses" if kind == "(" else "unary operators (+, -, NOT)"
            self.fail(f"the expression nests {what} more than {MAX_DEPTH} levels deep", token.pos)

    def unary_expression(self) -> Node:
        token = self.token
        if token.kind not in ("+", "-", "NOT"):
            return self.primary_expression()
        self.nest(token, "unary")
        self.advance()
        operand = self.unary_expression()
        self.nest(token, "unary", -1)
        if token.kind == "+":
            return operand
        if token.kind == "-":
            return Neg(operand, token.pos)
        return Not(self.condition(operand, "NOT needs a condition"), token.pos)

    def primary_expression(self) -> Node:
        token = self.token
        kind = token.kind
        if kind == "ID":
            self.advance()
            return Prop(token.text, token.pos)
        if kind == "(":
            self.nest(token, "(")
            self.advance()
            node = self.or_expression()
            if self.token.kind != ")":
                self.expected(f"')' to close the '(' at column {self._column(token.pos)}")
            self.advance()
            self.nest(token, "(", -1)
            return node
        if kind == "STRING":
            self.advance()
            return Const("string", token.value, token.pos)
        if kind == "INTEGER":
            self.advance()
            return self.integer(token)
        if kind == "DECIMAL":
            self.advance()
            return self.decimal(token)
        if kind in ("TRUE", "FALSE"):
            self.advance()
            return Const("bool", kind == "TRUE", token.pos)
        if kind == "NULL":
            self.advance()
            return Const("null", None, token.pos)
        self.expected("a property, a literal or '('")

    def _column(self, position: int) -> int:
        return position - (self.source.rfind("\n", 0, position) + 1) + 1

    # -- literals and RocketMQ's checks (ConstantExpression, ComparisonExpression.check*)

    def integer(self, token: Token) -> Const:
        value = int(token.text.rstrip("lL"))
        if value > java.LONG_MAX:
            self.fail(f"{token.text} does not fit in a Java long", token.pos)
        if value <= java.INT_MAX:
            return Const("int", JInt(value), token.pos)
        return Const("long", JLong(value), token.pos)

    def decimal(self, token: Token) -> Const:
        value = float(token.text)
        if value == float("inf"):
            self.fail(f"{token.text} is larger than the largest double", token.pos)
        if value < java.DOUBLE_MIN_POSITIVE:
            self.fail(f"{token.text} is below the smallest positive double (4.9E-324), which "
                      "RocketMQ refuses; write 0 or a non-zero number", token.pos)
        return Const("double", value, token.pos)

    def check_relational(self, node: Node, op: str) -> None:
        if isinstance(node, Const) and node.kind not in ("int", "long", "double"):
            self.fail(f"{to_text(node)} cannot be compared with {op}: "
                      "only numbers and properties can", node.pos)
        if is_condition(node):
            self.fail(f"{to_text(node)} is a condition and cannot be compared with {op}", node.pos)

    def check_equal(self, op: str, left: Node, right: Node) -> None:
        for node in (left, right):
            if isinstance(node, Const) and node.kind == "null":
                self.fail(f"NULL cannot be compared with {op}: use IS NULL or IS NOT NULL", node.pos)
        if (isinstance(left, Const) and isinstance(right, Const) and left.kind == "bool"
                and right.kind != "bool"):
            self.fail(f"{to_text(left)} cannot be compared with {to_text(right)}", left.pos)

    def check_between_bounds(self, low: Node, high: Node) -> None:
        if not (isinstance(low, Const) and isinstance(high, Const)):
            return
        if low.kind == "null" or high.kind == "null":
            bound = low if low.kind == "null" else high
            self.fail("the bounds of BETWEEN cannot be NULL", bound.pos)
        bounds = f"BETWEEN {to_text(low)} AND {to_text(high)}"
        try:
            order = java.compare(high.value, low.value)
        except java.EvaluationAborted:
            self.fail(f"{bounds}: the bounds cannot be compared with each other", low.pos)
        if order < 0:
            self.fail(f"{bounds}: the lower bound is greater than the upper bound", low.pos)
