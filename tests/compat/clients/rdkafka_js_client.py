"""The two librdkafka clients of Node.js, each driven one node process per call (JSON in, JSON out, like kafkajs;
node_program.py):

- node-rdkafka 3.6.1 through its own callback API (rdkafka_callback.js): Producer, KafkaConsumer by assign(),
  AdminClient (createTopic, createPartitions, deleteTopic: all it has);
- @confluentinc/kafka-javascript 1.10.1 through its KafkaJS-compatible promisified API (rdkafka_kafkajs.js), the one
  it recommends: consumers always join a group (no assign()), admin with topics, groups and offsets.

Both compile the librdkafka their npm tarball ships (node-rdkafka: 2.12.0; kafka-javascript: 2.15.1) when installed:
tests/setup/node-rdkafka.sh installs them into $COMPATBROKER_RDKAFKA_JS_DIR, one prefix per package. Group members
run the protocol of member.py in the same programs (`--member`).
"""
from __future__ import annotations

import copy
import functools
import json
import os
import shutil
import subprocess
from pathlib import Path

from ..records import EARLIEST
from .base import (
    DEFAULT_TIMEOUT_S,
    ClientAdapter,
    GroupInfo,
    GroupListing,
    MemberInfo,
    run_concurrently,
)
from .node_program import NodeProgramClient, ProgramError, consumed, record_json, start_json

HERE = Path(__file__).parent
DIR = Path(os.environ.get("COMPATBROKER_RDKAFKA_JS_DIR", Path.home() / ".cache" / "compatbroker" / "node-rdkafka"))
# matrix row -> (npm package, pinned version, prefix under DIR)
PACKAGES = {
    "node-rdkafka": ("node-rdkafka", "3.6.1", "node-rdkafka"),
    "confluent-kafka-javascript": ("@confluentinc/kafka-javascript", "1.10.1", "confluent-kafka-javascript"),
}
SETUP = ("bash tests/run.sh, whose tests/setup/node-rdkafka.sh installs both with the Debian packages their builds "
         "need (libssl-dev zlib1g-dev libzstd-dev pkg-config); each compiles librdkafka, several minutes")


# Both addons (src/producer.cc, produce) take an empty Buffer's data pointer, which node 20 gives as NULL for a
# zero-length Buffer, and librdkafka sends a NULL key or value as null; their fallback (a new zero-length Buffer,
# node-rdkafka PR #773 for node 13) meets the same NULL. Seen with node 20.20: Record(b"", b"") is read back as
# Record(None, None).
EMPTY_IS_NULL = "an empty key or value is sent as null on node 20 (zero-length Buffer data is NULL in the addon)"


class RdkafkaJsError(ProgramError):
    """A failure the program reported: `detail` is {"name", "message", "code", "kafka": librdkafka's error name}."""


class _NodeProgram(NodeProgramClient):
    """What both rows share: their error, an environment naming the package, and the calls only they have."""

    error = RdkafkaJsError
    package_env: dict[str, str] = {}
    call_slack_s = 15
    metadata_timeout_s = 40

    def _env(self) -> dict[str, str]:
        return {**super()._env(), **self.package_env}

    def consume_concurrently(self, bootstrap, topic, clients, count, started=None):
        # One node process holding every consumer, as for produce_concurrently.
        spec = {"op": "consume_many", "clients": clients, "brokers": bootstrap, "topic": topic, "count": count,
                "partitions": [0], "start": start_json(EARLIEST), "timeout_ms": 60_000, "fetch_wait_ms": None}
        [result] = run_concurrently([lambda: self._call(spec, 60)], started=started)
        return [[consumed(r) for r in one["records"]] for one in result["results"]]

    def admin(self, bootstrap: str, *calls: dict, timeout_s: float = 40) -> list[dict]:
        """The client's admin calls in order (see the program's `admin`); each answer is {"result"/"ok": ...} or
        {"error": detail}, a failed call not stopping the next."""
        return self._call({"op": "admin", "brokers": bootstrap, "calls": list(calls)}, timeout_s)["results"]


class NodeRdkafkaClient(_NodeProgram):
    """node-rdkafka's callback API. Its producer turns every header value into a string (src/producer.cc converts
    it with Nan::To<v8::String>, then UTF-8), so a binary header value cannot be sent; and an empty key or value
    goes out as null (EMPTY_IS_NULL). Hence not `expressive`: test_node_rdkafka.py produces the timestamps and
    binary keys and values that the shared record-shapes test then leaves out."""

    name = "node-rdkafka"
    script = HERE / "rdkafka_callback.js"
    expressive = False

    def produce(self, bootstrap, topic, records, *, acks=-1, compression=None, timeout_s=DEFAULT_TIMEOUT_S):
        result = self._call({"op": "produce", "brokers": bootstrap, "topic": topic, "acks": acks,
                             "codec": compression or "none", "records": [record_json(r) for r in records]},
                            timeout_s)
        # acks=0: librdkafka reports no offsets (-1)
        return None if acks == 0 else [tuple(report) for report in result["reports"]]

    def committed(self, bootstrap, group, topic, partitions):
        offsets = self._call({"op": "committed", "brokers": bootstrap, "group": group, "topic": topic,
                              "partitions": list(partitions)}, 30)["offsets"]
        return {p: offsets[str(p)] if offsets.get(str(p), -1) >= 0 else None for p in partitions}  # -1001: none


class ConfluentKafkaJsClient(_NodeProgram):
    """@confluentinc/kafka-javascript's KafkaJS API. Its send() answers one base offset per partition, not each
    record's offset; its consumers join a group of their own to read. An empty key or value goes out as null
    (EMPTY_IS_NULL), so not `expressive`: test_confluent_kafka_javascript.py produces the timestamps and binary
    keys, values and headers that the shared record-shapes test then leaves out."""

    name = "confluent-kafka-javascript"
    script = HERE / "rdkafka_kafkajs.js"
    expressive = False

    def list_offsets(self, bootstrap, topic, partition, timestamp):
        found = self._call({"op": "list_offsets", "brokers": bootstrap, "topic": topic, "partition": partition,
                            "timestamp": timestamp}, 30)
        # Where Kafka answers -1 (no record that recent) the API reports the latest offset, as kafkajs does; a
        # record's own offset is always below the latest, so the latest can only mean that answer.
        at = found["at"]
        return found["earliest"], found["latest"], None if at < 0 or at == found["latest"] else at

    def metadata(self, bootstrap, topics=None, *, auto_create=False):
        if not auto_create:
            return super().metadata(bootstrap, topics)
        # No call of the KafkaJS API lets the broker create a topic it names: its admin's describeTopics never does,
        # and a subscribing consumer of librdkafka 2.15.1 allows creation only once it knows some topic already
        # (rd_kafka_metadata_refresh_consumer_topics). The package's node-rdkafka-style Producer.getMetadata does.
        return self._in_callback_api(NodeProgramClient.metadata, bootstrap, topics, auto_create=True)

    def _in_callback_api(self, method, *args, **kwargs):
        """NodeProgramClient's `method` run by rdkafka_callback.js, on this package's node-rdkafka-style API."""
        clone = copy.copy(self)
        clone.script = NodeRdkafkaClient.script
        clone.package_env = {"RDKAFKA_JS_PACKAGE": PACKAGES[self.name][0]}
        return method(clone, *args, **kwargs)

    def read_to_end(self, *args, **kwargs):
        # The KafkaJS API has no position(): the package's node-rdkafka-style KafkaConsumer reads instead.
        return self._in_callback_api(NodeProgramClient.read_to_end, *args, **kwargs)

    def _admin_result(self, bootstrap: str, call: dict):
        [answer] = self.admin(bootstrap, call)
        if "error" in answer:
            raise RdkafkaJsError(f"{self.name} {call['call']}: {answer['error']}", answer["error"])
        return answer["result"]

    def list_groups(self, bootstrap, states=()):
        call = {"call": "list_groups", "states": list(states) or None}
        return {g["group_id"]: GroupListing(g["group_id"], g["state"], g["protocol_type"])
                for g in self._admin_result(bootstrap, call)}

    def describe_groups(self, bootstrap, group_ids):
        found = self._admin_result(bootstrap, {"call": "describe_groups", "groups": list(group_ids)})
        return {g["group_id"]: _group_info(g) for g in found}

    def group_offsets(self, bootstrap, group_id):
        found = self._admin_result(bootstrap, {"call": "group_offsets", "group": group_id})
        return {(topic, partition): offset for topic, partition, offset in found}


def _group_info(g: dict) -> GroupInfo:
    if "error" in g:
        raise RdkafkaJsError(f"describe_groups {g['group_id']}: {g['error']}", g["error"])
    members = tuple(MemberInfo(m["member_id"], m["client_id"], m["host"], m["instance_id"],
                               frozenset(tuple(tp) for tp in m["assignment"])) for m in g["members"])
    # librdkafka names a group without a protocol type "simple"; Kafka's name for it is the empty string
    protocol_type = "" if g["protocol_type"] == "simple" else g["protocol_type"]
    return GroupInfo(g["group_id"], g["state"], protocol_type, g["protocol"], members)


# --- the catalog's adapter and version functions --------------------------------------------------------------------

def _modules(name: str) -> Path:
    _package, _version, prefix = PACKAGES[name]
    return DIR / prefix / "node_modules"


def _install_hint(name: str) -> str:
    package, version, prefix = PACKAGES[name]
    build = "CKJS_LINKING=dynamic " if name == "confluent-kafka-javascript" else ""
    extra = " --build-from-source" if name == "confluent-kafka-javascript" else ""
    return (f"{build}npm install{extra} --prefix {DIR / prefix} {package}@{version}  (or: {SETUP}; "
            "COMPATBROKER_RDKAFKA_JS_DIR selects another directory)")


def load(name: str) -> ClientAdapter:
    from . import MissingClient
    package, version, _prefix = PACKAGES[name]
    node = shutil.which("node")
    manifest = _modules(name) / package / "package.json"
    installed = json.loads(manifest.read_text()).get("version", "").lstrip("v") if manifest.is_file() else None
    built = list((_modules(name) / package / "build" / "Release").glob("*.node"))
    if node is None or installed != version or not built:
        problem = ("node is missing" if node is None else
                   f"{package}@{version} is not built in {_modules(name)} (found: {installed or 'nothing'})")
        raise MissingClient(f"{name}: {problem}; install with: {_install_hint(name)}")
    adapter = NodeRdkafkaClient if name == "node-rdkafka" else ConfluentKafkaJsClient
    return adapter(node, _modules(name))


@functools.cache
def version(name: str) -> str | None:
    """`<package> <version>, librdkafka <version>`, as the installed package reports them."""
    package, _version, _prefix = PACKAGES[name]
    node = shutil.which("node")
    if node is None:
        return None
    script = (f"const k = require({json.dumps(package)}); "
              f"console.log(require({json.dumps(package + '/package.json')}).version, k.librdkafkaVersion)")
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=False,
                          env=dict(os.environ, NODE_PATH=str(_modules(name))))
    if done.returncode != 0:
        return None
    package_version, librdkafka = done.stdout.split()
    return f"{package} {package_version.lstrip('v')}, librdkafka {librdkafka}"
