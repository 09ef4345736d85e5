"""Dependencies point down: the metrics package is read by the server and the handlers and reads the broker
duck-typed, so it imports none of them (only the server package's public StartupError), nor the toolkit."""
from __future__ import annotations

from tests.server.test_layering import PACKAGE, _imported_modules, _package_of

_ALLOWED = {"compatbroker.server", "compatbroker.server.StartupError"}
_ABOVE = ("compatbroker.handlers", "compatbroker.server", "compatbroker.toolkit", "compatbroker.coordinator",
          "compatbroker.broker", "compatbroker.cli")


def test_the_metrics_package_imports_nothing_above_it():
    offenders = [f"{path.name} imports {name}"
                 for path in sorted((PACKAGE / "metrics").glob("*.py"))
                 for name in _imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
                 if name not in _ALLOWED and any(name == above or name.startswith(above + ".") for above in _ABOVE)]
    assert offenders == []
