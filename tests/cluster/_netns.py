"""Hosts for network-fault tests, built with Linux network namespaces (iproute2's ``ip netns``,
as root): every host is a namespace with one veth link into a bridge that lives in a 'switch'
namespace of its own, all on one /24. The test's own process stays in the root namespace and is
plugged into the same bridge, so its clients reach every host.

A partition is made with the neighbour tables alone (no firewall needed: nft/iptables and tc's
drop actions are often missing): each side of a cut pair gets a permanent ARP entry pointing the
other's address at a MAC address nobody has, so their packets go nowhere, silently, in both
directions - TCP connections hang as they do on a real partition instead of failing fast. The
root namespace's entries are left alone: the test's clients still reach both sides.

Names carry the test process's pid (``kcnp-<pid>-<host>``); namespaces and links left by a run
that crashed (its pid gone) are deleted, with any process still inside, before a new network is
built."""
from __future__ import annotations

import ipaddress
import os
import re
import signal
import subprocess

from kafkacore.cluster.local_cluster import pid_alive

PREFIX = "kcnp"
NOWHERE_MAC = "02:00:00:00:00:01"  # locally administered, never given to a link here


class NetnsUnavailable(Exception):
    """The namespaces could not be built here (not root, no iproute2, a kernel without veth or
    bridge); the message says what failed."""


def ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and r.returncode != 0:
        raise subprocess.CalledProcessError(r.returncode, ["ip", *args], r.stdout, r.stderr)
    return r.stdout


def _delete_namespace(name):
    # processes a crashed run left inside (its brokers, its ZooKeeper) would keep the namespace
    # alive after its name is gone: they are that run's, started in a namespace only it used
    for pid in ip("netns", "pids", name, check=False).split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    ip("netns", "delete", name, check=False)


def delete_stale(own_pid=None):
    """Deletes the namespaces and root links of runs whose process is gone (and this pid's)."""
    for line in ip("netns", "list", check=False).splitlines():
        m = re.match(rf"({PREFIX}-(\d+)-\S+)", line)
        if m and (int(m.group(2)) == own_pid or not pid_alive(int(m.group(2)))):
            _delete_namespace(m.group(1))
    for line in ip("-o", "link", "show", check=False).splitlines():
        m = re.match(rf"\d+: ({PREFIX}(\d+))[@:]", line)
        if m and (int(m.group(2)) == own_pid or not pid_alive(int(m.group(2)))):
            ip("link", "delete", m.group(1), check=False)


def _free_subnet(start):
    """A 10.199.N.0/24 no route of the root namespace overlaps."""
    used = [ipaddress.ip_network(m, strict=False)
            for m in re.findall(r"^(\d+\.\d+\.\d+\.\d+(?:/\d+)?)", ip("-4", "route", "show", "table", "all",
                                                                     check=False), re.MULTILINE)]
    for i in range(256):
        net = ipaddress.ip_network(f"10.199.{(start + i) % 256}.0/24")
        if not any(net.overlaps(u) for u in used):
            return net
    raise NetnsUnavailable("no free 10.199.N.0/24 subnet in the root namespace")


class Network:
    """Hosts ``names`` (e.g. zk, b1, b2, b3), each a namespace at its own address on one bridge."""

    def __init__(self, names):
        self.pid = os.getpid()
        self.names = list(names)
        self.switch = f"{PREFIX}-{self.pid}-sw"
        self.root_link = f"{PREFIX}{self.pid}"  # at most 11 characters of IFNAMSIZ's 15
        self.subnet = None
        self.addresses = {}
        self.cuts = set()
        self.built = False

    def ns(self, name):
        return f"{PREFIX}-{self.pid}-{name}"

    def address(self, name):
        return self.addresses[name]

    def exec_prefix(self, name):
        """The command prefix that runs a program on host ``name``."""
        return ["ip", "netns", "exec", self.ns(name)]

    def create(self):
        if os.geteuid() != 0:
            raise NetnsUnavailable("needs root to create network namespaces")
        try:
            ip("-V")
        except (OSError, subprocess.CalledProcessError) as e:
            raise NetnsUnavailable(f"iproute2's ip is not usable: {e}") from None
        delete_stale(own_pid=self.pid)
        self.subnet = _free_subnet(self.pid % 256)
        hosts = list(self.subnet.hosts())
        self.root_address = str(hosts[0])
        self.addresses = {name: str(hosts[9 + i]) for i, name in enumerate(self.names)}
        prefixlen = self.subnet.prefixlen
        self.built = True  # from here on destroy() has something to undo
        try:
            ip("netns", "add", self.switch)
            ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            ip("-n", self.switch, "link", "set", "br0", "up")
            for name in self.names:
                ns = self.ns(name)
                ip("netns", "add", ns)
                ip("-n", ns, "link", "set", "lo", "up")
                # created straight into the namespaces: no name is ever taken in the root one
                ip("link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", name, "netns", self.switch)
                ip("-n", self.switch, "link", "set", name, "master", "br0", "up")
                ip("-n", ns, "addr", "add", f"{self.addresses[name]}/{prefixlen}", "dev", "eth0")
                ip("-n", ns, "link", "set", "eth0", "up")
            ip("link", "add", self.root_link, "type", "veth", "peer", "name", "root", "netns", self.switch)
            ip("-n", self.switch, "link", "set", "root", "master", "br0", "up")
            ip("addr", "add", f"{self.root_address}/{prefixlen}", "dev", self.root_link)
            ip("link", "set", self.root_link, "up")
        except subprocess.CalledProcessError as e:
            self.destroy()
            raise NetnsUnavailable(f"{' '.join(e.cmd)} failed: {e.stderr.strip()}") from None
        return self

    # -- faults -----------------------------------------------------------------------------------
    def cut(self, a, b):
        """No packet passes between hosts a and b, either way."""
        for x, y in ((a, b), (b, a)):
            ip("-n", self.ns(x), "neigh", "replace", self.addresses[y], "lladdr", NOWHERE_MAC, "dev", "eth0",
               "nud", "permanent")
        self.cuts.add((a, b))

    def isolate(self, host, others):
        for o in others:
            self.cut(host, o)

    def heal(self):
        """Every cut repaired: the entries go, ARP finds the real addresses again."""
        for a, b in sorted(self.cuts):
            for x, y in ((a, b), (b, a)):
                ip("-n", self.ns(x), "neigh", "del", self.addresses[y], "dev", "eth0", check=False)
        self.cuts.clear()

    def destroy(self):
        if not self.built:
            return
        for name in self.names:
            _delete_namespace(self.ns(name))
        _delete_namespace(self.switch)  # takes the root link's peer, hence the link, with it
        ip("link", "delete", self.root_link, check=False)
        self.built = False
