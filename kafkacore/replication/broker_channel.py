"""An asyncio connection from one broker to another, speaking the Kafka protocol: what the
controller sends LeaderAndIsr, UpdateMetadata and StopReplica over, and what a follower's
ReplicaFetcher fetches with (Kafka's ControllerChannelManager and NetworkClient, reduced to one
connection per destination).

- Requests are pipelined: ``call`` writes at once and awaits the response with the same
  correlation id; responses come back in order (Kafka's rule per connection).
- The connection is opened on first use and again after a failure; a failed or timed-out call
  raises ``BrokerChannelError`` and drops the connection (every request in flight on it fails),
  so the caller decides whether to retry.
- ApiVersions is not negotiated: brokers of one kafkacore cluster speak the same versions.
- Security (Kafka's inter-broker listener with its security protocol): with a ``security`` (a
  ClientSecurity, client/security.py, made by broker/inter_broker.py from the broker's own
  settings) a new connection first does the TLS handshake (the broker's key store as client
  certificate, its trust store, the host name checked as ``ssl.endpoint.identification.algorithm``
  says), then SaslHandshake + SaslAuthenticate with the inter-broker mechanism (the same login
  exchange as kafkacore's clients), before any request goes out. A refused handshake or login is
  a ``BrokerAuthenticationError``, logged once (one line, never a secret) until a login works.
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import ssl
import struct

from ..protocol.frames import RequestHeader, decode_response, encode_request
from ..protocol.wire import ProtocolDecodeError

log = logging.getLogger("kafkacore.cluster")

_size = struct.Struct(">i")
MAX_RESPONSE_BYTES = 1 << 30  # a larger size prefix from a peer broker is a broken stream, not a response


class FrameReceiver(asyncio.BufferedProtocol):
    """Size-prefixed response frames off a connection, each byte copied once after the kernel:
    small frames are received into a staging buffer and sliced out of it; a frame larger than
    the staging buffer (a follower's 1 MiB fetch response) is received straight into its own
    bytearray. asyncio's StreamReader copied every byte three times (into its buffer, out of
    it, and the buffer's remainder to the front), which held a new replica's catch-up to a
    fraction of the link."""

    STAGING = 64 * 1024

    def __init__(self, on_frame, on_lost):
        self.on_frame = on_frame  # (receiver, frame): frame is bytes or a bytearray, no size prefix
        self.on_lost = on_lost  # (receiver, reason)
        self.transport = None
        self._staging = bytearray(self.STAGING)
        self._filled = 0
        self._frame = None  # the large frame being received straight into place
        self._got = 0
        self._failed = False

    def connection_made(self, transport):
        self.transport = transport

    def connection_lost(self, exc):
        if not self._failed:
            self.on_lost(self, exc or "closed")

    def get_buffer(self, sizehint):
        if self._frame is not None:
            return memoryview(self._frame)[self._got:]
        return memoryview(self._staging)[self._filled:]

    def buffer_updated(self, nbytes):
        if self._frame is not None:
            self._got += nbytes
            if self._got == len(self._frame):
                frame, self._frame = self._frame, None
                self.on_frame(self, frame)
            return
        self._filled += nbytes
        staging, start, filled = self._staging, 0, self._filled
        while filled - start >= 4:
            (size,) = _size.unpack_from(staging, start)
            if size < 4 or size > MAX_RESPONSE_BYTES:
                self._fail(f"a response frame of {size} bytes")
                return
            end = start + 4 + size
            if end <= filled:
                self.on_frame(self, bytes(staging[start + 4:end]))
                start = end
                if self._failed:
                    return
                continue
            if 4 + size > self.STAGING:  # the rest of it goes straight into place
                self._frame = bytearray(size)
                self._got = filled - start - 4
                self._frame[:self._got] = staging[start + 4:filled]
                self._filled = 0
                return
            break
        if start:
            rest = filled - start
            staging[:rest] = staging[start:filled]
            self._filled = rest

    def _fail(self, why):
        self._failed = True
        self.on_lost(self, why)
        if self.transport is not None:
            self.transport.close()


class BrokerChannelError(Exception):
    """The destination could not be reached, or the connection failed during the call."""


class BrokerAuthenticationError(BrokerChannelError):
    """The destination's TLS handshake or SASL login refused this broker (or this broker refused
    the destination's certificate): retrying helps only once the settings are fixed."""


# (destination id, host, port, message) of the authentication failures logged: each is logged
# once, by whichever channel meets it first, until a login to that broker succeeds
_auth_failures_logged: set = set()


class BrokerChannel:
    def __init__(self, node_id, host, port, client_id, connect_timeout=10.0, security=None):
        """``security``: a ClientSecurity for a TLS and/or SASL inter-broker listener, None for
        PLAINTEXT."""
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self.security = security
        self._writer = None  # the connection's transport
        self._pending = {}  # correlation id -> (future, api_key, api_version)
        self._connecting = None
        self._ids = itertools.count(1)
        self.closed = False

    def __repr__(self):
        return f"BrokerChannel({self.node_id} at {self.host}:{self.port})"

    def update_address(self, host, port):
        """A broker that re-registered elsewhere: the next call connects to the new address."""
        if (host, port) != (self.host, self.port):
            self.host, self.port = host, port
            self._drop(BrokerChannelError(f"broker {self.node_id} moved to {host}:{port}"))

    async def _connect(self):
        # a connection still logging in has its transport set but is not ready for requests
        if self._writer is not None and self._connecting is None:
            return
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        connecting = self._connecting
        try:
            await asyncio.shield(connecting)
        finally:
            if self._connecting is connecting and connecting.done():
                self._connecting = None

    def _where(self):
        return f"broker {self.node_id} at {self.host}:{self.port}"

    async def _open(self):
        loop = asyncio.get_running_loop()
        sec = self.security
        tls = {}
        if sec is not None and sec.tls:
            tls = {"ssl": sec.ssl_context, "server_hostname": self.host if sec.check_hostname else None,
                   "ssl_handshake_timeout": self.connect_timeout}
        try:
            transport, protocol = await asyncio.wait_for(
                loop.create_connection(lambda: FrameReceiver(self._on_frame, self._on_lost), self.host, self.port,
                                       **tls),
                self.connect_timeout)
        except (ssl.SSLError, ssl.CertificateError) as e:
            why = getattr(e, "verify_message", None) or getattr(e, "reason", None) or e.__class__.__name__
            raise self._auth_failed(f"TLS handshake with {self._where()} failed: {why}") from None
        except (OSError, asyncio.TimeoutError) as e:
            raise BrokerChannelError(f"cannot connect to {self._where()}: {e or 'timed out'}") from None
        if self.closed:
            transport.close()
            raise BrokerChannelError("channel closed")
        self._writer = transport
        if sec is not None and sec.sasl:
            await self._login(transport)
        if _auth_failures_logged:
            _auth_failures_logged.difference_update(
                [k for k in _auth_failures_logged if k[:3] == (self.node_id, self.host, self.port)])

    async def _login(self, transport):
        """SaslHandshake and SaslAuthenticate on the new connection, through the clients' login
        exchange (ClientSecurity.login_requests); requests wait until it is done."""
        from ..errors import KafkaError

        sec = self.security
        steps = sec.login_requests(self._where(), 2)
        response = None
        try:
            while True:
                try:
                    api_key, version, body = steps.send(response)
                except StopIteration:
                    return
                response = await self._send(api_key, version, body, self.connect_timeout)
        except (KafkaError, ValueError) as e:  # refused: UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED...
            if transport is self._writer:
                self._drop(BrokerChannelError(f"login to {self._where()} refused"))
            message = getattr(e, "message", None) or str(e)
            raise self._auth_failed(f"SASL login to {self._where()} as {sec.username!r} with {sec.mechanism} over "
                                    f"{sec.protocol.upper()} failed: {message}") from None

    def _auth_failed(self, message) -> BrokerAuthenticationError:
        key = (self.node_id, self.host, self.port, message)
        if key not in _auth_failures_logged:
            _auth_failures_logged.add(key)
            log.error("%s (retrying; logged once until a login works)", message)
        return BrokerAuthenticationError(message)

    def _on_frame(self, receiver, frame):
        if receiver.transport is not self._writer:
            return  # a connection already dropped
        (correlation_id,) = _size.unpack_from(frame)
        entry = self._pending.pop(correlation_id, None)
        if entry is None:
            self._drop(BrokerChannelError(f"broker {self.node_id} answered unknown correlation id {correlation_id}"))
            return
        fut, api_key, version = entry
        if fut.done():
            return
        try:
            _cid, body = decode_response(api_key, version, frame, strict=False)
        except ProtocolDecodeError as e:
            fut.set_exception(BrokerChannelError(f"malformed response from broker {self.node_id}: {e}"))
            return
        fut.set_result(body)

    def _on_lost(self, receiver, why):
        if receiver.transport is self._writer:
            self._drop(BrokerChannelError(f"connection to broker {self.node_id} lost: {why}"))

    def _drop(self, exc):
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        pending, self._pending = self._pending, {}
        for fut, _k, _v in pending.values():
            if not fut.done():
                fut.set_exception(exc)

    async def call(self, api_key, version, body, timeout=30.0):
        """The response object, or BrokerChannelError."""
        if self.closed:
            raise BrokerChannelError("channel closed")
        await self._connect()
        return await self._send(api_key, version, body, timeout)

    async def _send(self, api_key, version, body, timeout):
        if self._writer is None:
            raise BrokerChannelError(f"connection to broker {self.node_id} lost")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        frame = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id), body)
        fut = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (fut, api_key, version)
        self._writer.write(frame)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            # the connection's order is broken for us: start over on a fresh one
            self._drop(BrokerChannelError(f"request to broker {self.node_id} timed out after {timeout} s"))
            raise BrokerChannelError(f"request {api_key} v{version} to broker {self.node_id} timed out") from None

    def close(self):
        self.closed = True
        self._drop(BrokerChannelError("channel closed"))


class BrokerChannels:
    """The connections a broker opens to other live brokers for the coordinators' requests
    (WriteTxnMarkers from a transaction coordinator, AddPartitionsToTxn verification from a
    partition leader): one per destination, at the address the metadata cache lists now."""

    def __init__(self, node_id, metadata_cache, security=None):
        """``security``: how this broker dials the others' inter-broker listener (a ClientSecurity
        for TLS and SASL; None for PLAINTEXT). Every connection to another broker is made by
        ``open``, with it: the coordinators' here, the replica fetchers', the controller's and a
        controlled shutdown's."""
        self.node_id = node_id
        self.metadata_cache = metadata_cache
        self.security = security
        self._channels: dict[int, BrokerChannel] = {}
        # this broker's requests to itself, without a socket (broker/local_channel.py): set by
        # the broker, which owns the handlers
        self.local = None

    def channel(self, node_id) -> BrokerChannel | None:
        """None when the metadata does not list ``node_id`` as live. Follows a broker that
        re-registered at another address; this broker itself is reached through ``local``."""
        if node_id == self.node_id and self.local is not None:
            return self.local
        ep = self.metadata_cache.brokers.get(node_id)
        if ep is None:
            return None
        ch = self._channels.get(node_id)
        if ch is None or ch.closed:
            ch = self._channels[node_id] = self.open(node_id, ep.host, ep.port, client_id=f"broker-{self.node_id}-txn")
        else:
            ch.update_address(ep.host, ep.port)
        return ch

    def open(self, node_id, host, port, client_id, connect_timeout=10.0) -> BrokerChannel:
        """A new channel to another broker's inter-broker endpoint, with this broker's security."""
        return BrokerChannel(node_id, host, port, client_id=client_id, connect_timeout=connect_timeout,
                             security=self.security)

    def close(self):
        for ch in self._channels.values():
            ch.close()
        self._channels.clear()
        if self.local is not None:
            self.local.close()
