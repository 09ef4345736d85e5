"""`python -m compatbroker` and the `compatbroker` console script: the command line of `compatbroker.cli`.

`main(argv=None) -> int` runs it and returns the exit code (see `compatbroker.cli.main`).
"""
from __future__ import annotations

import sys

from .cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
