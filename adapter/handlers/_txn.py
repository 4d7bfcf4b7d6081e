"""Shared by the transaction handlers: the coordinator call, its errors, durability."""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from ..context import BrokerContext
from ..transactions.coordinator import TxnError, legacy_epoch_error

log = logging.getLogger(__name__)

__all__ = ("TxnError", "legacy_epoch_error", "run")


async def run(ctx: BrokerContext, call, *args, **kwargs) -> tuple[ErrorCode, object]:
    """Call the coordinator; (error code, result). Whatever the coordinator wrote is made
    durable (flush=sync) before the answer, errors included: a fence may have written."""
    try:
        result = call(*args, **kwargs)
        code = ErrorCode.none
    except TxnError as exc:
        result, code = None, exc.code
    except Exception:
        log.exception("transaction coordinator failed")
        result, code = None, ErrorCode.coordinator_not_available
    await ctx.transactions.durable()
    return code, result
