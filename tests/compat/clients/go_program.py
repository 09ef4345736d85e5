"""What the Go-program rows share (sarama, kafka-go, confluent-kafka-go): each client's program is a Go package built
at first use in GOPATH mode against the source Debian packages (`GO111MODULE=off GOPATH=/usr/share/gocode`), into
a cache directory keyed by the hash of its sources, and runs once per operation with one JSON command on stdin,
answering one JSON object on stdout (a failure: a non-zero exit and its stderr). Keys, values and header values
travel in base64; the client's version is its Debian package's.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from pathlib import Path

from ..records import Consumed
from .base import ClientError

GOPATH = Path("/usr/share/gocode")  # where Debian's golang-*-dev packages put their source
BUILD_TIMEOUT_S = 600  # a first build compiles the client (sarama: and its cgo zstd binding)


def build_go_program(go: str, program_dir: Path, build_dir: Path, binary: str) -> Path:
    """Builds the Go package in `program_dir` once per source hash, into build_dir/<hash>/<binary>; the path of the
    program."""
    digest = hashlib.sha256()
    for source in sorted(program_dir.glob("*.go")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    target = build_dir / digest.hexdigest()[:16] / binary
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{binary}.{os.getpid()}.partial")
    env = os.environ | {"GO111MODULE": "off", "GOPATH": str(GOPATH), "GOFLAGS": "", "CGO_ENABLED": "1"}
    done = subprocess.run([go, "build", "-o", str(partial), "."], cwd=program_dir, env=env,
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise ClientError(f"building {binary} failed:\n{done.stderr[-4000:]}")
    partial.replace(target)  # atomic: a concurrent run sees the old state or the whole program
    return target


def run_go_program(program: Path, command: dict, *, label: str, timeout_s: float, as_argument: bool = False) -> dict:
    """Runs `program` with `command` on stdin (`as_argument`: as its one argument); its JSON answer, or ClientError
    (its stderr) when it fails or does not finish within `timeout_s`."""
    spec = json.dumps(command)
    try:
        done = subprocess.run([str(program), spec] if as_argument else [str(program)],
                              input=None if as_argument else spec, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise ClientError(f"{label} {command['op']} did not finish within {timeout_s} s") from None
    if done.returncode != 0:
        raise ClientError(f"{label} {command['op']} failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def debian_version(package: str) -> str | None:
    """The installed version of a Debian package, e.g. 1.22.1-1; None when it is not installed."""
    try:
        done = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                              timeout=10)
    except OSError:
        return None
    return done.stdout.strip() or None


def host_port(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


def b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def unb64(data: str | None) -> bytes | None:
    return None if data is None else base64.b64decode(data)


def consumed(raw: dict) -> Consumed:
    """A record as the programs report it; its headers ({"key", "value"}) where the program has them."""
    headers = tuple((h["key"], unb64(h["value"])) for h in raw.get("headers") or ())
    return Consumed(raw["partition"], raw["offset"], unb64(raw["key"]), unb64(raw["value"]), headers,
                    raw["timestamp"])
