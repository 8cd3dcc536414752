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

# KAFKACORE_EXTRAS picks the optional dependencies: ci/main.sh asks for none (the broker needs
# only the package's own dependencies), the test scripts "test" (the default), ci/dev.sh
# everything (tests, benchmarks, Spark).
EXTRAS="${KAFKACORE_EXTRAS-test}"
stamp="$VENV/.kafkacore-deps"
want="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
have_hash="" have_extras=""
if [ -f "$stamp" ]; then
    read -r have_hash have_extras <"$stamp" || true
    [ "$have_extras" = "-" ] && have_extras=""  # installed with no extras
fi
missing_extras=""
for e in ${EXTRAS//,/ }; do
    case ",$have_extras," in *",$e,"*) ;; *) missing_extras+="$e,";; esac
done
if [ "$have_hash" != "$want" ] || [ -n "$missing_extras" ]; then
    # an installed superset is kept: ci/main.sh after ci/test.sh installs nothing more
    if [ "$have_hash" = "$want" ]; then EXTRAS="${have_extras:+$have_extras,}${missing_extras%,}"; fi
    echo "[env] installing kafkacore${EXTRAS:+[$EXTRAS]} and its dependencies"
    "$PY" -m pip install -q --disable-pip-version-check --upgrade pip
    "$PY" -m pip install -q --disable-pip-version-check "setuptools>=77" wheel "cython>=3.0,<4"
    # the editable install compiles nothing (KAFKACORE_NO_EXTENSION_BUILD, setup.py): the
    # extension is built once, in place, below, and only its changed parts after that
    KAFKACORE_NO_EXTENSION_BUILD=1 "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation \
        -e ".${EXTRAS:+[$EXTRAS]}" >"$VENV/.install.log" 2>&1 || { cat "$VENV/.install.log"; exit 1; }
    echo "$want ${EXTRAS:--}" > "$stamp"
fi

echo "[env] building native extension (only what changed since the last build)"
"$PY" setup.py -q build_ext --inplace -j 2 >"$VENV/.build.log" 2>&1 || { cat "$VENV/.build.log"; exit 1; }
export PATH="$VENV/bin:$PATH"

# pytest's arguments for KAFKACORE_TEST_WORKERS xdist workers (ci/test.sh sets it; unset or 1:
# one process). --dist loadfile keeps a module's tests on one worker, so its module-scoped
# brokers and clusters start once (xdist_group marks cannot: pytest 9 ignores the node ids
# xdist 3.8 rewrites for them, and the modules' tests were spread over both workers).
# tests/conftest.py makes it tests/_xdist_schedule.py's: tests/spark/ is one unit (one Spark
# session, not one per worker) and the long modules go first, so no worker ends the pass alone.
xdist_args() {
    local n="${KAFKACORE_TEST_WORKERS:-1}"
    if [ "$n" -gt 1 ]; then echo "-n $n --dist loadfile"; fi
}
