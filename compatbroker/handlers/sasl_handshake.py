"""SaslHandshake (key 17), versions 0-1: the client names the SASL mechanism it will authenticate with.

The connection's authenticator (compatbroker.security.authenticator) decides, as Kafka's SaslServerAuthenticator:
an enabled mechanism is accepted (v0: raw tokens follow; v1: SaslAuthenticate requests), any other gets
UNSUPPORTED_SASL_MECHANISM with the listener's mechanisms and the connection closes. On an authenticated connection
it starts re-authentication when the session has a lifetime (KIP-368), else it gets ILLEGAL_SASL_STATE, as it does
on a listener without SASL (KafkaApis' answer).
"""
from __future__ import annotations

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import SaslHandshakeResponse
from ..security.authenticator import AuthenticationFailed
from . import CloseAfterResponse

API_KEY = 17
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx, request) -> SaslHandshakeResponse:
    if ctx.authenticator is None:
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    try:
        return ctx.authenticator.handshake(ctx.api_version, request.mechanism)
    except AuthenticationFailed as exc:
        raise CloseAfterResponse(exc.response, str(exc)) from None
