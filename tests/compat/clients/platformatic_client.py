"""@platformatic/kafka 1.35.0 on node, driven through platformatic_client.js (one node process per call).

@platformatic/kafka is a pure JavaScript client that speaks recent protocol versions only (Kafka 3.5 to 4.1: Produce
v7+, Fetch v12+ by topic id, Metadata v9+, JoinGroup v6+...). Why 1.35.0: it is the newest release that runs on the
node this machine has (Debian's 20.x); every 2.x release requires node >= 22.22. Its two own dependencies,
@platformatic/dynamic-buffer 0.3.1 and @platformatic/wasm-utils 0.2.1 (snappy and lz4 in WebAssembly), are pinned
beside it (tests/setup/platformatic.sh): they declare node >= 22.19 but run on 20.19+, and newer ones might not.
What 1.35.0 cannot do on node 20: zstd (it compresses with node:zlib's zstd, which node 20 lacks, and raises
UnsupportedCompressionError), nor read snappy in xerial framing (Kafka's Java client, kafka-python). Its consumers
always join a group (no assign()), like kafkajs': a consume here is a group of its own, with autocommit off. Its
classic group protocol assigns roundrobin, eagerly (no cooperative assignor), a member's stream may hand out records
of a partition a rebalance took from it, and closing a static member sends LeaveGroup; it also has KIP-848's
consumer protocol, which this adapter does not use. Its transactional producers
cannot take over a transactional id another producer holds (PRODUCER_FENCED). test_platformatic_kafka.py shows each.

Failures are PlatformaticError, carrying the error's name, code and the Kafka error names (`api_ids`) inside it.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .base import DEFAULT_TIMEOUT_S, GroupInfo, GroupListing, MemberInfo
from .node_program import NodeProgramClient, ProgramError

SCRIPT = Path(__file__).with_name("platformatic_client.js")
VERSION = "1.35.0"
# The packages tests/setup/platformatic.sh installs, pinned (see the module docstring).
PACKAGES = (f"@platformatic/kafka@{VERSION}", "@platformatic/dynamic-buffer@0.3.1", "@platformatic/wasm-utils@0.2.1")
PREFIX = Path(os.environ.get("COMPATBROKER_PLATFORMATIC_DIR",
                             Path.home() / ".cache" / "compatbroker" / "platformatic"))
INSTALL = (f"apt-get install -y nodejs npm && npm install --prefix {PREFIX} {' '.join(PACKAGES)}  "
           "(or: bash tests/run.sh; COMPATBROKER_PLATFORMATIC_DIR selects another directory)")


class PlatformaticError(ProgramError):
    """The library's error: `detail` is {"name", "code", "message", "apiIds"} as the script reported it."""

    @property
    def api_ids(self) -> list[str]:
        """The Kafka error names inside the error (its ProtocolErrors' apiId), e.g. ["TOPIC_ALREADY_EXISTS"]."""
        return self.detail.get("apiIds", [])


def installed_version(name: str = "platformatic-kafka") -> str | None:
    try:
        return json.loads((PREFIX / "node_modules" / "@platformatic" / "kafka" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return None


def load(name: str = "platformatic-kafka") -> PlatformaticClient:
    from . import MissingClient
    node = shutil.which("node")
    version = installed_version()
    if node is None or version != VERSION:
        found = ("node is missing" if node is None
                 else f"@platformatic/kafka {version or 'is not installed'} in {PREFIX}")
        raise MissingClient(f"{name}: {found}; install with: {INSTALL}")
    return PlatformaticClient(node, PREFIX / "node_modules")


class PlatformaticClient(NodeProgramClient):
    name = "platformatic-kafka"
    script = SCRIPT
    error = PlatformaticError
    label = "platformatic"
    sends_null_header = True  # a header value left undefined goes out as null (test_platformatic_kafka.py)

    def batch(self, bootstrap: str, *steps: dict, concurrent: bool = False,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list:
        """Several of the script's operations in one node process (`steps`: specs without `brokers`), in order or all
        at once; returns each one's result, or a PlatformaticError for one that failed (the others still run)."""
        answers = self._call({"op": "batch", "brokers": bootstrap, "steps": list(steps), "concurrent": concurrent},
                             timeout_s)["results"]
        return [PlatformaticError(f"platformatic {step['op']}: {answer['error']}", answer["error"])
                if "error" in answer else answer["result"] for step, answer in zip(steps, answers)]

    # --- admin ---------------------------------------------------------------------------------------------------

    def admin(self, bootstrap: str, *calls: dict, timeout_s: float = 30) -> list:
        """The Admin client's calls in order, over one client (the script's ADMIN_CALLS); returns each call's result,
        or a PlatformaticError for a call that failed (the next calls still run)."""
        answers = self._call({"op": "admin", "brokers": bootstrap, "calls": list(calls)}, timeout_s)["results"]
        return [PlatformaticError(f"platformatic admin {call['call']}: {answer['error']}", answer["error"])
                if "error" in answer else answer["result"] for call, answer in zip(calls, answers)]

    def list_groups(self, bootstrap, states=()):
        [found] = self.admin(bootstrap, {"call": "list_groups", "states": _state_names(states) or None})
        _raise(found)
        return {g["id"]: GroupListing(g["id"], g["state"], g["protocolType"]) for g in found}

    def describe_groups(self, bootstrap, group_ids):
        [found] = self.admin(bootstrap, {"call": "describe_groups", "groups": list(group_ids)})
        _raise(found)
        return {g["id"]: GroupInfo(g["id"], g["state"], g["protocolType"], g["protocol"], tuple(
            MemberInfo(m["memberId"], m["clientId"], m["host"], m["instanceId"],
                       frozenset((t, p) for t, p in m["assignment"])) for m in g["members"])) for g in found}

    def group_offsets(self, bootstrap, group_id):
        [found] = self.admin(bootstrap, {"call": "group_offsets", "group": group_id})
        _raise(found)
        return {(key.rsplit(":", 1)[0], int(key.rsplit(":", 1)[1])): offset for key, offset in found.items()}

# Kafka's group state names -> the library's ConsumerGroupStates.
_STATES = {"Stable": "STABLE", "Empty": "EMPTY", "Dead": "DEAD", "PreparingRebalance": "PREPARING_REBALANCE",
           "CompletingRebalance": "COMPLETING_REBALANCE"}


def _state_names(states) -> list[str]:
    return [_STATES[state] for state in states]


def _raise(found) -> None:
    if isinstance(found, Exception):
        raise found

