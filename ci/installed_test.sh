#!/usr/bin/env bash
# Tests what users install. Builds the sdist and, from it, the wheel (`python -m build`, in an
# isolated build environment as pip would), then:
#   1. installs the wheel into a fresh virtualenv and runs the whole suite (native extension,
#      with the client compatibility suite, real local Spark and the ZooKeeper cluster) against it;
#   2. installs the sdist (compiled from source) into another fresh virtualenv and runs the
#      suite on the pure-Python twins (KAFKACORE_NO_EXTENSIONS=1).
# Both run a copy of tests/ from a scratch directory, so the checkout cannot shadow the
# installed package; tests/conftest.py refuses to run if kafkacore was imported from the
# checkout (KAFKACORE_TEST_INSTALLED=1). Extra arguments go to pytest.
# KAFKACORE_INSTALLED_PASSES picks the passes (default "wheel sdist").
source "$(dirname "$0")/env.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/kc_installed.XXXXXX")"
trap 'rm -rf "$work"' EXIT
passes="${KAFKACORE_INSTALLED_PASSES:-wheel sdist}"

echo "== build: sdist, then the wheel from the sdist"
"$PY" -m pip install -q --disable-pip-version-check "build>=1.2,<2"
"$PY" -m build --outdir "$work/dist" "$ROOT" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
# setuptools' deprecations (project.license as a table was one) fail the build here, before
# they fail users' builds (numpy's NPY_NO_DEPRECATED_API define is not one)
if grep -i "deprecat" "$work/build.log" | grep -qv "NPY_NO_DEPRECATED_API"; then
    grep -i "deprecat" "$work/build.log" | grep -v "NPY_NO_DEPRECATED_API" | head -n 20 >&2
    echo "the build printed a deprecation warning (see above)" >&2
    exit 1
fi
sdist="$(ls "$work"/dist/kafkacore-*.tar.gz)"
wheel="$(ls "$work"/dist/kafkacore-*.whl)"
echo "   $(basename "$sdist") $(du -h "$sdist" | cut -f1), $(basename "$wheel") $(du -h "$wheel" | cut -f1)"

# The suite's copy: only tests/ (and bench/, whose reference benchmark's plots a test draws),
# nothing that could be imported as kafkacore.
mkdir -p "$work/suite"
cp -r "$ROOT/tests" "$ROOT/bench" "$work/suite/"
find "$work/suite" -name __pycache__ -prune -exec rm -rf {} +
export KAFKACORE_TEST_INSTALLED=1
export KAFKACORE_SOURCE_ROOT="$ROOT"
export KAFKACORE_PROTOCOL_SCHEMAS="$ROOT/../shared/kafka-protocol"

fresh_venv() {  # fresh_venv DIR SPEC: a new virtualenv with SPEC installed; prints its python
    "${PYTHON:-python3}" -m venv "$1"
    "$1/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip >&2
    "$1/bin/python" -m pip install -q --disable-pip-version-check "$2" >&2
    echo "$1/bin/python"
}

for pass in $passes; do
    pass_started=$SECONDS
    case "$pass" in
    wheel)
        echo "== install: the wheel with [test,spark] into a fresh virtualenv"
        VPY="$(fresh_venv "$work/venv-wheel" "$wheel[test,spark]")"
        (cd "$work/suite" && "$work/venv-wheel/bin/kafkacore" info)
        echo "== Python suite against the installed wheel, native extension (with tests/compat and tests/spark)"
        (cd "$work/suite" && KAFKACORE_REQUIRE_EXTENSIONS=1 PATH="$work/venv-wheel/bin:$PATH" \
            "$VPY" -m pytest -q -p no:cacheprovider --timeout=600 $(xdist_args) tests "$@")
        rm -rf "$work/venv-wheel"
        ;;
    sdist)
        echo "== install: the sdist with [test] into a fresh virtualenv (compiles the extension)"
        VPY="$(fresh_venv "$work/venv-sdist" "$sdist[test]")"
        (cd "$work/suite" && "$work/venv-sdist/bin/kafkacore" info)
        (cd "$work/suite" && KAFKACORE_REQUIRE_EXTENSIONS=1 "$VPY" -c \
            "import kafkacore, sys; sys.exit(not kafkacore.native_extensions())") \
            || { echo "the sdist's build has no native extensions" >&2; exit 1; }
        # the twins' pass: what the native code does, done by the pure-Python twins. The suites
        # about other things than the twins ran against the wheel above: compat, Spark, the
        # cluster, the CLI and console (tests/tools), ZooKeeper's client, the README and install
        # walk-throughs, the exactly-once kill loop, and security (TLS, SASL, ACLs, quotas,
        # dynamic configs: Python whatever the record code), and the protocol's codecs and
        # generator (pure Python, no twin behind them: the same run as the wheel pass's), and the
        # share groups' membership, state and offsets, group configs and group migration
        # (coordinator logic; the share records' decoding runs in test_share_fetch and the
        # kafkacore ShareConsumer's tests, which stay)
        echo "== Python suite against the installed sdist, pure-Python twins"
        (cd "$work/suite" && KAFKACORE_NO_EXTENSIONS=1 PATH="$work/venv-sdist/bin:$PATH" \
            "$VPY" -m pytest -q -p no:cacheprovider --timeout=900 $(xdist_args) tests --ignore=tests/compat --ignore=tests/spark \
            --ignore=tests/cluster --ignore=tests/tools --ignore=tests/test_zk_client.py \
            --ignore=tests/test_readme.py --ignore=tests/test_install_docs.py --ignore=tests/test_eos_kill_loop.py \
            --ignore-glob='tests/test_security_*.py' --ignore=tests/test_embedded_security.py \
            --ignore=tests/test_broker_dynamic_config.py --ignore=tests/test_connection_quotas.py \
            --ignore=tests/test_hostile_input.py --ignore=tests/test_protocol_codecs.py \
            --ignore=tests/test_protocol_generated.py --ignore=tests/test_share_groups_membership.py \
            --ignore=tests/test_share_state.py --ignore=tests/test_share_group_offsets.py \
            --ignore=tests/test_group_configs.py --ignore=tests/test_consumer_group_migration.py \
            --ignore=tests/test_consumer_group_regex_acl.py --ignore=tests/test_share_group_delete.py "$@")
        rm -rf "$work/venv-sdist"
        ;;
    *) echo "installed_test: unknown pass $pass (wheel, sdist)" >&2; exit 2;;
    esac
    echo "== the $pass pass: $(( SECONDS - pass_started )) s"
done
