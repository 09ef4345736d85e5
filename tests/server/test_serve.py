"""`compatbroker serve` as a process, and kafka-python bootstrapping against the broker."""
from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time

import pytest

from compatbroker.handlers import HANDLER_MODULES, build_registry
from compatbroker.handlers import api_versions as api_versions_module
from compatbroker.protocol import RequestHeader, decode_response, encode_request
from compatbroker.protocol.messages import ApiVersionsRequest
from compatbroker.storage import LogManager

from .helpers import handler_module, running_server

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LISTENING = re.compile(r"compatbroker listening on (\S+):(\d+)\n")
START_TIMEOUT_S = 20


class Serve:
    """`python -m compatbroker serve ...` as a child process, with its stderr kept in a file."""

    def __init__(self, tmp_path, *args: str, env: dict | None = None):
        self.stderr_path = tmp_path / f"stderr-{time.monotonic_ns()}.txt"
        with open(self.stderr_path, "w") as stderr:
            self.process = subprocess.Popen([sys.executable, "-m", "compatbroker", "serve", *args], cwd=REPO,
                                            stdout=subprocess.PIPE, stderr=stderr, text=True,
                                            env={**os.environ, **(env or {})})

    def listening(self) -> tuple[str, int]:
        ready, _, _ = select.select([self.process.stdout], [], [], START_TIMEOUT_S)
        assert ready, f"no listening line within {START_TIMEOUT_S} s; stderr: {self.stderr()}"
        line = self.process.stdout.readline()
        match = LISTENING.fullmatch(line)
        assert match, f"unexpected first line {line!r}; stderr: {self.stderr()}"
        return match.group(1), int(match.group(2))

    def stop(self, signum=signal.SIGTERM, timeout_s: float = 5.0) -> int:
        self.process.send_signal(signum)
        return self.process.wait(timeout_s)

    def exit_status(self) -> int:
        return self.process.wait(START_TIMEOUT_S)

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture
def serve(tmp_path):
    started = []

    def start(*args: str, env: dict | None = None) -> Serve:
        process = Serve(tmp_path, *args, env=env)
        started.append(process)
        return process

    yield start
    for process in started:
        process.kill()


def api_versions_round_trip(host: str, port: int) -> list[int]:
    """ApiVersions v3 over a blocking socket: the API keys the broker advertises."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect((host.strip("[]"), port))
        header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=5, client_id="t")
        frame = encode_request(header, ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", _receive(sock, 4))
        response_header, body = decode_response(18, 3, _receive(sock, size))
    assert (response_header.correlation_id, body.error_code) == (5, 0)
    return [entry.api_key for entry in body.api_keys]


def _receive(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def _ipv6_loopback_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_one_line_serves_and_exits_zero_on_a_stop_signal(serve, tmp_path, signum):
    data_dir = tmp_path / "data"
    broker = serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir))
    host, port = broker.listening()
    assert host == "127.0.0.1" and port > 0
    assert sorted(api_versions_round_trip(host, port)) == sorted(build_registry(HANDLER_MODULES))
    idle = socket.create_connection((host, port))  # an open connection must not hold the shutdown up
    began = time.monotonic()
    assert broker.stop(signum) == 0
    assert time.monotonic() - began < 5
    assert broker.process.stdout.read() == ""  # exactly one line in all
    assert idle.recv(1) == b""
    idle.close()
    assert (data_dir / ".kafka_cleanshutdown").exists()
    assert (data_dir / "meta.properties").exists()


def test_serve_on_localhost_accepts_ipv4_and_ipv6_loopback(serve, tmp_path):
    broker = serve("--listen", "localhost:0", "--data-dir", str(tmp_path / "data"))
    host, port = broker.listening()
    assert host == "localhost"
    api_versions_round_trip("127.0.0.1", port)
    if _ipv6_loopback_available():
        api_versions_round_trip("::1", port)
    assert broker.stop() == 0


def test_serve_keeps_its_data_in_the_per_user_directory_by_default(serve, tmp_path):
    broker = serve("--listen", "127.0.0.1:0", env={"XDG_DATA_HOME": str(tmp_path / "xdg")})
    broker.listening()
    assert broker.stop() == 0
    assert (tmp_path / "xdg" / "compatbroker" / "meta.properties").exists()


def test_serve_reports_a_port_in_use(serve, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        broker = serve("--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path / "data"))
        assert broker.exit_status() == 1
    assert broker.stderr() == f"compatbroker: cannot listen on 127.0.0.1:{port}: address already in use\n"
    assert broker.process.stdout.read() == ""


def test_serve_reports_an_unwritable_data_dir(serve, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    broker = serve("--listen", "127.0.0.1:0", "--data-dir", str(blocker / "data"))
    assert broker.exit_status() == 1
    assert broker.stderr() == f"compatbroker: data directory {blocker / 'data'} is not writable: Not a directory\n"


@pytest.mark.parametrize("args, message", [
    (["--set", "no.such.key=1"], "compatbroker: unknown configuration key 'no.such.key'\n"),
    (["--set", "num.partitions=zero"], "compatbroker: invalid value 'zero' for num.partitions: "),
    (["--listen", "nowhere"], "compatbroker: --listen: 'nowhere' is not HOST:PORT"),
])
def test_serve_reports_configuration_errors_in_one_line(serve, tmp_path, args, message):
    broker = serve("--data-dir", str(tmp_path / "data"), *args)
    assert broker.exit_status() == 2
    stderr = broker.stderr()
    assert stderr.startswith(message) and stderr.count("\n") == 1


def test_serve_reads_a_properties_file(serve, tmp_path):
    config = tmp_path / "server.properties"
    config.write_text(f"listeners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'from-file'}\nnode.id=9\n")
    broker = serve("--config", str(config))
    broker.listening()
    assert broker.stop() == 0
    meta = (tmp_path / "from-file" / "meta.properties").read_text()
    assert "node.id=9" in meta

    config.write_text("log.retention.hour=1\n")
    broken = serve("--config", str(config))
    assert broken.exit_status() == 2
    assert "did you mean log.retention.hours" in broken.stderr()


# --- kafka-python against the broker --------------------------------------------------------------------------------

def _seed_topic(data_dir, name: str, partitions: int) -> None:
    manager = LogManager(str(data_dir))
    manager.startup(0)
    manager.create_topic(name, partitions, now_ms=0)
    manager.shutdown()


def test_kafka_python_bootstraps_against_the_served_broker(serve, tmp_path):
    from kafka import KafkaAdminClient, KafkaConsumer

    data_dir = tmp_path / "data"
    _seed_topic(data_dir, "seeded", 3)
    broker = serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir))
    host, port = broker.listening()
    consumer = KafkaConsumer(bootstrap_servers=f"{host}:{port}", group_id=None, request_timeout_ms=10_000)
    try:
        assert consumer.topics() == {"seeded"}
        assert consumer.partitions_for_topic("seeded") == {0, 1, 2}
    finally:
        consumer.close()
    admin = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", request_timeout_ms=10_000)
    try:
        cluster = admin.describe_cluster()
        # kafka-python asks DescribeCluster v2 (is_fenced) now that it is served; Metadata before that
        assert cluster["brokers"] == [{"host": host, "port": port, "rack": None, "broker_id": 1, "is_fenced": False}]
        assert cluster["controller_id"] == 1
        meta = (data_dir / "meta.properties").read_text()
        assert f"cluster.id={cluster['cluster_id']}\n" in meta
    finally:
        admin.close()
    assert broker.stop() == 0


async def test_kafka_python_falls_back_when_its_api_versions_version_is_too_new(tmp_path):
    """kafka-python opens with ApiVersions v4; a broker serving only v0-2 answers with Kafka's v0-format error, after
    which kafka-python retries with v2 and bootstraps (the failure the librdkafka mock causes, see
    /work/shared/client-surface.md)."""
    from kafka import KafkaConsumer

    seen_versions = []

    async def recording(ctx, request):
        seen_versions.append(ctx.api_version)
        return await api_versions_module.handle(ctx, request)

    lowered = handler_module(18, recording, max_version=2)
    registry = build_registry([lowered, *(name for name in HANDLER_MODULES if name != "api_versions")])
    _seed_topic(tmp_path / "data", "seeded", 2)
    async with running_server(tmp_path, registry) as (_, port):
        def bootstrap():
            consumer = KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", group_id=None,
                                     request_timeout_ms=10_000)
            try:
                return consumer.topics(), consumer.partitions_for_topic("seeded")
            finally:
                consumer.close()

        topics, partitions = await asyncio.get_running_loop().run_in_executor(None, bootstrap)
    assert (topics, partitions) == ({"seeded"}, {0, 1})
    assert seen_versions and set(seen_versions) == {2}


def test_serve_reports_a_data_dir_of_another_node(serve, tmp_path):
    data_dir = tmp_path / "data"
    first = serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir), "--set", "node.id=2")
    first.listening()
    assert first.stop() == 0
    second = serve("--listen", "127.0.0.1:0", "--data-dir", str(data_dir))
    assert second.exit_status() == 1
    stderr = second.stderr()
    assert stderr.startswith(f"compatbroker: cannot load the data directory {data_dir}: ") and "node 2" in stderr
    assert stderr.count("\n") == 1


def test_serve_names_each_further_listener_with_its_protocol(serve, tmp_path):
    broker = serve("--listen", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0", "--data-dir",
                   str(tmp_path / "data"), "--set", "sasl.enabled.mechanisms=SCRAM-SHA-512")
    host, port = broker.listening()
    second = re.fullmatch(r"compatbroker listener SASL_PLAINTEXT \(SASL_PLAINTEXT\) on 127\.0\.0\.1:(\d+)\n",
                          broker.process.stdout.readline())  # printed with the first, already buffered
    assert second and int(second.group(1)) not in (0, port)
    assert sorted(api_versions_round_trip(host, port)) == sorted(build_registry(HANDLER_MODULES))
    assert broker.stop() == 0
