"""kafkajs against a cluster: cluster_kafkajs.js run as a workload process (see cluster_workload.py) or once per
call (a produce, a list of admin calls)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from . import load_or_fail
from .base import ClientError
from .cluster_workload import Workload

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
        try:
            done = subprocess.run([self.node, str(SCRIPT), json.dumps(spec)], capture_output=True,
                                  timeout=CALL_TIMEOUT_S, env=os.environ | self.env, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"kafkajs {spec['op']}: no answer within {CALL_TIMEOUT_S} s; log: "
                              f"{(exc.stderr or b'').decode(errors='replace')[-1500:]}") from None
        log = done.stderr.decode(errors="replace")[-3000:]
        for line in reversed(done.stdout.decode(errors="replace").splitlines()):
            if line.startswith("RESULT ") and done.returncode == 0:
                return json.loads(line[len("RESULT "):])
            if line.startswith("ERROR "):
                raise ClientError(f"kafkajs {spec['op']}: {line[len('ERROR '):]}\nkafkajs log:\n{log}")
        raise ClientError(f"kafkajs {spec['op']}: exit {done.returncode} without a result\n{log}")

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
