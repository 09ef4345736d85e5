#!/usr/bin/env bash
# Installs everything the tests need, then runs them. The README's second command.
# The virtual environment lives outside the checkout so repeated runs reuse installed wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${COMPATBROKER_VENV:-$HOME/.cache/compatbroker/venv}"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
exec "$VENV/bin/python" -m pytest "$@"
