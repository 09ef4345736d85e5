"""One consumer-group member in a process of its own, driven by tests/compat/groups.py.

    python -m tests.compat.clients.member '<spec json>'

A test needs members it can SIGKILL, so each member is a process. The Python clients run here (their adapter's
`run_member` does the client-specific part); kafkajs runs the same protocol in kafkajs_client.js.

The protocol, one JSON object per line:
- stdout, `EVENT {"type": ...}`: `assigned` / `revoked` / `lost` (the partitions the client's rebalance callback
  was given and the member's whole `assignment` after it), `records` ([partition, offset, value] triples as the
  application received them), `committed` (partition -> offset, after the client's synchronous commit returned),
  `pong`, `closed`, `error`. Anything else on stdout is not ours and is ignored.
- stdin: {"op": "commit"} commits, for each partition assigned now, the offset after the last record delivered
  ({"op": "commit", "offsets": {...}} commits exactly those); {"op": "ping"}; {"op": "close"} closes the consumer
  (a LeaveGroup, except for a static member) and ends the process. End of stdin means close.

The spec: client, bootstrap, topic, group, client_id, session_timeout_ms, heartbeat_interval_ms,
rebalance_timeout_ms (max.poll.interval.ms), instance_id (static membership, or null), strategy (null: the client's
default assignors; "cooperative-sticky"; "roundrobin"...), fetch_wait_ms, group_protocol ("classic", or "consumer":
KIP-848, where the broker sets session and heartbeat and remote_assignor names its assignor, null for its default).
"""
from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable, Iterable

EVENT_PREFIX = "EVENT "
COOPERATIVE = "cooperative-sticky"
POLL_TIMEOUT_S = 0.2  # how long a command may wait for the poll loop


class MemberSession:
    """The worker's side of the protocol: events out, commands in, and what the member was given so far."""

    def __init__(self, spec: dict, out=None):
        self.spec = spec
        self.out = out or sys.stdout
        self.assignment: set[int] = set()
        self.positions: dict[int, int] = {}  # partition -> offset after the last record delivered
        self.commands: queue.Queue = queue.Queue()
        self._lock = threading.Lock()  # a client may call back from its own thread

    @property
    def cooperative(self) -> bool:
        """Incremental rebalance callbacks: cooperative-sticky, or the consumer protocol (KIP-848) of librdkafka."""
        return self.spec.get("strategy") == COOPERATIVE or self.spec.get("group_protocol") == "consumer"

    def emit(self, kind: str, **fields) -> None:
        line = EVENT_PREFIX + json.dumps({"type": kind, **fields})
        with self._lock:
            self.out.write(line + "\n")
            self.out.flush()

    # --- rebalance callbacks: eager callbacks carry the whole assignment, cooperative ones the change ----------------

    def assigned(self, partitions: Iterable[int]) -> None:
        partitions = set(partitions)
        self.assignment = self.assignment | partitions if self.cooperative else partitions
        self.emit("assigned", partitions=sorted(partitions), assignment=sorted(self.assignment))

    def revoked(self, partitions: Iterable[int], kind: str = "revoked") -> None:
        partitions = set(partitions)
        self.assignment -= partitions
        self.emit(kind, partitions=sorted(partitions), assignment=sorted(self.assignment))

    def delivered(self, records: Iterable[tuple[int, int, bytes | None]]) -> None:
        batch = [(p, o, None if v is None else v.decode("utf-8", "replace")) for p, o, v in records]
        if not batch:
            return
        for partition, offset, _ in batch:
            self.positions[partition] = max(self.positions.get(partition, 0), offset + 1)
        self.emit("records", records=batch)

    def offsets_to_commit(self, command: dict) -> dict[int, int]:
        if command.get("offsets") is not None:
            return {int(p): int(o) for p, o in command["offsets"].items()}
        return {p: o for p, o in self.positions.items() if p in self.assignment}

    # --- commands ------------------------------------------------------------------------------------------------

    def read_commands(self, stream=None) -> None:
        """Starts the thread that queues stdin's commands; end of input queues a close."""
        def read():
            for line in stream or sys.stdin:
                if line.strip():
                    self.commands.put(json.loads(line))
            self.commands.put({"op": "close"})
        threading.Thread(target=read, daemon=True).start()

    def next_command(self) -> dict | None:
        try:
            return self.commands.get_nowait()
        except queue.Empty:
            return None

    def next_step(self) -> tuple[str, dict[int, int] | None]:
        """("poll", None), ("commit", offsets) or ("close", None); pings are answered on the way."""
        while True:
            command = self.next_command()
            if command is None:
                return "poll", None
            if command["op"] == "ping":
                self.emit("pong")
            elif command["op"] == "commit":
                return "commit", self.offsets_to_commit(command)
            elif command["op"] == "close":
                return "close", None
            else:
                raise ValueError(f"unknown command {command!r}")

    def committed(self, offsets: dict[int, int]) -> None:
        self.emit("committed", offsets={str(p): o for p, o in sorted(offsets.items())})

    def serve(self, poll: Callable[[], None], commit: Callable[[dict[int, int]], None],
              close: Callable[[], None]) -> None:
        """The member's loop: poll the client, carry out commands between polls, close on request."""
        while True:
            step, offsets = self.next_step()
            if step == "poll":
                poll()
            elif step == "commit":
                commit(offsets)
                self.committed(offsets)
            else:
                close()
                self.emit("closed")
                return

    async def serve_async(self, poll, commit, close) -> None:
        """serve() for asyncio clients: the three callables are coroutine functions."""
        while True:
            step, offsets = self.next_step()
            if step == "poll":
                await poll()
            elif step == "commit":
                await commit(offsets)
                self.committed(offsets)
            else:
                await close()
                self.emit("closed")
                return


def main(argv: list[str]) -> int:
    from . import load
    # The client library's log goes to stderr, which the test keeps in the member's log file;
    # COMPAT_MEMBER_LOG=DEBUG shows its protocol exchanges.
    logging.basicConfig(level=os.environ.get("COMPAT_MEMBER_LOG", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    spec = json.loads(argv[1])
    session = MemberSession(spec)
    session.read_commands()
    try:
        load(spec["client"]).run_member(spec, session)
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails with it
        session.emit("error", message=repr(exc))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
