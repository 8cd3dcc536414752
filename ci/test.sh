#!/usr/bin/env bash
# The whole test suite: the C core under AddressSanitizer + UBSan, a bounded fuzz of the
# decoders, the Python suite against an ASan/UBSan build of the extension, then the package
# users install (ci/installed_test.sh): the sdist and the wheel are built, each installed into
# a fresh virtualenv, and the suite runs against them from outside the checkout - the wheel
# with the native extension (client compatibility suite and real local Spark included), the
# sdist on the pure-Python twins (KAFKACORE_NO_EXTENSIONS=1).
# Extra arguments go to pytest (e.g. ci/test.sh -k crc).
export KAFKACORE_EXTRAS="test"
# the fault loops' budget in CI (each is a soak with a larger budget: docs/cluster.md)
export KAFKACORE_KILL_LOOP_SECONDS="${KAFKACORE_KILL_LOOP_SECONDS:-45}"
# pytest-xdist workers per pass (ci/env.sh keeps each module's tests on one worker); 1 runs the
# suite in one process
export KAFKACORE_TEST_WORKERS="${KAFKACORE_TEST_WORKERS:-2}"
source "$(dirname "$0")/env.sh"

# each pass prints how long it took (CI's whole run must stay under 40 minutes)
pass_started=$SECONDS
pass_name=""
pass_begin() {
    if [ -n "$pass_name" ]; then echo "== ${pass_name}: $(( SECONDS - pass_started )) s"; fi
    pass_name="$1"
    pass_started=$SECONDS
    echo "== $1"
}
trap 'if [ -n "$pass_name" ]; then echo "== ${pass_name}: $(( SECONDS - pass_started )) s"; fi; echo "== total: ${SECONDS} s"' EXIT

pass_begin "C core under AddressSanitizer + UBSan"
bash ci/native_sanitize.sh

pass_begin "Fuzzing the native decoders (atheris, bounded)"
fuzz_dir="$(mktemp -d "${TMPDIR:-/tmp}/kc_fuzz.XXXXXX")"
if KAFKACORE_REQUIRE_EXTENSIONS=1 "$PY" ci/fuzz_decoders.py -max_total_time="${KAFKACORE_FUZZ_SECONDS:-30}" \
        -rss_limit_mb=4096 -artifact_prefix="$fuzz_dir/" >"$fuzz_dir/log" 2>&1; then
    tail -n 1 "$fuzz_dir/log"
    rm -rf "$fuzz_dir"
else
    cat "$fuzz_dir/log"
    echo "fuzzing found a failure; the input is in $fuzz_dir" >&2
    exit 1
fi

pass_begin "Fuzzing the broker's SASL server side (atheris, bounded)"
# ~20 s in all (2 s of start-up: fuzz_sasl.py instruments only the SASL code). Not under ASan:
# the SASL servers and the request codec are pure Python, ASan would watch only the interpreter.
fuzz_dir="$(mktemp -d "${TMPDIR:-/tmp}/kc_fuzz_sasl.XXXXXX")"
if "$PY" ci/fuzz_sasl.py -max_total_time="${KAFKACORE_FUZZ_SASL_SECONDS:-15}" -rss_limit_mb=2048 \
        -artifact_prefix="$fuzz_dir/" >"$fuzz_dir/log" 2>&1; then
    tail -n 1 "$fuzz_dir/log"
    rm -rf "$fuzz_dir"
else
    cat "$fuzz_dir/log"
    echo "fuzzing the SASL server found a failure; the input is in $fuzz_dir" >&2
    exit 1
fi

pass_begin "Cython layer under AddressSanitizer + UBSan"
bash ci/python_sanitize.sh

pass_begin "System packages for the client compatibility suite (kcat)"
bash ci/compat_deps.sh

pass_begin "The installed package: wheel and sdist in fresh virtualenvs"
bash ci/installed_test.sh "$@"
