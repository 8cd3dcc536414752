#!/usr/bin/env bash
# The randomized fault run of tests/cluster/test_fault_run.py (issue 26): three real brokers and
# a real ZooKeeper, two idempotent acks=all producers and a transactional producer writing while
# brokers are SIGKILLed (any broker, the controller, two at once), SIGSTOPped and ZooKeeper is
# restarted, at random. Each round ends with the history check (every acknowledged record once,
# in order; committed transactions whole, aborted ones invisible), byte-identical replicas and
# broker logs free of tracebacks; it prints how long every partition took to accept acks=all
# writes again after each kind of fault.
#
#   bench/fault_run.sh [SECONDS_PER_ROUND] [ROUNDS]      # defaults: 300 s, 1 round
#   KAFKACORE_FAULT_RUN_SEED=1234 bench/fault_run.sh     # the same choices again (timing varies)
#
# Stops at the first failing round and keeps its directory (brokers' and ZooKeeper's logs and
# data) under $KAFKACORE_FAULT_RUN_DIR (default: a new directory in $TMPDIR). Needs ZooKeeper
# and Java from the system (ci/compat_deps.sh) and the test extras (ci/env.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_PER_ROUND="${1:-300}"
ROUNDS="${2:-1}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
OUT="${KAFKACORE_FAULT_RUN_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kc-faults.XXXXXX")}"
mkdir -p "$OUT"
echo "fault run: ${ROUNDS} round(s) of ${SECONDS_PER_ROUND} s; output in $OUT"
for round in $(seq 1 "$ROUNDS"); do
    dir="$OUT/round-$round"
    started=$(date +%s)
    if KAFKACORE_FAULT_RUN_SECONDS="$SECONDS_PER_ROUND" "$PY" -m pytest -x -q -s -p no:cacheprovider \
            --basetemp="$dir" tests/cluster/test_fault_run.py >"$dir.log" 2>&1; then
        echo "round $round: passed in $(( $(date +%s) - started )) s"
        grep -hE '^fault run: [0-9]+ faults|^  [a-z]+: [0-9]+ faults' "$dir.log" || true
    else
        grep -h '^fault run: .* seed' "$dir.log" || true
        tail -n 40 "$dir.log"
        echo "round $round FAILED after $(( $(date +%s) - started )) s; pytest output $dir.log, logs under $dir" >&2
        exit 1
    fi
done
