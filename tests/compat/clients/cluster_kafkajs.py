"""kafkajs against a cluster: cluster_kafkajs.js run as a workload process (see cluster_workload.py) or once per
call (a produce, a list of admin calls)."""
from __future__ import annotations

import json
from pathlib import Path

from . import load_or_fail
from .base import ClientError
from .cluster_workload import Workload
from .kafkajs_client import KafkajsError
from .node_program import run_program

SCRIPT = Path(__file__).with_name("cluster_kafkajs.js")
CALL_TIMEOUT_S = 120.0


class KafkajsCluster:
    def __init__(self, bootstrap: str):
        adapter = load_or_fail("kafkajs")  # fails the test with the install command when kafkajs is missing
        self.node = adapter.node
        self.env = {"NODE_PATH": str(adapter.node_modules)}
        self.bootstrap = bootstrap

    def workload(self, topic: str, group: str, *, partitions: int, chunk: int, log_path: Path) -> Workload:
        spec = {"op": "workload", "brokers": self.bootstrap, "topic": topic, "group": group,
                "partitions": partitions, "chunk": chunk}
        return Workload([self.node, str(SCRIPT), json.dumps(spec)], self.env, log_path)

    def call(self, spec: dict) -> dict:
        spec = {"brokers": self.bootstrap} | spec
        return run_program([self.node, str(SCRIPT)], spec, label="kafkajs", timeout_s=CALL_TIMEOUT_S, env=self.env,
                           error=KafkajsError, stdin=False)

    def produce(self, topic: str, partition: int, values: list[str], *, retries: int,
                idempotent: bool = False) -> dict:
        """{"ok": true, "answer": ...} or {"ok": false, "error": {name, message, type}} (type: Kafka's error)."""
        return self.call({"op": "produce", "topic": topic, "partition": partition, "values": values,
                          "retries": retries, "idempotent": idempotent})

    def admin(self, *calls: dict) -> list[dict]:
        """Each call's {"result": ...} or {"error": {...}}, in order (see adminCall in cluster_kafkajs.js)."""
        return self.call({"op": "admin", "calls": list(calls)})["results"]

    def admin_results(self, *calls: dict) -> list:
        answers = self.admin(*calls)
        failed = [(call["call"], answer["error"]) for call, answer in zip(calls, answers, strict=True)
                  if "error" in answer]
        if failed:
            raise ClientError(f"kafkajs admin: {failed}")
        return [answer["result"] for answer in answers]
