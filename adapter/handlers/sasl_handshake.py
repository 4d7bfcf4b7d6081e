"""SaslHandshake (17): pick the SASL mechanism; v0 means bare tokens follow, v1 means
SaslAuthenticate requests. On a listener without SASL, or once authenticated, the answer is
ILLEGAL_SASL_STATE, unless it starts a re-authentication (KIP-368; the connection decides,
adapter.security.authentication); an unknown mechanism gets UNSUPPORTED_SASL_MECHANISM with
the enabled ones, and the connection is closed after the answer (as Kafka does)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import AUTHENTICATION, BrokerContext

API_KEY = 17


async def handle(ctx: BrokerContext, request: Request):
    auth = AUTHENTICATION.get()
    code = ErrorCode.illegal_sasl_state if auth is None else auth.handshake(request.body.mechanism,
                                                                           request.api_version)
    mechanisms = auth.mechanisms if auth is not None else ()
    return make(response_type(request), error_code=code, mechanisms=mechanisms)
