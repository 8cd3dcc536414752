"""A small synchronous Kafka client for tests, built on kafkacore's generated codecs, and a
fixture helper that runs a real ``kafkacore serve`` process on a free port.

    with BrokerProcess(tmp_path) as b:          # python -m kafkacore serve ... on 127.0.0.1
        c = b.client()                          # a KafkaConnection
        resp = c.call(3, 12, MetadataRequest(topics=None))
"""
from __future__ import annotations

import os
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from kafkacore.protocol.frames import RequestHeader, decode_response, encode_request, request_class

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class KafkaConnection:
    """One TCP connection; ``call`` sends a request and returns the decoded response;
    ``send``/``receive`` let a test pipeline several."""

    def __init__(self, host, port, client_id="kafkacore-tests", timeout=30.0, security=None):
        """``security``: a kafkacore ClientSecurity (kafkacore/client/security.py): the TLS
        handshake and the SASL login are done before the connection is handed over."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = client_id
        self.correlation_id = 0
        self.inflight = {}
        if security is not None and security.tls:
            self.sock = security.wrap(self.sock, host)
        if security is not None and security.sasl:
            steps = security.login_requests(f"{host}:{port}", 1)
            response = None
            while True:
                try:
                    api_key, version, body = steps.send(response)
                except StopIteration:
                    break
                response = self.call(api_key, version, body)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, api_key, version, body) -> int:
        self.correlation_id += 1
        cid = self.correlation_id
        frame = encode_request(RequestHeader(api_key, version, cid, self.client_id), body)
        self.sock.sendall(frame)
        self.inflight[cid] = (api_key, version)
        return cid

    def send_raw(self, data: bytes):
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._recv_exact(4))[0]
        return self._recv_exact(size)

    def _recv_exact(self, n) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def receive(self, expect_cid=None):
        frame = self.read_frame()
        cid = struct.unpack_from(">i", frame)[0]
        if expect_cid is not None:
            assert cid == expect_cid, f"response for correlation id {cid}, expected {expect_cid}"
        api_key, version = self.inflight.pop(cid)
        _cid, body = decode_response(api_key, version, frame)
        return body

    def call(self, api_key, version, body):
        return self.receive(self.send(api_key, version, body))

    def is_closed_by_peer(self, timeout=5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False


def request(api_key, **fields):
    """A request object of the API's generated class."""
    return request_class(api_key)(**fields)


METADATA_API = 3
LEADER_NOT_AVAILABLE = 5


def auto_create(conn, topic, version=12, timeout=10.0):
    """The topic's metadata, creating it through Metadata's auto-creation as a client does: the
    response that creates it says LEADER_NOT_AVAILABLE (as Kafka's), the retry finds it."""
    from kafkacore.protocol.messages.metadata_request import MetadataRequestTopic

    deadline = time.monotonic() + timeout
    while True:
        resp = conn.call(METADATA_API, version, request(METADATA_API, topics=[MetadataRequestTopic(name=topic)],
                                                        allow_auto_topic_creation=True))
        t = resp.topics[0]
        if t.error_code != LEADER_NOT_AVAILABLE or time.monotonic() > deadline:
            assert t.error_code == 0, t
            return t
        time.sleep(0.01)


class BrokerProcess:
    """``python -m kafkacore serve`` on 127.0.0.1:<free port> with data_dir; ``restart()``
    stops it with SIGTERM and starts it again on the same port and directory."""

    def __init__(self, data_dir, settings=None, port=None, extra_args=()):
        self.data_dir = str(data_dir)
        self.settings = {"group.initial.rebalance.delay.ms": "0", **(settings or {})}
        self.port = port or free_port()
        self.extra_args = list(extra_args)
        self.proc = None
        self.log_path = os.path.join(self.data_dir + "-broker.log")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def start(self, timeout=30.0):
        args = [sys.executable, "-m", "kafkacore", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", self.data_dir]
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        args += self.extra_args
        self._log = open(self.log_path, "ab")
        since = self._log.tell()  # the log is appended across restarts
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=str(ROOT))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.output()}")
            # ready: it says "listening on" once it leads its partitions, and it answers
            if "listening on" not in self.output_since(since):
                time.sleep(0.02)
                continue
            try:
                with KafkaConnection("127.0.0.1", self.port, timeout=2) as c:
                    c.call(18, 3, request(18, client_software_name="tests", client_software_version="1"))
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"broker did not answer within {timeout}s:\n{self.output()}")

    def output(self) -> str:
        return self.output_since(0)

    def output_since(self, offset) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, sig=signal.SIGTERM, timeout=30.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"broker did not stop within {timeout}s after {sig!r}:\n{self.output()}")
        rc = self.proc.returncode
        self.proc = None
        self._log.close()
        return rc

    def kill(self):
        return self.stop(signal.SIGKILL)

    def restart(self):
        rc = self.stop()
        assert rc == 0, f"broker exited with {rc} on SIGTERM:\n{self.output()}"
        return self.start()

    def client(self, **kw) -> KafkaConnection:
        return KafkaConnection("127.0.0.1", self.port, **kw)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self._log.close()
            self.proc = None


async def start_single_node(data_dir, settings=None):
    """A single node in this process, on the running event loop, started as `kafkacore serve`
    starts one (its own cluster of one: the metadata store in its data directory, its own
    controller) but serving no socket. broker.shutdown() stops it."""
    import asyncio

    from kafkacore.broker.config import BrokerConfig
    from kafkacore.broker.main import start_broker

    broker = start_broker(BrokerConfig({"log.dirs": str(data_dir), **(settings or {})}))
    loop = asyncio.get_running_loop()
    broker.attach_loop(loop)
    await broker.cluster.start(loop, broker.config.advertised_listeners)
    return broker


async def create_topic_and_wait(broker, name, partitions=1):
    """CreateTopics' work on ``broker``, returning once every partition has its leader."""
    broker.create_topic(name, partitions)
    assert await broker.wait_for_topic(name, 30, partitions), f"topic {name} got no leaders within 30 s"


async def internal_topic_ready(broker, store):
    """A coordinator's internal topic (``store``: its InternalTopicLog) created and led."""
    store.ensure_topic()
    assert await broker.wait_for_topic(store.topic, 30, store.configured_partitions), f"{store.topic} not led"


FIND_COORDINATOR_API = 10


def find_coordinators(conn, group="any-group", transactional_id="any-txn"):
    """FindCoordinator for a group and a transactional id, as clients ask before their first
    group or transaction request: the first such request creates the coordinators' internal
    topics. Asserts both answer."""
    for key_type, key in ((0, group), (1, transactional_id)):
        r = conn.call(FIND_COORDINATOR_API, 4, request(FIND_COORDINATOR_API, key_type=key_type, coordinator_keys=[key]))
        assert r.coordinators[0].error_code == 0, r
