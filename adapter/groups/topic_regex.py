"""Regular-expression subscriptions (ConsumerGroupHeartbeat v1 SubscribedTopicRegex).

Kafka compiles them with RE2J and matches whole topic names. Python's ``re`` agrees with
RE2J on the syntax clients send (literals, classes, ``.``, ``*``, ``+``, ``?``, ``{m,n}``,
alternation, groups, anchors, ``(?i)``-style flags); what RE2J refuses (backreferences,
lookaround, possessive and atomic forms) or reads differently from ``re`` (POSIX classes
``[[:alpha:]]``, ``\\Q...\\E``, ``\\z``/``\\Z``, ``\\p{..}``, ``(?<name>``) is refused with
INVALID_REGULAR_EXPRESSION rather than matched with another meaning.
"""

from __future__ import annotations

import functools
import re

MAX_LENGTH = 4096  # bounds the compile cost a client controls

# Constructs whose RE2J meaning ``re`` does not share (or that RE2J refuses).
_UNPORTABLE = re.compile(
    r"""\\[1-9]            # backreference
      | \(\?[=!]           # lookahead
      | \(\?<[=!]          # lookbehind
      | \(\?>              # atomic group
      | \(\?<[A-Za-z]      # (?<name>: RE2J only
      | \(\?P=             # named backreference
      | \(\?\(             # conditional
      | [*+?}]\+           # possessive quantifier
      | \\[QEzZpPCG]       # \Q \E \z \Z \p \P \C \G
      | \[:[a-z]+:\]       # POSIX class
    """,
    re.VERBOSE,
)


class InvalidRegex(ValueError):
    pass


@functools.lru_cache(maxsize=256)
def compile_subscription(pattern: str) -> re.Pattern[str]:
    """The compiled pattern; raises InvalidRegex with Kafka's message."""
    if len(pattern) > MAX_LENGTH:
        raise InvalidRegex(f"SubscribedTopicRegex is longer than {MAX_LENGTH} characters.")
    problem = _unportable(pattern)
    if problem is None:
        try:
            return re.compile(pattern)
        except re.error as exc:
            problem = str(exc)
    raise InvalidRegex(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {problem}.")


def _unportable(pattern: str) -> str | None:
    # Skip escaped backslashes first, so that "\\1" (a backslash, then "1") is not a backreference.
    scan = pattern.replace("\\\\", "__")
    found = _UNPORTABLE.search(scan)
    if found is None:
        return None
    return f"unsupported construct `{pattern[found.start():found.end()]}` at index {found.start()}"


def matching(pattern: str, names: list[str]) -> set[str]:
    compiled = compile_subscription(pattern)
    return {name for name in names if compiled.fullmatch(name)}
