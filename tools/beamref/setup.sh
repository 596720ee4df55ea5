#!/usr/bin/env bash
# Create tools/beamref/.venv with apache-beam from PyPI (idempotent).
# APACHE_BEAM pins the requirement (default: apache-beam==2.77.*, the version the golden
# outputs in tests/beam/golden.json were recorded with).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"
REQ="${APACHE_BEAM:-apache-beam==2.77.*}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" -c 'import apache_beam.transforms.trigger' 2>/dev/null; then
  echo "apache-beam already installed in $VENV"
else
  "$VENV/bin/python" -m pip install --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install "$REQ"
fi
"$VENV/bin/python" -c 'import apache_beam; print("apache-beam", apache_beam.__version__)' 2>/dev/null
