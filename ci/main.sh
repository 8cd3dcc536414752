#!/usr/bin/env bash
# The main job: the broker. Sets up .venv with only what the broker needs (the package's own
# dependencies, no test, benchmark or Spark extras) and builds the native extension
# (ci/env.sh), then runs `kafkacore serve` on 127.0.0.1:9092 with the embedded default data
# directory; extra arguments go to `kafkacore serve` (e.g. --port 19092 --data-dir /tmp/kc
# --set num.partitions=3). The benchmarks are bench/*.py (bench/RESULTS.md, ci/dev.sh).
KAFKACORE_EXTRAS=""
source "$(dirname "$0")/env.sh"
exec "$PY" -m kafkacore serve "$@"
