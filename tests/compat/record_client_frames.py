#!/usr/bin/env python3
"""Record the request frames that real Kafka clients send, as test data for the protocol layer.

Run by hand (not by the test suite) whenever the client set changes:

    /tmp/venv/bin/python tests/compat/record_client_frames.py

The broker is librdkafka's mock cluster, a small Kafka broker written in C that ships inside the
confluent-kafka wheel. Each client flow talks to it through the logging proxy kproxy.py, which
writes every request frame to a dump directory. The frames are then de-duplicated, renamed to
tests/data/client_frames/<client>/<Api>__v<version>__<n>.bin and described in manifest.json,
together with the records every produce flow sent, so tests/protocol/test_client_frames.py can
check that our codec decodes and re-encodes them byte for byte.

Why the proxy options:
  --fix-apiversions  the mock answers an unsupported ApiVersions version with a malformed body
                     that kafka-python cannot bootstrap from;
  --cap              the mock misreads flexible JoinGroup/SyncGroup and LeaveGroup v3+;
  --advertise        the mock lacks the admin APIs; advertised, the clients send them (the frames
                     are recorded, the requests swallowed and left unanswered, so admin calls time
                     out by design and use short timeouts).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import ctypes
import dataclasses
import glob
import importlib
import importlib.metadata
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEFAULT_OUT = REPO / "tests" / "data" / "client_frames"
DEFAULT_KPROXY = Path(os.environ.get("KPROXY", "/work/shared/tools/kproxy.py"))
DEFAULT_KAFKAJS_DIR = Path(os.environ.get("KAFKAJS_DIR", "/tmp/kafkajs"))
KAFKAJS_SCRIPT = Path(__file__).resolve().parent / "clients" / "record_kafkajs.js"

PROXY_CAP = "11:5,14:3,13:2"
# Apache Kafka 4.x ranges of CreateTopics, DeleteTopics, DescribeConfigs, DescribeGroups, ListGroups.
PROXY_ADVERTISE = "19:2-7,20:1-6,32:1-4,15:0-6,16:0-5"
ADMIN_TIMEOUT_S = 1.5
TELEMETRY_API_KEYS = (71, 72)  # GetTelemetrySubscriptions, PushTelemetry

# Frames of these APIs repeat with little variation (polling); keep only a few per version.
FRAME_CAP = {"ApiVersions": 4, "Fetch": 4, "Heartbeat": 4, "Metadata": 4}

# Versions this data set was made with; other versions are recorded too, with a warning.
EXPECTED_VERSIONS = {"kafka-python": "3.0.12", "aiokafka": "0.14.0", "confluent-kafka": "2.16.1",
                     "kafkajs": "2.2.4"}

INSTALL_HINTS = {
    "kafka-python": "/tmp/venv/bin/pip install kafka-python==3.0.12 python-snappy lz4 zstandard crc32c",
    "aiokafka": "/tmp/venv/bin/pip install aiokafka==0.14.0 cramjam",
    "confluent-kafka": "/tmp/venv/bin/pip install confluent-kafka==2.16.1",
    "kcat": "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y kcat",
    "kafkajs": ("mkdir -p /tmp/kafkajs && cd /tmp/kafkajs && npm install kafkajs@2.2.4 "
                "kafkajs-snappy@1.1.0 kafkajs-lz4@1.2.1 @bokuweb/zstd-wasm@0.0.27 "
                "(node >= 18; or pass --kafkajs-dir / set KAFKAJS_DIR)"),
}

log = logging.getLogger("record_client_frames")


# ---------------------------------------------------------------------------------------------
# What the produce flows send
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int | None  # None: the client stamps the record itself (kcat)

    def to_json(self) -> dict:
        return {"key": b64(self.key), "value": b64(self.value),
                "headers": [[name, b64(value)] for name, value in self.headers],
                "timestamp": self.timestamp}


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


BASE_TIMESTAMP = 1_700_000_000_000
# Repeated header names are kept adjacent: kafkajs takes headers as an object and can only
# express a repeated name as consecutive headers.
HEADERS = (("trace-id", b"abc123"), ("trace-id", b"dup"), ("empty", b""), ("null-value", None))
RECORDS = (
    Record(b"key-1", b"value-1", (), BASE_TIMESTAMP),
    Record(None, b"no key here", (), BASE_TIMESTAMP + 1_000),
    Record(b"tombstone-key", None, (), BASE_TIMESTAMP + 2_000),
    Record(b"key-4", b"with headers", HEADERS, BASE_TIMESTAMP + 3_000),
    Record(b"key-5", b"compatbroker " * 16, (), BASE_TIMESTAMP + 4_000),
)


@dataclasses.dataclass(frozen=True)
class ProduceFlow:
    name: str
    codec: str  # none, gzip, snappy, lz4, zstd
    acks: int  # 1 or -1
    idempotent: bool = False


PRODUCE_FLOWS = (
    ProduceFlow("produce-none", "none", 1),
    ProduceFlow("produce-gzip", "gzip", 1),
    ProduceFlow("produce-snappy", "snappy", 1),
    ProduceFlow("produce-lz4", "lz4", 1),
    ProduceFlow("produce-zstd", "zstd", 1),
    ProduceFlow("produce-acksall", "none", -1),
    ProduceFlow("produce-idempotent", "none", -1, idempotent=True),
)
CONSUME_SOURCE = "produce-none"  # topic the plain consumer reads from the beginning
GROUP_SOURCE = "produce-gzip"  # topic the group consumer reads (a compressed Fetch answer)


# ---------------------------------------------------------------------------------------------
# The broker: librdkafka's mock cluster, driven through the library bundled with confluent-kafka
# ---------------------------------------------------------------------------------------------

class MockCluster:
    """One mock broker, alive for the whole recording.

    The confluent-kafka Python API can start a mock cluster (`test.mock.num.brokers`) but offers
    no handle to configure it, and a few settings matter here: the mock reports a controller id
    that names no broker (so admin clients never send CreateTopics/DeleteTopics), it delays the
    first group rebalance, and it advertises client telemetry. So the same bundled librdkafka is
    called through ctypes, which also yields the mock's address directly
    (rd_kafka_mock_cluster_bootstraps).
    """

    def __init__(self) -> None:
        self._lib = _load_bundled_librdkafka()
        self.version = self._lib.rd_kafka_version_str().decode()
        errstr = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        for name, value in ((b"test.mock.num.brokers", b"1"), (b"log_level", b"3")):
            if self._lib.rd_kafka_conf_set(conf, name, value, errstr, len(errstr)) != 0:
                raise RuntimeError("librdkafka config %s: %s" % (name, errstr.value.decode()))
        self._rk = self._lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0: producer handle
        if not self._rk:
            raise RuntimeError("rd_kafka_new failed: " + errstr.value.decode())
        self._mock = self._lib.rd_kafka_handle_mock_cluster(self._rk)
        self.bootstrap = self._lib.rd_kafka_mock_cluster_bootstraps(self._mock).decode()
        self.host, port = self.bootstrap.split(",")[0].rsplit(":", 1)
        self.port = int(port)
        self._check(self._lib.rd_kafka_mock_set_controller_id(self._mock, 1), "set controller")
        self._check(self._lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mock, 0),
                    "set rebalance delay")
        # librdkafka pushes client metrics (KIP-714) to brokers that advertise them, on a timer: the
        # recorded flows leave them out (tests/compat/test_client_telemetry.py covers them).
        for api_key in TELEMETRY_API_KEYS:
            self._check(self._lib.rd_kafka_mock_set_apiversion(self._mock, api_key, -1, -1),
                        "disable API %d" % api_key)

    def create_topic(self, name: str) -> None:
        """One partition, so every record of a flow lands in one batch of partition 0."""
        self._check(self._lib.rd_kafka_mock_topic_create(self._mock, name.encode(), 1, 1),
                    "create topic " + name)

    def close(self) -> None:
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    @staticmethod
    def _check(err: int, what: str) -> None:
        if err:
            raise RuntimeError("mock cluster: %s failed with error %d" % (what, err))


def _load_bundled_librdkafka() -> ctypes.CDLL:
    import confluent_kafka
    libdir = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    candidates = sorted(glob.glob(str(libdir / "librdkafka*.so*")))
    if not candidates:
        raise SystemExit("no bundled librdkafka under %s; install the confluent-kafka wheel: %s"
                         % (libdir, INSTALL_HINTS["confluent-kafka"]))
    lib = ctypes.CDLL(candidates[0])
    vp, i32, cp = ctypes.c_void_p, ctypes.c_int32, ctypes.c_char_p
    signatures = {
        "rd_kafka_version_str": (cp, []),
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [vp]),
        "rd_kafka_handle_mock_cluster": (vp, [vp]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_set_controller_id": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_group_initial_rebalance_delay_ms": (ctypes.c_int, [vp, i32]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_mock_set_apiversion": (ctypes.c_int, [vp, ctypes.c_int16, ctypes.c_int16,
                                                        ctypes.c_int16]),
    }
    for name, (restype, argtypes) in signatures.items():
        func = getattr(lib, name)
        func.restype, func.argtypes = restype, argtypes
    return lib


# ---------------------------------------------------------------------------------------------
# The proxy and one flow's recording context
# ---------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def kproxy(kproxy_path: Path, mock: MockCluster, dump_dir: Path):
    """Run kproxy in front of the mock for one flow; yields the address clients bootstrap from."""
    port = free_port()
    cmd = [sys.executable, str(kproxy_path), "--map", "%d=%s:%d" % (port, mock.host, mock.port),
           "--log", str(dump_dir / "kproxy.jsonl"), "--dump-dir", str(dump_dir),
           "--fix-apiversions", "--cap", PROXY_CAP, "--advertise", PROXY_ADVERTISE]
    stderr_path = dump_dir / "kproxy.stderr"
    with open(stderr_path, "w") as stderr:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=stderr, preexec_fn=die_with_parent)
    try:
        deadline = time.monotonic() + 10
        while "listening" not in stderr_path.read_text():  # kproxy announces itself once it listens
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("kproxy did not start: " + stderr_path.read_text()[-2000:])
            time.sleep(0.02)
        yield "127.0.0.1:%d" % port
    finally:
        stop_process(proc)


def die_with_parent() -> None:
    """preexec_fn for child processes: on Linux, have the kernel end them if this script dies
    without cleaning up (SIGKILL); elsewhere the finally blocks are all there is."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, wait_s: float = 10) -> None:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@dataclasses.dataclass
class Flow:
    """What a client adapter needs to run one flow."""
    client: str
    tag: str  # short client name used in topic and group names
    name: str
    bootstrap: str
    dump_dir: Path

    def topic(self, flow_name: str) -> str:
        return "%s.%s" % (self.tag, flow_name)

    @property
    def group(self) -> str:
        return "%s.%s" % (self.tag, self.name)

    def count(self, api: str) -> int:
        """Request frames of this API the proxy has seen so far in this flow."""
        return len(glob.glob(str(self.dump_dir / ("*__%s__v*.bin" % api))))

    def wait_for(self, api: str, count: int, timeout_s: float, step=None) -> bool:
        """Drive the client with step() until the proxy has seen `count` frames of `api`."""
        deadline = time.monotonic() + timeout_s
        while self.count(api) < count:
            if time.monotonic() > deadline:
                return False
            if step is not None:
                step()
            else:
                time.sleep(0.05)
        return True


HEARTBEAT_WAIT_S = 15


def require_heartbeats(flow: Flow, step) -> None:
    """Keep a group member polling until two Heartbeat requests are on record."""
    if not flow.wait_for("Heartbeat", 2, HEARTBEAT_WAIT_S, step=step):
        raise RuntimeError("no Heartbeat within %d s" % HEARTBEAT_WAIT_S)


def records_for(client: "ClientAdapter") -> tuple[Record, ...]:
    if client.null_header_values:
        return RECORDS
    return tuple(dataclasses.replace(r, headers=tuple(h for h in r.headers if h[1] is not None))
                 for r in RECORDS)


# ---------------------------------------------------------------------------------------------
# Client adapters: one method per flow, each raising on failure
# ---------------------------------------------------------------------------------------------

class ClientAdapter:
    name = ""
    tag = ""
    null_header_values = True  # can the client send a header whose value is null?

    def check(self) -> str:
        """Return the client's version; raise ImportError/FileNotFoundError if missing."""
        raise NotImplementedError

    def flows(self) -> list[str]:
        return ["metadata"] + [f.name for f in PRODUCE_FLOWS] + ["consume", "group", "admin"]

    def run(self, flow: Flow, produce: ProduceFlow | None, records) -> str:
        if produce is not None:
            return self.produce(flow, produce, records)
        return getattr(self, flow.name)(flow)


class KafkaPython(ClientAdapter):
    name, tag = "kafka-python", "kp"
    null_header_values = False  # KafkaProducer.send() accepts only bytes header values

    def check(self) -> str:
        import kafka
        for codec_module in ("snappy", "lz4.frame", "zstandard"):
            importlib.import_module(codec_module)
        return kafka.__version__

    def metadata(self, flow: Flow) -> str:
        from kafka import KafkaConsumer
        consumer = KafkaConsumer(bootstrap_servers=flow.bootstrap, request_timeout_ms=5000)
        try:
            topics = consumer.topics()
            partitions = consumer.partitions_for_topic(flow.topic(CONSUME_SOURCE))
        finally:
            consumer.close()
        return "%d topics, %d partitions" % (len(topics), len(partitions or ()))

    def produce(self, flow: Flow, spec: ProduceFlow, records) -> str:
        from kafka import KafkaProducer
        producer = KafkaProducer(
            bootstrap_servers=flow.bootstrap, acks="all" if spec.acks == -1 else spec.acks,
            compression_type=None if spec.codec == "none" else spec.codec,
            enable_idempotence=spec.idempotent, linger_ms=100, request_timeout_ms=5000,
            max_block_ms=10000)
        try:
            futures = [producer.send(flow.topic(spec.name), key=r.key, value=r.value,
                                     headers=list(r.headers), timestamp_ms=r.timestamp,
                                     partition=0) for r in records]
            producer.flush(timeout=15)
            offsets = [f.get(timeout=1).offset for f in futures]
        finally:
            producer.close(timeout=5)
        return "offsets %s" % offsets

    def consume(self, flow: Flow) -> str:
        from kafka import KafkaConsumer, TopicPartition
        consumer = KafkaConsumer(bootstrap_servers=flow.bootstrap, group_id=None,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 request_timeout_ms=5000)
        try:
            tp = TopicPartition(flow.topic(CONSUME_SOURCE), 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got = self._poll(consumer, len(RECORDS))
        finally:
            consumer.close()
        return "consumed %d" % got

    def group(self, flow: Flow) -> str:
        from kafka import KafkaConsumer, TopicPartition
        from kafka.structs import OffsetAndMetadata
        topic = flow.topic(GROUP_SOURCE)
        consumer = KafkaConsumer(topic, bootstrap_servers=flow.bootstrap, group_id=flow.group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 heartbeat_interval_ms=300, session_timeout_ms=10000,
                                 request_timeout_ms=15000)
        try:
            got = self._poll(consumer, len(RECORDS))
            require_heartbeats(flow, step=lambda: consumer.poll(timeout_ms=100))
            tp = TopicPartition(topic, 0)
            consumer.commit({tp: OffsetAndMetadata(got, "", -1)})
            committed = consumer.committed(tp)
        finally:
            consumer.close()  # sends LeaveGroup
        return "consumed %d, committed %s" % (got, committed)

    def admin(self, flow: Flow) -> str:
        from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
        admin = KafkaAdminClient(bootstrap_servers=flow.bootstrap,
                                 request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
        created = flow.topic("admin-created")
        try:
            return run_admin_calls({
                "create_topics": lambda: admin.create_topics([NewTopic(created, 1, 1)]),
                "describe_configs": lambda: admin.describe_configs(
                    [ConfigResource(ConfigResourceType.TOPIC, flow.topic(CONSUME_SOURCE))]),
                "list_groups": admin.list_groups,
                "describe_groups": lambda: admin.describe_groups([flow.topic("group")]),
                "delete_topics": lambda: admin.delete_topics([created]),
            })
        finally:
            admin.close()

    @staticmethod
    def _poll(consumer, want: int, timeout_s: float = 30) -> int:
        got = 0
        deadline = time.monotonic() + timeout_s
        while got < want and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                got += len(batch)
        if got < want:
            raise RuntimeError("consumed %d of %d records" % (got, want))
        return got


class Aiokafka(ClientAdapter):
    name, tag = "aiokafka", "aio"

    def check(self) -> str:
        import aiokafka
        importlib.import_module("cramjam")
        return aiokafka.__version__

    def metadata(self, flow: Flow) -> str:
        return asyncio.run(self._metadata(flow))

    def produce(self, flow: Flow, spec: ProduceFlow, records) -> str:
        return asyncio.run(self._produce(flow, spec, records))

    def consume(self, flow: Flow) -> str:
        return asyncio.run(self._consume(flow))

    def group(self, flow: Flow) -> str:
        return asyncio.run(self._group(flow))

    def admin(self, flow: Flow) -> str:
        return asyncio.run(self._admin(flow))

    async def _metadata(self, flow: Flow) -> str:
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(bootstrap_servers=flow.bootstrap, request_timeout_ms=5000)
        await consumer.start()
        try:
            topics = await consumer.topics()
        finally:
            await consumer.stop()
        return "%d topics" % len(topics)

    async def _produce(self, flow: Flow, spec: ProduceFlow, records) -> str:
        from aiokafka import AIOKafkaProducer
        producer = AIOKafkaProducer(
            bootstrap_servers=flow.bootstrap, acks="all" if spec.acks == -1 else spec.acks,
            compression_type=None if spec.codec == "none" else spec.codec,
            enable_idempotence=spec.idempotent, linger_ms=100, request_timeout_ms=5000)
        await producer.start()
        try:
            futures = [await producer.send(flow.topic(spec.name), key=r.key, value=r.value,
                                           headers=list(r.headers), timestamp_ms=r.timestamp,
                                           partition=0) for r in records]
            metadata = await asyncio.wait_for(asyncio.gather(*futures), 15)
        finally:
            await producer.stop()
        return "offsets %s" % [m.offset for m in metadata]

    async def _consume(self, flow: Flow) -> str:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        consumer = AIOKafkaConsumer(bootstrap_servers=flow.bootstrap, group_id=None,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    request_timeout_ms=5000)
        await consumer.start()
        try:
            tp = TopicPartition(flow.topic(CONSUME_SOURCE), 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            got = await self._poll(consumer, len(RECORDS))
        finally:
            await consumer.stop()
        return "consumed %d" % got

    async def _group(self, flow: Flow) -> str:
        from aiokafka import AIOKafkaConsumer, TopicPartition
        topic = flow.topic(GROUP_SOURCE)
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=flow.bootstrap, group_id=flow.group,
                                    auto_offset_reset="earliest", enable_auto_commit=False,
                                    heartbeat_interval_ms=300, session_timeout_ms=10000,
                                    request_timeout_ms=15000)
        await consumer.start()
        try:
            got = await self._poll(consumer, len(RECORDS))
            deadline = time.monotonic() + HEARTBEAT_WAIT_S
            while flow.count("Heartbeat") < 2:
                if time.monotonic() > deadline:
                    raise RuntimeError("no Heartbeat within %d s" % HEARTBEAT_WAIT_S)
                await consumer.getmany(timeout_ms=100)
            tp = TopicPartition(topic, 0)
            await consumer.commit({tp: got})
            committed = await consumer.committed(tp)
        finally:
            await consumer.stop()  # sends LeaveGroup
        return "consumed %d, committed %s" % (got, committed)

    async def _admin(self, flow: Flow) -> str:
        from aiokafka.admin import AIOKafkaAdminClient, NewTopic
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
        admin = AIOKafkaAdminClient(bootstrap_servers=flow.bootstrap,
                                    request_timeout_ms=int(ADMIN_TIMEOUT_S * 1000))
        await admin.start()
        created = flow.topic("admin-created")
        calls = {
            "create_topics": lambda: admin.create_topics([NewTopic(created, 1, 1)]),
            "describe_configs": lambda: admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, flow.topic(CONSUME_SOURCE))]),
            "list_consumer_groups": admin.list_consumer_groups,
            "describe_consumer_groups": lambda: admin.describe_consumer_groups(
                [flow.topic("group")]),
            "delete_topics": lambda: admin.delete_topics([created]),
        }
        outcome = {}
        try:
            for name, call in calls.items():
                try:
                    await asyncio.wait_for(call(), ADMIN_TIMEOUT_S * 3)
                    outcome[name] = "ok"
                except Exception as e:  # noqa: BLE001 - unanswered requests fail by design
                    outcome[name] = type(e).__name__
        finally:
            await admin.close()
        return format_outcome(outcome)

    @staticmethod
    async def _poll(consumer, want: int, timeout_s: float = 30) -> int:
        got = 0
        deadline = time.monotonic() + timeout_s
        while got < want and time.monotonic() < deadline:
            for batch in (await consumer.getmany(timeout_ms=200)).values():
                got += len(batch)
        if got < want:
            raise RuntimeError("consumed %d of %d records" % (got, want))
        return got


class ConfluentKafka(ClientAdapter):
    name, tag = "confluent-kafka", "ck"

    def check(self) -> str:
        import confluent_kafka
        return "%s (librdkafka %s)" % (importlib.metadata.version("confluent-kafka"),
                                      confluent_kafka.libversion()[0])

    @staticmethod
    def _conf(flow: Flow, **extra) -> dict:
        conf = {"bootstrap.servers": flow.bootstrap, "log_level": 2}
        conf.update({k.replace("_", "."): v for k, v in extra.items()})
        return conf

    def metadata(self, flow: Flow) -> str:
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(self._conf(flow))
        everything = admin.list_topics(timeout=10)
        one = admin.list_topics(topic=flow.topic(CONSUME_SOURCE), timeout=10)
        return "%d topics, %d partitions" % (
            len(everything.topics), len(one.topics[flow.topic(CONSUME_SOURCE)].partitions))

    def produce(self, flow: Flow, spec: ProduceFlow, records) -> str:
        from confluent_kafka import Producer
        producer = Producer(self._conf(
            flow, acks="all" if spec.acks == -1 else str(spec.acks), compression_type=spec.codec,
            enable_idempotence=spec.idempotent, linger_ms=100))
        reports = []
        for r in records:
            producer.produce(flow.topic(spec.name), key=r.key, value=r.value, partition=0,
                             headers=list(r.headers), timestamp=r.timestamp,
                             on_delivery=lambda err, msg: reports.append((err, msg.offset())))
        left = producer.flush(15)
        errors = [err for err, _ in reports if err is not None]
        if left or errors or len(reports) != len(records):
            raise RuntimeError("undelivered %d, errors %s" % (left, errors))
        return "offsets %s" % [offset for _, offset in reports]

    def consume(self, flow: Flow) -> str:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
        # librdkafka insists on a group id even for assign(); it looks up the coordinator too.
        consumer = Consumer(self._conf(flow, group_id=flow.group, enable_auto_commit=False,
                                       auto_offset_reset="earliest"))
        try:
            consumer.assign([TopicPartition(flow.topic(CONSUME_SOURCE), 0, OFFSET_BEGINNING)])
            got = self._poll(consumer, len(RECORDS))
        finally:
            consumer.close()
        return "consumed %d" % got

    def group(self, flow: Flow) -> str:
        from confluent_kafka import Consumer, TopicPartition
        topic = flow.topic(GROUP_SOURCE)
        consumer = Consumer(self._conf(flow, group_id=flow.group, enable_auto_commit=False,
                                       auto_offset_reset="earliest", heartbeat_interval_ms=300,
                                       session_timeout_ms=10000))
        try:
            consumer.subscribe([topic])
            got = self._poll(consumer, len(RECORDS))
            require_heartbeats(flow, step=lambda: consumer.poll(0.1))
            consumer.commit(offsets=[TopicPartition(topic, 0, got)], asynchronous=False)
            committed = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        finally:
            consumer.close()  # sends LeaveGroup
        return "consumed %d, committed %s" % (got, [tp.offset for tp in committed])

    def admin(self, flow: Flow) -> str:
        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType
        admin = AdminClient(self._conf(flow))
        created = flow.topic("admin-created")
        timeout = {"request_timeout": ADMIN_TIMEOUT_S}
        return run_admin_calls({
            "create_topics": lambda: wait_all(admin.create_topics(
                [NewTopic(created, 1, 1)], operation_timeout=1, **timeout)),
            "describe_configs": lambda: wait_all(admin.describe_configs(
                [ConfigResource(ResourceType.TOPIC, flow.topic(CONSUME_SOURCE))], **timeout)),
            "list_consumer_groups": lambda: admin.list_consumer_groups(**timeout).result(),
            "describe_consumer_groups": lambda: wait_all(admin.describe_consumer_groups(
                [flow.topic("group")], **timeout)),
            "delete_topics": lambda: wait_all(admin.delete_topics(
                [created], operation_timeout=1, **timeout)),
        })

    @staticmethod
    def _poll(consumer, want: int, timeout_s: float = 30) -> int:
        got = 0
        deadline = time.monotonic() + timeout_s
        while got < want and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                got += 1
        if got < want:
            raise RuntimeError("consumed %d of %d records" % (got, want))
        return got


def wait_all(futures: dict) -> None:
    for future in futures.values():
        future.result()


class Kcat(ClientAdapter):
    name, tag = "kcat", "kcat"
    KEY_DELIMITER = "\t"

    def check(self) -> str:
        if shutil.which("kcat") is None:
            raise FileNotFoundError("kcat")
        out = subprocess.run(["kcat", "-V"], capture_output=True, text=True, timeout=10).stdout
        match = re.search(r"Version (\S+).*?(librdkafka \S+)", out, re.S)
        return "%s (%s)" % match.groups() if match else out.strip().splitlines()[0]

    def flows(self) -> list[str]:
        return [f for f in super().flows() if f != "admin"]  # kcat has no admin API

    def metadata(self, flow: Flow) -> str:
        topic = flow.topic(CONSUME_SOURCE)
        self._kcat(flow, ["-L"])
        self._kcat(flow, ["-L", "-t", topic])
        self._kcat(flow, ["-Q", "-t", "%s:0:%d" % (topic, BASE_TIMESTAMP)])  # ListOffsets by time
        return "ok"

    def produce(self, flow: Flow, spec: ProduceFlow, records) -> str:
        args = ["-P", "-t", flow.topic(spec.name), "-p", "0", "-K", self.KEY_DELIMITER, "-Z",
                "-X", "acks=%s" % ("all" if spec.acks == -1 else spec.acks), "-X", "linger.ms=100"]
        if spec.codec != "none":
            args += ["-z", spec.codec]
        if spec.idempotent:
            args += ["-X", "enable.idempotence=true"]
        for name, value in HEADERS:
            args += ["-H", name if value is None else "%s=%s" % (name, value.decode())]
        self._kcat(flow, args, stdin=self.input_lines(records))
        return "ok"

    def consume(self, flow: Flow) -> str:
        out = self._kcat(flow, ["-C", "-t", flow.topic(CONSUME_SOURCE), "-p", "0",
                                "-o", "beginning", "-e", "-f", "%o\\n"])
        return "consumed %d" % len(out.split())

    def group(self, flow: Flow) -> str:
        """Runs a balanced consumer until it has committed and heartbeated, then stops it with
        SIGINT so it commits and leaves the group the way an interrupted kcat does."""
        cmd = self._cmd(flow, ["-G", flow.group, flow.topic(GROUP_SOURCE), "-f", "%o\\n",
                               "-X", "auto.offset.reset=earliest", "-X", "heartbeat.interval.ms=300",
                               "-X", "auto.commit.interval.ms=300"])
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=die_with_parent)
        try:
            seen = (flow.wait_for("OffsetCommit", 1, 30, step=lambda: proc_alive(proc))
                    and flow.wait_for("Heartbeat", 2, 15, step=lambda: proc_alive(proc)))
        finally:
            stop_process(proc, signal.SIGINT)
        if not seen:
            raise RuntimeError("kcat group consumer did not commit and heartbeat in time")
        return "consumed %d" % len(proc.stdout.read().split())

    def input_lines(self, records) -> str:
        """kcat reads key<TAB>value lines: no delimiter means a null key, -Z turns an empty
        value into null. Timestamps and headers cannot be set per record."""
        lines = []
        for r in records:
            value = (r.value or b"").decode()
            lines.append(value if r.key is None else "%s%s%s" % (r.key.decode(), self.KEY_DELIMITER, value))
        return "".join(line + "\n" for line in lines)

    @staticmethod
    def as_sent(records) -> tuple[Record, ...]:
        """What kcat actually sends for `records`: the flow's headers on each, its own timestamps."""
        return tuple(dataclasses.replace(r, headers=HEADERS, timestamp=None) for r in records)

    @staticmethod
    def _cmd(flow: Flow, args: list[str]) -> list[str]:
        return ["kcat", "-b", flow.bootstrap, "-q", "-m", "10"] + args

    def _kcat(self, flow: Flow, args: list[str], stdin: str | None = None) -> str:
        done = subprocess.run(self._cmd(flow, args), input=stdin, capture_output=True, text=True,
                              timeout=60, preexec_fn=die_with_parent)
        if done.returncode != 0:
            raise RuntimeError("kcat %s failed (%d): %s" % (" ".join(args[:2]), done.returncode,
                                                            done.stderr.strip()[-300:]))
        return done.stdout


def proc_alive(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        raise RuntimeError("kcat exited early (%d): %s" % (proc.returncode, proc.stderr.read()[-300:]))
    time.sleep(0.05)


class Kafkajs(ClientAdapter):
    name, tag = "kafkajs", "kjs"
    null_header_values = False  # kafkajs 2.2.4 fails to size a header whose value is null

    def __init__(self, kafkajs_dir: Path) -> None:
        self.node_path = kafkajs_dir / "node_modules"

    def check(self) -> str:
        if shutil.which("node") is None:
            raise FileNotFoundError("node")
        for package in ("kafkajs", "kafkajs-snappy", "kafkajs-lz4", "@bokuweb/zstd-wasm"):
            if not (self.node_path / package / "package.json").is_file():
                raise FileNotFoundError(str(self.node_path / package))
        package = json.loads((self.node_path / "kafkajs" / "package.json").read_text())
        node = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=10)
        return "%s (node %s)" % (package["version"], node.stdout.strip())

    def run(self, flow: Flow, produce: ProduceFlow | None, records) -> str:
        spec = {"topic": flow.topic(CONSUME_SOURCE), "group": flow.group,
                "request_timeout_ms": int(ADMIN_TIMEOUT_S * 1000) if flow.name == "admin" else 5000}
        if produce is not None:
            spec.update(topic=flow.topic(produce.name), codec=produce.codec, acks=produce.acks,
                        idempotent=produce.idempotent, records=[r.to_json() for r in records])
        elif flow.name in ("consume", "group"):
            is_group = flow.name == "group"
            spec.update(consume_topic=flow.topic(GROUP_SOURCE if is_group else CONSUME_SOURCE),
                        expected=len(RECORDS), heartbeats=2 if is_group else 0,
                        commit=is_group, fetch_committed=is_group)
        elif flow.name == "admin":
            spec.update(create_topic=flow.topic("admin-created"), group=flow.topic("group"))
        spec_path = flow.dump_dir / "kafkajs-spec.json"
        spec_path.write_text(json.dumps(spec))
        env = dict(os.environ, NODE_PATH=str(self.node_path))
        cmd = ["node", str(KAFKAJS_SCRIPT), flow.name, flow.bootstrap, str(spec_path)]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env,
                              preexec_fn=die_with_parent)
        lines = done.stdout.strip().splitlines()
        result = json.loads(lines[-1]) if lines else {"ok": False, "error": done.stderr[-500:]}
        if done.returncode != 0 or not result.get("ok"):
            raise RuntimeError("kafkajs %s failed: %s" % (flow.name, str(result.get("error"))[:500]))
        return json.dumps(result.get("result"), separators=(",", ":"))[:200]


def run_admin_calls(calls: dict) -> str:
    outcome = {}
    for name, call in calls.items():
        try:
            call()
            outcome[name] = "ok"
        except Exception as e:  # noqa: BLE001 - unanswered requests fail by design
            outcome[name] = type(e).__name__
    return format_outcome(outcome)


def format_outcome(outcome: dict) -> str:
    return ", ".join("%s: %s" % item for item in outcome.items())


# ---------------------------------------------------------------------------------------------
# Turning dumps into test data
# ---------------------------------------------------------------------------------------------

DUMP_NAME = re.compile(r"^(?P<tag>.+?)__(?P<api>[A-Za-z0-9]+)__v(?P<version>\d+)__(?P<n>\d+)\.bin$")


@dataclasses.dataclass
class Frame:
    client: str
    flow: str
    api: str
    version: int
    seq: int  # kproxy's per (api, version) counter within the flow
    data: bytes
    name: str = ""  # final file name, set when kept

    def shape(self) -> bytes:
        """The frame with its correlation id blanked: retries and polls differ only there."""
        return self.data[:4] + b"\0\0\0\0" + self.data[8:]


def collect_frames(client: str, flow: str, dump_dir: Path) -> list[Frame]:
    frames = []
    for path in sorted(dump_dir.glob("*.bin")):
        match = DUMP_NAME.match(path.name)
        if match is None or match["api"] == "Unparsed":
            raise RuntimeError("%s/%s: kproxy could not parse a request header: %s"
                               % (client, flow, path.name))
        data = path.read_bytes()
        if not data:
            # A request that arrived while the proxy was being stopped: created, never written.
            log.warning("%s/%s: skipping empty dump %s", client, flow, path.name)
            continue
        frames.append(Frame(client, flow, match["api"], int(match["version"]), int(match["n"]),
                            data))
    frames.sort(key=lambda f: (f.api, f.version, f.seq))
    return frames


def select_frames(frames: list[Frame]) -> list[Frame]:
    """Drop frames equal up to the correlation id, cap the polling APIs, name the rest.

    `frames` is one client's frames in flow order. For capped APIs the kept frames are taken
    round-robin across flows, so they come from different situations (producer, consumer...).
    """
    unique, seen = [], set()
    for frame in frames:
        if frame.shape() not in seen:
            seen.add(frame.shape())
            unique.append(frame)
    by_api: dict[tuple[str, int], list[Frame]] = {}
    for frame in unique:
        by_api.setdefault((frame.api, frame.version), []).append(frame)
    kept = []
    for (api, version), group in by_api.items():
        cap = FRAME_CAP.get(api)
        if cap is not None and len(group) > cap:
            group = round_robin_by_flow(group)[:cap]
        for n, frame in enumerate(group):
            frame.name = "%s__v%d__%d.bin" % (api, version, n)
            kept.append(frame)
    return kept


def round_robin_by_flow(frames: list[Frame]) -> list[Frame]:
    flows: dict[str, list[Frame]] = {}
    for frame in frames:
        flows.setdefault(frame.flow, []).append(frame)
    ordered = []
    for i in range(max(len(group) for group in flows.values())):
        ordered += [group[i] for group in flows.values() if i < len(group)]
    return ordered


def decode_produce(frame: Frame) -> list[tuple[str, int, str, list[Record]]]:
    """Decode a Produce frame with kafka-python's codec: an independent check of the data."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record import MemoryRecords
    codecs = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
    request = ProduceRequest.decode(frame.data, version=frame.version, header=True)
    out = []
    for topic in request.topic_data:
        for partition in topic.partition_data:
            batches = MemoryRecords(bytes(partition.records))
            while (batch := batches.next_batch()) is not None:
                records = [Record(r.key, r.value, tuple(r.headers), r.timestamp) for r in batch]
                out.append((topic.name, partition.index, codecs[batch.compression_type], records))
    return out


def match_produce_frames(flow_entry: dict, frames: list[Frame], sent: tuple[Record, ...],
                         window: tuple[int, int] | None) -> None:
    """Check that the flow's Produce frames carry exactly the records sent, in order, and note
    in the manifest which slice of them each frame holds."""
    position = 0
    for frame in sorted(frames, key=lambda f: f.seq):
        start = position
        for topic, partition, codec, records in decode_produce(frame):
            if topic != flow_entry["topic"] or partition != 0 or codec != flow_entry["codec"]:
                raise RuntimeError("%s: unexpected batch %s[%d] codec %s"
                                   % (frame.name, topic, partition, codec))
            for record in records:
                expected = sent[position] if position < len(sent) else None
                if window is not None and expected is not None:
                    ok_time = window[0] <= record.timestamp <= window[1]
                    record = dataclasses.replace(record, timestamp=None) if ok_time else record
                if record != expected:
                    raise RuntimeError("%s/%s: record %d is %r, expected %r"
                                       % (flow_entry["client"], frame.name, position, record, expected))
                position += 1
        flow_entry["frames"].append({"file": frame.name, "records": [start, position]})
    if position != len(sent):
        raise RuntimeError("%s %s: Produce frames carry %d of %d records"
                           % (flow_entry["client"], flow_entry["flow"], position, len(sent)))


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def check_clients(adapters: list[ClientAdapter]) -> dict[str, str]:
    versions, missing = {}, []
    for adapter in adapters:
        try:
            versions[adapter.name] = adapter.check()
        except (ImportError, FileNotFoundError) as e:
            missing.append("  %s is missing (%s). Install it with:\n    %s"
                           % (adapter.name, e, INSTALL_HINTS[adapter.name]))
    if missing:
        raise SystemExit("Cannot record: some clients are not installed.\n" + "\n".join(missing))
    for name, expected in EXPECTED_VERSIONS.items():
        if name in versions and not versions[name].startswith(expected):
            log.warning("%s is %s; the data set was designed with %s", name, versions[name], expected)
    return versions


def record_client(adapter: ClientAdapter, mock: MockCluster, kproxy_path: Path, work: Path,
                  manifest: dict) -> list[Frame]:
    frames: list[Frame] = []
    produce_runs = []
    produce_specs = {p.name: p for p in PRODUCE_FLOWS}
    for flow_name in adapter.flows():
        dump_dir = work / adapter.name / flow_name
        dump_dir.mkdir(parents=True)
        spec = produce_specs.get(flow_name)
        records = records_for(adapter)
        if isinstance(adapter, Kcat):
            records = Kcat.as_sent(records)
        started = int(time.time() * 1000)
        with kproxy(kproxy_path, mock, dump_dir) as bootstrap:
            flow = Flow(adapter.name, adapter.tag, flow_name, bootstrap, dump_dir)
            try:
                outcome = adapter.run(flow, spec, records)
            except Exception as e:  # noqa: BLE001 - reported and recorded as a failed flow
                outcome = "FAILED: %s: %s" % (type(e).__name__, str(e)[:300])
        finished = int(time.time() * 1000)
        print("  %-16s %-20s %s" % (adapter.name, flow_name, outcome), flush=True)
        manifest["flows"].append({"client": adapter.name, "flow": flow_name, "outcome": outcome})
        flow_frames = collect_frames(adapter.name, flow_name, dump_dir)
        if spec is not None and outcome.startswith("FAILED"):
            # Without a confirmed delivery the records in its Produce frames are unverified.
            flow_frames = [f for f in flow_frames if f.api != "Produce"]
        elif spec is not None:
            produce_runs.append((spec, records, (started, finished), flow_frames))
        frames += flow_frames
    kept = select_frames(frames)
    kept_ids = {id(f) for f in kept}
    for spec, records, window, flow_frames in produce_runs:
        entry = {"client": adapter.name, "flow": spec.name, "topic": "%s.%s" % (adapter.tag, spec.name),
                 "codec": spec.codec, "acks": spec.acks, "idempotent": spec.idempotent,
                 "records": [r.to_json() for r in records], "frames": []}
        if any(r.timestamp is None for r in records):
            entry["timestamp_window"] = list(window)
        produce_frames = [f for f in flow_frames if f.api == "Produce" and id(f) in kept_ids]
        match_produce_frames(entry, produce_frames, tuple(records),
                             window if "timestamp_window" in entry else None)
        manifest["produce_flows"].append(entry)
    return kept


def write_output(out_dir: Path, kept: dict[str, list[Frame]], manifest: dict) -> int:
    """Replace out_dir with the new data set; returns its size in bytes."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".client_frames-", dir=out_dir.parent))
    try:
        for client, frames in kept.items():
            (staging / client).mkdir()
            for frame in frames:
                (staging / client / frame.name).write_bytes(frame.data)
        (staging / "manifest.json").write_text(format_manifest(manifest))
        staging.chmod(0o755)  # mkdtemp makes it private
        if out_dir.exists():
            shutil.rmtree(out_dir)
        staging.rename(out_dir)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
    return sum(p.stat().st_size for p in out_dir.rglob("*") if p.is_file())


def format_manifest(manifest: dict) -> str:
    """JSON with one line per list item (flow), small enough to read and to diff."""
    parts = []
    for key, value in manifest.items():
        if isinstance(value, list):
            items = ",\n  ".join(json.dumps(item, separators=(",", ":")) for item in value)
            parts.append("%s: [\n  %s\n ]" % (json.dumps(key), items))
        else:
            parts.append("%s: %s" % (json.dumps(key), json.dumps(value)))
    text = "{\n " + ",\n ".join(parts) + "\n}\n"
    assert json.loads(text) == manifest
    return text


def summary(kept: dict[str, list[Frame]]) -> str:
    lines = []
    for client, frames in kept.items():
        apis: dict[str, dict[int, int]] = {}
        for frame in frames:
            apis.setdefault(frame.api, {}).setdefault(frame.version, 0)
            apis[frame.api][frame.version] += 1
        lines.append("%s (%d frames):" % (client, len(frames)))
        for api in sorted(apis):
            versions = ", ".join("v%d x%d" % item for item in sorted(apis[api].items()))
            lines.append("    %-22s %s" % (api, versions))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="data directory to (re)write")
    parser.add_argument("--kproxy", type=Path, default=DEFAULT_KPROXY, help="path of kproxy.py")
    parser.add_argument("--kafkajs-dir", type=Path, default=DEFAULT_KAFKAJS_DIR,
                        help="directory whose node_modules holds kafkajs and its codecs")
    parser.add_argument("--keep-dumps", type=Path, help="also copy the raw kproxy dumps here")
    parser.add_argument("--clients", help="comma-separated subset of clients (for debugging; "
                        "the committed data set must hold all of them)")
    args = parser.parse_args(argv)
    # Turn SIGTERM into SystemExit so the finally blocks stop the proxy and client processes.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for noisy in ("kafka", "aiokafka"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    if not args.kproxy.is_file():
        raise SystemExit("kproxy not found at %s (pass --kproxy or set KPROXY)" % args.kproxy)

    adapters = [KafkaPython(), Aiokafka(), ConfluentKafka(), Kcat(), Kafkajs(args.kafkajs_dir)]
    if args.clients:
        wanted = set(args.clients.split(","))
        adapters = [a for a in adapters if a.name in wanted]
    versions = check_clients(adapters)
    mock = MockCluster()
    manifest = {
        "about": "Request frames recorded from real Kafka clients by tests/compat/"
                 "record_client_frames.py; byte strings are base64.",
        "broker": "librdkafka %s mock cluster, behind kproxy --fix-apiversions --cap %s "
                  "--advertise %s" % (mock.version, PROXY_CAP, PROXY_ADVERTISE),
        "clients": versions,
        "notes": [
            "Every produce flow sends one batch to partition 0 of its own one-partition topic; "
            "frames[].records is the slice of records[] that a Produce frame carries.",
            "kafka-python and kafkajs cannot send a null header value, so their records lack "
            "the 'null-value' header.",
            "kcat cannot set timestamps or per-record headers: its records carry the same "
            "headers and a timestamp of null, meaning stamped by kcat within timestamp_window "
            "(epoch ms, inclusive).",
            "Frames equal up to the correlation id are kept once; ApiVersions, Fetch, Heartbeat "
            "and Metadata keep at most %d frames per client and version." % max(FRAME_CAP.values()),
            "Admin requests (CreateTopics, DeleteTopics, DescribeConfigs, DescribeGroups, "
            "ListGroups) were advertised by the proxy and never answered.",
        ],
        "flows": [], "produce_flows": [],
    }
    kept: dict[str, list[Frame]] = {}
    try:
        for adapter in adapters:
            for spec in PRODUCE_FLOWS:
                mock.create_topic("%s.%s" % (adapter.tag, spec.name))
        with tempfile.TemporaryDirectory(prefix="client-frames-") as work:
            for adapter in adapters:
                print("recording %s %s" % (adapter.name, versions[adapter.name]), flush=True)
                kept[adapter.name] = record_client(adapter, mock, args.kproxy, Path(work), manifest)
            if args.keep_dumps:
                shutil.copytree(work, args.keep_dumps, dirs_exist_ok=True)
    finally:
        mock.close()
    size = write_output(args.out, kept, manifest)
    print(summary(kept))
    failed = [f for f in manifest["flows"] if f["outcome"].startswith("FAILED")]
    print("wrote %d frames, %d bytes, to %s" % (sum(map(len, kept.values())), size, args.out))
    if failed:
        print("%d flows failed: %s" % (len(failed), ", ".join(
            "%s/%s" % (f["client"], f["flow"]) for f in failed)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
