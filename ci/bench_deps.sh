#!/usr/bin/env bash
# Installs the system tools bench/bench_storage.py compares against: fio (sequential buffered
# writes) and iperf3 (loopback TCP). Debian/Ubuntu packages, through apt-get, only when the
# command is missing; non-interactive (iperf3's "start as a daemon?" question takes its default,
# no). Runs as root, or through sudo when that works without a password. Prints what it did.
# dd is part of coreutils and is only checked.
#
#   ci/bench_deps.sh            # install what is missing
#   ci/bench_deps.sh --check    # only report; exit 1 if something is missing
#
# Exit status: 0 when every tool is present afterwards, 1 otherwise.
set -uo pipefail

check_only=0
[ "${1:-}" = "--check" ] && check_only=1

# command -> Debian package
declare -A PKG=([fio]=fio [iperf3]=iperf3)
missing_pkgs=()
for cmd in fio iperf3; do
    if command -v "$cmd" >/dev/null 2>&1; then
        echo "[bench_deps] $cmd: present ($(command -v "$cmd"))"
    else
        echo "[bench_deps] $cmd: missing (package ${PKG[$cmd]})"
        missing_pkgs+=("${PKG[$cmd]}")
    fi
done
if ! command -v dd >/dev/null 2>&1; then
    echo "[bench_deps] dd: missing; it comes with coreutils, which this script does not install" >&2
    exit 1
fi
echo "[bench_deps] dd: present ($(command -v dd))"

if [ ${#missing_pkgs[@]} -eq 0 ]; then
    echo "[bench_deps] nothing to install"
    exit 0
fi
if [ "$check_only" = 1 ]; then
    echo "[bench_deps] --check: not installing ${missing_pkgs[*]}" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "[bench_deps] apt-get not found: install ${missing_pkgs[*]} with this system's package manager" >&2
    exit 1
fi

if [ "$(id -u)" = 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -n)
else
    echo "[bench_deps] not root and no password-less sudo: cannot install ${missing_pkgs[*]}" >&2
    echo "[bench_deps] run as root: apt-get install -y ${missing_pkgs[*]}" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q --no-install-recommends -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
echo "[bench_deps] ${as_root[*]:-}apt-get update"
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q; then
    echo "[bench_deps] apt-get update failed" >&2
    exit 1
fi
echo "[bench_deps] ${as_root[*]:-}apt-get install ${missing_pkgs[*]}"
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install "${apt_opts[@]}" "${missing_pkgs[@]}"; then
    echo "[bench_deps] apt-get install ${missing_pkgs[*]} failed" >&2
    exit 1
fi

status=0
for cmd in fio iperf3; do
    if command -v "$cmd" >/dev/null 2>&1; then
        echo "[bench_deps] $cmd: installed ($(command -v "$cmd"))"
    else
        echo "[bench_deps] $cmd: still missing after apt-get install" >&2
        status=1
    fi
done
exit $status
