"""kafkajs 2.2.4 on node, driven through kafkajs_client.js (one node process per call).

kafkajs has no assign(): its consumers always join a consumer group, so consuming needs the group coordinator APIs,
which it sends at these versions: FindCoordinator v2, JoinGroup v5, SyncGroup v3, Heartbeat v3, OffsetFetch v4 and
LeaveGroup v3 (kafkajs' highest versions; autoCommit is off, so no OffsetCommit). Without FindCoordinator in
ApiVersions kafkajs sends no group request at all and fails with KafkaJSGroupCoordinatorNotFound. Producing and
ListOffsets (through its admin client) need only Metadata, Produce and ListOffsets.

`secured(config)` (base.py) gives an adapter whose every call connects over TLS and/or with SASL: `config` is the
"kafkajs" client config of compatbroker.toolkit.security, whose `ssl` and `sasl` options the script takes (each call
still names its bootstrap). Failures are KafkajsError, carrying kafkajs' error and the chain of its causes.
"""
from __future__ import annotations

from pathlib import Path

from ..records import Consumed
from .base import DEFAULT_TIMEOUT_S
from .node_program import NodeProgramClient, ProgramError, unb64

SCRIPT = Path(__file__).with_name("kafkajs_client.js")


def error_chain(detail: dict | None) -> list[dict]:
    """An error the script reported ({"name", "message", "type", "code", "cause"}), then each cause in turn."""
    found = []
    while detail:
        found.append(detail)
        detail = detail.get("cause")
    return found


class KafkajsError(ProgramError):
    """kafkajs' error: `detail` is {"name", "message", "type", "code", "retriable", "cause": {...}} as the script
    reported it (`cause`: the error a retrier gave up on, when kafkajs kept it)."""

    def chain(self) -> list[dict]:
        """The error, then each cause in turn."""
        return error_chain(self.detail)

    def types(self) -> set[str]:
        """The Kafka error names (kafkajs' `type`) anywhere in the chain, e.g. {"TOPIC_AUTHORIZATION_FAILED"}."""
        return {detail["type"] for detail in self.chain() if detail.get("type")}


class KafkajsClient(NodeProgramClient):
    name = "kafkajs"
    script = SCRIPT
    error = KafkajsError

    def _call(self, spec: dict, timeout_s: float):
        if self.security is not None:
            spec = spec | {"security": {key: self.security[key] for key in ("ssl", "sasl") if key in self.security}}
        return super()._call(spec, timeout_s)

    def group_consume(self, bootstrap, topic, group, count, timeout_s=DEFAULT_TIMEOUT_S):
        # the script reports no headers nor timestamps here
        result = self._call({"op": "group_consume", "brokers": bootstrap, "topic": topic, "group": group,
                             "count": count, "timeout_ms": int(timeout_s * 1000)}, timeout_s)
        return [Consumed(r["partition"], r["offset"], unb64(r["key"]), unb64(r["value"]), (), -1)
                for r in result["records"]]

    def acl_calls(self, bootstrap: str, *calls: dict, timeout_s: float = 30) -> list[dict]:
        """kafkajs' admin createAcls / describeAcls / deleteAcls in order ({"call": "create", "acl": [...]},
        {"call": "describe", "filter": {...}}, {"call": "delete", "filters": [...]}); each answer is {"result": ...}
        or {"error": detail}."""
        return self._call({"op": "acls", "brokers": bootstrap, "calls": list(calls)}, timeout_s)["results"]

