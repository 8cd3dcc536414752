"""A local cluster for development and tests (``kafkacore cluster up``): a standalone ZooKeeper
from the system's install and N ``kafkacore serve`` brokers on 127.0.0.1, each with its own
data directory under one root, all stopped together.

ZooKeeper comes from the operating system (Debian: ``apt-get install zookeeper``, which puts
/usr/share/java/zookeeper.jar in place; any ZooKeeper 3.5+ jar named by
``$KAFKACORE_ZOOKEEPER_JAR`` works too) and runs on Java (``java`` on PATH). It is started with
its own zoo.cfg in the cluster's root: standalone, the four-letter ``ruok``/``srvr`` words
allowed, the admin server off, and a short tick (500 ms) so test sessions may be short."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time

ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar",)
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class LocalClusterError(Exception):
    """A part of the local cluster could not start; the message says what to do."""


def free_port(host="127.0.0.1"):
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def find_zookeeper():
    """(java, jar) or LocalClusterError naming what to install."""
    java = shutil.which("java")
    jar = os.environ.get("KAFKACORE_ZOOKEEPER_JAR") or next((j for j in ZOOKEEPER_JARS if os.path.exists(j)), None)
    missing = []
    if java is None:
        missing.append("a Java runtime (java on PATH; Debian: apt-get install default-jre-headless)")
    if jar is None or not os.path.exists(jar):
        missing.append("ZooKeeper (Debian: apt-get install zookeeper, or $KAFKACORE_ZOOKEEPER_JAR naming its jar)")
    if missing:
        raise LocalClusterError("cannot start ZooKeeper: install " + " and ".join(missing))
    return java, jar


def four_letter_word(host, port, word, timeout=1.0):
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return out.decode(errors="replace")
            out += chunk


class LocalZooKeeper:
    def __init__(self, root, port=None, tick_ms=500):
        self.root = os.path.abspath(root)
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.proc = None
        self.log_path = os.path.join(self.root, "zookeeper.log")

    @property
    def connect_string(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=30.0):
        java, jar = find_zookeeper()
        data = os.path.join(self.root, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.root, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_ms}\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                    f"admin.enableServer=false\nminSessionTimeout={2 * self.tick_ms}\nmaxSessionTimeout=120000\n"
                    "4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([java, "-Xmx256m", "-cp", jar, ZOOKEEPER_MAIN, cfg], stdout=log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalClusterError(f"ZooKeeper exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if four_letter_word("127.0.0.1", self.port, "ruok") == "imok":
                    return self
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise LocalClusterError(f"ZooKeeper did not answer on 127.0.0.1:{self.port} within {timeout:.0f} s; "
                                f"see {self.log_path}")

    def signal(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self):
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(15)
        self.proc = None


class LocalBroker:
    def __init__(self, broker_id, root, zk_connect, port=None, settings=None, python=None):
        self.broker_id = broker_id
        self.data_dir = os.path.join(root, f"broker-{broker_id}")
        self.port = port or free_port()
        self.zk_connect = zk_connect
        self.settings = dict(settings or {})
        self.python = python or sys.executable
        self.log_path = os.path.join(root, f"broker-{broker_id}.log")
        self.proc = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def command(self):
        args = [self.python, "-m", "kafkacore", "serve", "--port", str(self.port), "--data-dir", self.data_dir,
                "--set", f"broker.id={self.broker_id}", "--set", f"zookeeper.connect={self.zk_connect}"]
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        return args

    def start(self, timeout=60.0):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=os.path.dirname(self.data_dir))
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalClusterError(f"broker {self.broker_id} exited with {self.proc.returncode}; "
                                        f"see {self.log_path}")
            with open(self.log_path, "rb") as f:
                if b"registered in ZooKeeper" in f.read()[-20000:]:
                    return self
            time.sleep(0.05)
        raise LocalClusterError(f"broker {self.broker_id} did not register within {timeout:.0f} s; see {self.log_path}")

    def signal(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout=60.0):
        """SIGTERM (a controlled shutdown) and wait; the exit code."""
        if self.proc is None:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            code = self.proc.wait(15)
        self.proc = None
        return code

    def kill(self):
        if self.proc is not None:
            self.signal(signal.SIGKILL)
            self.proc.wait(15)
            self.proc = None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None


class LocalCluster:
    def __init__(self, root, brokers=3, settings=None, base_port=None, zookeeper_port=None):
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.zookeeper = LocalZooKeeper(os.path.join(self.root, "zookeeper"), port=zookeeper_port)
        self.brokers = {
            i: LocalBroker(i, self.root, self.zookeeper.connect_string,
                           port=(base_port + i - 1) if base_port else None, settings=settings)
            for i in range(1, brokers + 1)}

    @property
    def bootstrap_servers(self):
        return ",".join(b.address for b in self.brokers.values())

    def start(self):
        self.zookeeper.start()
        for b in self.brokers.values():
            b.start()
        return self

    def stop(self):
        for b in self.brokers.values():
            b.stop()
        self.zookeeper.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def cluster_up(args) -> int:
    """``kafkacore cluster up``: runs until Ctrl-C or SIGTERM, then stops everything."""
    cluster = LocalCluster(args.data_dir, brokers=args.brokers, base_port=args.base_port,
                           zookeeper_port=args.zookeeper_port,
                           settings=dict(s.split("=", 1) for s in (args.set or [])))
    stop = []
    signal.signal(signal.SIGTERM, lambda *_a: stop.append(1))
    try:
        cluster.start()
    except LocalClusterError as e:
        cluster.stop()
        print(f"kafkacore cluster: {e}", file=sys.stderr)
        return 1
    print(f"ZooKeeper: {cluster.zookeeper.connect_string}", flush=True)
    print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
    print(f"data and logs under {cluster.root}; Ctrl-C stops the cluster", flush=True)
    try:
        while not stop:
            time.sleep(0.2)
            dead = [b.broker_id for b in cluster.brokers.values() if b.proc is not None and not b.running]
            if dead:
                print(f"kafkacore cluster: broker {dead[0]} exited; see {cluster.brokers[dead[0]].log_path}",
                      file=sys.stderr)
                return 1
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping the cluster", flush=True)
        cluster.stop()
    return 0
