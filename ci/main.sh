#!/usr/bin/env bash
# The main job. Until the broker lands this runs the native-core and storage benchmarks against their peers
# (side by side, ratios printed); then it will start `kafkacore serve`.
source "$(dirname "$0")/env.sh"
"$PY" bench/bench_native.py "$@"
exec "$PY" bench/bench_storage.py
