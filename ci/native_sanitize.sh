#!/usr/bin/env bash
# Builds and runs the C core's tests (_native/tests/test_native.c) twice:
#   1. with AddressSanitizer + UndefinedBehaviorSanitizer (+ LeakSanitizer when it works), -O1;
#   2. without sanitizers at -O2, to catch behaviour that depends on optimisation.
# Works from any directory. Exits non-zero on any compiler warning, sanitizer report or
# failed check. CC may override the compiler (default: cc).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

CC="${CC:-cc}"
work="$(mktemp -d "${TMPDIR:-/tmp}/kc_native_sanitize.XXXXXX")"
trap 'rm -rf "$work"' EXIT

shopt -s nullglob
sources=(_native/*.c)
shopt -u nullglob
if [ "${#sources[@]}" -eq 0 ]; then
    echo "native_sanitize: no C sources in _native/" >&2
    exit 1
fi
test_src=_native/tests/test_native.c

warn_flags=(-std=c99 -Wall -Wextra -Werror)
san_flags=(-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all)

echo "== $("$CC" --version | head -n 1)"

# LeakSanitizer needs to stop the process with ptrace at exit; inside some sandboxes and
# under a debugger/tracer that fails ("LeakSanitizer has encountered a fatal error" /
# "does not work under ptrace"), which would fail every run for reasons unrelated to the
# code. Probe with a leak-free program: if LSan cannot run there, fall back to
# detect_leaks=0 (ASan and UBSan still run) and say so loudly.
detect_leaks=1
printf 'int main(void) { return 0; }\n' >"$work/lsan_probe.c"
"$CC" -fsanitize=address -o "$work/lsan_probe" "$work/lsan_probe.c"
if ! ASAN_OPTIONS=detect_leaks=1 "$work/lsan_probe" >"$work/lsan_probe.out" 2>&1; then
    echo "WARNING: LeakSanitizer does not work in this environment; running with detect_leaks=0:" >&2
    sed 's/^/    /' "$work/lsan_probe.out" >&2
    detect_leaks=0
fi

echo "== build: sanitizers (address, undefined), -O1"
"$CC" "${warn_flags[@]}" "${san_flags[@]}" -I_native "${sources[@]}" "$test_src" -o "$work/test_native_san"

# Both configurations run even when the first fails, so one invocation reports everything;
# the script fails if either did.
san_status=0
echo "== run: sanitizers (detect_leaks=$detect_leaks)"
start=$(date +%s.%N)
ASAN_OPTIONS="detect_leaks=$detect_leaks:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$work/test_native_san" || san_status=$?
end=$(date +%s.%N)
echo "== sanitizer run: exit $san_status, $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }') s"

echo "== build: no sanitizers, -O2"
"$CC" "${warn_flags[@]}" -O2 -I_native "${sources[@]}" "$test_src" -o "$work/test_native_o2"

o2_status=0
echo "== run: -O2"
start=$(date +%s.%N)
"$work/test_native_o2" || o2_status=$?
end=$(date +%s.%N)
echo "== -O2 run: exit $o2_status, $(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.2f", e - s }') s"

if [ "$san_status" -ne 0 ] || [ "$o2_status" -ne 0 ]; then
    echo "== native_sanitize: FAILED (sanitizer run exit $san_status, -O2 run exit $o2_status)" >&2
    exit 1
fi
# kc_crc32c dispatches to the fastest CRC kernel the CPU has (test_crc32c_impls calls each
# one directly); run once more with the dispatch forced to the SSE4.2 3-way crc32 fallback so
# the code that runs through kc_crc32c (record batches, the log) is tested on it too.
echo "== run: -O2, CRC dispatch forced to the SSE4.2 fallback (KAFKACORE_CRC32C_IMPL=sse4.2)"
KAFKACORE_CRC32C_IMPL=sse4.2 "$work/test_native_o2"

echo "== native_sanitize: OK"
