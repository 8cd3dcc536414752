#!/usr/bin/env bash
# The Cython layer under AddressSanitizer + UBSan: builds kafkacore._ext.* with the
# sanitizers into a scratch copy of the package, then runs the native test suite and a short
# fuzz of the decoders against it with libasan preloaded into the (uninstrumented) Python.
# ci/native_sanitize.sh covers the plain C core; this covers bindings/*.pyx and the glue.
source "$(dirname "$0")/env.sh"

work="$(mktemp -d "${TMPDIR:-/tmp}/kc_pysan.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp -r kafkacore tests "$work/"
# the protocol tests read Kafka's schemas next to the repository, not next to the copy
export KAFKACORE_PROTOCOL_SCHEMAS="$ROOT/../shared/kafka-protocol"
rm -f "$work"/kafkacore/_ext/*.so
echo "== build: extension with -fsanitize=address,undefined"
KAFKACORE_SANITIZE=1 "$PY" setup.py -q build_ext --force --build-lib "$work" --build-temp "$work/build" -j 2 \
    >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }

# Instrumented code calls into the ASan runtime, so an instrumented module imports __asan_* symbols.
# (The symbol table is captured first: `readelf | grep -q` under pipefail fails whenever grep's
# early exit hits readelf with SIGPIPE, which is what once turned this check red.)
for so in "$work"/kafkacore/_ext/*.so; do
    syms="$(readelf --dyn-syms --wide "$so")"
    if [[ "$syms" != *" __asan_"* ]]; then
        echo "$so is not built with AddressSanitizer" >&2
        ls -l "$work"/kafkacore/_ext/ >&2; ldd "$so" >&2 || true; tail -n 40 "$work/build.log" >&2
        exit 1
    fi
done
libasan="$(gcc -print-file-name=libasan.so)"
# Leaks are not checked here: CPython keeps objects alive at exit by design.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

(cd "$work" && LD_PRELOAD="$libasan" PYTHONPATH="$work" "$PY" -c \
    "import sys, kafkacore._ext.records as r; sys.exit(not r.__file__.startswith('$work'))") \
    || { echo "the sanitized copy is not the kafkacore being imported" >&2; exit 1; }

echo "== tests: native extension under ASan/UBSan"
# Run from the scratch copy so that it, not the checkout, is the kafkacore imported.
# Left out: tests/spark, tests/cluster, tests/tools and tests/test_zk_client.py, whose
# programs (Spark's and ZooKeeper's JVMs, chromium, prometheus) would inherit the preloaded ASan
# runtime (chromium never finishes starting under it); and the suites that drive whole
# brokers through other clients for minutes (tests/compat, the group, transaction and
# cross-client suites, the README and install walk-throughs, the exactly-once kill loop):
# their native calls are the decoder's, the accumulator's and the storage engine's, which the
# record, storage, client and broker tests kept here make directly and in every edge case. The
# security suites (TLS, SASL, ACLs, quotas, dynamic configs) are left out for the same reason:
# what they test is Python, and their brokers store records as every other broker does.
# The KIP-848 group suite (tests/test_consumer_groups.py) is a group suite like the others. The
# protocol's codecs and generator (tests/test_protocol_*.py) are pure Python and call no native
# code: under ASan they would repeat the wheel pass exactly. Likewise the KIP-848 client and
# migration suites, and the share groups' membership, state, offsets, group configs and
# confluent-kafka-only share suites (coordinator logic); the share fetch path and the kafkacore
# ShareConsumer, which decode records, stay.
# Together that halves this pass (17 -> about 8 minutes on 2 cores); the wheel pass runs them all.
(cd "$work" && LD_PRELOAD="$libasan" KAFKACORE_REQUIRE_EXTENSIONS=1 PYTHONPATH="$work" \
    "$PY" -m pytest -q -p no:cacheprovider --timeout=900 $(xdist_args) tests --ignore=tests/spark --ignore=tests/cluster \
    --ignore=tests/tools --ignore=tests/test_zk_client.py --ignore=tests/compat \
    --ignore=tests/test_client_groups.py --ignore=tests/test_broker_groups.py \
    --ignore=tests/test_client_transactions.py --ignore=tests/test_broker_transactions.py \
    --ignore=tests/test_client_crossbroker.py --ignore=tests/test_readme.py --ignore=tests/test_install_docs.py \
    --ignore=tests/test_eos_kill_loop.py --ignore-glob='tests/test_security_*.py' --ignore=tests/test_embedded_security.py \
    --ignore=tests/test_broker_dynamic_config.py --ignore=tests/test_consumer_groups_clients.py \
    --ignore=tests/test_consumer_group_migration.py --ignore=tests/test_consumer_group_regex_acl.py \
    --ignore=tests/test_connection_quotas.py --ignore=tests/test_hostile_input.py \
    --ignore=tests/test_consumer_groups.py --ignore=tests/test_protocol_codecs.py --ignore=tests/test_protocol_generated.py \
    --ignore=tests/test_client_consumer_protocol.py --ignore=tests/test_share_groups_membership.py \
    --ignore=tests/test_share_state.py --ignore=tests/test_share_group_offsets.py --ignore=tests/test_group_configs.py \
    --ignore=tests/test_share_consumer_clients.py --ignore=tests/test_share_group_delete.py)

echo "== fuzz: decoders under ASan/UBSan"
(cd "$work" && LD_PRELOAD="$libasan" KAFKACORE_REQUIRE_EXTENSIONS=1 PYTHONPATH="$work" \
    "$PY" "$ROOT/ci/fuzz_decoders.py" -max_total_time="${KAFKACORE_SANITIZE_FUZZ_SECONDS:-20}" \
    -rss_limit_mb=8192 -artifact_prefix="$work/" >"$work/fuzz.log" 2>&1) \
    || { cat "$work/fuzz.log"; exit 1; }
tail -n 1 "$work/fuzz.log"
