#!/usr/bin/env bash
# System packages the client compatibility suite (tests/compat) needs beyond the Python ones in
# pyproject's "test" extra: kcat (Debian's package, librdkafka built in). Idempotent and quiet:
# does nothing when kcat is already on PATH; runs `apt-get update` only when the install cannot
# find the package in the current lists. Meant to be called from ci/test.sh.
set -euo pipefail

if command -v kcat >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
else
    echo "compat_deps: kcat is missing and neither root nor sudo is available to install it" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "compat_deps: kcat is missing and there is no apt-get to install it with" >&2
    exit 1
fi

log="$(mktemp "${TMPDIR:-/tmp}/compat_deps.XXXXXX")"
trap 'rm -f "$log"' EXIT
apt_install() {
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends kcat >>"$log" 2>&1
}

echo "[compat_deps] installing kcat"
if ! apt_install; then
    # package lists missing or stale: refresh them once and retry
    if ! { "${SUDO[@]}" apt-get update -qq >>"$log" 2>&1 && apt_install; }; then
        cat "$log" >&2
        echo "compat_deps: could not install kcat" >&2
        exit 1
    fi
fi
command -v kcat >/dev/null 2>&1 || { cat "$log" >&2; echo "compat_deps: kcat not on PATH after install" >&2; exit 1; }
echo "[compat_deps] $(kcat -V 2>&1 | grep -m1 '^Version' || echo 'kcat installed')"
