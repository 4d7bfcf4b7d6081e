"""SQL92 filter expressions: which parser, and which evaluator.

    python -m bench.filter_expressions [--quick]

Parsing happens once per subscription view, evaluation once per record read through a view
(millions), so evaluation decides and parse time only has to stay reasonable. Measured here:

* compile time: the hand-written recursive-descent parser of rmqkafka.rmqsemantics
  (tokens, parse, RocketMQ's checks) against lark's LALR parser with a grammar of the same
  language and a Transformer into the same syntax tree (no RocketMQ checks: lark gets the
  benefit of the doubt); both followed by the same code generation. The one-time cost of
  importing lark and building its parser is printed separately.
* evaluation time per record: the generated function (what the broker uses) against the
  closure-per-node interpreter (rmqkafka.rmqsemantics.filters.sql92_eval.interpret, the
  reference transcription of RocketMQ's classes). A lark-built tree is equal to the
  hand-built one (checked below), so the parser has no influence on evaluation time.

lark is in the ``bench`` extra (pip install -e ".[bench]"); without it only the evaluators
are measured.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

from rmqkafka.rmqsemantics.filters import compile_filter
from rmqkafka.rmqsemantics.filters.java import JInt, JLong
from rmqkafka.rmqsemantics.filters.sql92 import (
    And,
    Between,
    BoolCast,
    Compare,
    Const,
    In,
    IsNull,
    Match,
    Neg,
    Not,
    Or,
    Prop,
    is_condition,
    parse,
)
from rmqkafka.rmqsemantics.filters.sql92_eval import compile_matcher, interpret

EXPRESSIONS = {
    "tag list": "TAGS IN ('TagA', 'TagB', 'TagC')",
    "tag and number": "TAGS = 'TagA' AND price > 100",
    "mixed": ("region = 'eu' AND (price BETWEEN 10 AND 500 OR vip = TRUE) "
              "AND sku STARTSWITH 'A-'"),
    "not/in/decimal": ("NOT (status IN ('cancelled', 'refunded')) AND amount >= 99.5 "
                       "OR priority IS NOT NULL"),
    "50 ORs": " OR ".join(f"k{i} = 'v{i}'" for i in range(50)),
}

RECORDS = [
    {"TAGS": "TagA", "price": "150", "region": "eu", "sku": "A-17", "status": "paid",
     "amount": "120.0"},
    {"TAGS": "TagB", "price": "50", "region": "us", "sku": "B-2", "status": "cancelled",
     "amount": "12.5", "vip": "true"},
    {"TAGS": "TagZ", "price": "800", "region": "eu", "sku": "A-9", "priority": "high"},
    {"TAGS": "TagC", "region": "eu", "vip": "false", "k49": "v49"},
    {"price": "abc", "status": "paid", "amount": "NaN"},
]

LARK_GRAMMAR = r"""
?start: or_expr
?or_expr: and_expr | or_expr OR and_expr -> or_
?and_expr: equality | and_expr AND equality -> and_
?equality: comparison
    | equality "=" comparison -> eq
    | equality "<>" comparison -> ne
    | equality IS NULL -> is_null
    | equality IS NOT NULL -> is_not_null
?comparison: unary
    | comparison ">" unary -> gt
    | comparison ">=" unary -> ge
    | comparison "<" unary -> lt
    | comparison "<=" unary -> le
    | comparison BETWEEN unary AND unary -> between
    | comparison NOT BETWEEN unary AND unary -> not_between
    | comparison IN "(" STRING ("," STRING)* ")" -> in_
    | comparison NOT IN "(" STRING ("," STRING)* ")" -> not_in
    | comparison (CONTAINS | STARTSWITH | ENDSWITH) STRING -> match
    | comparison NOT (CONTAINS | STARTSWITH | ENDSWITH) STRING -> not_match
?unary: "+" unary | "-" unary -> neg | NOT unary -> not_ | primary
?primary: STRING -> string | INTEGER -> integer | DECIMAL -> decimal
    | TRUE -> true | FALSE -> false | NULL -> null | ID -> prop | "(" or_expr ")"

NOT: "NOT"i
AND: "AND"i
OR: "OR"i
BETWEEN: "BETWEEN"i
IN: "IN"i
IS: "IS"i
NULL: "NULL"i
TRUE: "TRUE"i
FALSE: "FALSE"i
CONTAINS: "CONTAINS"i
STARTSWITH: "STARTSWITH"i
ENDSWITH: "ENDSWITH"i
ID: /[a-z_$][a-z0-9_$]*/i
DECIMAL.2: /[0-9]+\.[0-9]*([eE][+-]?[0-9]+)?|\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+/
INTEGER: /0|[1-9][0-9]*[lL]?/
STRING: /'(''|[^'])*'/
%ignore /[ \t\r\n\f]+/
%ignore /--[^\r\n]*/
%ignore /\/\*(.|\n)*?\*\//
"""


def build_lark():
    from lark import Lark, Transformer

    def condition(node):
        return BoolCast(node) if isinstance(node, Prop) else node

    def string(token) -> str:
        return token[1:-1].replace("''", "'")

    class ToTree(Transformer):
        def or_(self, c): return Or(condition(c[0]), condition(c[2]))
        def and_(self, c): return And(condition(c[0]), condition(c[2]))
        def eq(self, c): return Compare("=", c[0], c[1])
        def ne(self, c): return Compare("<>", c[0], c[1])
        def is_null(self, c): return IsNull(c[0], False)
        def is_not_null(self, c): return IsNull(c[0], True)
        def gt(self, c): return Compare(">", c[0], c[1])
        def ge(self, c): return Compare(">=", c[0], c[1])
        def lt(self, c): return Compare("<", c[0], c[1])
        def le(self, c): return Compare("<=", c[0], c[1])
        def between(self, c): return Between(c[0], c[2], c[4], False)
        def not_between(self, c): return Between(c[0], c[3], c[5], True)
        def in_(self, c): return In(c[0], tuple(string(t) for t in c[2:]), False)
        def not_in(self, c): return In(c[0], tuple(string(t) for t in c[3:]), True)
        def match(self, c): return Match(c[1].type, c[0], string(c[2]), False)
        def not_match(self, c): return Match(c[2].type, c[0], string(c[3]), True)
        def neg(self, c): return Neg(c[0])
        def not_(self, c): return Not(condition(c[1]))
        def string(self, c): return Const("string", string(c[0]))
        def integer(self, c):
            value = int(c[0].rstrip("lL"))
            return Const("int", JInt(value)) if value < 2**31 else Const("long", JLong(value))
        def decimal(self, c): return Const("double", float(c[0]))
        def true(self, c): return Const("bool", True)
        def false(self, c): return Const("bool", False)
        def null(self, c): return Const("null", None)
        def prop(self, c): return Prop(str(c[0]))

    lark = Lark(LARK_GRAMMAR, parser="lalr")
    to_tree = ToTree()

    def lark_parse(text: str):
        node = to_tree.transform(lark.parse(text))
        node = condition(node)
        assert is_condition(node)
        return node

    return lark_parse


def best_seconds(run: Callable[[], object], number: int, repeat: int) -> float:
    """Seconds per call: the best of ``repeat`` rounds of ``number`` calls."""
    rounds = []
    for _ in range(repeat):
        began = time.perf_counter()
        for _ in range(number):
            run()
        rounds.append((time.perf_counter() - began) / number)
    return min(rounds)


def cold_import_ms(module: str) -> float:
    code = (f"import time; t = time.perf_counter(); import {module}; "
            "print((time.perf_counter() - t) * 1000)")
    runs = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout) for _ in range(3)]
    return statistics.median(runs)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    options.add_argument("--quick", action="store_true", help="fewer repetitions")
    args = options.parse_args()
    scale = 0.1 if args.quick else 1.0
    repeat = 5

    try:
        import lark
    except ImportError:
        lark = None
        print("lark is not installed (pip install -e '.[bench]'): parser comparison skipped")

    print(f"Python {sys.version.split()[0]}; best of {repeat} rounds; times per call\n")
    lark_parse = None
    if lark is not None:
        print(f"one-time costs      cold import: rmqkafka.rmqsemantics.filters "
              f"{cold_import_ms('rmqkafka.rmqsemantics.filters'):.1f} ms, "
              f"lark {lark.__version__} {cold_import_ms('lark'):.1f} ms")
        began = time.perf_counter()
        lark_parse = build_lark()
        print(f"                    building the lark LALR parser: "
              f"{(time.perf_counter() - began) * 1000:.1f} ms\n")

    print("compile (text -> matcher)           hand-written      lark LALR    lark/hand")
    for name, text in EXPRESSIONS.items():
        number = max(1, int((20 if name == "50 ORs" else 300) * scale))
        ours = best_seconds(lambda text=text: compile_matcher(parse(text)), number, repeat)
        line = f"  {name:<16}  parse+codegen   {ours * 1e6:9.1f} us"
        if lark_parse is not None:
            assert lark_parse(text) == parse(text), name  # same tree, so same evaluation
            theirs = best_seconds(lambda text=text: compile_matcher(lark_parse(text)), number,
                                  repeat)
            line += f"   {theirs * 1e6:9.1f} us   {theirs / ours:6.1f}x"
        print(line)
    print("  (parse only)")
    for name, text in EXPRESSIONS.items():
        number = max(1, int((40 if name == "50 ORs" else 600) * scale))
        ours = best_seconds(lambda text=text: parse(text), number, repeat)
        line = f"  {name:<16}  parse           {ours * 1e6:9.1f} us"
        if lark_parse is not None:
            theirs = best_seconds(lambda text=text: lark_parse(text), number, repeat)
            line += f"   {theirs * 1e6:9.1f} us   {theirs / ours:6.1f}x"
        print(line)

    print("\nevaluate (per record, 5 records)    generated code   closures     closures/generated")
    records = RECORDS * 200
    for name, text in EXPRESSIONS.items():
        tree = parse(text)
        generated, closures = compile_matcher(tree), interpret(tree)
        assert [generated(r) for r in RECORDS] == [closures(r) for r in RECORDS]
        number = max(1, int(20 * scale))
        fast = best_seconds(lambda f=generated: [f(r) for r in records], number, repeat) / len(records)
        slow = best_seconds(lambda f=closures: [f(r) for r in records], number, repeat) / len(records)
        print(f"  {name:<16}                    {fast * 1e9:7.0f} ns     {slow * 1e9:7.0f} ns"
              f"     {slow / fast:6.1f}x")
    print("\nfrom raw Kafka headers (RecordFilter.matches_headers: decode what is read, evaluate)")
    raw = [[(k, v.encode()) for k, v in r.items()] + [("UNIQ_KEY", b"0A0B0C0D0E0F")]
           for r in RECORDS] * 200
    views = {"tags 'TagA || TagB'": compile_filter("tags", "TagA || TagB")}
    views.update({f"sql {name}": compile_filter("sql", EXPRESSIONS[name])
                  for name in ("tag and number", "mixed")})
    for name, view in views.items():
        number = max(1, int(20 * scale))
        per = best_seconds(lambda f=view.matches_headers: [f(h) for h in raw], number, repeat) / len(raw)
        print(f"  {name:<28}        {per * 1e9:7.0f} ns")
    matched = [sum(compile_matcher(parse(t))(r) for r in RECORDS) for t in EXPRESSIONS.values()]
    print(f"\n(matches per expression over the 5 records: {matched})")


if __name__ == "__main__":
    main()
