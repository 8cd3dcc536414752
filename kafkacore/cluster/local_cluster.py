"""A local cluster for development and tests (``kafkacore cluster up``): a standalone ZooKeeper
from the system's install and N ``kafkacore serve`` brokers on 127.0.0.1, each with its own
data directory under one root, all stopped together.

ZooKeeper comes from the operating system (Debian: ``apt-get install zookeeper``, which puts
/usr/share/java/zookeeper.jar in place; any ZooKeeper 3.5+ jar named by
``$KAFKACORE_ZOOKEEPER_JAR`` works too) and runs on Java (``java`` on PATH). It is started with
its own zoo.cfg in the cluster's root: standalone, the four-letter ``ruok``/``srvr`` words
allowed, the admin server off, and a short tick (500 ms) so test sessions may be short.

A broker of ``cluster up`` that dies is reported and the others keep running, so a failover can
be watched; ``kafkacore cluster restart N --data-dir DIR`` asks the running ``cluster up`` to
start broker N again (or to stop and start it, when it runs). The two talk through files in the
root: ``cluster-up.json`` (who runs: the up process, ZooKeeper, each broker's address, pid and
log) and a request/answer pair per restart."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from ..errors import KafkaError
from ..protocol.api_table import ApiKey


ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar",)
ZOOKEEPER_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
SLF4J_SIMPLE_JARS = ("/usr/share/java/slf4j-simple.jar",)
STATE_FILE = "cluster-up.json"  # in the root, while `cluster up` runs
RESTART_WAIT_S = 180.0  # a restart waits out the broker's old ZooKeeper session, then registers


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


def metadata_broker_ids(address, timeout=5.0, client_config=None):
    """The broker ids a broker's Metadata (v12, no topics) lists; ``client_config``: the Java
    client's security settings for a secured listener (kafkacore's client connection then)."""
    from ..protocol.frames import RequestHeader, decode_response, encode_request, request_class

    host, port = address.rsplit(":", 1)
    if client_config:
        from ..client.config import security_config
        from ..client.connection import BrokerConnection
        from ..client.security import client_security

        conn = BrokerConnection(host, int(port), client_id="kafkacore-local-cluster", timeout=timeout,
                                security=client_security(security_config(client_config)))
        try:
            resp = conn.call(ApiKey.METADATA, request_class(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False),
                             version=12, timeout=timeout)
        finally:
            conn.close()
        return sorted(b.node_id for b in resp.brokers)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        body = request_class(ApiKey.METADATA)(topics=[], allow_auto_topic_creation=False)
        sock.sendall(encode_request(RequestHeader(ApiKey.METADATA, 12, 1, "kafkacore-local-cluster"), body))
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        _cid, resp = decode_response(ApiKey.METADATA, 12, _recv_exact(sock, size))
    return sorted(b.node_id for b in resp.brokers)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


class LocalZooKeeper:
    """A standalone ZooKeeper on this machine: the one launcher, for ``cluster up`` and the tests.

    ``root`` holds zoo.cfg, the data and zookeeper.log; ``host`` is the address ZooKeeper binds
    and is reached at; ``prefix`` goes before the java command (e.g. ``ip netns exec NS``, to run
    it in a network namespace). ``start()`` may be called again after ``stop()``: same port, same
    data. Sessions may be as short as two ticks (1 s at the default 500 ms tick) and as long as
    120 s, so a broker's default 18 s session is granted as asked."""

    def __init__(self, root, port=None, tick_ms=500, host="127.0.0.1", prefix=()):
        self.root = os.path.abspath(root)
        self.host = host
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.prefix = list(prefix)
        self.proc = None
        self.paused = False
        self.log_path = os.path.join(self.root, "zookeeper.log")

    @property
    def connect_string(self):
        return f"{self.host}:{self.port}"

    def command(self, cfg):
        java, jar = find_zookeeper()
        # slf4j-simple (Debian's libslf4j-java, a dependency of the package) sends ZooKeeper's own
        # log to zookeeper.log; without it slf4j drops every line
        classpath = jar + "".join(os.pathsep + j for j in SLF4J_SIMPLE_JARS if os.path.exists(j))
        return self.prefix + [
            java,
            # a small, quickly started JVM: it shares the machine with the brokers it serves
            "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
            "-cp", classpath, ZOOKEEPER_MAIN, cfg]

    def start(self, timeout=60.0):
        """Start (again, on the same port and data) and wait until it serves requests."""
        if self.running():
            raise LocalClusterError(f"ZooKeeper on {self.connect_string} is already running")
        data = os.path.join(self.root, "data")
        os.makedirs(data, exist_ok=True)
        cfg = os.path.join(self.root, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_ms}\ndataDir={data}\nclientPort={self.port}\nclientPortAddress={self.host}\n"
                    f"admin.enableServer=false\nminSessionTimeout={2 * self.tick_ms}\nmaxSessionTimeout=120000\n"
                    "4lw.commands.whitelist=ruok,srvr,stat\nmaxClientCnxns=0\n")
        command = self.command(cfg)
        with open(self.log_path, "ab") as log:
            log.write(f"---- starting ZooKeeper on {self.connect_string} ----\n".encode())
            log.flush()
            self.proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.root, start_new_session=True)
        self.paused = False
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalClusterError(f"ZooKeeper exited with {self.proc.returncode} while starting; "
                                        f"its log ends:\n{self.log_tail()}")
            try:
                # srvr says "not currently serving requests" until the database is loaded
                # (ruok answers imok before that)
                last = four_letter_word(self.host, self.port, "srvr")
                if "Mode:" in last:
                    return self
            except OSError as e:
                last = str(e)
            time.sleep(0.1)
        self.stop()
        raise LocalClusterError(f"ZooKeeper did not serve on {self.connect_string} within {timeout:.0f} s "
                                f"({last.strip()!r}); its log ends:\n{self.log_tail()}")

    def signal(self, sig):
        if self.running():
            os.killpg(self.proc.pid, sig)

    def pause(self):
        """Freeze the server (SIGSTOP): clients get no answers, and no session expires meanwhile."""
        if not self.running():
            raise LocalClusterError("ZooKeeper is not running")
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        if self.paused:
            self.signal(signal.SIGCONT)
        self.paused = False

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """Stop the process; its data stays for a later start()."""
        if self.proc is None:
            return
        self.signal(signal.SIGCONT)
        self.paused = False
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(15)
        self.proc = None

    def log_tail(self, lines=40):
        try:
            with open(self.log_path, errors="replace") as f:
                return "\n".join(f.read().splitlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


class LocalBroker:
    """``host`` is the address the broker listens on and advertises (None: the broker's default,
    127.0.0.1); ``prefix`` goes before its command, as LocalZooKeeper's."""

    def __init__(self, broker_id, root, zk_connect, port=None, settings=None, python=None, host=None, prefix=(),
                 config_file=None, extra_args=()):
        """``config_file``: a properties file given with --config (a secured cluster's listeners
        and secrets: local_security.py); its listeners then hold the ports, --port is not given.
        ``extra_args``: more arguments of ``kafkacore serve`` (e.g. --log-level debug)."""
        self.config_file = config_file
        self.broker_port = None  # a secured cluster's BROKER listener (the inter-broker one)
        self.extra_args = list(extra_args)
        self.broker_id = broker_id
        self.host = host
        self.prefix = list(prefix)
        self.data_dir = os.path.join(root, f"broker-{broker_id}")
        self.port = port or free_port()
        self.zk_connect = zk_connect
        self.settings = dict(settings or {})
        self.python = python or sys.executable
        self.log_path = os.path.join(root, f"broker-{broker_id}.log")
        self.proc = None

    @property
    def address(self):
        return f"{self.host or '127.0.0.1'}:{self.port}"

    def command(self):
        args = self.prefix + [self.python, "-m", "kafkacore", "serve", "--data-dir", self.data_dir,
                              "--set", f"broker.id={self.broker_id}", "--set", f"zookeeper.connect={self.zk_connect}"]
        if self.config_file is not None:
            args += ["--config", self.config_file, *self.extra_args]
        else:
            args += ["--port", str(self.port), *self.extra_args]
            if self.host is not None:
                args += ["--host", self.host]
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        return args

    def start(self, timeout=60.0):
        log = open(self.log_path, "ab")
        # the log is appended across restarts: only this start's lines say it registered
        since = log.tell()
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=os.path.dirname(self.data_dir))
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise LocalClusterError(f"broker {self.broker_id} exited with {self.proc.returncode}; "
                                        f"see {self.log_path}")
            with open(self.log_path, "rb") as f:
                f.seek(since)
                if b"registered in ZooKeeper" in f.read():
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


def rack_settings(broker_id, racks, settings):
    """``settings`` with broker ``broker_id``'s broker.rack: racks are dealt round-robin (with
    racks a,b and 3 brokers: 1 in a, 2 in b, 3 in a), as `cluster up --racks` documents."""
    if not racks:
        return dict(settings or {})
    return {**(settings or {}), "broker.rack": racks[(broker_id - 1) % len(racks)]}


class LocalCluster:
    """``racks``: rack names dealt to the brokers round-robin (broker.rack), for rack-aware
    replica placement and fetching from the closest replica (KIP-392)."""

    def __init__(self, root, brokers=3, settings=None, base_port=None, zookeeper_port=None, racks=None,
                 security=None, extra_args=()):
        """``security``: a LocalSecurity (local_security.py): TLS or SASL_SSL between the brokers
        on a BROKER listener of their own; each broker's port is then its CLIENT listener's."""
        self.root = os.path.abspath(root)
        os.makedirs(self.root, exist_ok=True)
        self.security = security
        self.zookeeper = LocalZooKeeper(os.path.join(self.root, "zookeeper"), port=zookeeper_port)
        self.brokers = {
            i: LocalBroker(i, self.root, self.zookeeper.connect_string,
                           port=(base_port + i - 1) if base_port else None, settings=rack_settings(i, racks, settings),
                           extra_args=extra_args)
            for i in range(1, brokers + 1)}
        if security is not None:
            security.prepare()  # the test CA, before anything starts
            for i, b in self.brokers.items():
                self.secure(b, (base_port + brokers + i - 1) if base_port else None)

    def secure(self, broker, broker_port=None):
        """Gives ``broker`` (one of this cluster's, or one that joins it) the cluster's listeners:
        its port becomes the CLIENT listener's, BROKER gets ``broker_port`` (None: a free one)."""
        from .local_security import write_properties

        broker.broker_port = broker_port or free_port(broker.host or "127.0.0.1")
        broker.config_file = write_properties(
            os.path.join(self.root, f"broker-{broker.broker_id}.properties"),
            self.security.broker_settings(broker.port, broker.broker_port, broker.host or "127.0.0.1"))
        return broker

    @property
    def bootstrap_servers(self):
        return ",".join(b.address for b in self.brokers.values())

    @property
    def client_config(self) -> dict:
        """The Java client's settings for the brokers' CLIENT listener ({}: PLAINTEXT)."""
        return self.security.client_config() if self.security is not None else {}

    def start(self):
        self.zookeeper.start()
        if self.security is not None:
            try:
                self.security.bootstrap_zookeeper(self.zookeeper.connect_string)
            except Exception as e:  # noqa: BLE001 - ZkError, KafkaError, OSError: said in one line
                raise LocalClusterError(f"cannot write the brokers' SCRAM user into ZooKeeper: {e}") from None
        for b in self.brokers.values():
            b.start()
        self.wait_until_brokers_know_each_other()
        return self

    def wait_until_brokers_know_each_other(self, timeout=60.0):
        """A broker's start returns once it is registered in ZooKeeper; the others hear of it
        only with the controller's next UpdateMetadata, and until then a CreateTopics they
        answer counts too few brokers (Kafka has the same window). Waits until every broker's
        Metadata lists every running broker."""
        want = sorted(i for i, b in self.brokers.items() if b.running)
        deadline = time.monotonic() + timeout
        views = {}
        while time.monotonic() < deadline:
            try:
                views = {i: metadata_broker_ids(self.brokers[i].address, client_config=self.client_config) for i in want}
            except (OSError, KafkaError) as e:  # a broker still opening its listener
                views = {"error": repr(e)}
            if all(v == want for v in views.values()):
                return
            time.sleep(0.1)
        raise LocalClusterError(f"the brokers' metadata did not list every broker within {timeout:.0f} s: {views}")

    def stop(self):
        for b in self.brokers.values():
            b.stop()
        self.zookeeper.stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def _write_json(path, data):
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _restart_paths(root, broker_id):
    return os.path.join(root, f"restart-{broker_id}.request"), os.path.join(root, f"restart-{broker_id}.answer")


class _UpSupervisor:
    """What ``cluster up`` does while it runs: reports brokers that exit (once each, with how to
    restart them), serves restart requests, and keeps cluster-up.json current."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.state_path = os.path.join(cluster.root, STATE_FILE)
        self.reported = set()

    def write_state(self):
        _write_json(self.state_path, {
            "pid": os.getpid(), "zookeeper": self.cluster.zookeeper.connect_string,
            "bootstrap_servers": self.cluster.bootstrap_servers,
            "brokers": {str(i): {"address": b.address, "pid": b.proc.pid if b.running else None,
                                 "log": b.log_path} for i, b in self.cluster.brokers.items()}})

    def check(self):
        for i, b in self.cluster.brokers.items():
            if b.proc is not None and not b.running and i not in self.reported:
                self.reported.add(i)
                print(f"kafkacore cluster: broker {i} exited with code {b.proc.returncode} (its log: {b.log_path}); "
                      f"the other brokers keep running. Restart it with: kafkacore cluster restart {i} "
                      f"--data-dir {self.cluster.root}", file=sys.stderr, flush=True)
                self.write_state()
        for i in self.cluster.brokers:
            request, answer = _restart_paths(self.cluster.root, i)
            if os.path.exists(request):
                self.restart(i, request, answer)

    def restart(self, i, request, answer):
        b = self.cluster.brokers[i]
        try:
            if b.running:
                b.stop()
            b.start(timeout=RESTART_WAIT_S)
            result = {"ok": True, "message": f"broker {i} restarted on {b.address} (pid {b.proc.pid})"}
        except LocalClusterError as e:
            result = {"ok": False, "message": str(e)}
        self.reported.discard(i)
        os.unlink(request)
        _write_json(answer, result)
        print(f"kafkacore cluster: {result['message']}", file=sys.stderr if not result["ok"] else sys.stdout,
              flush=True)
        self.write_state()

    def close(self):
        try:
            os.unlink(self.state_path)
        except FileNotFoundError:
            pass


def cluster_up(args) -> int:
    """``kafkacore cluster up``: runs until Ctrl-C or SIGTERM, then stops everything."""
    from .local_security import LocalSecurity, LocalSecurityError

    protocol = getattr(args, "security", "plaintext") or "plaintext"
    try:
        security = None if protocol == "plaintext" else LocalSecurity(args.data_dir, protocol)
        cluster = LocalCluster(args.data_dir, brokers=args.brokers, base_port=args.base_port,
                               zookeeper_port=args.zookeeper_port,
                               settings=dict(s.split("=", 1) for s in (args.set or [])), racks=args.racks,
                               security=security)
    except LocalSecurityError as e:
        print(f"kafkacore cluster: {e}", file=sys.stderr)
        return 1
    stop = []
    signal.signal(signal.SIGTERM, lambda *_a: stop.append(1))
    try:
        cluster.start()
    except LocalClusterError as e:
        cluster.stop()
        print(f"kafkacore cluster: {e}", file=sys.stderr)
        return 1
    supervisor = _UpSupervisor(cluster)
    supervisor.write_state()
    print(f"ZooKeeper: {cluster.zookeeper.connect_string}", flush=True)
    print(f"bootstrap servers: {cluster.bootstrap_servers}", flush=True)
    if security is not None:
        path = security.write_client_properties()
        shown = {k: ("[hidden: in the file]" if k == "sasl.jaas.config" else v)
                 for k, v in security.client_config().items()}
        print(f"brokers talk to each other over {protocol.upper()} (listener BROKER); clients use these settings, "
              f"written to {path}:", flush=True)
        for k, v in shown.items():
            print(f"  {k}={v}", flush=True)
    print(f"data and logs under {cluster.root}; Ctrl-C stops the cluster; a broker that dies can be started "
          f"again with: kafkacore cluster restart N --data-dir {cluster.root}", flush=True)
    try:
        while not stop:
            time.sleep(0.2)
            supervisor.check()
    except KeyboardInterrupt:
        pass
    finally:
        print("stopping the cluster", flush=True)
        supervisor.close()
        cluster.stop()
    return 0


def cluster_restart(args) -> int:
    """``kafkacore cluster restart N``: asks the ``cluster up`` running on --data-dir to start
    broker N again (stopping it first if it runs) and waits for its answer."""
    root = os.path.abspath(args.data_dir)
    try:
        with open(os.path.join(root, STATE_FILE)) as f:
            state = json.load(f)
    except (OSError, ValueError):
        print(f"kafkacore cluster restart: error: no `kafkacore cluster up` is running with --data-dir {root}",
              file=sys.stderr)
        return 1
    if not pid_alive(state.get("pid")):
        print(f"kafkacore cluster restart: error: the `kafkacore cluster up` of {root} (pid {state.get('pid')}) is "
              "not running any more", file=sys.stderr)
        return 1
    if str(args.broker) not in state.get("brokers", {}):
        print(f"kafkacore cluster restart: error: the cluster has no broker {args.broker} "
              f"(brokers: {', '.join(sorted(state.get('brokers', {}), key=int))})", file=sys.stderr)
        return 2
    request, answer = _restart_paths(root, args.broker)
    try:
        os.unlink(answer)
    except FileNotFoundError:
        pass
    _write_json(request, {"requested_by": os.getpid()})
    deadline = time.monotonic() + RESTART_WAIT_S + 30
    while time.monotonic() < deadline:
        if os.path.exists(answer):
            with open(answer) as f:
                result = json.load(f)
            os.unlink(answer)
            print(result["message"], file=sys.stdout if result["ok"] else sys.stderr)
            return 0 if result["ok"] else 1
        if not pid_alive(state["pid"]):
            print("kafkacore cluster restart: error: `kafkacore cluster up` stopped before answering", file=sys.stderr)
            return 1
        time.sleep(0.1)
    print(f"kafkacore cluster restart: error: no answer from `kafkacore cluster up` within "
          f"{RESTART_WAIT_S + 30:.0f} s", file=sys.stderr)
    return 1


def pid_alive(pid) -> bool:
    """Whether a process with this pid exists (one of another user's counts)."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
