"""Embedded broker benchmark: time from `EmbeddedBroker()` to the first acknowledged produce.

    python bench/embedded_bench.py                     # both modes, both clients, 7 passes each
    python bench/embedded_bench.py --passes 15 --modes thread --clients kafka-python

What a test pays before its first record is stored: the clock starts just before `EmbeddedBroker(mode=...)` and
stops when the client has the acknowledgement of one record (acks=all) sent to a topic the test created with
`broker.create_topic` (as a suite using the `compatbroker_fresh` fixture does). The client library is imported
before the clock starts (a suite imports it anyway); the producer is created inside the window.

- warm: within one process, brokers after the first (the broker's modules are imported already): the cost per
  test of a fresh broker. Median of the passes, with the part spent until `EmbeddedBroker()` returned.
- cold: a new Python process per pass, the clock starting before `from compatbroker import EmbeddedBroker`: what
  the first test of a session pays. Python's own start-up is left out.

Bytecode: the checkout's environment may forbid writing .pyc files (PYTHONDONTWRITEBYTECODE); an installed package
has them, so this script keeps compiled bytecode in a cache directory of its own (PYTHONPYCACHEPREFIX), warmed by
one unmeasured pass, for itself and the processes it starts.

Target: <= 300 ms (median, warm and cold, thread mode). Subprocess mode adds a Python interpreter's start-up and is
printed for reference.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

TARGET_S = 0.300
CLIENTS = ("kafka-python", "confluent-kafka")
MODES = ("thread", "subprocess")
REPO = Path(__file__).resolve().parents[1]
PYCACHE = Path(tempfile.gettempdir()) / "compatbroker-bench-pycache"


def use_bytecode_cache() -> None:
    """Compile once and reuse, in this process and its children, as an installed package does."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    sys.dont_write_bytecode = False
    sys.pycache_prefix = str(PYCACHE)


def import_client(client: str) -> None:
    if client == "kafka-python":
        import kafka  # noqa: F401
    else:
        import confluent_kafka  # noqa: F401


def first_produce(broker, client: str) -> None:
    """Create a topic and have one record acknowledged through `client`."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    broker.create_topic(topic, 1)
    if client == "kafka-python":
        from kafka import KafkaProducer
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all", linger_ms=0)
        try:
            producer.send(topic, b"first").get(timeout=30)
        finally:
            producer.close(timeout=5)
        return
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all", "linger.ms": 0,
                         "broker.address.family": "v4", "log_level": 3})
    report = []
    producer.produce(topic, b"first", on_delivery=lambda err, msg: report.append(err))
    producer.flush(30)
    if report != [None]:
        raise RuntimeError(f"confluent-kafka did not deliver: {report}")


def one_pass(mode: str, client: str) -> tuple[float, float]:
    """(seconds until EmbeddedBroker() returned, seconds until the first produce was acknowledged)."""
    from compatbroker import EmbeddedBroker
    began = time.monotonic()
    broker = EmbeddedBroker(mode=mode)
    started = time.monotonic()
    try:
        first_produce(broker, client)
        done = time.monotonic()
    finally:
        broker.stop()
    return started - began, done - began


def cold_pass(mode: str, client: str) -> float:
    """One pass in a new interpreter (see `--one-cold`)."""
    output = subprocess.run([sys.executable, __file__, "--one-cold", mode, client], cwd=REPO, check=True,
                            capture_output=True, text=True, timeout=120).stdout
    return float(output.strip().splitlines()[-1])


def run_one_cold(mode: str, client: str) -> None:
    import_client(client)
    began = time.monotonic()
    from compatbroker import EmbeddedBroker
    broker = EmbeddedBroker(mode=mode)
    try:
        first_produce(broker, client)
        took = time.monotonic() - began
    finally:
        broker.stop()
    print(f"{took:.6f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passes", type=int, default=7)
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS))
    parser.add_argument("--one-cold", nargs=2, metavar=("MODE", "CLIENT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    use_bytecode_cache()
    if args.one_cold:
        run_one_cold(*args.one_cold)
        return 0
    verdicts = []
    print(f"== time from EmbeddedBroker() to the first acknowledged produce ({args.passes} passes each; "
          f"target <= {TARGET_S * 1000:.0f} ms in thread mode)")
    for client in args.clients:
        import_client(client)
    for mode in args.modes:
        for client in args.clients:
            cold_pass(mode, client)  # unmeasured: compiles the bytecode cache
            one_pass(mode, client)   # unmeasured: imports the broker into this process
            warm = [one_pass(mode, client) for _ in range(args.passes)]
            cold = [cold_pass(mode, client) for _ in range(args.passes)]
            warm_total = statistics.median(total for _, total in warm)
            warm_start = statistics.median(start for start, _ in warm)
            cold_total = statistics.median(cold)
            print(f"  {mode:10s} {client:16s} warm: median {warm_total * 1000:6.1f} ms (broker up after "
                  f"{warm_start * 1000:5.1f} ms; min {min(t for _, t in warm) * 1000:6.1f}, max "
                  f"{max(t for _, t in warm) * 1000:6.1f})   cold: median {cold_total * 1000:6.1f} ms "
                  f"(min {min(cold) * 1000:6.1f}, max {max(cold) * 1000:6.1f})", flush=True)
            if mode == "thread":
                verdicts.append((f"{mode} {client}", max(warm_total, cold_total)))
    if verdicts:
        print("\n== target (thread mode, the slower of warm and cold medians)")
        for name, seconds in verdicts:
            verdict = "met" if seconds <= TARGET_S else "NOT MET"
            print(f"  {name:28s} {seconds * 1000:6.1f} ms   target <= {TARGET_S * 1000:.0f} ms   {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
