"""Resource benchmark of a broker subprocess (issue 14): file descriptors, memory per connection, Metadata latency
under many connections, start-up time with many partitions.

    python bench/resource_bench.py                     # the issue's sizes
    python bench/resource_bench.py --connections 200 --startup-partitions 2000    # a quicker look

Prints, each beside its target:
1. fds per partition: /proc/<pid>/fd counted before and after one CreateTopics of --partitions partitions.
   Target: about 1 (Kafka: one per active segment; indexes mmapped, inactive segments opened on demand).
2. RSS with --connections idle connections (each made one ApiVersions round trip). Target: < 200 MB.
3. Metadata p99, from a separate client, while those connections and a slowloris of --slowloris connections (each
   sends a request one byte at a time) are open. Target: < 50 ms.
4. RSS with --connections silent 100 MiB frame declarations (the 4-byte size 104857600, nothing after), and how long
   a well-behaved client then waits for Metadata. Target: < 200 MB, client served. The connections are opened in
   steps; the section stops early when the broker passes GUARD_RSS_BYTES (a broker that allocates declared sizes
   up front would otherwise take the machine's memory), and says so.
5. Start-up with --startup-partitions partitions: created by CreateTopics, the broker stopped (SIGTERM) and started
   again; the time from spawn to its `listening` line. Target: <= 2 s.
A figure that could not be taken (the broker refused or died) is printed as such with the reason; the rest go on.
"""
from __future__ import annotations

import argparse
import resource
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from brokers import BrokerError, CompatBroker, rss_bytes  # noqa: E402

from tests.server.load import (Client, Slowloris, declaration, fd_count, percentile,  # noqa: E402
                               socket_count, wait_for)

from compatbroker.protocol.messages import (ApiVersionsRequest, CreateTopicsRequest,  # noqa: E402
                                            MetadataRequest)

MB = 1_000_000
MIB = 1 << 20
DECLARED = 100 * MIB  # socket.request.max.bytes: the largest frame a client may announce
GUARD_RSS_BYTES = 1 << 30
SETTLE_S = 30.0  # bound on waiting for the broker to have accepted every connection


def _host_port(bootstrap: str) -> tuple[str, int]:
    host, port = bootstrap.rsplit(":", 1)
    return host, int(port)


def line(label: str, figure: str, target: str, ok: bool | None) -> None:
    verdict = "" if ok is None else ("  ok" if ok else "  MISSED")
    print(f"  {label:<52} {figure:>14}   target {target}{verdict}", flush=True)


def create_topic(bootstrap: str, name: str, partitions: int) -> str | None:
    """CreateTopics of one topic; None when created, else the error the broker answered (or the failure)."""
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    conn = Client(*_host_port(bootstrap), timeout_s=300, client_id="resource-bench")
    try:
        result = conn.call(CreateTopicsRequest(topics=[topic], timeout_ms=300_000), 7).topics[0]
    except (OSError, ConnectionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return None if result.error_code == 0 else f"error {result.error_code}: {result.error_message}"


def metadata_latencies(bootstrap: str, topic: str, count: int) -> list[float]:
    conn = Client(*_host_port(bootstrap), timeout_s=60, client_id="resource-bench")
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                              allow_auto_topic_creation=False)
    took = []
    try:
        for _ in range(count):
            began = time.perf_counter()
            conn.call(request, 12)
            took.append(time.perf_counter() - began)
    finally:
        conn.close()
    return took


def open_idle(bootstrap: str, count: int) -> list[Client]:
    conns = []
    for _ in range(count):
        conn = Client(*_host_port(bootstrap), timeout_s=60, client_id="resource-bench")
        conn.call(ApiVersionsRequest(client_software_name="bench", client_software_version="1"), 3)
        conns.append(conn)
    return conns


def bench_fds(broker: CompatBroker, partitions: int) -> None:
    before = fd_count(broker.pid)
    failed = create_topic(broker.bootstrap, "resource-bench.fds", partitions)
    after = fd_count(broker.pid)
    if failed:
        line(f"fds per partition ({partitions} partitions)", "n/a", "~1", False)
        print(f"    CreateTopics failed: {failed}; fds {before} -> {after}")
        return
    per = (after - before) / partitions
    line(f"fds per partition ({partitions} partitions)", f"{per:.2f}", "~1", per <= 1.5)
    print(f"    fds {before} -> {after}")


def bench_connections(broker: CompatBroker, connections: int, slowloris: int, samples: int) -> None:
    create_topic(broker.bootstrap, "resource-bench.small", 1)
    metadata_latencies(broker.bootstrap, "resource-bench.small", 20)  # warm: the first calls import and cache
    baseline = rss_bytes(broker.pid)
    sockets = socket_count(broker.pid)
    idle = open_idle(broker.bootstrap, connections)
    try:
        wait_for(lambda: socket_count(broker.pid) >= sockets + connections, SETTLE_S, "the idle connections")
        rss = rss_bytes(broker.pid)
        line(f"RSS with {connections} idle connections", f"{rss / MB:.0f} MB", "< 200 MB", rss < 200 * MB)
        print(f"    {baseline / MB:.0f} MB before: {(rss - baseline) / connections / 1024:.1f} KiB per connection")
        with Slowloris(*_host_port(broker.bootstrap), slowloris):
            took = metadata_latencies(broker.bootstrap, "resource-bench.small", samples)
        p99 = percentile(took, 0.99)
        line(f"Metadata p99 ({connections} open + slowloris {slowloris})", f"{p99 * 1000:.1f} ms", "< 50 ms",
             p99 < 0.050)
        print(f"    p50 {percentile(took, 0.5) * 1000:.1f} ms, max {max(took) * 1000:.1f} ms over {samples} calls")
    finally:
        for conn in idle:
            conn.close()


def bench_silent_declarations(broker: CompatBroker, connections: int, step: int = 10) -> None:
    host, port = broker.bootstrap.rsplit(":", 1)
    socks = []
    stopped = None
    try:
        while len(socks) < connections:
            for _ in range(min(step, connections - len(socks))):
                sock = socket.create_connection((host, int(port)), timeout=10)
                sock.sendall(declaration(DECLARED))
                socks.append(sock)
            settle(broker)
            if not broker.alive():
                stopped = f"the broker died after {len(socks)} connections"
                break
            if rss_bytes(broker.pid) > GUARD_RSS_BYTES:
                stopped = f"stopped at {len(socks)} connections: RSS passed {GUARD_RSS_BYTES >> 20} MiB"
                break
        rss = rss_bytes(broker.pid) if broker.alive() else 0
        label = f"RSS with {connections} silent 100 MiB declarations"
        line(label, f"{rss / MB:.0f} MB" if not stopped else "n/a", "< 200 MB", rss < 200 * MB and not stopped)
        if stopped:
            print(f"    {stopped} ({rss / MB:.0f} MB)")
            return
        began = time.perf_counter()
        try:
            metadata_latencies(broker.bootstrap, "resource-bench.small", 1)
            served = f"served in {(time.perf_counter() - began) * 1000:.0f} ms"
        except (OSError, ConnectionError) as exc:
            served = f"NOT served: {exc}"
        print(f"    a well-behaved client meanwhile: Metadata {served}")
    finally:
        for sock in socks:
            sock.close()


def settle(broker: CompatBroker) -> None:
    """Until RSS stops growing for a moment (the broker reads what arrived), bounded."""
    last = -1
    deadline = time.monotonic() + SETTLE_S
    while broker.alive() and time.monotonic() < deadline:
        now = rss_bytes(broker.pid)
        if now == last:
            return
        last = now
        time.sleep(0.2)


def bench_startup(work: Path, partitions: int, per_topic: int, pycache: Path) -> None:
    data_dir = work / "startup"
    broker = start(data_dir, work / "startup.log", pycache)
    failed = None
    try:
        for n in range(0, partitions, per_topic):
            failed = create_topic(broker.bootstrap, f"resource-bench.startup.{n // per_topic}",
                                  min(per_topic, partitions - n))
            if failed:
                failed = f"CreateTopics failed after {n} partitions: {failed}"
                break
    finally:
        took, code = broker.stop()
    if failed:
        line(f"start-up with {partitions} partitions", "n/a", "<= 2 s", False)
        print(f"    {failed}")
        return
    print(f"    stopped in {took:.1f} s (exit {code}); starting again")
    broker = start(data_dir, work / "startup.log", pycache)
    try:
        line(f"start-up with {partitions} partitions", f"{broker.startup_s:.2f} s", "<= 2 s", broker.startup_s <= 2)
    finally:
        broker.stop()


def start(data_dir: Path, log_path: Path, pycache: Path) -> CompatBroker:
    return CompatBroker.start(data_dir, log_path, partitions=1, timeout_s=300, pycache=pycache)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1000, help="partitions of the fd count's topic")
    parser.add_argument("--connections", type=int, default=1000)
    parser.add_argument("--slowloris", type=int, default=200)
    parser.add_argument("--samples", type=int, default=1000, help="Metadata calls for the p99")
    parser.add_argument("--startup-partitions", type=int, default=10_000)
    parser.add_argument("--dir", type=Path, default=None, help="where the data dirs go (default: a temp dir)")
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # this process holds every client connection
    work = Path(tempfile.mkdtemp(prefix="resource-bench-", dir=args.dir))
    try:
        print(f"resource bench: data in {work}, RLIMIT_NOFILE {soft}/{hard} (the broker inherits {hard})")
        pycache = work / "pycache"
        start(work / "warm", work / "warm.log", pycache).stop()  # compile the bytecode once, outside the timing
        broker = start(work / "data", work / "broker.log", pycache)
        try:
            bench_fds(broker, args.partitions)
            bench_connections(broker, args.connections, args.slowloris, args.samples)
            bench_silent_declarations(broker, args.connections)
        finally:
            broker.stop()
        bench_startup(work, args.startup_partitions, min(args.partitions, args.startup_partitions), pycache)
    except BrokerError as exc:
        print(f"broker failed: {exc}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
