"""The older Python clients of the matrix: kafka-python, aiokafka and confluent-kafka at their oldest still-supported
minor lines (OLDER), beside the current releases the project venv has.

One process cannot import two versions of a library, so each older release lives in a virtual environment of its
own (tests/setup/older-python.sh makes them under OLDER_DIR) and runs the CURRENT adapter class of its library
(kafka_python_client.py, aiokafka_client.py, confluent_client.py, whose version-guarded branches cover what the old
release lacks) in that environment's interpreter: each adapter call is one process of older_python_runner.py, with
its arguments and result sent as JSON. Group members run member.py with that interpreter.

Why these versions (checked in November 2026):
- kafka-python 2.2: its maintainer still cuts 2.2.x patch releases beside 2.3.x and 3.0.x (2.2.20 with 2.3.2 in
  June 2026, then 2.2.21); the 2.0 and 2.1 lines ended with 2.0.6 and 2.1.6 in 2025.
- aiokafka 0.10: aiokafka keeps no maintenance branches (fixes ship in its next minor only); 0.10.0 is the oldest
  release its ecosystem still declares support for (faust-streaming 0.15 requires aiokafka>=0.10.0).
- confluent-kafka 2.4: Confluent maintains each client minor for 3 years from its first release under Platinum
  support (2 under Standard); 2.4.0 (May 2024) is the oldest inside that window, 2.3.0 (Oct 2023) left it.

Each row joins the shared tests of its current sibling's tags (catalog.py), except kafka-python-2.2: no "static"
(2.2 has no group_instance_id setting and sends JoinGroup v4 at most: KIP-345 came in 2.3), no "cooperative" (2.2
has no cooperative-sticky assignor: KIP-429 came in 3.0), and no "group_admin" (2.2's list_consumer_groups sends
ListGroups v2 at most and returns (group id, protocol type) pairs: no group states and no states filter, KIP-518).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import subprocess
from pathlib import Path

from . import MissingClient
from .base import DEFAULT_TIMEOUT_S, ClientAdapter, ClientError
from .older_python_runner import ATTRIBUTES, RESULT_PREFIX, decode, encode

OLDER_DIR = Path(os.environ.get("COMPATBROKER_OLDER_DIR", Path.home() / ".cache" / "compatbroker" / "older"))
REPO = Path(__file__).resolve().parents[3]
SPARE_S = 60.0  # how much longer than a call's own timeout its process may take (start-up, closing clients)


@dataclasses.dataclass(frozen=True)
class Older:
    current: str  # the matrix row of the current release, whose adapter class runs in the venv
    distribution: str
    version: str
    requirement: str  # what tests/setup/older-python.sh installs (keep the two in step)


OLDER = {
    "kafka-python-2.2": Older("kafka-python", "kafka-python", "2.2.21",
                              "kafka-python[snappy,lz4,zstd,crc32c]==2.2.21"),
    "aiokafka-0.10": Older("aiokafka", "aiokafka", "0.10.0", "aiokafka[snappy,lz4,zstd]==0.10.0"),
    "confluent-kafka-2.4": Older("confluent-kafka", "confluent-kafka", "2.4.0", "confluent-kafka==2.4.0"),
}


def python(name: str) -> Path:
    return OLDER_DIR / name / "bin" / "python"


def version(name: str) -> str | None:
    """The version installed in the row's venv (read from its dist-info, without starting the interpreter)."""
    pattern = f"{OLDER[name].distribution.replace('-', '_')}-*.dist-info"
    found = sorted((OLDER_DIR / name).glob(f"lib/python*/site-packages/{pattern}"))
    return found[0].name[len(pattern) - len("*.dist-info"):-len(".dist-info")] if found else None


def load(name: str) -> RemoteAdapter:
    older = OLDER[name]
    if version(name) != older.version or not python(name).is_file():
        venv = OLDER_DIR / name
        raise MissingClient(
            f"{name} is not installed in {venv}: bash tests/run.sh (tests/setup/older-python.sh), or "
            f"python3 -m venv {venv} && {venv}/bin/pip install '{older.requirement}'")
    return RemoteAdapter(name, older.current, _attributes(name))


@functools.cache
def _attributes(name: str) -> dict:
    return RemoteAdapter(name, OLDER[name].current, {})._call("attributes")


class RemoteAdapter(ClientAdapter):
    """A ClientAdapter whose calls run the current row's adapter in the older release's interpreter."""

    def __init__(self, name: str, current: str, attributes: dict):
        self.name = name
        self.current = current
        for attribute in ATTRIBUTES:
            if attribute in attributes:
                setattr(self, attribute, attributes[attribute])

    def _call(self, method: str, *args, **kwargs):
        request = {"client": self.current, "method": method, "args": encode(list(args)),
                   "kwargs": encode(kwargs), "security": self.security}
        timeout = kwargs.get("timeout_s", DEFAULT_TIMEOUT_S) + SPARE_S
        try:
            done = subprocess.run([str(python(self.name)), "-m", "tests.compat.clients.older_python_runner"],
                                  input=json.dumps(request), capture_output=True, text=True, timeout=timeout,
                                  cwd=REPO, env=_environment())
        except subprocess.TimeoutExpired as exc:
            raise ClientError(f"{self.name} {method}: no answer within {timeout} s; stderr: {_tail(exc.stderr)}")
        answers = [line[len(RESULT_PREFIX):] for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        if not answers:
            raise ClientError(f"{self.name} {method}: exit {done.returncode} without an answer; "
                              f"stderr: {_tail(done.stderr)}")
        answer = json.loads(answers[-1])
        if "error" in answer:
            raise _error(self.name, method, answer["error"], done.stderr)
        return decode(answer["result"])

    def member_command(self, spec):
        # member.py loads the current row's adapter, which the venv's interpreter runs with the older library
        spec = spec | {"client": self.current}
        return ([str(python(self.name)), "-m", "tests.compat.clients.member", json.dumps(spec)],
                {"PYTHONPATH": _environment()["PYTHONPATH"]})


def _remote(method: str):
    def call(self, *args, **kwargs):
        return self._call(method, *args, **kwargs)
    call.__name__ = method
    call.__doc__ = getattr(ClientAdapter, method).__doc__
    return call


# Every call the shared tests make through an adapter; the venv's adapter raises NotImplementedError for those its
# library has not (aiokafka has no group admin here), as the current row's adapter does.
for _method in ("produce", "consume", "list_offsets", "metadata", "list_topics", "group_consume", "committed",
                "produce_idempotent", "run_transactional", "read_to_end", "list_groups", "describe_groups",
                "group_offsets", "connect_failure"):
    setattr(RemoteAdapter, _method, _remote(_method))


def _environment() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return os.environ | {"PYTHONPATH": str(REPO) if not path else f"{REPO}{os.pathsep}{path}"}


def _error(name: str, method: str, error: dict, stderr: str) -> Exception:
    message = f"{name} {method}: {error['type']}: {error['message']}"
    if error["type"] in ("NotImplementedError", "ValueError"):
        return {"NotImplementedError": NotImplementedError, "ValueError": ValueError}[error["type"]](message)
    return ClientError(f"{message}\nstderr: {_tail(stderr)}" if stderr.strip() else message)


def _tail(text: str | bytes | None, chars: int = 3000) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return (text or "")[-chars:]
