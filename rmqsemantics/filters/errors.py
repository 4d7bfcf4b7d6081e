"""The one exception a filter expression raises when it cannot be compiled."""

from __future__ import annotations


class ExpressionError(ValueError):
    """A tag or SQL92 filter expression that cannot be compiled.

    ``str(error)`` is written to be shown to a user as it is (the broker returns it as the
    message of an INVALID_CONFIG error): where the problem is and what was expected there.
    ``position`` is the 0-based offset in ``expression`` (None when the problem is not at one
    place), ``line``/``column`` its 1-based line and column.
    """

    def __init__(self, kind: str, expression: str, detail: str, position: int | None = None) -> None:
        self.kind = kind
        self.expression = expression
        self.detail = detail
        self.position = position
        if position is None:
            self.line = self.column = None
            where = ""
        else:
            before = expression[:position]
            self.line = before.count("\n") + 1
            self.column = position - (before.rfind("\n") + 1) + 1
            where = f" at column {self.column}" if "\n" not in expression else (
                f" at line {self.line}, column {self.column}")
        super().__init__(f"invalid {kind} expression{where}: {detail}")
