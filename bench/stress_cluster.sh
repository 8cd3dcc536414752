#!/usr/bin/env bash
# A soak of the replicated cluster: the kill loop of tests/cluster/test_kill_loop.py (three real
# brokers, a real ZooKeeper, an idempotent acks=all producer throughout while brokers are
# SIGKILLed and restarted), run for a long time instead of CI's 90 s, round after round, each
# round on a fresh cluster with a fresh seed; every round ends with the history check (nothing
# acknowledged lost or doubled, per-key order) and byte-identical replicas.
#
#   bench/stress_cluster.sh [SECONDS_PER_ROUND] [ROUNDS]      # defaults: 1800 s, 1 round
#   KAFKACORE_STRESS_PARTITION=1 bench/stress_cluster.sh ...   # also the ip netns partition test
#                                                                # each round (root only)
#
# Stops at the first failing round and keeps its directory (every broker's log and data,
# ZooKeeper's log) under $KAFKACORE_STRESS_DIR (default: a new directory in $TMPDIR); the
# failing round's seed is printed (KAFKACORE_KILL_LOOP_SEED=... replays its choices). Needs
# ZooKeeper and Java from the system (apt-get install zookeeper) and the test extras.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_PER_ROUND="${1:-1800}"
ROUNDS="${2:-1}"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
OUT="${KAFKACORE_STRESS_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kc-stress.XXXXXX")}"
mkdir -p "$OUT"
tests=(tests/cluster/test_kill_loop.py)
if [ -n "${KAFKACORE_STRESS_PARTITION:-}" ]; then tests+=(tests/cluster/test_network_partition.py); fi

echo "stress: ${ROUNDS} round(s) of ${SECONDS_PER_ROUND} s; output in $OUT"
for round in $(seq 1 "$ROUNDS"); do
    dir="$OUT/round-$round"
    started=$(date +%s)
    if KAFKACORE_KILL_LOOP_SECONDS="$SECONDS_PER_ROUND" "$PY" -m pytest -x -q -s -p no:cacheprovider \
            --basetemp="$dir" "${tests[@]}" >"$dir.log" 2>&1; then
        echo "round $round: passed in $(( $(date +%s) - started )) s: $(grep -h '^kill loop: [0-9]* kills' "$dir.log" || true)"
    else
        grep -h '^kill loop: .* seed' "$dir.log" || true
        tail -n 40 "$dir.log"
        echo "round $round FAILED after $(( $(date +%s) - started )) s; pytest output $dir.log, brokers' logs under $dir" >&2
        exit 1
    fi
done
echo "stress: all ${ROUNDS} round(s) passed"
