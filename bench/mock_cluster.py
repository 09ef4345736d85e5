"""librdkafka's mock cluster as a process of its own: the peer the broker benchmark compares against.

    python bench/mock_cluster.py

The mock is a small Kafka broker written in C inside librdkafka (`test.mock.num.brokers=1`). It keeps each
partition in memory and drops its oldest batches beyond 5 MiB per partition, so it can only hold a small backlog.
The confluent-kafka Python API can start one but gives no handle on it, so the librdkafka bundled in the
confluent-kafka wheel is driven through ctypes, which also yields the mock's address.

It runs in its own process, like compatbroker, so each broker's CPU time and memory can be read from /proc and
neither shares a process with the load generator.

Protocol on stdin/stdout, one line each:
    started:   prints "mock listening on HOST:PORT"
    "create TOPIC PARTITIONS"  ->  "ok" or "error CODE"
    end of stdin               ->  the mock is destroyed and the process exits 0
"""
from __future__ import annotations

import ctypes
import glob
import sys
from pathlib import Path

# The mock advertises client telemetry (KIP-714); compatbroker does not, so the mock stops advertising it too and
# the client does the same work against both.
TELEMETRY_API_KEYS = (71, 72)


def load_librdkafka() -> ctypes.CDLL:
    """The librdkafka shipped inside the confluent-kafka wheel, with the signatures used here."""
    import confluent_kafka
    libdir = Path(confluent_kafka.__file__).resolve().parent.parent / "confluent_kafka.libs"
    candidates = sorted(glob.glob(str(libdir / "librdkafka*.so*")))
    if not candidates:
        raise SystemExit("no bundled librdkafka under %s; pip install confluent-kafka" % libdir)
    lib = ctypes.CDLL(candidates[0])
    vp, cp, i16 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int16
    signatures = {
        "rd_kafka_conf_new": (vp, []),
        "rd_kafka_conf_set": (ctypes.c_int, [vp, cp, cp, cp, ctypes.c_size_t]),
        "rd_kafka_new": (vp, [ctypes.c_int, vp, cp, ctypes.c_size_t]),
        "rd_kafka_destroy": (None, [vp]),
        "rd_kafka_handle_mock_cluster": (vp, [vp]),
        "rd_kafka_mock_cluster_bootstraps": (cp, [vp]),
        "rd_kafka_mock_topic_create": (ctypes.c_int, [vp, cp, ctypes.c_int, ctypes.c_int]),
        "rd_kafka_mock_set_apiversion": (ctypes.c_int, [vp, i16, i16, i16]),
    }
    for name, (restype, argtypes) in signatures.items():
        func = getattr(lib, name)
        func.restype, func.argtypes = restype, argtypes
    return lib


class MockCluster:
    """One mock broker inside an otherwise idle librdkafka producer handle."""

    def __init__(self) -> None:
        self._lib = load_librdkafka()
        errstr = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        for name, value in ((b"test.mock.num.brokers", b"1"), (b"log_level", b"3")):
            if self._lib.rd_kafka_conf_set(conf, name, value, errstr, len(errstr)) != 0:
                raise RuntimeError("librdkafka config %s: %s" % (name.decode(), errstr.value.decode()))
        self._rk = self._lib.rd_kafka_new(0, conf, errstr, len(errstr))  # 0: a producer handle
        if not self._rk:
            raise RuntimeError("rd_kafka_new failed: " + errstr.value.decode())
        self._mock = self._lib.rd_kafka_handle_mock_cluster(self._rk)
        self.bootstrap = self._lib.rd_kafka_mock_cluster_bootstraps(self._mock).decode().split(",")[0]
        for api_key in TELEMETRY_API_KEYS:
            self._lib.rd_kafka_mock_set_apiversion(self._mock, api_key, -1, -1)

    def create_topic(self, name: str, partitions: int) -> int:
        """0 on success, else librdkafka's error code."""
        return self._lib.rd_kafka_mock_topic_create(self._mock, name.encode(), partitions, 1)

    def close(self) -> None:
        if self._rk:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    mock = MockCluster()
    try:
        print("mock listening on " + mock.bootstrap, file=stdout, flush=True)
        for line in stdin:
            words = line.split()
            if len(words) == 3 and words[0] == "create":
                err = mock.create_topic(words[1], int(words[2]))
                print("ok" if err == 0 else "error %d" % err, file=stdout, flush=True)
            elif words:
                print("error unknown command", file=stdout, flush=True)
    finally:
        mock.close()


if __name__ == "__main__":
    serve()
