"""The control API: ask a running broker to misbehave, and ask it what it saw.

- `operations.py`: the operations themselves (inject errors and latency, drop connections, go down and up; in a
  cluster stop, start and isolate nodes, delay followers and move leaders; list topics, records, committed offsets,
  groups of every type (`groups.py` describes them) and the request log), run on the broker's event loop;
  `security.py` adds SCRAM users and ACL bindings;
- `http.py`: the HTTP/JSON endpoint of `compatbroker serve --control-listen HOST:PORT`, for tests in any language;
- `client.py`: a Python client of that endpoint (the embedded broker's subprocess mode and `compatbroker control`);
- `console/`: the web console the same listener serves to browsers (pages over the same operations).

This package's `__init__` stays light: the command-line client imports it without loading the broker.
"""
from __future__ import annotations


class ControlError(Exception):
    """A control request that cannot be honoured: `status` is its HTTP status, `message` the one-line reason."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{message} (HTTP {status})")
        self.status = status
        self.message = message


__all__ = ["ControlError"]
