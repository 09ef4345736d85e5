"""SaslAuthenticate (key 36), versions 0-2: one token of the SASL exchange after SaslHandshake v1.

The connection's authenticator (compatbroker.security.authenticator) feeds the token to the mechanism and answers
its challenge; on completion v1+ carries `session_lifetime_ms` (KIP-368). A refused token gets
SASL_AUTHENTICATION_FAILED with the mechanism's message and the connection closes. After authentication, and on a
listener without SASL, the answer is ILLEGAL_SASL_STATE (KafkaApis' answer).
"""
from __future__ import annotations

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import SaslAuthenticateResponse
from ..security.authenticator import AuthenticationFailed
from . import CloseAfterResponse

API_KEY = 36
MIN_VERSION = 0
MAX_VERSION = 2

_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


async def handle(ctx, request) -> SaslAuthenticateResponse:
    if ctx.authenticator is None:
        return SaslAuthenticateResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message=_AFTER_AUTHENTICATION,
                                        auth_bytes=b"")
    try:
        return ctx.authenticator.authenticate(ctx.api_version, request.auth_bytes)
    except AuthenticationFailed as exc:
        raise CloseAfterResponse(exc.response, str(exc)) from None
