"""Kafka's own command-line tools (kafka-topics, kafka-console-producer, kafka-console-consumer,
kafka-consumer-groups, kafka-configs), run the way bin/kafka-*.sh runs them: `java -cp <jars> <main class> ...`.

The jars come from COMPATBROKER_KAFKA_TOOLS: a directory (every *.jar in it), or a class path (entries separated by
os.pathsep, each a jar or a directory of jars). They must hold the tools' classes, kafka-clients and what those need
(jopt-simple, jackson, slf4j; scala-library and scala-logging for the tools still written in Scala). A Kafka binary
distribution's libs/ directory is such a directory; without a Maven repository they can also be built from Kafka's
sources (javac, and PySpark's Scala compiler for the Scala tools). Without the variable, the tests skip with HOW_TO;
a variable naming something that is not there is an error. A tool whose main class the jars lack skips with that
reason (Kafka 3.9's kafka-configs, kafka.admin.ConfigCommand, needs the broker's whole Scala module, kafka_2.13).

Main classes by Kafka version: 3.9 has TopicCommand, ConsoleConsumer and ConsumerGroupCommand in the tools module
(Java), ConsoleProducer and ConfigCommand in core (Scala); 4.x moved ConsoleProducer to the tools module.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import shutil
import subprocess
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

ENV = "COMPATBROKER_KAFKA_TOOLS"
HOW_TO = (f"Kafka's tool jars are not set: point {ENV} at a Kafka binary distribution's libs/ directory, or at a "
          f"directory (or class path) of jars built from Kafka's sources holding the tools, kafka-clients and their "
          f"dependencies (jopt-simple, jackson, slf4j, scala-library)")
RUN_TIMEOUT_S = 120.0  # a bound for one tool run: a JVM start, and the tool's own request timeouts, on a loaded machine
TOOL_TIMEOUT_MS = 60_000  # what the tests give the tools' own --timeout options (their defaults are a few seconds)

# tool -> its main classes, newest Kafka first
MAIN_CLASSES: Mapping[str, tuple[str, ...]] = {
    "kafka-topics": ("org.apache.kafka.tools.TopicCommand",),
    "kafka-console-producer": ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
    "kafka-console-consumer": ("org.apache.kafka.tools.consumer.ConsoleConsumer",),
    "kafka-consumer-groups": ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",),
    "kafka-configs": ("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"),
}
VERSION_FILE = "kafka/kafka-version.properties"  # in kafka-clients' jar: what AppInfoParser reports


class ToolsUnavailable(Exception):
    """The jars (or one tool's class in them) are not there: the tests skip with this message."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One finished tool run."""
    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]

    def __str__(self) -> str:
        return f"{' '.join(self.args)} -> exit {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


@dataclasses.dataclass(frozen=True)
class KafkaTools:
    jars: tuple[Path, ...]
    bootstrap: str = ""

    def on(self, bootstrap: str) -> KafkaTools:
        return dataclasses.replace(self, bootstrap=bootstrap)

    def main_class(self, tool: str) -> str:
        """The tool's main class in the jars; ToolsUnavailable when they have none of its classes."""
        for candidate in MAIN_CLASSES[tool]:
            if _has_entry(self.jars, candidate.replace(".", "/") + ".class"):
                return candidate
        raise ToolsUnavailable(f"{tool}: the jars of {ENV} hold none of {', '.join(MAIN_CLASSES[tool])}")

    def run(self, tool: str, *args: str, stdin: str | None = None, timeout_s: float = RUN_TIMEOUT_S) -> Run:
        """Runs `tool` with --bootstrap-server and `args`, feeding it `stdin` (else an empty stdin)."""
        command = [_java(), "-cp", os.pathsep.join(map(str, self.jars)), self.main_class(tool),
                   "--bootstrap-server", self.bootstrap, *args]
        done = subprocess.run(command, input=stdin or "", capture_output=True, text=True, timeout=timeout_s)
        return Run((tool, *args), done.returncode, done.stdout, done.stderr)

    def version(self) -> str | None:
        """Kafka's version as the tools report it (kafka-clients' kafka-version.properties)."""
        text = _read_entry(self.jars, VERSION_FILE)
        found = re.search(r"^version=(\S+)", text or "", re.MULTILINE)
        return found.group(1) if found else None


def configured(environ: Mapping[str, str] = os.environ) -> bool:
    return bool(environ.get(ENV, "").strip())


def find(environ: Mapping[str, str] = os.environ) -> KafkaTools:
    """The tool jars COMPATBROKER_KAFKA_TOOLS names; ToolsUnavailable when it is not set."""
    named = environ.get(ENV, "").strip()
    if not named:
        raise ToolsUnavailable(HOW_TO)
    return KafkaTools(_jars(named))


def installed_version(environ: Mapping[str, str] = os.environ) -> str:
    """What the matrix row shows: the tools' Kafka version, or why there is none."""
    try:
        return find(environ).version() or "? (no kafka-version.properties in the jars)"
    except ToolsUnavailable:
        return f"jars not set ({ENV})"


def _jars(named: str) -> tuple[Path, ...]:
    jars: list[Path] = []
    for entry in filter(None, named.split(os.pathsep)):
        path = Path(entry)
        if path.is_dir():
            jars += sorted(path.glob("*.jar"))
        elif path.is_file():
            jars.append(path)
        else:
            raise FileNotFoundError(f"{ENV} names {entry}, which does not exist")
    if not jars:
        raise FileNotFoundError(f"{ENV}={named} holds no jar")
    return tuple(jars)


@functools.lru_cache(maxsize=None)
def _entries(jar: Path) -> frozenset[str]:
    with zipfile.ZipFile(jar) as opened:
        return frozenset(opened.namelist())


def _has_entry(jars: Sequence[Path], name: str) -> bool:
    return any(name in _entries(jar) for jar in jars)


def _read_entry(jars: Sequence[Path], name: str) -> str | None:
    for jar in jars:
        if name in _entries(jar):
            with zipfile.ZipFile(jar) as opened:
                return opened.read(name).decode()
    return None


def _java() -> str:
    found = shutil.which("java")
    assert found, "no java on PATH: apt-get install default-jre-headless (the Kafka tools are Java programs)"
    return found
