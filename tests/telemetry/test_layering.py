"""Dependencies point down: the telemetry package is used by the handlers, the server and the toolkit, and imports
none of them (nor the coordinator, the metrics package or the CLI)."""
from __future__ import annotations

from tests.server.test_layering import PACKAGE, _imported_modules, _package_of

_ABOVE = ("compatbroker.handlers", "compatbroker.server", "compatbroker.toolkit", "compatbroker.coordinator",
          "compatbroker.broker", "compatbroker.cli", "compatbroker.metrics")


def test_the_telemetry_package_imports_nothing_above_it():
    modules = sorted((PACKAGE / "telemetry").glob("*.py"))
    offenders = [f"{path.name} imports {name}"
                 for path in modules
                 for name in _imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
                 if any(name == above or name.startswith(above + ".") for above in _ABOVE)]
    assert len(modules) >= 7 and offenders == []
