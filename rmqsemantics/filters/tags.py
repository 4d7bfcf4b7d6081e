"""RocketMQ tag expressions: ``*`` or ``TagA || TagB``.

The rules of RocketMQ's FilterAPI.buildSubscriptionData (remoting/.../protocol/filter/
FilterAPI.java, and common/.../filter/FilterAPI.java before 5.0):

* ``*``, an empty string or null subscribes to everything. Only exactly ``*`` counts: ``" * "``
  is the tag ``*``.
* Anything else is split at every ``||``; each piece is trimmed (Java ``String.trim``: every
  character up to U+0020, no other blank) and empty pieces are ignored. What remains are the
  tags, and their Java ``String.hashCode`` values are the codes that the consume queue holds.
* A record matches when its tag is one of the tags. The broker first compares the consume
  queue's code with the codes; as different tags can share a code (``"Aa"`` and ``"BB"``), the
  exact tag is then compared too (RocketMQ leaves that second step to its client).

Deviation: RocketMQ rejects ``||`` alone but accepts ``" || "`` or ``"  "``, which name no tag
and match nothing; here every expression that names no tag is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from rmqkafka.storage.tag_code import java_string_hash

from .errors import ExpressionError
from .java import java_trim

KIND = "tag"
ALL = "*"
MAX_LENGTH = 16384  # characters: a client's expression is bounded before it is split


@dataclass(frozen=True, slots=True)
class TagExpression:
    """A compiled tag expression; ``tags`` None means every record (``*``)."""

    tags: frozenset[str] | None
    codes: frozenset[int] | None
    text: str  # canonical: "*" or the tags in their first order joined by " || "

    @property
    def matches_all(self) -> bool:
        return self.tags is None


def parse_tags(expression: str | None) -> TagExpression:
    """Compile a tag expression, or raise ExpressionError if it names no tag."""
    if expression is None or expression == "" or expression == ALL:
        return TagExpression(None, None, ALL)
    if len(expression) > MAX_LENGTH:
        raise ExpressionError(KIND, expression, f"the expression is longer than {MAX_LENGTH} characters")
    ordered: dict[str, None] = {}
    for piece in expression.split("||"):
        tag = java_trim(piece)
        if tag:
            ordered.setdefault(tag)
    if not ordered:
        raise ExpressionError(KIND, expression, "it names no tag: write '*' for every record, "
                              "or tags separated by '||' such as 'TagA || TagB'")
    tags = tuple(ordered)
    return TagExpression(frozenset(tags), frozenset(java_string_hash(t) for t in tags),
                         " || ".join(tags))
