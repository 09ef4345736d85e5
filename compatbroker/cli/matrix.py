"""`compatbroker matrix`: where the latest compatibility matrix is (the HTML page, its Markdown, the failing tests'
output), when it was run and its totals.

The compat test run (tests/compat/matrix_report.py) writes the matrix into its report directory and then records
where, with `write_latest`, in a small JSON pointer in the user's cache: `$XDG_CACHE_HOME/compatbroker/
compat-matrix-latest.json` (default ~/.cache). This command only reads that pointer; the broker never imports the
tests. Exit 0 with the paths, 1 when no matrix was written yet or its files are gone.

`--format json`: the pointer as written: `{"html", "markdown", "outputs", "started", "finished", "passed",
"failed", "skipped", "failing_cells", "untested_cells"}` (paths absolute, times ISO 8601 UTC).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import click

from .errors import CliError
from .options import format_option
from .output import Fields, emit

POINTER_NAME = "compat-matrix-latest.json"
EXIT_CODES_HELP = "Exit codes: 0 ok; 1 no matrix written yet, or it is unreadable or gone; 2 usage error."
_FIELDS = ("html", "markdown", "outputs", "started", "finished", "passed", "failed", "skipped", "failing_cells",
           "untested_cells")


def pointer_path() -> Path:
    """Where the latest matrix's pointer lives: $XDG_CACHE_HOME/compatbroker (an absolute path, as the XDG spec
    asks), else ~/.cache/compatbroker."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        base = os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compatbroker" / POINTER_NAME


def write_latest(document: dict) -> Path:
    """Records `document` (the keys of _FIELDS) as the latest matrix; replaced whole, so a reader never sees half."""
    path = pointer_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(json.dumps({key: document.get(key) for key in _FIELDS}, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, path)
    return path


def read_latest() -> dict:
    """The pointer's document; CliError (exit 1) when there is none, it is unreadable, or its HTML page is gone."""
    path = pointer_path()
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CliError("matrix", None, f"no compatibility matrix written yet ({path} does not exist); run the "
                       "compat tests: bash tests/run.sh tests/compat") from None
    except (OSError, ValueError) as exc:
        raise CliError("matrix", None, f"cannot read {path}: {exc}") from None
    if not isinstance(document, dict) or not isinstance(document.get("html"), str):
        raise CliError("matrix", None, f"{path} does not name a matrix (no \"html\" path)")
    if not Path(document["html"]).is_file():
        raise CliError("matrix", None, f"the latest matrix, {document['html']}, was removed; run the compat "
                       "tests again")
    return document


@click.command("matrix", epilog=EXIT_CODES_HELP)
@format_option
@click.pass_context
def matrix(ctx):
    """Show where the latest compatibility matrix is: its HTML page (failing cells link to their tests' output),
    its Markdown (as the README shows it), when it ran and its totals.

    The compat tests (`bash tests/run.sh tests/compat`, or any pytest run of tests/compat/ or spark_tests/) write it
    to build/ (or $COMPATBROKER_MATRIX_DIR) and record where in $XDG_CACHE_HOME/compatbroker/compat-matrix-latest.json
    (default ~/.cache). Scripts read `--format json`: the same facts, the page's path under "html".
    """
    document = read_latest()
    counts = f"{document.get('passed')} passed, {document.get('failed')} failed, {document.get('skipped')} skipped"
    cells = f"{document.get('failing_cells')} failing, {document.get('untested_cells')} not tested"
    emit(ctx, document, Fields({"HTML": document["html"], "Markdown": document.get("markdown"),
                                "Test output": document.get("outputs"), "Run": _when(document), "Tests": counts,
                                "Cells": cells}))


def _when(document: dict) -> str:
    started, finished = document.get("started") or "?", document.get("finished") or "?"
    return f"{started} to {finished}"
