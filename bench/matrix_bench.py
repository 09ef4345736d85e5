"""The compat matrix's wall time: runs tests/compat/ with pytest, then prints how long it took and its cell counts.

    python bench/matrix_bench.py                       # the whole matrix
    python bench/matrix_bench.py -- -k sarama          # anything after -- goes to pytest

The matrix report (build/compat-matrix.md and .html, or $COMPATBROKER_MATRIX_DIR) is written by the run itself;
this reads the Markdown back for the per-client counts. Run it with the test environment's python (bash tests/run.sh installs every client),
so that no cell fails for a missing client.
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Where the run writes its report (tests/compat/matrix_report.py honours the same variable).
REPORT_DIR = Path(os.environ.get("COMPATBROKER_MATRIX_DIR", REPO / "build"))
REPORT = REPORT_DIR / "compat-matrix.md"
_CELL = re.compile(r"^(\*\*FAIL\*\* )?(\d+)/(\d+)")  # a cell of tests/compat/matrix.py's Markdown: 3/4


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    command = [sys.executable, "-m", "pytest", "tests/compat", "-q", "-p", "no:cacheprovider", *args.pytest_args]
    print("running:", " ".join(command), flush=True)
    began = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - began
    summary = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    print(f"wall time: {wall:.1f} s ({wall / 60:.1f} min); pytest exit status {done.returncode}")
    print("pytest:", summary[-1] if summary else "(no summary line)")
    if REPORT.is_file():
        print_cells(REPORT.read_text(encoding="utf-8"))
    else:
        print(f"no report at {REPORT}")
    return 0 if done.returncode in (0, 1) else done.returncode  # failing cells are a result, not a bench error


def print_cells(markdown: str) -> None:
    """Cells per client row (family heading rows left out): how many pass, fail, and the tests they hold."""
    rows = [[c.strip() for c in line.strip().strip("|").split(" | ")] for line in markdown.splitlines()
            if line.startswith("| ")]
    print(f"{'client':45} {'cells':>5} {'pass':>5} {'fail':>5} {'tests':>6}")
    for client, *row in rows[2:]:
        if client.startswith("**"):
            continue
        counts = [(bool(failed), int(total)) for cell in row for failed, _, total in _CELL.findall(cell)]
        cells = len(counts)
        failing = sum(1 for failed, _ in counts if failed)
        tests = sum(total for _, total in counts)
        print(f"{client[:45]:45} {cells:5d} {cells - failing:5d} {failing:5d} {tests:6d}")


if __name__ == "__main__":
    sys.exit(main())
