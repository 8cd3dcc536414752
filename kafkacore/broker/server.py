"""The network layer: an asyncio server speaking Kafka's framing.

One ``Connection`` per client socket:
- reads into a reusable buffer (``asyncio.BufferedProtocol``: no copy per read); a frame larger
  than the buffer gets a buffer of its own, so a 1 MiB produce request is received straight into
  the bytes it is decoded from;
- a frame above ``socket.request.max.bytes``, a negative size, or a request that does not decode
  closes the connection with a log line (Kafka does the same); nothing a client sends raises out
  of here;
- requests are handled in arrival order. A handler returns a response, None (acks=0 produce)
  or an awaitable (a long-poll fetch, a JoinGroup waiting for the rebalance). Responses leave
  in request order: a ready response behind a pending one waits for it, and a slow request
  blocks only its own connection;
- one accept loop per listener (``listeners``: PLAINTEXT or SSL, any names; connection_quotas.py's
  Acceptor, which stops accepting at Kafka's connection limits); a connection counts in the
  limits until it closes, however that happens (``_forget``), and after a failed login it
  is muted and closed connection.failed.authentication.delay.ms later; each connection
  knows its ``Listener`` and, once authenticated, its principal (broker/security.py), and hands
  both to the handlers in the RequestContext;
- an SSL listener's connection starts with the TLS handshake (``loop.start_tls``, bounded by
  ``request.timeout.ms``); one that fails or stalls is closed with one log line and costs the
  others nothing; the client certificate's name, through ``ssl.principal.mapping.rules``, is
  the principal (User:ANONYMOUS without a certificate, and on plaintext);
- record data held in segment files goes out with ``os.sendfile`` straight from the page cache
  (slices below SENDFILE_MIN_BYTES are read and written instead: one pread is cheaper than the
  sendfile set-up for a few kilobytes); under TLS the bytes must be encrypted in this process,
  so they are read in TLS_READ_BYTES pieces and written through the TLS transport (the kernel
  has no TLS offload here: see docs/security.md on kTLS);
- when more than MAX_PENDING responses are waiting, reading pauses until they drain, and while
  the socket's send buffer is full the writer waits (flow control both ways);
- a request begun and not finished (a size announced, its bytes stalled) for
  ``request.timeout.ms`` (30 s) closes the connection, so a stalled or hostile client does not hold
  a buffer of up to socket.request.max.bytes for ever; a connection with no traffic and nothing
  pending for ``connections.max.idle.ms`` is closed too (Kafka's idle expiry, default 10 min);
- with metrics on (``KafkaServer.metrics``, broker/metrics.py) every request answered is counted with
  its time from arrival to the response handed to the socket, and a Fetch response's record
  bytes as bytes out; with metrics off each request only tests ``self.metrics`` for None.
"""
from __future__ import annotations

import asyncio
import collections
import errno
import itertools
import logging
import os
import socket
import struct
from time import monotonic, perf_counter

from ..errors import KafkaError, UnsupportedVersionError
from ..protocol.api_table import API_TABLE, ApiKey
from ..protocol.frames import decode_request, encode_response, peek_header
from ..protocol.wire import ProtocolDecodeError, Writer
from .config import served_group_protocols
from .connection_quotas import Acceptor, ConnectionQuotas
from .handlers import HANDLERS, api_versions
from .quotas import EXEMPT_APIS, ClientQuotaSensors
from .request import RequestContext
from .sasl_authenticator import SaslAuthenticator
from .security import ANONYMOUS, NoMatchingRule

log = logging.getLogger("kafkacore.broker")

# what a starting broker serves at once: its controller's requests (its start waits for them),
# and the SASL login that comes before them on a SASL inter-broker listener (SaslAuthenticate
# once the credentials are loaded: before that a login would be refused as invalid)
STARTUP_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA,
                          ApiKey.CONTROLLED_SHUTDOWN, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})

READ_BUFFER_BYTES = 256 * 1024
EXPIRY_CHECK_S = 1.0  # how often connections are checked for a stalled request or idleness
IDLE = "idle"  # Connection.expiry's answer for a connection with nothing going on
SENDFILE_MIN_BYTES = 64 * 1024
TLS_READ_BYTES = 256 * 1024  # a slice read for the TLS transport: big enough to keep pread calls few
MAX_PENDING = 256
_size = struct.Struct(">i")
_ids = itertools.count(1)


class _SliceFile:
    """What loop.sendfile wants of a file: fileno() and seek() (the position is ours)."""

    __slots__ = ("fd",)

    def __init__(self, fd):
        self.fd = fd

    def fileno(self):
        return self.fd

    def seek(self, *_args):
        return 0


class Listener:
    """What a connection knows of the listener it came in on (Kafka's ListenerName and
    SecurityProtocol); ``tls`` is its broker/tls.ListenerTls, None on PLAINTEXT."""

    __slots__ = ("name", "security_protocol", "tls", "sasl")

    def __init__(self, name, security_protocol="PLAINTEXT", tls=None, sasl=None):
        self.name = name
        self.security_protocol = security_protocol
        self.tls = tls
        self.sasl = sasl  # broker/sasl_authenticator.ListenerSasl on SASL_PLAINTEXT and SASL_SSL

    def __repr__(self):
        return f"Listener({self.name}, {self.security_protocol})"


class Connection(asyncio.BufferedProtocol):
    def __init__(self, server, listener, counted_address=None):
        self.server = server
        self.listener = listener
        # the address this connection counts under in the server's connection_quotas until it
        # gives its place back (_forget); None: not counted
        self.counted_address = counted_address
        self.delayed_close = None  # the timer of a close after a failed login
        self.principal = ANONYMOUS
        self.sasl = None  # a SaslAuthenticator on a SASL listener (made when the peer is known)
        self.handshake_task = None
        # bytes the TLS layer decrypts in the same turn as the handshake's end arrive before
        # start_tls hands over the TLS transport: they are kept, and parsed once it has
        self.handshaking = listener.tls is not None
        self.broker = server.broker
        self.metrics = server.broker.metrics  # None unless metrics.port is set
        self.max_request = server.broker.config["socket.request.max.bytes"]
        self.id = next(_ids)
        self.transport = None
        self.peer = "?"
        self.buf = bytearray(READ_BUFFER_BYTES)
        self.view = memoryview(self.buf)
        self.start = 0  # first unparsed byte in buf
        self.end = 0  # end of received bytes in buf
        self.big = None  # a frame larger than buf, being received: (bytearray, received)
        # [api_key, version, correlation_id, request, response, entry, arrival time (perf_counter)]
        self.pending = collections.deque()
        self.writer_task = None
        self.can_write = asyncio.Event()
        self.can_write.set()
        self.reading_paused = False
        self.closed = False
        self.last_read = monotonic()  # when bytes last arrived (the expiry sweep reads it)
        # client quotas (broker/quotas.py): the broker's quota configs, this connection's sensors
        # once a quota is set anywhere, and the mute: while a throttle runs no request is read
        self.quota_configs = server.broker.quota_configs
        self.quotas = None
        self.unmute_handle = None
        self.held_frame = None  # a large frame completed while muted, handled at the unmute

    # -- connection events ------------------------------------------------------------------
    def connection_made(self, transport):
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.server.connections.add(self)
        if self.listener.sasl is not None:
            self.sasl = SaslAuthenticator(self.listener.sasl, self.peer)
        if self.listener.tls is not None:
            transport.pause_reading()  # the ClientHello is for the TLS layer, not for the framing
            self.handshake_task = asyncio.ensure_future(self._handshake(transport))

    async def _handshake(self, transport):
        loop = asyncio.get_running_loop()
        timeout_s = self.broker.config["request.timeout.ms"] / 1000
        try:
            tls_transport = await loop.start_tls(transport, self, self.listener.tls.context, server_side=True,
                                                 ssl_handshake_timeout=timeout_s)
        except asyncio.CancelledError:
            transport.abort()
            self._forget()
            raise
        except (OSError, ConnectionError, asyncio.TimeoutError) as e:  # ssl.SSLError is an OSError
            if not self.closed:
                log.info("connection %d from %s on listener %s: TLS handshake failed: %s", self.id, self.peer,
                         self.listener.name, _one_line(e))
            self.closed = True
            transport.abort()
            self._forget()  # a failed handshake never reaches connection_lost
            return
        if self.closed:
            tls_transport.abort()
            self._forget()
            return
        self.transport = tls_transport
        try:
            self.principal = self.listener.tls.principal_mapper.principal(tls_transport.get_extra_info("peercert"))
        except NoMatchingRule as e:  # Kafka fails the authentication
            self._close_failed_authentication(f"TLS authentication failed: {e}")
            return
        self.last_read = monotonic()
        log.debug("connection %d from %s on listener %s: TLS %s, principal %s", self.id, self.peer,
                  self.listener.name, tls_transport.get_extra_info("ssl_object").version(), self.principal)
        self.handshaking = False
        if self.end > self.start:
            self._parse_frames()

    def _forget(self):
        """Out of the server's connections, and its place in the connection limits given back
        (once, whichever way the connection ended)."""
        self.server.connections.discard(self)
        address, self.counted_address = self.counted_address, None
        if address is not None:
            self.server.connection_quotas.release(self.listener.name, address)

    def connection_lost(self, exc):
        self.closed = True
        self._forget()
        self.broker.connection_closed(self.id)
        if self.delayed_close is not None:
            self.delayed_close.cancel()
        for item in self.pending:
            resp = item[4]
            if isinstance(resp, asyncio.Future) and not resp.done():
                resp.cancel()
        self.pending.clear()
        if self.writer_task is not None:
            self.writer_task.cancel()
        if self.unmute_handle is not None:
            self.unmute_handle.cancel()
            self.unmute_handle = None

    def pause_writing(self):
        self.can_write.clear()

    def resume_writing(self):
        self.can_write.set()

    def close(self, reason: str, level=logging.WARNING):
        if not self.closed:
            log.log(level, "closing connection %d from %s: %s", self.id, self.peer, reason)
            self.closed = True
            self.transport.abort()

    # -- reading ----------------------------------------------------------------------------
    def get_buffer(self, sizehint):
        if self.big is not None:
            frame, got = self.big
            return memoryview(frame)[got:]
        if self.end == len(self.buf):
            self._compact()
        return self.view[self.end:]

    def _compact(self):
        n = self.end - self.start
        if self.start:
            self.buf[:n] = self.buf[self.start:self.end]
        self.start, self.end = 0, n

    def buffer_updated(self, nbytes):
        self.last_read = monotonic()
        if self.big is not None:
            frame, got = self.big
            got += nbytes
            if got < len(frame):
                self.big = (frame, got)
                return
            self.big = None
            if self.unmute_handle is not None:
                self.held_frame = frame
                return
            self._on_frame(frame)
            return
        self.end += nbytes
        if not self.handshaking:
            self._parse_frames()

    def _parse_frames(self):
        buf = self.buf
        while not self.closed and self.unmute_handle is None:
            avail = self.end - self.start
            if avail < 4:
                break
            size = _size.unpack_from(buf, self.start)[0]
            if size < 0 or size > self.max_request:
                self.close(f"request size {size} is outside 0..socket.request.max.bytes={self.max_request}")
                return
            if self.sasl is not None and not self.sasl.authenticated and size > self.sasl.listener.max_receive_size:
                # before the login an unknown peer must not make the broker allocate (KIP-541)
                self.close(f"a {size}-byte frame before the SASL login completed (sasl.server.max.receive.size="
                           f"{self.sasl.listener.max_receive_size})")
                return
            if avail - 4 >= size:
                s = self.start + 4
                frame = bytearray(self.view[s:s + size])  # writable: records are appended from it in place
                self.start = s + size
                self._on_frame(frame)
                continue
            if size + 4 > len(buf):
                # too big for the shared buffer: receive the rest straight into its own bytes
                frame = bytearray(size)
                have = avail - 4
                frame[:have] = self.view[self.start + 4:self.end]
                self.start = self.end = 0
                self.big = (frame, have)
            elif self.start + 4 + size > len(buf):
                self._compact()
            break
        if self.start == self.end:
            self.start = self.end = 0

    def expiry(self, now, stalled_s, idle_s):
        """Why this connection should be closed now, or None: a request begun and stalled for
        ``stalled_s`` (a client that stopped mid-request has given up on its answer), or no
        traffic and nothing pending for ``idle_s`` (None: no idle limit)."""
        if self.unmute_handle is not None:
            return None  # muted by a quota: its unread bytes are not stalled
        quiet = now - self.last_read
        if (self.big is not None or self.end > self.start) and quiet > stalled_s:
            got = self.big[1] if self.big is not None else self.end - self.start
            want = len(self.big[0]) if self.big is not None else None
            return (f"a request stalled for {quiet:.0f} s (request.timeout.ms) after {got} bytes"
                    + (f" of {want}" if want is not None else ""))
        if idle_s is not None and quiet > idle_s and not self.pending and self.can_write.is_set():
            return IDLE
        return None

    # -- dispatch ---------------------------------------------------------------------------
    def _on_frame(self, frame):
        t0 = perf_counter() if self.metrics is not None else 0.0
        sasl = self.sasl
        if sasl is not None and sasl.raw_tokens:
            self._on_raw_sasl_token(frame)
            return
        try:
            api_key, version, correlation_id = peek_header(frame)
        except ProtocolDecodeError as e:
            self.close(str(e))
            return
        if sasl is not None and not sasl.permits(api_key):
            self.close(f"SASL: {sasl.why_refused(api_key)}")
            return
        entry = HANDLERS.get(api_key)
        if entry is not None and entry.cluster_only and not self.broker.cluster.serves_inter_broker_apis:
            entry = None  # an inter-broker API on a single node: not served
        if entry is not None and entry.group_protocol is not None \
                and entry.group_protocol not in served_group_protocols(self.broker.config):
            entry = None  # a group protocol switched off
        if entry is None or not entry.min_version <= version <= entry.max_version:
            self._unsupported(frame, api_key, version, correlation_id, entry, t0)
            return
        try:
            header, request = decode_request(frame)
        except (ProtocolDecodeError, KeyError) as e:
            self.close(f"malformed request (api key {api_key}, version {version}): {e}")
            return
        quotas = None
        if self.quota_configs.active and api_key not in EXEMPT_APIS:
            quotas = self._quotas(sasl, header)
            if quotas.any:
                quotas.before(api_key, request, version)
            tq = perf_counter()
        ctx = RequestContext(self.broker, header, self.peer, self.id, self.listener.name,
                             self.listener.security_protocol,
                             sasl.principal if sasl is not None and sasl.authenticated else self.principal, sasl,
                             quotas=quotas)
        try:
            if self.broker.started or (api_key in STARTUP_APIS and (api_key != ApiKey.SASL_AUTHENTICATE
                                                                    or self.broker.credentials_loaded)):
                response = entry.handle(ctx, request)
            elif api_key == ApiKey.SASL_AUTHENTICATE:
                response = self._once_started(entry, ctx, request, version, self.broker.wait_credentials_loaded)
            else:
                response = self._once_started(entry, ctx, request, version)
        except Exception as e:  # noqa: BLE001 - a handler bug must not take the broker down
            response = self._error_response(entry, request, version, e)
            if response is None:
                self.close(f"{entry.name} v{version} failed: {e!r}")
                return
        if quotas is not None:
            response = quotas.after(ctx, api_key, request, response, len(frame), perf_counter() - tq, self.mute)
        if response is None:  # acks=0
            if self.metrics is not None:
                self.metrics.request_done(api_key, version, request, None, t0)
            return
        if asyncio.isfuture(response) or asyncio.iscoroutine(response):
            response = asyncio.ensure_future(response)
        elif not self.pending:
            # the common case: answered at once, nothing queued ahead
            self._write_ready(api_key, version, correlation_id, request, response, entry, t0)
            if sasl is not None and sasl.failed:
                self._close_failed_authentication("the SASL login failed")
            return
        self.pending.append([api_key, version, correlation_id, request, response, entry, t0])
        if self.writer_task is None or self.writer_task.done():
            self.writer_task = asyncio.ensure_future(self._drain())
        if len(self.pending) > MAX_PENDING and not self.reading_paused:
            self.reading_paused = True
            if self.unmute_handle is None:
                self.transport.pause_reading()

    def _quotas(self, sasl, header):
        """This connection's ClientQuotaSensors, resolved for the request's principal and client id."""
        quotas = self.quotas
        if quotas is None:
            quotas = self.quotas = ClientQuotaSensors(self.broker.quotas)
        principal = sasl.principal if sasl is not None and sasl.authenticated else self.principal
        quotas.resolve(principal.name, header.client_id or "")
        return quotas

    def mute(self, ms):
        """Reads no request for ``ms`` (a quota's throttle, KIP-219); responses already on their
        way still go. A longer throttle given meanwhile extends it."""
        if self.closed:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + ms / 1000
        handle = self.unmute_handle
        if handle is not None:
            if handle.when() >= until:
                return
            handle.cancel()
        elif not self.reading_paused:
            self.transport.pause_reading()
        self.unmute_handle = loop.call_at(until, self._unmute)

    def _unmute(self):
        self.unmute_handle = None
        if self.closed:
            return
        if not self.reading_paused:
            self.transport.resume_reading()
        self.last_read = monotonic()  # the time muted is not the client's silence
        frame, self.held_frame = self.held_frame, None
        if frame is not None:
            self._on_frame(frame)
        if not self.handshaking and self.big is None:
            self._parse_frames()

    def _on_raw_sasl_token(self, frame):
        """A SASL token after a v0 SaslHandshake: no Kafka header, answered size-prefixed; a
        failed login closes the connection (v0 has no way to say why)."""
        try:
            answer = self.sasl.raw_token(bytes(frame))
        except KafkaError as e:
            log.info("connection %d from %s: SASL login failed: %s", self.id, self.peer, e.message)
            self._close_failed_authentication("the SASL login failed")  # v0 has no way to say why
            return
        self.transport.write(_size.pack(len(answer)) + answer)

    def _close_failed_authentication(self, reason):
        """Kafka's delayed close after a failed authentication: what was written (the failure's
        answer) goes, nothing more is read, and the connection closes after
        connection.failed.authentication.delay.ms, so a client retrying a password cannot do it
        at the rate of the network (the event loop serves the others meanwhile). A failed
        re-authentication closes at once, as in Kafka (that client did log in once)."""
        if self.closed:
            return
        self.closed = True
        delay_s = self.server.failed_authentication_delay_s
        if self.sasl is not None and self.sasl.authenticated:
            delay_s = 0
        log.info("closing connection %d from %s: %s%s", self.id, self.peer, reason,
                 f" (in {delay_s * 1000:.0f} ms: connection.failed.authentication.delay.ms)" if delay_s else "")
        if delay_s <= 0:
            self.transport.close()
            return
        self.transport.pause_reading()
        self.delayed_close = asyncio.get_running_loop().call_later(delay_s, self.transport.close)

    async def _once_started(self, entry, ctx, request, version, wait=None):
        """A client's request that came while the broker was starting: handled once it is in
        its cluster (Kafka's broker only starts processing requests then); the controller's
        requests are not held (the start waits for them). ``wait``: what to wait for instead
        (a SASL login: the credentials)."""
        await (wait or self.broker.wait_started)()
        try:
            response = entry.handle(ctx, request)
            if asyncio.isfuture(response) or asyncio.iscoroutine(response):
                response = await response
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - answered as any handler's failure
            response = self._error_response(entry, request, version, e)
        return response

    def _error_response(self, entry, request, version, exc):
        code = exc.code if isinstance(exc, KafkaError) else -1
        if not isinstance(exc, KafkaError):
            log.exception("%s v%d failed", entry.name, version, exc_info=exc)
        if entry.error_response is None:
            return None
        try:
            return entry.error_response(request, version, code)
        except Exception:  # noqa: BLE001
            log.exception("building the error response of %s failed", entry.name)
            return None

    def _unsupported(self, frame, api_key, version, correlation_id, entry, t0):
        """A request this broker does not serve, answered as Kafka answers it:
        - ApiVersions above what we speak: a v0 response with UNSUPPORTED_VERSION and our ranges
          (KIP-511: clients then retry with a version we have);
        - a version we advertise but refuse (Produce v0-2, see handlers/produce.py): that
          version's response with UNSUPPORTED_VERSION;
        - any other API key or version (not in ApiVersions): Kafka's SocketServer rejects the
          header as an invalid request and closes the connection; so do we. (A bare error code
          after the correlation id, as this broker once sent, is no response any client can
          parse.)"""
        if api_key == api_versions.API_KEY:
            log.info("connection %d from %s: ApiVersions v%d is not supported, answering v0", self.id, self.peer,
                     version)
            body = api_versions.response(
                UnsupportedVersionError.code, 0, clustered=self.broker.cluster.serves_inter_broker_apis,
                group_protocols=served_group_protocols(self.broker.config))
            self._write(encode_response(api_key, 0, correlation_id, body, header_version=0).parts())
            if self.metrics is not None:
                self.metrics.request_done(api_key, 0, None, None, t0)  # answered in v0
            return
        table = API_TABLE.get(api_key)
        if (entry is not None and entry.error_response is not None and entry.advertised_min <= version
                and table and table[4] <= version <= table[5]):
            try:
                _header, request = decode_request(frame)
                body = entry.error_response(request, version, UnsupportedVersionError.code)
                self._queue_or_write(api_key, version, correlation_id, request, body, entry, t0)
                return
            except (ProtocolDecodeError, KeyError) as e:
                self.close(f"malformed request (api key {api_key}, version {version}): {e}")
                return
        name = table[0] if table else "unknown"
        served = f"versions {entry.advertised_min}-{entry.max_version}" if entry else "not served"
        self.close(f"api key {api_key} ({name}) version {version} is not enabled on this broker ({served}; "
                   "see ApiVersions)")

    def _queue_or_write(self, api_key, version, correlation_id, request, response, entry, t0):
        if not self.pending:
            self._write_ready(api_key, version, correlation_id, request, response, entry, t0)
        else:
            self.pending.append([api_key, version, correlation_id, request, response, entry, t0])

    # -- writing ----------------------------------------------------------------------------
    def _encode(self, api_key, version, correlation_id, response):
        if isinstance(response, Writer):
            return response
        return encode_response(api_key, version, correlation_id, response)

    def _write_ready(self, api_key, version, correlation_id, request, response, entry, t0):
        try:
            w = self._encode(api_key, version, correlation_id, response)
        except Exception as e:  # noqa: BLE001
            log.exception("encoding a %s v%d response failed", API_TABLE.get(api_key, ("?",))[0], version)
            self.close(f"could not encode a response: {e!r}")
            return
        if w.chunks is None:
            self.transport.write(w.buf)
            if self.metrics is not None:
                self.metrics.request_done(api_key, version, request, response, t0)
            return
        if w.size_before + len(w.buf) < SENDFILE_MIN_BYTES and not self.pending:
            # a small fetch response: one write of header, records and tail together
            self.transport.write(b"".join(p if isinstance(p, (bytes, bytearray, memoryview)) else p.read()
                                          for p in w.parts()))
            if self.metrics is not None:
                self.metrics.request_done(api_key, version, request, response, t0)
            return
        if self.metrics is not None and api_key == ApiKey.FETCH and not isinstance(response, Writer):
            self.metrics.fetch_response(request, version, response)  # its time once sent, in _drain
        self.pending.append([api_key, version, correlation_id, request, w, entry, t0])
        if self.writer_task is None or self.writer_task.done():
            self.writer_task = asyncio.ensure_future(self._drain())

    def _write(self, parts):
        for p in parts:
            self.transport.write(p)

    async def _drain(self):
        try:
            while self.pending and not self.closed:
                api_key, version, correlation_id, request, response, entry, t0 = self.pending[0]
                if isinstance(response, asyncio.Future):
                    try:
                        response = await response
                    except asyncio.CancelledError:
                        if self.closed:
                            return
                        raise
                    except Exception as e:  # noqa: BLE001
                        response = self._error_response(entry, request, version, e)
                        if response is None:
                            self.close(f"{entry.name} v{version} failed: {e!r}")
                            return
                    if response is None:
                        self.pending.popleft()
                        if self.metrics is not None:
                            self.metrics.request_done(api_key, version, request, None, t0)
                        continue
                w = self._encode(api_key, version, correlation_id, response)
                parts = w.parts()
                if w.chunks is not None and len(w) < SENDFILE_MIN_BYTES:
                    parts = [b"".join(p if isinstance(p, (bytes, bytearray, memoryview)) else p.read() for p in parts)]
                for part in parts:
                    if not self.can_write.is_set():
                        await self.can_write.wait()
                    if self.closed:
                        return
                    if isinstance(part, (bytes, bytearray, memoryview)):
                        if len(part):
                            self.transport.write(part)
                    else:
                        await self._send_slice(part)
                self.pending.popleft()
                if self.sasl is not None and self.sasl.failed and not self.pending:
                    self._close_failed_authentication("the SASL login failed")
                    return
                if self.metrics is not None:
                    # a Writer here was made by _write_ready, which counted its record bytes
                    self.metrics.request_done(api_key, version, request, response if w is not response else None,
                                              t0)
                if self.reading_paused and len(self.pending) < MAX_PENDING // 2:
                    self.reading_paused = False
                    if self.unmute_handle is None:  # a quota's mute resumes reading itself
                        self.transport.resume_reading()
        except (ConnectionError, OSError) as e:
            self.close(f"send failed: {e}")
        except asyncio.CancelledError:
            pass
        except Exception as e:  # noqa: BLE001
            log.exception("connection %d: writing a response failed", self.id)
            self.close(f"writing a response failed: {e!r}")

    async def _send_slice(self, sl):
        length = len(sl)
        if length == 0:
            return
        if length < SENDFILE_MIN_BYTES:
            self.transport.write(sl.read())
            return
        if self.listener.tls is not None:
            await self._send_slice_through_tls(sl)
            return
        sent = 0
        if self.transport.get_write_buffer_size() == 0:
            # fast path: nothing buffered ahead, so the kernel can take the slice now
            sock = self.transport.get_extra_info("socket")
            try:
                while sent < length:
                    n = sl.sendfile(sock.fileno(), sent, length - sent)
                    if n == 0:
                        raise ConnectionError("socket closed during sendfile")
                    sent += n
            except BlockingIOError:
                pass
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                    raise
        if sent < length:
            loop = asyncio.get_running_loop()
            await loop.sendfile(self.transport, _SliceFile(sl.fileno()), sl.position + sent, length - sent,
                                fallback=True)


    async def _send_slice_through_tls(self, sl):
        """A slice read in pieces and written through the TLS transport, which encrypts it
        (sendfile would send the file's bytes in clear past the TLS layer); the transport's
        flow control paces the reads."""
        pos, end = sl.position, sl.position + len(sl)
        fd = sl.fileno()
        while pos < end:
            if not self.can_write.is_set():
                await self.can_write.wait()
            if self.closed:
                return
            chunk = os.pread(fd, min(end - pos, TLS_READ_BYTES), pos)
            if not chunk:  # the response's size is already sent: a short slice cannot be answered
                raise ConnectionError(f"segment file ended {end - pos} bytes before the fetched slice")
            self.transport.write(chunk)
            pos += len(chunk)


def _one_line(exc) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def bind_listener(host, port):
    """A socket bound to host:port (SO_REUSEADDR, as create_server sets it), not yet listening:
    `kafkacore serve` binds before it opens the data directory, so a port in use touches no
    file. Raises OSError."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, kind, proto, _name, addr = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
    except BaseException:
        sock.close()
        raise
    return sock


class SocketServer:
    """Listens on every listener and serves the broker's handlers (Kafka's SocketServer)."""

    def __init__(self, broker):
        self.broker = broker
        self.connections = set()
        self.servers = {}  # listener name -> its connection_quotas.Acceptor
        self._expiry_task = None
        # max.connections and the other limits (Kafka's ConnectionQuotas, connection_quotas.py)
        self.connection_quotas = ConnectionQuotas(broker.config)
        self.connection_quotas.on_over_broker_limit = self._make_room
        broker.connection_quotas = self.connection_quotas  # dynamic configs reconfigure it
        self.failed_authentication_delay_s = broker.config["connection.failed.authentication.delay.ms"] / 1000

    async def start(self, host=None, port=None, sock=None, listener=None):
        """Serves one listener on host:port, or on ``sock`` already bound by bind_listener;
        returns the bound (host, port). ``listener``: a Listener; by default the broker's primary
        listener's name over PLAINTEXT (the embedded broker's socket)."""
        if listener is None:
            listener = Listener(self.broker.config.primary_listener_name)
        loop = asyncio.get_running_loop()
        if sock is None:
            sock = bind_listener(host, port)
        self.connection_quotas.add_listener(listener.name)
        # our own accept loop, not loop.create_server: the connection limits must be able to stop accepting
        server = Acceptor(sock, listener.name, self.connection_quotas,
                          lambda address: Connection(self, listener, address))
        server.start()
        self.servers[listener.name] = server
        if self._expiry_task is None:
            self._expiry_task = loop.create_task(self._expire_connections())
        return server.sockets[0].getsockname()[:2]

    def _make_room(self, listener_name):
        """An inter-broker connection took the broker over max.connections: the least recently
        active connection of another listener makes room (Kafka's KIP-402)."""
        others = [c for c in self.connections if c.listener.name != listener_name and not c.closed]
        if others:
            victim = min(others, key=lambda c: c.last_read)
            victim.close(f"making room for an inter-broker connection on listener {listener_name} "
                         f"(max.connections={self.connection_quotas.max_connections})", logging.INFO)

    async def _expire_connections(self):
        idle_ms = self.broker.config["connections.max.idle.ms"]
        idle_s = idle_ms / 1000 if idle_ms >= 0 else None
        stalled_s = self.broker.config["request.timeout.ms"] / 1000
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            now = monotonic()
            for conn in list(self.connections):
                why = conn.expiry(now, stalled_s, idle_s)
                if why is IDLE:  # routine, as in Kafka: not worth a warning
                    conn.close(f"idle for over {idle_ms} ms (connections.max.idle.ms)", logging.INFO)
                elif why is not None:
                    conn.close(why)

    async def stop(self):
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            self._expiry_task = None
        for server in self.servers.values():
            server.close()
        for conn in list(self.connections):
            if conn.handshake_task is not None:
                conn.handshake_task.cancel()
            if conn.transport is not None:
                conn.transport.abort()
        for server in self.servers.values():
            await server.wait_closed()
