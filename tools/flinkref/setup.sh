#!/usr/bin/env bash
# Create tools/flinkref/.venv with apache-flink 1.20.* (idempotent).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="$HERE/.venv"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
if "$VENV/bin/python" -c 'import pyflink.version as v, sys; sys.exit(0 if v.__version__.startswith("1.20") else 1)' 2>/dev/null; then
  echo "apache-flink 1.20 already installed in $VENV"
else
  "$VENV/bin/python" -m pip install --upgrade pip >/dev/null
  "$VENV/bin/python" -m pip install 'apache-flink==1.20.*'
fi
"$VENV/bin/python" - <<'PY'
import os, pyflink, pyflink.version
lib = os.path.join(os.path.dirname(pyflink.__file__), "lib")
print("pyflink", pyflink.version.__version__, "lib:", lib)
print("\n".join(sorted(os.listdir(lib))))
PY
