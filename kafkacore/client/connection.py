"""One TCP connection from a kafkacore client to one broker.

Requests are framed with kafkacore's generated codecs. A connection negotiates API versions
at connect (ApiVersions, falling back to v0 when the broker answers UNSUPPORTED_VERSION, as
Kafka's clients do) and then picks, per request, the highest version both sides speak.

A connection is used by one thread at a time; ``call`` is the synchronous round trip and
``send`` + ``read_responses`` let the producer's sender and the consumer's fetcher keep several
requests in flight and wait on many connections with one ``select``.
"""
from __future__ import annotations

import select
import socket
import ssl
import struct
import threading
import time

from ..errors import KafkaTimeoutError, UnsupportedVersionError
from ..protocol.api_table import ApiKey
from ..protocol.frames import RequestHeader, api_name, decode_response, encode_request_parts, request_class
from ..protocol.wire import ProtocolDecodeError

# The highest version kafkacore's clients send for each API they use, and the lowest they can
# make sense of. Fetch stops at 12 and Produce at 11: later versions name topics by id.
CLIENT_VERSIONS = {
    0: (3, 11),   # Produce (v3: record batches v2)
    1: (4, 12),   # Fetch (v4: isolation level, last stable offset)
    2: (1, 8),    # ListOffsets
    3: (1, 12),   # Metadata
    8: (2, 9),    # OffsetCommit
    9: (1, 7),    # OffsetFetch (v8 batches groups)
    10: (1, 3),   # FindCoordinator (v4 batches keys)
    11: (2, 9),   # JoinGroup
    12: (0, 4),   # Heartbeat
    13: (0, 5),   # LeaveGroup
    14: (0, 5),   # SyncGroup
    18: (0, 3),   # ApiVersions
    19: (2, 7),   # CreateTopics
    22: (0, 4),   # InitProducerId
    24: (0, 3),   # AddPartitionsToTxn (v4 batches transactions, for brokers)
    25: (0, 3),   # AddOffsetsToTxn
    26: (0, 3),   # EndTxn
    28: (0, 3),   # TxnOffsetCommit
    68: (1, 1),   # ConsumerGroupHeartbeat (group.protocol=consumer; v1: the client makes its member id)
    # the admin requests (client/admin.py)
    15: (0, 5),   # DescribeGroups
    16: (0, 5),   # ListGroups (v5: the group type, classic, consumer or share)
    20: (1, 6),   # DeleteTopics
    21: (0, 2),   # DeleteRecords
    32: (1, 4),   # DescribeConfigs (v1: config sources)
    35: (1, 4),   # DescribeLogDirs
    37: (0, 3),   # CreatePartitions
    42: (0, 2),   # DeleteGroups
    43: (1, 2),   # ElectLeaders (v1: election type)
    44: (0, 1),   # IncrementalAlterConfigs
    45: (0, 0),   # AlterPartitionReassignments
    46: (0, 0),   # ListPartitionReassignments
    47: (0, 0),   # OffsetDelete
    60: (0, 1),   # DescribeCluster
    69: (0, 0),   # ConsumerGroupDescribe (KIP-848 groups, which DescribeGroups answers Dead)
    77: (0, 1),   # ShareGroupDescribe (KIP-932 groups, likewise)
    90: (0, 0),   # DescribeShareGroupOffsets (KIP-932 share groups, Kafka 4.1)
    91: (0, 0),   # AlterShareGroupOffsets
    92: (0, 0),   # DeleteShareGroupOffsets
    # the share consumer (client/share_consumer.py): v1 only, as librdkafka 2.16 and Kafka 4.1's client
    76: (1, 1),   # ShareGroupHeartbeat
    78: (1, 1),   # ShareFetch
    79: (1, 1),   # ShareAcknowledge
    # security (client/security.py, the admin client)
    17: (1, 1),   # SaslHandshake (v0 would send the tokens unframed)
    36: (0, 2),   # SaslAuthenticate
    48: (0, 1),   # DescribeClientQuotas
    49: (0, 1),   # AlterClientQuotas
    50: (0, 0),   # DescribeUserScramCredentials
    51: (0, 0),   # AlterUserScramCredentials
    29: (1, 3),   # DescribeAcls (Kafka 4 dropped v0)
    30: (1, 3),   # CreateAcls
    31: (1, 3),   # DeleteAcls
}
_size = struct.Struct(">i")
_cid = struct.Struct(">i")


def pick_version(versions: dict, api_key: int, who: str) -> int:
    """The highest version of ``api_key`` in both CLIENT_VERSIONS and the broker's ``versions``."""
    lo, hi = CLIENT_VERSIONS[api_key]
    theirs = versions.get(api_key)
    if theirs is None:
        raise UnsupportedVersionError(f"{who} does not support {api_name(api_key)} (API key {api_key})")
    if min(hi, theirs[1]) < max(lo, theirs[0]):
        raise UnsupportedVersionError(f"{who} speaks {api_name(api_key)} (API key {api_key}) v{theirs[0]}-"
                                      f"{theirs[1]}, kafkacore v{lo}-{hi}")
    return min(hi, theirs[1])


def _decode(api_key, version, frame):
    """A response body, read as Kafka's Java client reads it: bytes after the response are
    ignored, and an ApiVersions response that does not parse at the version asked for is
    read at v0 (a broker that does not know that version answers UNSUPPORTED_VERSION in v0,
    or in a layout of its own; the v0 error code and ranges are what the fallback needs)."""
    try:
        return decode_response(api_key, version, memoryview(frame), strict=False)[1]
    except (ProtocolDecodeError, ValueError, struct.error):
        if api_key != ApiKey.API_VERSIONS or version == 0:
            raise
        resp = decode_response(api_key, 0, memoryview(frame), strict=False)[1]
        if not resp.error_code:
            raise
        return resp


def _connect(host: str, port: int, timeout: float, send_buffer_bytes: int, receive_buffer_bytes: int):
    """socket.create_connection, with the buffer sizes set on each socket before its connect."""
    if send_buffer_bytes < 0 and receive_buffer_bytes < 0:
        return socket.create_connection((host, port), timeout=timeout)
    err = None
    for family, kind, proto, _name, addr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            if send_buffer_bytes >= 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
            if receive_buffer_bytes >= 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
            sock.settimeout(timeout)
            sock.connect(addr)
            return sock
        except OSError as e:
            sock.close()
            err = e
    raise err if err is not None else OSError(f"getaddrinfo returned nothing for {host}:{port}")


class ConnectionClosed(ConnectionError):
    """The broker closed the connection, or it failed; requests in flight have no answer."""


class BrokerConnection:
    def __init__(self, host: str, port: int, client_id: str = "kafkacore", node_id: int = -1,
                 timeout: float = 10.0, software_version: str = "0.1.0", connect_timeout: float | None = None,
                 send_buffer_bytes: int = -1, receive_buffer_bytes: int = -1, security=None):
        """``connect_timeout`` bounds the TCP connect and the ApiVersions exchange (the Java
        client's socket.connection.setup.timeout.ms); None: ``timeout``, which bounds the rest.
        ``send_buffer_bytes`` / ``receive_buffer_bytes``: SO_SNDBUF / SO_RCVBUF, set before the
        connect as the Java client sets them (the receive window's scale is agreed in the
        handshake); -1 leaves the kernel's sizes and its autotuning. ``security``: a
        ClientSecurity (client/security.py) for TLS and SASL, None for plaintext."""
        self.host, self.port, self.node_id = host, port, node_id
        self.client_id = client_id
        self.lock = threading.Lock()  # held by ``call``; the owner of send/read holds it too
        self.correlation_id = 0
        self.in_flight: dict[int, tuple] = {}  # cid -> (api_key, version, context)
        self._buf = bytearray()
        self._chunk = bytearray(1 << 16)
        self.versions: dict[int, tuple[int, int]] = {}
        self.closed = False
        setup = timeout if connect_timeout is None else connect_timeout
        try:
            self.sock = _connect(host, port, setup, send_buffer_bytes, receive_buffer_bytes)
        except socket.timeout:
            raise ConnectionClosed(f"cannot connect to {host}:{port}: no answer in {setup:g} s") from None
        except OSError as e:
            raise ConnectionClosed(f"cannot connect to {host}:{port}: {e.strerror or e}") from e
        self.timeout = timeout
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.tls = security is not None and security.tls
        try:
            if self.tls:
                try:
                    self.sock = security.wrap(self.sock, host)
                except (ssl.SSLError, ssl.CertificateError) as e:
                    why = getattr(e, "verify_message", None) or getattr(e, "reason", None) or e
                    raise ConnectionClosed(f"TLS handshake with {host}:{port} failed: {why}") from None
                except socket.timeout:
                    raise ConnectionClosed(f"TLS handshake with {host}:{port}: no answer in {setup:g} s") from None
                except OSError as e:
                    raise ConnectionClosed(f"TLS handshake with {host}:{port} failed: {e.strerror or e}") from None
            self.sock.settimeout(timeout)
            self._negotiate(software_version, setup)
            if security is not None and security.sasl:
                security.authenticate(self)
        except BaseException:
            self.close()
            raise

    def __repr__(self):
        return f"<BrokerConnection node {self.node_id} {self.host}:{self.port}>"

    # -- versions -------------------------------------------------------------------------
    def _negotiate(self, software_version, timeout):
        req_cls = request_class(ApiKey.API_VERSIONS)
        body = req_cls(client_software_name="kafkacore-python", client_software_version=software_version)
        resp = self.call(ApiKey.API_VERSIONS, body, version=3, timeout=timeout)
        if resp.error_code == UnsupportedVersionError.code:
            # The broker answered in v0 with its own range; ask again at its highest.
            theirs = {k.api_key: k.max_version for k in resp.api_keys}
            v = min(theirs.get(ApiKey.API_VERSIONS, 0), 3)
            resp = self.call(ApiKey.API_VERSIONS, body, version=v, timeout=timeout)
        if resp.error_code:
            raise UnsupportedVersionError(f"ApiVersions failed at {self.host}:{self.port}: error {resp.error_code}")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}

    def version(self, api_key: int) -> int:
        """The highest version of ``api_key`` both sides speak; UnsupportedVersionError if none."""
        if api_key == ApiKey.API_VERSIONS and not self.versions:
            return CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        return pick_version(self.versions, api_key, f"broker {self.host}:{self.port}")

    # -- sending and receiving ------------------------------------------------------------
    def send(self, api_key: int, body, version: int | None = None, expect_response: bool = True,
             context=None) -> int:
        """Writes one request; returns its correlation id. ``context`` comes back with the response."""
        if self.closed:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        v = self.version(api_key) if version is None else version
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        cid = self.correlation_id
        parts = encode_request_parts(RequestHeader(api_key, v, cid, self.client_id), body)
        if expect_response:
            self.in_flight[cid] = (api_key, v, context)
        try:
            if len(parts) == 1:
                self.sock.sendall(parts[0])
            elif self.tls:  # an SSLSocket has no sendmsg: each part through TLS in turn
                for part in parts:
                    self.sock.sendall(part)
            else:
                _send_all_parts(self.sock, parts)
        except OSError as e:
            # the request never fully left: it is not in flight, and the caller (which gets the
            # exception) owns its context again; leaving it registered would hand the same
            # context back a second time when the lost connection's in-flight requests are retried
            self.in_flight.pop(cid, None)
            self.close()
            raise ConnectionClosed(f"send to {self.host}:{self.port} failed: {e}") from e
        return cid

    def fileno(self) -> int:
        return self.sock.fileno()

    def read_responses(self, timeout: float | None = None) -> list:
        """Reads what the socket has (waiting up to ``timeout`` for the first bytes) and returns
        the completed responses as [(context, api_key, version, response)] in arrival order."""
        if self.closed:
            raise ConnectionClosed(f"connection to {self.host}:{self.port} is closed")
        # The socket stays blocking (with a timeout) for sends; reads wait with select and
        # then take what is there without blocking.
        # (TLS: bytes already decrypted wait in the SSL object, where select cannot see them)
        if (timeout is None or timeout > 0) and not (self.tls and self.sock.pending()):
            readable, _, _ = select.select([self.sock], [], [], timeout)
            if not readable:
                return []
        try:
            if self.tls:  # an SSLSocket takes no recv flags: non-blocking for this one read
                self.sock.setblocking(False)
                try:
                    n = self.sock.recv_into(self._chunk)
                finally:
                    self.sock.settimeout(self.timeout)
            else:
                n = self.sock.recv_into(self._chunk, 0, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return []
        except OSError as e:
            self.close()
            raise ConnectionClosed(f"receive from {self.host}:{self.port} failed: {e}") from e
        if n == 0:
            self.close()
            raise ConnectionClosed(f"{self.host}:{self.port} closed the connection")
        buf = self._buf
        buf += memoryview(self._chunk)[:n]
        if n == len(self._chunk) and len(self._chunk) < (1 << 22):
            self._chunk = bytearray(len(self._chunk) * 2)  # big responses: fewer, larger reads
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            size = _size.unpack_from(buf, pos)[0]
            if size < 4:
                self.close()
                raise ConnectionClosed(f"{self.host}:{self.port} sent a frame of {size} bytes")
            if len(buf) - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            cid = _cid.unpack_from(frame, 0)[0]
            entry = self.in_flight.pop(cid, None)
            if entry is None:
                self.close()
                raise ConnectionClosed(f"{self.host}:{self.port} answered unknown correlation id {cid}")
            api_key, v, context = entry
            try:
                resp = _decode(api_key, v, frame)
            except (ProtocolDecodeError, ValueError, struct.error) as e:
                self.close()
                raise ConnectionClosed(f"malformed response from {self.host}:{self.port}: {e}") from e
            out.append((context, api_key, v, resp))
        if pos:
            del buf[:pos]
        return out

    def call(self, api_key: int, body, version: int | None = None, timeout: float = 30.0):
        """Sends one request and waits for its response (other responses must not be pending)."""
        with self.lock:
            if self.in_flight:
                raise RuntimeError("call() on a connection with requests in flight")
            self.send(api_key, body, version=version)
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    raise KafkaTimeoutError(f"no answer from {self.host}:{self.port} in {timeout:.1f} s")
                got = self.read_responses(left)
                if got:
                    return got[0][3]

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass


# sendmsg takes at most IOV_MAX (1024 on Linux) buffers at a time
_IOV_MAX = 1024


def _send_all_parts(sock, parts):
    """sendall for a list of buffers, without joining them (a request's record batches go out
    from their own buffers); loops over partial sends as sendall does."""
    views = [memoryview(p).cast("B") for p in parts]
    i = 0
    while i < len(views):
        sent = sock.sendmsg(views[i:i + _IOV_MAX])
        while i < len(views) and sent >= len(views[i]):
            sent -= len(views[i])
            i += 1
        if sent:
            views[i] = views[i][sent:]
