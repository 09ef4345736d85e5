"""PushTelemetry (API key 72), version 0: a client's metrics, as OTLP MetricsData (KIP-714).

Checked as Kafka 4.x's ClientMetricsManager checks it (`compatbroker.telemetry.client_telemetry`): INVALID_REQUEST
for the zero instance id or a push after a terminating one, THROTTLING_QUOTA_EXCEEDED sooner than the push
interval, UNKNOWN_SUBSCRIPTION_ID for a stale subscription id, UNSUPPORTED_COMPRESSION_TYPE, TELEMETRY_TOO_LARGE
above `telemetry.max.bytes`, INVALID_RECORD for a payload that does not decompress or decode. Taken metrics go to
the broker's store, shown by the console and re-exported on /metrics. No ACL is checked, as in Kafka. An
unexpected failure answers INVALID_REQUEST (one ERROR line), as Kafka's KafkaApis does.
"""
from __future__ import annotations

import logging

from ..protocol.error_codes import ErrorCode
from ..protocol.messages import PushTelemetryResponse
from ..security.session import host_address
from ..telemetry import ClientInfo, TelemetryError

API_KEY = 72
MIN_VERSION = 0
MAX_VERSION = 0

log = logging.getLogger(__name__)


async def handle(ctx, request) -> PushTelemetryResponse:
    try:
        ctx.broker.client_telemetry.push(
            request.client_instance_id, client_info(ctx), subscription_id=request.subscription_id,
            terminating=request.terminating, compression_type=request.compression_type,
            metrics=bytes(request.metrics or b""), client_gone=ctx.client_gone)
    except TelemetryError as exc:
        return PushTelemetryResponse(error_code=exc.error_code)
    except Exception:  # noqa: BLE001 - Kafka answers INVALID_REQUEST rather than closing
        log.exception("PushTelemetry from %s (client %r) failed", ctx.peer, ctx.client_id)
        return PushTelemetryResponse(error_code=ErrorCode.INVALID_REQUEST)
    return PushTelemetryResponse(error_code=ErrorCode.NONE)


def client_info(ctx) -> ClientInfo:
    """Who sent the request, as client metrics subscriptions match it (Kafka's ClientMetricsInstanceMetadata)."""
    session = ctx.session
    host, _sep, port = ctx.peer.rpartition(":")
    address = session.client_host or host_address(host.removeprefix("[").removesuffix("]"))
    return ClientInfo(client_id=ctx.client_id, software_name=session.client_software_name,
                      software_version=session.client_software_version,
                      source_address=address or None, source_port=int(port) if port.isdigit() else None)
