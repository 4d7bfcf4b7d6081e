"""ApiVersions (18): the version ranges this broker speaks."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..codec.versions import ADVERTISED_VERSIONS
from ..context import BrokerContext

API_KEY = 18


async def handle(ctx: BrokerContext, request: Request):
    return make(
        response_type(request),
        error_code=ErrorCode.none,
        api_keys=[
            dict(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(ADVERTISED_VERSIONS.items())
        ],
        throttle_time=0,
        supported_features=(),
        finalized_features_epoch=-1,
        finalized_features=(),
        zk_migration_ready=False,
    )
