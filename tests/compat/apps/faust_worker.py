"""The faust-streaming worker of test_faust.py: faust_counter.py run by the Python of faust's own virtual environment
($COMPATBROKER_FAUST_VENV, default ~/.cache/compatbroker/faust; tests/setup/apps.sh makes it), whose aiokafka pins
stay out of the project's environment."""
from __future__ import annotations

import os
from pathlib import Path

from ..clients import MissingClient
from .process import AppProcess

FAUST_VENV = Path(os.environ.get("COMPATBROKER_FAUST_VENV", Path.home() / ".cache" / "compatbroker" / "faust"))
FAUST_VERSION = "0.15.3"  # the faust-streaming release tests/setup/apps.sh installs
FAUST_HINT = (f"bash tests/run.sh (tests/setup/apps.sh), or: python3 -m venv {FAUST_VENV} && "
              f"{FAUST_VENV}/bin/pip install faust-streaming=={FAUST_VERSION}  ($COMPATBROKER_FAUST_VENV selects "
              "another directory)")
APP = Path(__file__).with_name("faust_counter.py")


def changelog_topic(app_id: str) -> str:
    """Where faust keeps the updates of faust_counter.py's table (`<app id>-<table>-changelog`)."""
    return f"{app_id}-counts-changelog"


def _python() -> Path:
    python = FAUST_VENV / "bin" / "python"
    if not python.exists() or not list(FAUST_VENV.glob("lib/python*/site-packages/faust/__init__.py")):
        raise MissingClient(f"faust-streaming is not installed in {FAUST_VENV}: {FAUST_HINT}")
    return python


def faust_version() -> str | None:
    """The installed faust-streaming and aiokafka versions, from their wheels' metadata (no interpreter started)."""
    found = {}
    for name in ("faust_streaming", "aiokafka"):
        dist = sorted(FAUST_VENV.glob(f"lib/python*/site-packages/{name}-*.dist-info"))
        if dist:
            found[name] = dist[-1].name.removeprefix(f"{name}-").removesuffix(".dist-info")
    if "faust_streaming" not in found:
        return None
    return f"{found['faust_streaming']}, aiokafka {found.get('aiokafka', '?')}"


def worker(directory: Path, bootstrap: str, app_id: str, source: str, result: str, run: int) -> AppProcess:
    """A worker of faust_counter.py (not yet started); `run` numbers its log file."""
    env = {"FAUST_BROKER": bootstrap, "FAUST_APP_ID": app_id, "FAUST_SOURCE": source, "FAUST_RESULT": result,
           "FAUST_DATADIR": str(directory / "faust-data")}
    command = [str(_python()), str(APP), "worker", "--loglevel", "info"]
    return AppProcess(f"faust worker {run}", command, directory / f"faust-worker-{run}.log", env=env)
