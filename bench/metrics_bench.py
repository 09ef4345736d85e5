"""What the always-on metrics counting costs (compatbroker.metrics.counting).

    python bench/metrics_bench.py             # both parts, about a minute
    python bench/metrics_bench.py --quick     # fewer messages

1. Per request: the counting a connection and the Produce handler do for one request (the (API, version) slot,
   the latency bucket, the walk of the response for its error codes, the listener's bytes, the topic's records and
   bytes), timed in a loop for typical responses, in microseconds.
2. Produce throughput: 100-byte messages from confluent-kafka (bench/loadgen.py, linger.ms=0 and at most 10 messages
   per batch, so that requests are many and small, and their count does not follow the broker's speed) to a broker
   process with the counting as shipped, then to one whose counting is stubbed out (request stats and topic tables
   replaced by no-ops: what remains is a few attribute additions per request), alternately, best of the passes
   each; the ratio is with / without (1.0: free). The broker's CPU time per message (from /proc) is printed beside
   the rate: on a machine shared with other work (the throughput then swings by tens of percent from pass to pass)
   it is the steadier figure.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compatbroker.metrics.counting import BrokerMetrics  # noqa: E402
from compatbroker.protocol import FileRegion  # noqa: E402
from compatbroker.protocol.messages import FetchResponse, MetadataResponse, ProduceResponse  # noqa: E402

PAYLOAD = b"x" * 100
PARTITIONS = 4
PRODUCER = {"linger.ms": 0, "batch.num.messages": 10}


# --- 1. per request ---------------------------------------------------------------------------------------------

def _produce_response() -> ProduceResponse:
    return ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=0, base_offset=42, log_start_offset=0)])])


def _fetch_response(partitions: int) -> FetchResponse:
    region = FileRegion(None, 0, 16384)
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=index, high_watermark=100, records=region)
        for index in range(partitions)])])


def _metadata_response() -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=node, host="localhost", port=9092 + node)
                 for node in range(3)],
        topics=[MetadataResponse.MetadataResponseTopic(name=f"topic-{topic}", partitions=[
            MetadataResponse.MetadataResponsePartition(partition_index=partition, replica_nodes=[0, 1, 2],
                                                       isr_nodes=[0, 1, 2]) for partition in range(3)])
            for topic in range(10)])


def per_request_cost(response, api_key: int, version: int, *, produce: bool, loops: int = 200_000) -> float:
    """Microseconds of counting per request, as connection.py and the Produce handler count it."""
    metrics = BrokerMetrics()
    listener = metrics.listener("PLAINTEXT")
    requests = metrics.requests

    def one_request():
        listener.bytes_in += 200
        stats = requests.get(api_key << 16 | version) or metrics.request_stats(api_key, version)
        stats.record(0.0004, response)
        listener.bytes_out += 100
        if produce:
            topic = metrics.topic("t")
            topic.produce_requests += 1
            topic.bytes_in += 100
            topic.messages_in += 1

    one_request()  # the plans of the response's classes are learnt on first sight
    return min(timeit.repeat(one_request, number=loops, repeat=3)) / loops * 1e6


def bench_per_request() -> None:
    print("1. counting per request (µs, best of 3):")
    cases = [("Produce, 1 partition", _produce_response(), 0, 9, True),
             ("Fetch, 1 partition", _fetch_response(1), 1, 16, False),
             ("Fetch, 50 partitions", _fetch_response(50), 1, 16, False),
             ("Metadata, 10 topics x 3 partitions", _metadata_response(), 3, 12, False)]
    for label, response, api_key, version, produce in cases:
        print(f"   {label:<36} {per_request_cost(response, api_key, version, produce=produce):6.2f} µs")


# --- 2. produce throughput ----------------------------------------------------------------------------------------

def serve(data_dir: str, stub: bool) -> int:
    """The broker process of a pass (this script with --serve): counting as shipped, or stubbed out."""
    if stub:
        from compatbroker.metrics import counting
        spare = counting.TopicStats()
        counting.RequestStats.record = lambda self, latency_s, response: 0
        counting.BrokerMetrics.topic = lambda self, name: spare
    from compatbroker.config import BrokerConfig
    from compatbroker.server.run import run
    config = BrokerConfig.from_sources(overrides=[f"num.partitions={PARTITIONS}"], listen="127.0.0.1:0",
                                       data_dir=data_dir)
    return run(config)


class _Broker:
    def __init__(self, stub: bool, root: str):
        from brokers import _drain, _wait_for_listening, die_with_parent

        command = [sys.executable, __file__, "--serve", tempfile.mkdtemp(dir=root)] + (["--stub"] if stub else [])
        self.log = open(Path(root) / f"broker-{'stub' if stub else 'counting'}.log", "ab")
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log,
                                     preexec_fn=die_with_parent)
        host, port = _wait_for_listening(self.proc, 30)
        threading.Thread(target=_drain, args=(self.proc.stdout, self.log), daemon=True).start()
        self.bootstrap = f"{host}:{port}"
        self.passes = 0

    def produce_pass(self, count: int) -> tuple[float, float]:
        """(messages/s, broker CPU µs per message) of one pass on a topic of its own."""
        from brokers import cpu_seconds
        from loadgen import produce_run
        self.passes += 1
        before = cpu_seconds(self.proc.pid)
        run = produce_run(self.bootstrap, f"pass-{self.passes}", list(range(PARTITIONS)), PAYLOAD, count, 180.0,
                          **PRODUCER)
        return run.messages_per_s, (cpu_seconds(self.proc.pid) - before) / count * 1e6

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(15)
        self.log.close()


def bench_produce(count: int, passes: int) -> None:
    print(f"2. produce throughput, {count} x {len(PAYLOAD)} B messages over {PARTITIONS} partitions, {PRODUCER} "
          f"(best of {passes} passes each, alternating):")
    with tempfile.TemporaryDirectory(prefix="metrics-bench-") as root:
        brokers = {"with counting": _Broker(False, root), "counting stubbed out": _Broker(True, root)}
        try:
            rate = {label: 0.0 for label in brokers}
            cpu = {label: float("inf") for label in brokers}
            for _ in range(passes):
                for label, broker in brokers.items():
                    messages_per_s, cpu_us = broker.produce_pass(count)
                    rate[label], cpu[label] = max(rate[label], messages_per_s), min(cpu[label], cpu_us)
        finally:
            for broker in brokers.values():
                broker.stop()
    for label in brokers:
        print(f"   {label:<22} {rate[label]:>10,.0f} messages/s   broker CPU {cpu[label]:6.2f} µs/message")
    with_, without = "with counting", "counting stubbed out"
    print(f"   ratio with / without: throughput {rate[with_] / rate[without]:.3f}, "
          f"broker CPU per message {cpu[with_] / cpu[without]:.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and passes")
    parser.add_argument("--serve", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--stub", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve, args.stub)
    bench_per_request()
    bench_produce(50_000 if args.quick else 200_000, 2 if args.quick else 3)
    return 0


if __name__ == "__main__":
    sys.exit(main())
