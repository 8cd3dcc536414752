#!/usr/bin/env bash
# The main job. Until the broker lands this runs the native-core benchmark against its peers
# (side by side, ratios printed); then it will start `kafkacore serve`.
source "$(dirname "$0")/env.sh"
exec "$PY" bench/bench_native.py "$@"
