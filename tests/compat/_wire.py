"""Just enough of the Kafka wire protocol for the compatibility suite's harness, written
independently of kafkacore.protocol so that the suite does not trust the code it tests:

* ``probe_api_versions``: the readiness probe (TCP connect + ApiVersions v0).
* ``Proxy``: a loopback TCP proxy, used only in front of tansu: it empties the top-level
  tagged fields of ApiVersions v3+ responses, which tansu always sends and librdkafka 2.0.x
  (Debian's kcat) cannot parse (see conftest.Broker), and it records which (api key, version)
  pairs each client sends (printed at the end of a run with ``KAFKACORE_COMPAT_TRACE=1``).
"""
import asyncio
import socket
import struct
import threading

API_VERSIONS = 18

# api key -> name, for reports (the keys the four clients of this suite use)
API_NAMES = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 8: "OffsetCommit", 9: "OffsetFetch",
    10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup", 14: "SyncGroup",
    15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics",
    20: "DeleteTopics", 21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 28: "TxnOffsetCommit",
    29: "DescribeAcls", 32: "DescribeConfigs", 33: "AlterConfigs", 35: "DescribeLogDirs",
    36: "SaslAuthenticate", 37: "CreatePartitions", 42: "DeleteGroups", 44: "IncrementalAlterConfigs",
    47: "OffsetDelete", 50: "DescribeUserScramCredentials", 60: "DescribeCluster",
    61: "DescribeProducers", 68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 75: "DescribeTopicPartitions",
}


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def probe_api_versions(host, port, timeout=2.0):
    """Sends ApiVersions v0 and returns {api_key: (min_version, max_version)}.
    Raises OSError/ConnectionError/ValueError when the broker is not (yet) answering."""
    correlation_id = 0x4B43  # "KC"
    client_id = b"kafkacore-compat-probe"
    body = struct.pack(">hhih", API_VERSIONS, 0, correlation_id, len(client_id)) + client_id
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(body)) + body)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        if not 10 <= size <= 1 << 20:
            raise ValueError(f"implausible ApiVersions response size {size}")
        data = _recv_exact(sock, size)
    got_cid, error_code, count = struct.unpack_from(">ihi", data, 0)
    if got_cid != correlation_id:
        raise ValueError(f"ApiVersions correlation id {got_cid} != {correlation_id}")
    if error_code != 0:
        raise ValueError(f"ApiVersions v0 error code {error_code}")
    versions = {}
    pos = 10
    for _ in range(count):
        key, lo, hi = struct.unpack_from(">hhh", data, pos)
        pos += 6
        versions[key] = (lo, hi)
    return versions


def _read_uvarint(data, pos):
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, pos


def strip_api_versions_tags(payload):
    """Given an ApiVersions v3+ response (without the size prefix), returns it with an empty
    top-level tagged-field section. Unparseable input is returned unchanged."""
    try:
        pos = 4 + 2  # correlation id (response header v0 for ApiVersions), error code
        n, pos = _read_uvarint(payload, pos)
        for _ in range(max(n - 1, 0)):
            pos += 6
            tags, pos = _read_uvarint(payload, pos)
            for _ in range(tags):
                _, pos = _read_uvarint(payload, pos)
                size, pos = _read_uvarint(payload, pos)
                pos += size
        pos += 4  # throttle_time_ms
        return payload[:pos] + b"\x00"
    except (IndexError, struct.error):
        return payload


class Proxy:
    """A loopback TCP proxy on its own event-loop thread. Client->broker frames are parsed for
    (api key, version, correlation id); ``recorded`` collects the pairs; when ``strip_tags`` is
    on, ApiVersions v3+ responses lose their top-level tagged fields."""

    def __init__(self, upstream_host, upstream_port, strip_tags=False):
        self.upstream = (upstream_host, upstream_port)
        self.strip_tags = strip_tags
        self.recorded = {}  # client id -> {(api_key, version): count}
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._server = None
        self._writers = set()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self._thread = threading.Thread(target=self._run, name="compat-proxy", daemon=True)
        ready = threading.Event()
        self._ready = ready
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("proxy did not start")

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def _run(self):
        asyncio.set_event_loop(self._loop)

        async def start():
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
            self._ready.set()

        self._loop.run_until_complete(start())
        self._loop.run_forever()

    async def _handle(self, creader, cwriter):
        try:
            ureader, uwriter = await asyncio.open_connection(*self.upstream)
        except OSError:
            cwriter.close()
            return
        self._writers.update((cwriter, uwriter))
        pending = {}  # correlation id -> api version of in-flight ApiVersions requests

        async def upstream_bound():
            try:
                while True:
                    head = await creader.readexactly(4)
                    (size,) = struct.unpack(">i", head)
                    frame = await creader.readexactly(size)
                    key, version, cid = struct.unpack_from(">hhi", frame, 0)
                    (clen,) = struct.unpack_from(">h", frame, 8)
                    client = frame[10:10 + clen].decode("utf-8", "replace") if clen >= 0 else None
                    with self._lock:
                        per = self.recorded.setdefault(client, {})
                        per[(key, version)] = per.get((key, version), 0) + 1
                    if key == API_VERSIONS and version >= 3:
                        pending[cid] = version
                    uwriter.write(head + frame)
                    await uwriter.drain()
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                pass
            finally:
                uwriter.close()

        async def client_bound():
            try:
                while True:
                    head = await ureader.readexactly(4)
                    (size,) = struct.unpack(">i", head)
                    frame = await ureader.readexactly(size)
                    (cid,) = struct.unpack_from(">i", frame, 0)
                    if self.strip_tags and pending.pop(cid, None) is not None:
                        frame = strip_api_versions_tags(frame)
                        head = struct.pack(">i", len(frame))
                    cwriter.write(head + frame)
                    await cwriter.drain()
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                pass
            finally:
                cwriter.close()

        await asyncio.gather(upstream_bound(), client_bound())
        self._writers.difference_update((cwriter, uwriter))

    def close(self):
        def stop():
            if self._server is not None:
                self._server.close()
            for w in list(self._writers):
                w.close()
            self._loop.stop()

        if self._loop.is_running():
            self._loop.call_soon_threadsafe(stop)
        self._thread.join(10)

    def summary(self):
        """{client id: {api name: sorted versions}}"""
        with self._lock:
            out = {}
            for client, pairs in self.recorded.items():
                per = out.setdefault(client, {})
                for key, version in pairs:
                    per.setdefault(API_NAMES.get(key, f"api{key}"), set()).add(version)
            return {c: {k: sorted(v) for k, v in sorted(p.items())} for c, p in out.items()}
