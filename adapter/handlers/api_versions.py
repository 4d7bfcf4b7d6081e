"""ApiVersions (18): the version ranges this broker speaks and, from v3, its cluster
features: supported ranges, finalized levels and their epoch (adapter.features)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from .. import features
from ..codec import Request, response_type
from ..codec.entities import make
from ..codec.versions import ADVERTISED_VERSIONS
from ..context import BrokerContext

API_KEY = 18


async def handle(ctx: BrokerContext, request: Request):
    stored = ctx.store.features
    return make(
        response_type(request),
        error_code=ErrorCode.none,
        api_keys=[
            dict(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
        ],
        throttle_time=0,
        supported_features=features.supported_keys(request.api_version),
        finalized_features_epoch=stored.epoch,
        finalized_features=features.finalized_keys(features.finalized(stored.stored, stored.levels)),
        zk_migration_ready=False,
    )
