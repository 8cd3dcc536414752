# Sourced by the other ci/ scripts: creates or reuses the local virtualenv (.venv), installs
# the project's dependencies from the registries, and builds the native extension in place.
# Safe to source repeatedly: dependencies are reinstalled only when the packaging files change,
# and the build only recompiles what changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"

if [ ! -x "$VENV/bin/python" ]; then
    echo "[env] creating virtualenv $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PY="$VENV/bin/python"

stamp="$VENV/.kafkacore-deps"
want="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[env] installing dependencies"
    "$PY" -m pip install -q --disable-pip-version-check --upgrade pip
    "$PY" -m pip install -q --disable-pip-version-check "setuptools>=68" wheel "cython>=3.0,<4" "numpy>=1.26,<3"
    "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation -e ".[test,bench,spark]"
    echo "$want" > "$stamp"
fi

echo "[env] building native extension"
"$PY" setup.py -q build_ext --inplace -j 2 >"$VENV/.build.log" 2>&1 || { cat "$VENV/.build.log"; exit 1; }
export PATH="$VENV/bin:$PATH"
