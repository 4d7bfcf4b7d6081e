"""UpdateFeatures (57, v0-2): change finalized feature levels, as Kafka's controller does
(adapter.features has the validation and its messages).

- ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED at the top level and no results.
- All or nothing: the first refused update is the answer (INVALID_UPDATE_VERSION); v0/v1
  repeat the top-level error for every feature named, v2 has no per-feature results.
- v0's allow_downgrade means a safe downgrade; a feature named twice: the last one counts.
- Applied changes are written durably (storage.feature_levels) before the answer and the
  finalized features epoch grows by one; validate_only and a request that changes nothing
  write nothing. A failed write is KAFKA_STORAGE_ERROR and changes nothing.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from .. import features
from ..codec import Request, response_type
from ..codec.entities import make
from ..context import BrokerContext
from ..security.acls import AclOperation
from . import _cluster_admin

API_KEY = 57
log = logging.getLogger(__name__)


def _updates(request: Request) -> list[tuple[str, int, int]]:
    out = {}
    for update in request.body.feature_updates:
        if request.api_version == 0:
            kind = features.SAFE_DOWNGRADE if update.allow_downgrade else features.UPGRADE
        else:
            kind = update.upgrade_type
        out[update.feature] = (update.feature, update.max_version_level, kind)
    return list(out.values())


async def handle(ctx: BrokerContext, request: Request):
    cls = response_type(request)
    if not _cluster_admin.may_on_cluster(ctx, AclOperation.ALTER):
        return make(cls, throttle_time=0, error_code=ErrorCode.cluster_authorization_failed,
                    error_message=_cluster_admin.CLUSTER_AUTHORIZATION_FAILED, results=())
    updates = _updates(request)
    stored = ctx.store.features
    current = features.finalized(stored.stored, stored.levels)
    code, message = ErrorCode.none, None
    try:
        new = features.apply_updates(current, updates, ctx.config.node_id)
        if new != current and not getattr(request.body, "validate_only", False):
            stored.set(new)
            log.info("finalized features now %s (epoch %d)", new, stored.epoch)
    except features.Refusal as refusal:
        code, message = refusal.code, refusal.message
    except OSError as exc:
        log.error("could not write the finalized features: %s", exc)
        code, message = ErrorCode.kafka_storage_error, f"The feature levels could not be written: {exc}"
    return make(cls, throttle_time=0, error_code=code, error_message=message,
                results=[dict(feature=name, error_code=code, error_message=message) for name, _, _ in updates])
