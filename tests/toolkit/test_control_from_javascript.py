"""The control API from another language: a kafkajs test (node) injects an error over HTTP, its producer's retry
gets past it, and it reads back from the broker what arrived and what was stored."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from compatbroker import EmbeddedBroker
from tests.compat.clients import NODE_DIR, load

SCRIPT = Path(__file__).with_name("control_from_node.js")


def test_a_javascript_test_injects_a_fault_and_asserts_on_what_the_broker_saw():
    load("kafkajs")  # fails with the install command when node or kafkajs is missing
    with EmbeddedBroker(mode="subprocess") as broker:  # as a JS suite would run `compatbroker serve`
        done = subprocess.run([shutil.which("node"), str(SCRIPT), broker.bootstrap_servers, broker.control_url,
                               "js-orders"], capture_output=True, text=True, timeout=120, check=False,
                              env=dict(os.environ, NODE_PATH=str(NODE_DIR / "node_modules")))
        lines = [line for line in done.stdout.splitlines() if line.startswith(("RESULT ", "ERROR "))]
        assert done.returncode == 0 and lines and lines[-1].startswith("RESULT "), done.stdout + done.stderr
        result = json.loads(lines[-1].removeprefix("RESULT "))
        stored = [record.value for record in broker.records("js-orders")]
    assert result == {"offset": "0", "injected": ["NOT_LEADER_OR_FOLLOWER"] * 2 + [None], "clients": ["js-test"],
                      "values": ["from-js"]}
    assert stored == [b"from-js"]
