"""SaslAuthenticate (36): one SASL token each way. A failure is SASL_AUTHENTICATION_FAILED with
Kafka's message, and the connection is closed after the answer (which the connection holds
back ``connection.failed.authentication.delay.ms``); out of order (before a handshake, or
after authentication) it is ILLEGAL_SASL_STATE. v1+ tells the client its session lifetime
(``connections.max.reauth.ms``; 0 = no re-authentication, KIP-368)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..codec import Request, response_type
from ..codec.entities import make
from ..context import AUTHENTICATION, BrokerContext
from ..security.authentication import IllegalSaslState
from ..security.sasl import SaslFailure

API_KEY = 36


async def handle(ctx: BrokerContext, request: Request):
    auth = AUTHENTICATION.get()
    answer, code, message = b"", ErrorCode.none, None
    try:
        if auth is None:
            raise IllegalSaslState("SaslAuthenticate request received on a listener without SASL")
        answer = auth.authenticate(request.body.auth_bytes, ctx.clock.monotonic())
    except IllegalSaslState as exc:
        code, message = ErrorCode.illegal_sasl_state, str(exc)
    except SaslFailure as exc:
        code, message = ErrorCode.sasl_authentication_failed, str(exc)
    return make(response_type(request), error_code=code, error_message=message, auth_bytes=answer,
                session_lifetime=auth.session_lifetime_ms if auth is not None and code == ErrorCode.none else 0)
