#!/usr/bin/env bash
# A developer's environment: .venv with every optional dependency (tests, benchmarks, Spark)
# and the native extension built in place. The benchmarks in bench/ run from it.
KAFKACORE_EXTRAS="test,bench,spark"
source "$(dirname "$0")/env.sh"
echo "[dev] ready: $PY"
