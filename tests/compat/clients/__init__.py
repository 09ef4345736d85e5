"""The real clients the compat suite drives, each behind the same adapter interface (see base.py).

`load(name)` returns an adapter or raises MissingClient with the command that installs the client: a missing client
is a failed test, never a skipped one (`load_or_fail` fails the test with that command). `bash tests/run.sh`
installs all of them.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
from pathlib import Path

from . import catalog
from .base import ClientAdapter, ClientError

# The clients of the `client` fixture (catalog tag "client"), and of `each_client` (tag "each").
CLIENT_NAMES = catalog.with_tag("client")
EACH_CLIENT_NAMES = catalog.with_tag("each")
# Every row of the matrix: clients, tools and applications (catalog.CLIENTS).
ALL_CLIENT_NAMES = catalog.names()

NODE_PACKAGES = ("kafkajs@2.2.4", "kafkajs-snappy@1.1.0", "kafkajs-lz4@1.2.1", "@bokuweb/zstd-wasm@0.0.27")
# Where tests/run.sh installs the node packages (outside the checkout); override with COMPATBROKER_NODE_DIR.
NODE_DIR = Path(os.environ.get("COMPATBROKER_NODE_DIR", Path.home() / ".cache" / "compatbroker" / "node"))

INSTALL_HINTS = {
    "kafka-python": "pip install -e '.[test]'  (or: bash tests/run.sh)",
    "aiokafka": "pip install -e '.[test]'  (or: bash tests/run.sh)",
    "confluent-kafka": "pip install -e '.[test]'  (or: bash tests/run.sh)",
    "kcat": "apt-get update && apt-get install -y kcat  (or: bash tests/run.sh)",
    "kafkajs": (f"apt-get install -y nodejs npm && npm install --prefix {NODE_DIR} {' '.join(NODE_PACKAGES)}  "
                "(or: bash tests/run.sh; COMPATBROKER_NODE_DIR selects another directory)"),
    "strace": "apt-get update && apt-get install -y strace  (or: bash tests/run.sh)",
}


class MissingClient(AssertionError):
    pass


def _require_module(name: str, module: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise MissingClient(f"{name} is not installed: {INSTALL_HINTS[name]}")


def require_executable(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingClient(f"{name} is not installed: {INSTALL_HINTS[name]}")
    return path


def load(name: str) -> ClientAdapter:
    if name == "kafka-python":
        _require_module(name, "kafka")
        from .kafka_python_client import KafkaPythonClient
        return KafkaPythonClient()
    if name == "aiokafka":
        _require_module(name, "aiokafka")
        _require_module(name, "cramjam")  # aiokafka's snappy, lz4 and zstd
        from .aiokafka_client import AiokafkaClient
        return AiokafkaClient()
    if name == "confluent-kafka":
        _require_module(name, "confluent_kafka")
        from .confluent_client import ConfluentClient
        return ConfluentClient()
    if name == "kcat":
        from .kcat_client import KcatClient
        return KcatClient(require_executable("kcat"))
    if name == "kafkajs":
        node = shutil.which("node")
        modules = NODE_DIR / "node_modules"
        missing = [p for p in NODE_PACKAGES if not (modules / p.rsplit("@", 1)[0] / "package.json").is_file()]
        if node is None or missing:
            raise MissingClient(f"kafkajs: {'node is missing' if node is None else f'missing in {modules}: {missing}'}"
                                f"; install with: {INSTALL_HINTS['kafkajs']}")
        from .kafkajs_client import KafkajsClient
        return KafkajsClient(node, modules)
    if name == "sarama":
        from .sarama_client import load as load_sarama
        return load_sarama()  # builds its program on first use
    adapter = catalog.info(name).adapter  # KeyError: not a matrix client
    if not adapter:
        raise ValueError(f"{name} has no adapter (an application row: its tests drive it themselves)")
    module, _, function = adapter.partition(":")
    return getattr(importlib.import_module(f".{module}", __package__), function)(name)


def load_or_fail(name: str) -> ClientAdapter:
    """load() for a test: a missing client fails the test with the install command, without a traceback."""
    try:
        return load(name)
    except MissingClient as exc:
        missing = str(exc)
    import pytest  # here, not at the top: member processes import this package too
    pytest.fail(missing, pytrace=False)


__all__ = ["ALL_CLIENT_NAMES", "CLIENT_NAMES", "EACH_CLIENT_NAMES", "ClientAdapter", "ClientError", "MissingClient",
           "load", "load_or_fail", "require_executable"]
