"""Security benchmark: TLS and SASL against PLAINTEXT on one compatbroker, measured in the same run.

    python bench/security_bench.py                 # the issue's run: a 1 GiB backlog (a few minutes)
    python bench/security_bench.py --backlog-mib 256 --passes 2   # a quicker run
    python bench/security_bench.py --only setup    # one or more sections: consume,produce,setup
    python bench/security_bench.py --profile /tmp/prof   # also print where the broker's time goes (py-spy)

One broker process serves four listeners: PLAINTEXT, SSL, MTLS (SSL with ssl.client.auth=required) and SASL_SSL
(SCRAM-SHA-512), with a throwaway CA (compatbroker.toolkit.certificates) and a SCRAM user written to the data dir
before the start. confluent-kafka (librdkafka) is the load generator (bench/loadgen.py), with the same
configuration on every listener but the security settings.

Sections and targets (issue 17):
1. consume: a backlog of 64 KiB messages in one partition (1 GiB by default), read from the beginning over SSL
   and over PLAINTEXT, passes alternating, best of each. Target: SSL >= 0.5x PLAINTEXT. PLAINTEXT sends record
   bytes with os.sendfile; TLS cannot (Python 3.11 has no kernel TLS), so they are read from the page cache with
   os.preadv into one reused buffer and encrypted from there (security/tls_channel.py). The CPU time per MiB of
   broker and client is printed: on 2 cores shared by both, the client's own TLS cost bounds the ratio too.
2. produce: 1 KiB messages over SASL_SSL (SCRAM-SHA-512) and over PLAINTEXT, median of the passes, each pass a
   topic of its own deleted afterwards. Target: SASL_SSL >= 0.6x PLAINTEXT.
3. setup: connection set-up time, median of many fresh connections from a small Python client: TCP connect,
   then the TLS handshake (SSL, mTLS) and the SCRAM-SHA-512 exchange (SaslHandshake v1 + two SaslAuthenticate),
   until the answer of one ApiVersions request. Reported, no target. The client's PBKDF2 (4096 iterations) is
   computed once beforehand: the figure is the broker's and the protocol's share.
CPU shares are printed as in bench/broker_bench.py (100% = one core).
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import importlib.metadata
import os
import re
import shutil
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

try:
    import confluent_kafka
except ImportError:
    raise SystemExit("the security benchmark drives confluent-kafka: pip install confluent-kafka")
from broker_bench import Report, measured, rate_line, section  # noqa: E402
from brokers import REPO, BrokerError, CompatBroker, _drain, die_with_parent, file_tail  # noqa: E402
from loadgen import LoadError, consume_run, make_producer, produce, warm_up  # noqa: E402
from profiling import profiled  # noqa: E402

from compatbroker.protocol import RequestHeader, decode_response, encode_request  # noqa: E402
from compatbroker.protocol.messages import (ApiVersionsRequest, SaslAuthenticateRequest,  # noqa: E402
                                            SaslHandshakeRequest)
from compatbroker.security.broker_security import SCRAM_CREDENTIALS_FILE  # noqa: E402
from compatbroker.security.scram_credentials import ScramCredentialStore  # noqa: E402
from compatbroker.toolkit.certificates import TestCertificates  # noqa: E402

MiB = 1 << 20
SECTIONS = ("consume", "produce", "setup")
LISTENERS = ("PLAINTEXT", "SSL", "MTLS", "SASL_SSL")
USER, PASSWORD, MECHANISM = "bench", "bench-secret", "SCRAM-SHA-512"
BACKLOG_MESSAGE = 64 * 1024
PRODUCE_SIZE = 1024
TIMEOUT_S = 300.0
_FURTHER_LISTENER = re.compile(r"^compatbroker listener (\S+) \((\S+)\) on (\S+):(\d+)\s*$")
_FIRST_LISTENER = re.compile(r"^compatbroker listening on (\S+):(\d+)\s*$")


# --- the broker ----------------------------------------------------------------------------------------------------

class SecureBroker:
    """compatbroker with the four listeners, and each client family's settings for them."""

    def __init__(self, work: Path):
        self.work = work
        self.data_dir = work / "data"
        self.certs = TestCertificates.generate(work / "certs", clients=["bench-client"])
        self.data_dir.mkdir()
        ScramCredentialStore.open(str(self.data_dir / SCRAM_CREDENTIALS_FILE)).set_password(USER, MECHANISM, PASSWORD)
        self.process: CompatBroker | None = None
        self.addresses: dict[str, str] = {}

    def settings(self) -> dict:
        return {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": self.certs.broker.keystore_file,
            "ssl.truststore.type": "PEM", "ssl.truststore.location": self.certs.ca_file,
            "listener.name.mtls.ssl.client.auth": "required",
            "sasl.enabled.mechanisms": MECHANISM,
            "num.partitions": 1,
        }

    def start(self, timeout_s: float = 30.0) -> None:
        listen = ",".join(f"{name}://127.0.0.1:0" for name in LISTENERS)
        cmd = [sys.executable, "-m", "compatbroker", "serve", "--listen", listen, "--data-dir", str(self.data_dir)]
        for key, value in self.settings().items():
            cmd += ["--set", f"{key}={value}"]
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        log_path = self.work / "compatbroker.log"
        log = open(log_path, "ab")
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=log, preexec_fn=die_with_parent)
        timer = threading.Timer(timeout_s, proc.kill)
        timer.start()
        try:
            for raw in proc.stdout:
                line = raw.decode(errors="replace")
                first, further = _FIRST_LISTENER.match(line), _FURTHER_LISTENER.match(line)
                if first:
                    self.addresses[LISTENERS[0]] = f"{first.group(1)}:{first.group(2)}"
                elif further:
                    self.addresses[further.group(1)] = f"{further.group(3)}:{further.group(4)}"
                if len(self.addresses) == len(LISTENERS):
                    break
        finally:
            timer.cancel()
        if len(self.addresses) != len(LISTENERS):
            proc.kill()
            proc.wait()
            raise BrokerError("compatbroker did not print its listeners:\n" + file_tail(log_path))
        threading.Thread(target=_drain, args=(proc.stdout, log), daemon=True).start()
        self.process = CompatBroker(proc, self.addresses["PLAINTEXT"], log_path, time.perf_counter() - started, 1)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def client_config(self, listener: str) -> dict:
        """librdkafka settings to reach `listener`."""
        config = {"bootstrap.servers": self.addresses[listener]}
        if listener in ("SSL", "MTLS", "SASL_SSL"):
            config.update({"security.protocol": "SASL_SSL" if listener == "SASL_SSL" else "SSL",
                           "ssl.ca.location": self.certs.ca_file})
        if listener == "MTLS":
            client = self.certs.client("bench-client")
            config.update({"ssl.certificate.location": client.cert_file, "ssl.key.location": client.key_file})
        if listener == "SASL_SSL":
            config.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": PASSWORD})
        return config

    def drop_topic(self, topic: str) -> None:
        self.process.drop_topic(topic)


# --- 1. consume a backlog over SSL and PLAINTEXT ---------------------------------------------------------------------

def bench_consume(broker: SecureBroker, args, report: Report) -> None:
    section(f"consume: {args.backlog_mib} MiB of 64 KiB messages in one partition, SSL vs PLAINTEXT, "
            f"best of {args.passes} passes each")
    topic, payload = "bench-tls-backlog", os.urandom(BACKLOG_MESSAGE)
    count = args.backlog_mib * MiB // BACKLOG_MESSAGE
    plain = broker.client_config("PLAINTEXT")
    warm_up(plain["bootstrap.servers"], topic, [0], payload)
    producer, errors = make_producer(plain["bootstrap.servers"])
    produce(producer, errors, topic, [0], payload, count - 1, TIMEOUT_S)
    best: dict[str, object] = {}
    for index in range(args.passes):
        for listener in ("PLAINTEXT", "SSL"):
            config = {**broker.client_config(listener), **args.consumer_overrides}
            with profiled(broker.process.pid, args.profile if index == 0 else None, f"consume-{listener}"):
                result = measured(broker.process, consume_run, config["bootstrap.servers"], [(topic, 0)], count,
                                  TIMEOUT_S, 256, None, config)
            if listener not in best or result.run.seconds < best[listener].run.seconds:
                best[listener] = result
    for listener in ("PLAINTEXT", "SSL"):
        print(rate_line(f"consume over {listener}", best[listener], BACKLOG_MESSAGE))
    for listener in ("PLAINTEXT", "SSL"):
        result = best[listener]
        mib = result.run.messages * BACKLOG_MESSAGE / MiB
        print(f"  {'CPU per MiB, ' + listener:<28} broker {1000 * result.broker_cpu * result.run.seconds / mib:.2f} ms"
              f"   client {1000 * result.client_cpu * result.run.seconds / mib:.2f} ms")
    ratio = best["PLAINTEXT"].run.seconds / best["SSL"].run.seconds
    print(f"  {'ratio SSL / PLAINTEXT':<28} {ratio:.2f}x (target >= 0.5x)", flush=True)
    report.ratio("consume backlog over SSL (vs PLAINTEXT)", ratio, 0.5)
    broker.drop_topic(topic)


# --- 2. produce over SASL_SSL and PLAINTEXT --------------------------------------------------------------------------

def bench_produce(broker: SecureBroker, args, report: Report) -> None:
    section(f"produce: {args.produce_count:,} messages of 1 KiB, SASL_SSL ({MECHANISM}) vs PLAINTEXT, median of "
            f"{args.passes} passes each")
    payload = os.urandom(PRODUCE_SIZE)
    runs: dict[str, list] = {"PLAINTEXT": [], "SASL_SSL": []}
    for index in range(args.passes):
        for listener in runs:
            topic = f"bench-produce-{listener.lower()}-{index}"
            warm_up(broker.addresses["PLAINTEXT"], topic, [0], payload)
            config = broker.client_config(listener)
            producer, errors = make_producer(config.pop("bootstrap.servers"), **config)
            producer.list_topics(topic, timeout=10)
            with profiled(broker.process.pid, args.profile if index == 0 else None, f"produce-{listener}"):
                runs[listener].append(measured(broker.process, produce, producer, errors, topic, [0], payload,
                                               args.produce_count, TIMEOUT_S))
            del producer
            broker.drop_topic(topic)
    median = {listener: sorted(found, key=lambda m: m.run.seconds)[len(found) // 2]
              for listener, found in runs.items()}
    for listener, result in median.items():
        print(rate_line(f"produce over {listener}", result, PRODUCE_SIZE))
    ratio = median["PLAINTEXT"].run.seconds / median["SASL_SSL"].run.seconds
    print(f"  {'ratio SASL_SSL / PLAINTEXT':<28} {ratio:.2f}x (target >= 0.6x)", flush=True)
    report.ratio("produce 1 KiB over SASL_SSL (vs PLAINTEXT)", ratio, 0.6)


# --- 3. connection set-up ----------------------------------------------------------------------------------------

class ScramClient:
    """The client side of SCRAM-SHA-512 (RFC 5802), with the salted password computed once."""

    def __init__(self, user: str, password: str):
        self.user, self.password = user, password
        self._salted: dict[tuple[bytes, int], bytes] = {}

    def first(self) -> bytes:
        self._nonce = base64.b64encode(os.urandom(18)).decode()
        self._first_bare = f"n={self.user},r={self._nonce}"
        return ("n,," + self._first_bare).encode()

    def final(self, server_first: bytes) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
        salt, iterations = base64.b64decode(fields["s"]), int(fields["i"])
        assert fields["r"].startswith(self._nonce)
        salted = self._salted.get((salt, iterations))
        if salted is None:
            salted = self._salted[(salt, iterations)] = hashlib.pbkdf2_hmac("sha512", self.password.encode(), salt,
                                                                            iterations)
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{self._first_bare},{server_first.decode()},{without_proof}".encode()
        client_key = hmac.digest(salted, b"Client Key", "sha512")
        signature = hmac.digest(hashlib.sha512(client_key).digest(), auth_message, "sha512")
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


class Wire:
    """Blocking request/response over one (maybe TLS) socket."""

    def __init__(self, sock):
        self.sock = sock
        self.correlation_id = 0

    def call(self, body, version: int):
        self.correlation_id += 1
        frame = encode_request(RequestHeader(request_api_key=body.API_KEY, request_api_version=version,
                                             correlation_id=self.correlation_id, client_id="bench"), body)
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        (size,) = struct.unpack(">i", self._read(4))
        return decode_response(body.API_KEY, version, self._read(size))[1]

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data


def connect_once(broker: SecureBroker, listener: str, scram: ScramClient) -> float:
    """Seconds from connect() to the ApiVersions answer on an authenticated connection."""
    host, port = broker.addresses[listener].rsplit(":", 1)
    context = None
    if listener != "PLAINTEXT":
        context = ssl.create_default_context(cafile=broker.certs.ca_file)
        if listener == "MTLS":
            client = broker.certs.client("bench-client")
            context.load_cert_chain(client.cert_file, client.key_file)
    start = time.perf_counter()
    sock = socket.create_connection((host, int(port)), timeout=10)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if context is not None:
            sock = context.wrap_socket(sock, server_hostname="localhost")
        wire = Wire(sock)
        if listener == "SASL_SSL":
            assert wire.call(SaslHandshakeRequest(mechanism=MECHANISM), 1).error_code == 0
            first = wire.call(SaslAuthenticateRequest(auth_bytes=scram.first()), 2)
            final = wire.call(SaslAuthenticateRequest(auth_bytes=scram.final(first.auth_bytes)), 2)
            assert final.error_code == 0, final.error_message
        assert wire.call(ApiVersionsRequest(client_software_name="bench", client_software_version="1"), 3) \
            .error_code == 0
        return time.perf_counter() - start
    finally:
        sock.close()


def bench_setup(broker: SecureBroker, args, report: Report) -> None:
    section(f"setup: connect until the first answer, median of {args.connections} connections each")
    scram = ScramClient(USER, PASSWORD)
    connect_once(broker, "SASL_SSL", scram)  # PBKDF2 once, outside the figures
    for listener, label in (("PLAINTEXT", "PLAINTEXT"), ("SSL", "SSL (server certificate)"),
                            ("MTLS", "mTLS (client certificate)"), ("SASL_SSL", f"SASL_SSL {MECHANISM}")):
        times = [connect_once(broker, listener, scram) for _ in range(args.connections)]
        print(f"  {label:<32} median {1000 * statistics.median(times):6.2f} ms   "
              f"p90 {1000 * sorted(times)[int(0.9 * len(times))]:6.2f} ms", flush=True)


# --- main --------------------------------------------------------------------------------------------------------

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS), help="comma-separated sections (default: all)")
    parser.add_argument("--backlog-mib", type=int, default=1024, help="consume backlog size (default 1024)")
    parser.add_argument("--produce-count", type=int, default=300_000, help="1 KiB messages per produce pass")
    parser.add_argument("--passes", type=int, default=3, help="passes per listener (default 3)")
    parser.add_argument("--connections", type=int, default=50, help="connections per set-up figure")
    parser.add_argument("--dir", default=None, help="parent of the work dir (default: the system temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="sample the broker with py-spy during the first pass of each figure and print where its "
                             "time goes (bench/profiling.py)")
    parser.add_argument("--consumer", action="append", default=[], metavar="NAME=VALUE",
                        help="a librdkafka consumer setting for both listeners (e.g. max.partition.fetch.bytes=...)")
    args = parser.parse_args(argv)
    args.consumer_overrides = dict(item.split("=", 1) for item in args.consumer)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    if set(args.only) - set(SECTIONS):
        parser.error("unknown section(s): %s" % ", ".join(sorted(set(args.only) - set(SECTIONS))))
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="compatbroker-security-bench-", dir=args.dir))
    report = Report()
    started = time.perf_counter()
    print("security benchmark: python %s, %s, confluent-kafka %s, librdkafka %s, %d cores, work dir %s"
          % (sys.version.split()[0], ssl.OPENSSL_VERSION, importlib.metadata.version("confluent-kafka"),
             confluent_kafka.libversion()[0], os.cpu_count(), work), flush=True)
    broker = SecureBroker(work)
    try:
        broker.start()
        sections = {"consume": bench_consume, "produce": bench_produce, "setup": bench_setup}
        for name in args.only:
            try:
                sections[name](broker, args, report)
            except (LoadError, BrokerError, confluent_kafka.KafkaException) as exc:
                print(f"  {name} failed: {exc}")
    finally:
        broker.stop()
        if args.keep:
            print("\nwork dir kept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    report.print_summary()
    print("\nbenchmark time: %.0f s" % (time.perf_counter() - started))
    return 0


if __name__ == "__main__":
    sys.exit(main())
