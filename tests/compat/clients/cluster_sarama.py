"""sarama against a cluster: the program in sarama/cluster/main.go, built as sarama_client.py builds its own
(GOPATH mode against Debian's packaged source, cached by the source's hash), run as a workload process (see
cluster_workload.py) or once per produce."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import MissingClient
from .cluster_workload import Workload
from .go_program import build_go_program, run_go_program
from .sarama_client import BUILD_DIR, INSTALL_HINT, SARAMA_SOURCE

SOURCE_DIR = Path(__file__).with_name("sarama") / "cluster"
CALL_TIMEOUT_S = 120.0


def load() -> SaramaCluster:
    """The program, built if needed; raises MissingClient with the install command."""
    go = shutil.which("go")
    if go is None or not SARAMA_SOURCE.is_dir():
        missing = "the go command" if go is None else f"{SARAMA_SOURCE}"
        raise MissingClient(f"sarama is not installed ({missing} is missing): {INSTALL_HINT}")
    return SaramaCluster(build(go))


def build(go: str) -> Path:
    return build_go_program(go, SOURCE_DIR, BUILD_DIR / "cluster", "sarama-cluster")


class SaramaCluster:
    def __init__(self, program: Path):
        self.program = program

    def workload(self, bootstrap: str, topic: str, group: str, *, partitions: int, chunk: int,
                 log_path: Path) -> Workload:
        spec = {"op": "workload", "bootstrap": bootstrap, "topic": topic, "group": group, "partitions": partitions,
                "chunk": chunk}
        return Workload([str(self.program), json.dumps(spec)], {}, log_path)

    def produce(self, bootstrap: str, topic: str, partition: int, values: list[str], *, retries: int,
                idempotent: bool = False) -> dict:
        """{"ok": true} or {"ok": false, "error": {"message": ..., "code": Kafka's error code or -1}}."""
        spec = {"op": "produce", "bootstrap": bootstrap, "topic": topic, "partition": partition, "values": values,
                "retries": retries, "idempotent": idempotent}
        return run_go_program(self.program, spec, label="sarama", timeout_s=CALL_TIMEOUT_S, as_argument=True)
