"""Shared by the transaction handlers: the coordinator call, its errors, durability."""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from ..context import BrokerContext
from ..security.acls import AclOperation, ResourceType
from ..transactions.coordinator import TxnError, legacy_epoch_error

log = logging.getLogger(__name__)

__all__ = ("TxnError", "legacy_epoch_error", "may_write", "run")


def may_write(ctx: BrokerContext, transactional_id: str) -> bool:
    """WRITE on the transactional id: what every transactional request needs (else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    return ctx.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


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
