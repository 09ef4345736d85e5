"""The core never imports the testing toolkit: the server reaches it only through `compatbroker.server.hooks`, and
only the top layer (`compatbroker/__init__.py`, `compatbroker/__main__.py`, the command line `compatbroker/cli/`)
wires it in. The Kafka client the command line uses (`compatbroker/client/`) stands on the protocol layer alone, so
that it works against any Kafka broker and loads nothing of ours but the codecs."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import compatbroker

PACKAGE = Path(compatbroker.__file__).parent
TOP_LAYER = {PACKAGE / "__init__.py", PACKAGE / "__main__.py", *(PACKAGE / "cli").rglob("*.py")}


def _imported_modules(source: str, package: str) -> list[str]:
    """The absolute names of the modules a source file of `package` imports (relative imports resolved)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0]
                base = f"{parent}.{base}" if base else parent
            found += [base] + [f"{base}.{alias.name}" for alias in node.names]
    return found


def _package_of(path: Path) -> str:
    return ".".join(("compatbroker", *path.relative_to(PACKAGE).parent.parts))


def test_no_core_module_imports_the_toolkit():
    toolkit = PACKAGE / "toolkit"
    offenders = [f"{path.relative_to(PACKAGE.parent)} imports {name}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 if toolkit not in path.parents and path not in TOP_LAYER
                 for name in _imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
                 if name == "compatbroker.toolkit" or name.startswith("compatbroker.toolkit.")]
    assert offenders == []


def test_the_scan_resolves_relative_imports():
    """The check above sees `from ..toolkit import faults` in a subpackage (else it could pass by seeing
    nothing)."""
    assert "compatbroker.toolkit.faults" in _imported_modules("from ..toolkit import faults", "compatbroker.server")
    assert "compatbroker.toolkit.runtime" in _imported_modules("from .toolkit.runtime import x", "compatbroker")


def test_running_a_broker_loads_nothing_of_the_toolkit(tmp_path):
    code = (
        "import asyncio, sys\n"
        "from compatbroker.config import BrokerConfig\n"
        "from compatbroker.server.run import ClusterRuntime\n"
        "async def main():\n"
        f"    runtime = ClusterRuntime(BrokerConfig({{'listeners': 'PLAINTEXT://127.0.0.1:0', "
        f"'log.dirs': {str(tmp_path / 'data')!r}}}))\n"
        "    await runtime.start()\n"
        "    await runtime.stop()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.startswith('compatbroker.toolkit')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_the_client_imports_only_the_protocol_layer():
    client = PACKAGE / "client"
    # besides the protocol: the version it names itself with, and the parsing of HOST:PORT and properties files
    allowed = ("compatbroker.client", "compatbroker.protocol", "compatbroker.__version__", "compatbroker.config")
    offenders = [f"{path.relative_to(PACKAGE.parent)} imports {name}"
                 for path in sorted(client.rglob("*.py"))
                 for name in _imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
                 if name.startswith("compatbroker.") and not name.startswith(allowed)]
    assert offenders == []
