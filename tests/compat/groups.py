"""Consumer-group members seen from a test: each one a process (clients/member.py, or kafkajs_client.js --member)
that the test starts, watches, commands, closes or kills.

Every member of a test shares one condition variable with the others, so a test waits for a state of the whole
group ("these three own the six partitions between them") without polling or sleeping. A wait fails at once when
a member reports an error or exits unasked, with that member's log in the message.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .broker_process import REPO
from .clients.base import ClientAdapter
from .clients.member import EVENT_PREFIX

WAIT_S = 90.0  # bounds, not paces: a wait ends as soon as its condition holds (generous for loaded machines)
CLOSE_S = 60.0  # a close waits for the client's LeaveGroup and shutdown

# Short timeouts, so that a dead member costs seconds: 6000 ms is the broker's minimum session timeout (Kafka's
# group.min.session.timeout.ms), and a member heartbeats every second. The rebalance timeout (the Java client's
# max.poll.interval.ms) bounds how long a rebalance may wait for a member.
# group_protocol "consumer" (KIP-848, confluent-kafka only) leaves the session and heartbeat to the broker and
# takes remote_assignor (None: the broker's default) instead of strategy.
MEMBER_DEFAULTS = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000, "rebalance_timeout_ms": 20000,
                   "instance_id": None, "strategy": None, "fetch_wait_ms": 200, "group_protocol": "classic",
                   "remote_assignor": None}


class MemberFailed(AssertionError):
    """A member reported an error, exited unasked, or the group did not reach the state a test waited for."""


class Members:
    """The group members one test started; stop_all() ends those still running."""

    def __init__(self, log_dir: Path):
        self.log_dir = Path(log_dir)
        self.changed = threading.Condition()
        self.started: list[GroupMember] = []

    def start(self, adapter: ClientAdapter, bootstrap: str, topic: str, group: str, name: str,
              **settings) -> GroupMember:
        """Starts a member named `name` (for logs and client ids); settings override MEMBER_DEFAULTS."""
        unknown = set(settings) - set(MEMBER_DEFAULTS)
        assert not unknown, f"unknown member settings {unknown}"
        spec = MEMBER_DEFAULTS | settings | {
            "client": adapter.name, "bootstrap": bootstrap, "topic": topic, "group": group,
            "client_id": f"compat-{name}-{uuid.uuid4().hex[:6]}"}
        member = GroupMember(name, adapter, spec, self.log_dir / f"member-{name}-{len(self.started)}.log",
                             self.changed)
        self.started.append(member)
        member.start()
        return member

    def wait_until(self, condition: Callable[[], object], what: str, timeout_s: float = WAIT_S):
        """Waits until `condition()` is truthy and returns its value; fails when a member failed meanwhile."""
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while True:
                self._check_failures()
                result = condition()
                if result:
                    return result
                left = deadline - time.monotonic()
                if left <= 0:
                    raise MemberFailed(f"not within {timeout_s} s: {what}\n{self.describe()}")
                self.changed.wait(left)

    def _check_failures(self) -> None:
        for member in self.started:
            problem = member.failure()
            if problem:
                raise MemberFailed(f"member {member.name} ({member.adapter.name}): {problem}\n{member.describe()}")

    def describe(self) -> str:
        return "\n".join(member.describe() for member in self.started)

    def stop_all(self) -> None:
        """Closes stdin of every running member (a close), then kills what is still there after a while."""
        running = [m for m in self.started if m.proc.poll() is None]
        for member in running:
            member.close_stdin()
        deadline = time.monotonic() + 10
        for member in running:
            try:
                member.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.proc.kill()
                member.proc.wait()


class GroupMember:
    """One member process and everything it reported, in order."""

    def __init__(self, name: str, adapter: ClientAdapter, spec: dict, log_path: Path, changed: threading.Condition):
        self.name = name
        self.adapter = adapter
        self.spec = spec
        self.log_path = log_path
        self.changed = changed
        self.events: list[dict] = []  # each with "at": time.monotonic() when the test read it
        self.ended_on_purpose = False
        self.proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    @property
    def client_id(self) -> str:
        return self.spec["client_id"]

    def start(self) -> None:
        argv, extra_env = self.adapter.member_command(self.spec)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=REPO, env=os.environ | extra_env, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=log)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if not line.startswith(EVENT_PREFIX):
                continue  # a client library's own output
            event = json.loads(line[len(EVENT_PREFIX):]) | {"at": time.monotonic()}
            with self.changed:
                self.events.append(event)
                self.changed.notify_all()
        self.proc.wait()
        with self.changed:
            self.changed.notify_all()

    # --- what it reported ----------------------------------------------------------------------------------------

    def of_type(self, *kinds: str, since: int = 0) -> list[dict]:
        return [e for e in self.events[since:] if e["type"] in kinds]

    @property
    def assignment(self) -> frozenset[int]:
        """The member's partitions after its latest rebalance callback (none before the first)."""
        changes = self.of_type("assigned", "revoked", "lost")
        return frozenset(changes[-1]["assignment"]) if changes else frozenset()

    @property
    def records(self) -> list[tuple[int, int, str | None]]:
        """(partition, offset, value) of every record the application was handed, in order."""
        return [tuple(r) for e in self.of_type("records") for r in e["records"]]

    def failure(self) -> str:
        errors = self.of_type("error")
        if errors:
            return f"reported {errors[0]['message']}"
        if self.proc.poll() is not None and not self.ended_on_purpose:
            return f"exited with status {self.proc.returncode} unasked"
        return ""

    def describe(self) -> str:
        try:
            log = self.log_path.read_text(errors="replace")[-3000:]
        except OSError:
            log = ""
        changes = [(e["type"], e["partitions"], e["assignment"]) for e in self.of_type("assigned", "revoked", "lost")]
        return (f"--- member {self.name} ({self.adapter.name}, {self.client_id}): assignment {sorted(self.assignment)}"
                f", {len(self.records)} records, rebalance callbacks {changes}\n{log}")

    # --- commands ------------------------------------------------------------------------------------------------

    def send(self, command: dict) -> None:
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        self.proc.stdin.flush()

    def _wait_for(self, kind: str, count: int, timeout_s: float) -> dict:
        deadline = time.monotonic() + timeout_s
        with self.changed:
            while len(self.of_type(kind)) < count:
                problem = self.failure()
                if problem or time.monotonic() >= deadline:
                    raise MemberFailed(f"member {self.name}: no {kind} event ({problem or 'timed out'})\n"
                                       f"{self.describe()}")
                self.changed.wait(max(0.0, deadline - time.monotonic()))
            return self.of_type(kind)[count - 1]

    def commit(self, offsets: dict[int, int] | None = None, timeout_s: float = WAIT_S) -> dict[int, int]:
        """A synchronous commit of what the member consumed (or of `offsets`); returns what was committed."""
        count = len(self.of_type("committed")) + 1
        self.send({"op": "commit", "offsets": None if offsets is None else {str(p): o for p, o in offsets.items()}})
        event = self._wait_for("committed", count, timeout_s)
        return {int(p): o for p, o in event["offsets"].items()}

    def ping(self, timeout_s: float = WAIT_S) -> None:
        """A round trip through the member's loop: every event it emitted before is in `events` afterwards."""
        count = len(self.of_type("pong")) + 1
        self.send({"op": "ping"})
        self._wait_for("pong", count, timeout_s)

    def close(self, timeout_s: float = CLOSE_S) -> None:
        """Closes the consumer the way an application does (LeaveGroup, except for a static member)."""
        self.ended_on_purpose = True
        self.send({"op": "close"})
        self._wait_for("closed", 1, timeout_s)
        code = self.proc.wait(timeout=timeout_s)
        assert code == 0, f"member {self.name} exited with status {code} after closing\n{self.describe()}"

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no goodbye; the coordinator can only notice the silence."""
        self.ended_on_purpose = True
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def close_stdin(self) -> None:
        self.ended_on_purpose = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass


# --- conditions on a group ---------------------------------------------------------------------------------------

def split_among(members: Sequence[GroupMember], partitions: Iterable[int]) -> dict[str, frozenset[int]] | None:
    """The members' assignments when they share `partitions` evenly (disjoint, complete, sizes within one of each
    other), else None."""
    owned = {m.name: m.assignment for m in members}
    everything = set(partitions)
    sizes = [len(parts) for parts in owned.values()]
    disjoint = sum(sizes) == len(set().union(*owned.values()))
    if disjoint and set().union(*owned.values()) == everything and max(sizes) - min(sizes) <= 1:
        return owned
    return None


def received_all(members: Sequence[GroupMember], expected: Iterable[tuple[int, str]]) -> bool:
    """Whether the members together were handed every (partition, value) of `expected`."""
    got = {(p, v) for m in members for p, _, v in m.records}
    return set(expected) <= got


def each_read_its_own(members: Sequence[GroupMember], expected: Iterable[tuple[int, str]]) -> bool:
    """Whether each member was handed every (partition, value) of `expected` in the partitions it owns now (a
    member that read a partition before a rebalance moved it does not count for the new owner)."""
    expected = set(expected)
    return all(received_all([m], {(p, v) for p, v in expected if p in m.assignment}) for m in members)
