"""The coordinators sit below the node: nothing under compatbroker/coordinator, compatbroker/share (share-group
delivery) or producer_ids.py imports the broker (the node) or the cluster, not even for type checking; they see the
node through `coordinator/host.py`."""
from __future__ import annotations

from pathlib import Path

import compatbroker
from tests.server.test_layering import _imported_modules, _package_of

PACKAGE = Path(compatbroker.__file__).parent
BELOW_THE_NODE = [*sorted((PACKAGE / "coordinator").rglob("*.py")), *sorted((PACKAGE / "share").rglob("*.py")),
                  PACKAGE / "producer_ids.py"]
ABOVE = ("compatbroker.broker", "compatbroker.cluster", "compatbroker.server", "compatbroker.handlers")


def test_coordinators_import_nothing_above_them():
    offenders = [f"{path.relative_to(PACKAGE.parent)} imports {name}"
                 for path in BELOW_THE_NODE
                 for name in _imported_modules(path.read_text(encoding="utf-8"), _package_of(path))
                 if any(name == above or name.startswith(above + ".") for above in ABOVE)]
    assert offenders == []


def test_the_scan_sees_an_import_under_type_checking():
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..broker import Broker\n"
    assert "compatbroker.broker" in _imported_modules(source, "compatbroker.coordinator")
