#!/usr/bin/env bash
# System packages the tests need beyond the Python ones in pyproject's extras: kcat (Debian's
# package, librdkafka built in) for the client compatibility suite (tests/compat), a Java 17
# runtime for real local Spark (tests/spark), and Debian's zookeeper (3.8: a jar, no service) for
# the real ZooKeeper the cluster tests run (tests/_zookeeper.py), Debian's prometheus (the
# binary: the tests start their own server) that scrapes the broker's /metrics in tests/tools/test_metrics.py,
# and Debian's chromium, the headless browser the web console's tests drive through Playwright
# (tests/tools/test_console.py; Playwright's own browser download is never used), ccache, and
# openssl, whose command makes the TLS tests' throw-away CA and certificates (tests/_tls.py).
# Idempotent and quiet: installs only what is not already there; runs `apt-get update` only when
# the install cannot find a package in the current lists. Meant to be called from ci/test.sh.
set -euo pipefail

PACKAGES=()
command -v kcat >/dev/null 2>&1 || PACKAGES+=(kcat)
command -v java >/dev/null 2>&1 || PACKAGES+=(openjdk-17-jre-headless)
# zookeeper ships no command on PATH: look for its jar
ZOOKEEPER_JAR=/usr/share/java/zookeeper.jar
[ -f "$ZOOKEEPER_JAR" ] || PACKAGES+=(zookeeper)
command -v prometheus >/dev/null 2>&1 || PACKAGES+=(prometheus)
command -v chromium >/dev/null 2>&1 || PACKAGES+=(chromium)
# ccache: the wheel, the sdist and the documented install lines compile the same sources with
# the same flags; setup.py compiles through ccache when it is there, so they compile once
command -v ccache >/dev/null 2>&1 || PACKAGES+=(ccache)
command -v openssl >/dev/null 2>&1 || PACKAGES+=(openssl)
if [ "${#PACKAGES[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo -n)
else
    echo "compat_deps: ${PACKAGES[*]} missing and neither root nor sudo is available to install them" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "compat_deps: ${PACKAGES[*]} missing and there is no apt-get to install them with" >&2
    exit 1
fi

log="$(mktemp "${TMPDIR:-/tmp}/compat_deps.XXXXXX")"
trap 'rm -f "$log"' EXIT
apt_install() {
    DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >>"$log" 2>&1
}

echo "[compat_deps] installing ${PACKAGES[*]}"
if ! apt_install; then
    # package lists missing or stale: refresh them once and retry
    if ! { "${SUDO[@]}" apt-get update -qq >>"$log" 2>&1 && apt_install; }; then
        cat "$log" >&2
        echo "compat_deps: could not install ${PACKAGES[*]}" >&2
        exit 1
    fi
fi
for tool in kcat java prometheus chromium openssl; do
    command -v "$tool" >/dev/null 2>&1 || { cat "$log" >&2; echo "compat_deps: $tool not on PATH after install" >&2; exit 1; }
done
[ -f "$ZOOKEEPER_JAR" ] || { cat "$log" >&2; echo "compat_deps: $ZOOKEEPER_JAR missing after install" >&2; exit 1; }
echo "[compat_deps] installed ${PACKAGES[*]}"
