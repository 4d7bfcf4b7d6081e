"""Regular expressions clients send, compiled as Kafka compiles them: with RE2J's syntax and
RE2's guarantee that matching takes time linear in the text, whatever the pattern.

Kafka compiles ConsumerGroupHeartbeat's SubscribedTopicRegex and ListTransactions'
TransactionalIdPattern with RE2J, a port of RE2; google-re2 is RE2 itself, so the syntax
agrees (POSIX classes, ``\\Q...\\E``, ``\\p{..}``, ``\\z``, named groups) and what RE2J
refuses (backreferences, lookaround, possessive and atomic forms, ``\\Z``) is refused. RE2
accepts one construct RE2J does not, ``\\C`` (any byte): it is refused here. Python's ``re``
backtracks: ``(a+)+b`` against 26 letters held the event loop for 15 s, and a client
controls both the pattern and, by creating a topic, the text.

What one pattern costs is bounded: RE2 builds at most ``MAX_MEMORY`` (2 MiB) of program and
DFA state for it, and a pattern whose program would not fit is refused ("pattern too large";
RE2J, which Kafka uses, has no such bound: ``\\pL{249}`` is refused here, ``\\pL{1,60}`` and
``.{1,249}`` are not). Compiling the largest accepted pattern takes about 0.2 s, so patterns
and refusals alike are cached (``_CACHED`` of them, at most about 128 MiB).
"""

from __future__ import annotations

import functools

import re2

MAX_PATTERN_LENGTH = 4096  # bounds the compile cost a client controls
MAX_MEMORY = 2 << 20  # RE2's bound per pattern: its program and DFA caches (RE2's default: 8 MiB)
_CACHED = 64  # so compiled patterns hold at most about 64 x MAX_MEMORY

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is the client's error, answered to it
_OPTIONS.max_mem = MAX_MEMORY


class PatternError(ValueError):
    """The pattern is not valid RE2J; the message is RE2's description, as RE2J's
    PatternSyntaxException.getDescription() gives it (e.g. "invalid escape sequence")."""


def compile_pattern(pattern: str):
    """The compiled pattern (use ``fullmatch``, as Kafka's ``matcher(..).matches()``)."""
    compiled = _compiled(pattern)
    if isinstance(compiled, PatternError):
        raise PatternError(*compiled.args)  # a fresh one: a raised instance keeps its traceback
    return compiled


@functools.lru_cache(maxsize=_CACHED)
def _compiled(pattern: str):
    """The compiled pattern or its refusal, both cached: RE2 refuses a program over its
    memory bound only once it built it (1,000 ``\\pL``: 0.3-0.7 s), so a refusal is paid
    once however often a client sends the pattern."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return PatternError(f"longer than {MAX_PATTERN_LENGTH} characters")
    if _has_any_byte_escape(pattern):
        return PatternError("invalid escape sequence")
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else "invalid pattern"
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return PatternError(str(detail).split(": ", 1)[0])


def _has_any_byte_escape(pattern: str) -> bool:
    """``\\C`` outside ``\\Q...\\E`` (an escaped backslash before it is a literal)."""
    i, quoted = 0, False
    while i < len(pattern) - 1:
        pair = pattern[i:i + 2]
        if quoted:
            quoted = pair != "\\E"
            i += 1 if quoted else 2
        elif pair == "\\C":
            return True
        else:
            quoted = pair == "\\Q"
            i += 2 if pattern[i] == "\\" else 1
    return False
