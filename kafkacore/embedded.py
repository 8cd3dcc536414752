"""kafkacore.Broker: the broker in-process, with producers and consumers that need no socket.

    with Broker("/path/to/data", config={"num.partitions": 3}) as broker:
        broker.create_topic("events", partitions=6)
        p = broker.producer({"linger.ms": 5})       # kafkacore.Producer, appending directly
        c = broker.consumer({"group.id": "g"})      # kafkacore.Consumer, reading directly
        broker.serve("127.0.0.1", 9092)             # optional: network clients too

With ``listeners`` (and ``ssl.*``, ``sasl.*``, ``authorizer.class.name``...) in its config,
``broker.serve()`` serves those listeners with their security, as ``kafkacore serve`` does. The
embedded clients reach no listener: they act as ``User:ANONYMOUS``, so with an authorizer they
need ACLs for it (or it in ``super.users``, on a broker whose listeners all authenticate).

The broker core (storage, group coordinator, producer ids) runs on an asyncio loop in a
background thread, exactly as ``kafkacore serve`` runs it. Embedded clients are the same
Producer and Consumer classes; instead of a TCP connection they hold an EmbeddedConnection,
which hands request objects straight to the broker's handlers on that loop and gets response
objects back: no encoding, no socket, no copy of the record batches. Because they go through
the same handlers, storage and group coordinator as network requests, an external kcat sees
what an embedded producer wrote, embedded and network consumers share groups and committed
offsets, and idempotence and every broker check apply to both.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import os
import select
import threading
import time
from collections import deque

from .broker.handlers import HANDLERS, served_by
from .broker.request import RequestContext
from .client.cluster import Cluster
from .client.connection import ConnectionClosed, pick_version
from .errors import KafkaError, KafkaTimeoutError
from .protocol.api_table import ApiKey
from .protocol.frames import RequestHeader

_connection_ids = itertools.count(1 << 20)


class Broker:
    def __init__(self, path=None, config: dict | None = None):
        from .broker.main import build_config, start_broker

        sets = [f"{k}={v}" for k, v in (config or {}).items()]
        self.config = build_config(sets=sets, data_dir=None if path is None else str(path))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="kafkacore-embedded-broker",
                                        daemon=True)
        self._thread.start()
        self._server = None
        self._closed = False
        try:
            # a single node, as `kafkacore serve` runs one: its own cluster of one, with the
            # metadata store in its data directory and its own controller
            self.core = self.call(start_broker, self.config)
        except BaseException:
            self._stop_loop()
            raise
        try:
            self.call(self.core.attach_loop, self._loop)
            cfg = self.config
            self._run(self.core.cluster.start(self._loop, cfg.advertised_listeners))
        except BaseException:
            self.call(self.core.shutdown)
            self._stop_loop()
            raise
        self.data_dir = self.core.data_dir

    # -- running things on the broker's loop ------------------------------------------------
    def call(self, fn, *args, **kwargs):
        """Runs ``fn`` on the broker's thread and returns its result (or raises its error)."""
        if threading.get_ident() == self._thread.ident:
            return fn(*args, **kwargs)
        fut = concurrent.futures.Future()

        def run():
            try:
                fut.set_result(fn(*args, **kwargs))
            except BaseException as e:  # noqa: BLE001 - handed to the caller
                fut.set_exception(e)
        self._loop.call_soon_threadsafe(run)
        return fut.result()

    def submit(self, fn, *args):
        self._loop.call_soon_threadsafe(fn, *args)

    def _run(self, coro, timeout=60.0):
        """Runs a coroutine on the broker's loop and returns its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    # -- the public API -------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = -1, config: dict | None = None) -> int:
        """Creates a topic (``partitions`` -1: num.partitions) and returns its partition count
        once every partition has its leader. TopicAlreadyExistsError, InvalidTopicError, ... as
        CreateTopics reports them."""
        info = self.call(self.core.create_topic, name, partitions, -1, config)
        if not self._run(self.core.wait_for_topic(name, 30, info.partitions), 35):
            raise KafkaTimeoutError(f"topic {name} was created, but its partitions had no leader within 30 s")
        return info.partitions

    def delete_topic(self, name: str) -> None:
        """Deletes a topic; returns once the broker no longer has it."""
        self.call(self.core.delete_topic, name)
        deadline = time.monotonic() + 30
        while self.call(lambda: name in self.core.topics):
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"topic {name} was marked for deletion, but is still there after 30 s")
            time.sleep(0.01)

    def topics(self) -> dict:
        """{topic: partition count} (internal topics included)."""
        return self.call(lambda: {n: t.partitions for n, t in self.core.topics.items()})

    def producer(self, config: dict | None = None):
        from .client.producer import Producer
        return Producer(config, _embedded=self)

    def consumer(self, config: dict | None = None):
        from .client.consumer import Consumer
        return Consumer(config, _embedded=self)

    def serve(self, host: str | None = None, port: int | None = None) -> tuple[str, int]:
        """Also serves network clients on host:port (default 127.0.0.1:9092; port 0: any free
        one), in plaintext; returns the address. Given no address and a config that names
        ``listeners``, serves those listeners with their security (TLS, SASL, as ``kafkacore
        serve`` does) and returns the first one's address."""
        from .broker.server import SocketServer
        if self._server is not None:
            raise RuntimeError("the broker is already serving")
        if host is None and port is None and "listeners" in self.config.props:
            return self._serve_configured()
        host = "127.0.0.1" if host is None else host
        port = 9092 if port is None else port
        server = SocketServer(self.core)
        bound = asyncio.run_coroutine_threadsafe(server.start(host, port), self._loop).result()
        self._server = server

        def advertise():
            self.config.host, self.config.port = bound[0], bound[1]
            self.config.advertised_host = "127.0.0.1" if bound[0] in ("0.0.0.0", "::", "") else bound[0]
            self.config.advertised_port = bound[1]
        self.call(advertise)
        # the registration says where clients reach it now, and the metadata follows
        self._run(self.core.cluster.update_advertised(self.config.advertised_listeners))
        deadline = time.monotonic() + 30
        while self.call(lambda: (lambda b: b is None or b.port != self.config.advertised_port)(
                self.core.metadata_cache.brokers.get(self.core.node_id))):
            if time.monotonic() > deadline:
                raise KafkaTimeoutError("the broker's metadata did not take its new address within 30 s")
            time.sleep(0.01)
        return bound[0], bound[1]

    def _serve_configured(self) -> tuple[str, int]:
        from .broker.main import _bind_all
        from .broker.sasl_authenticator import server_sasl
        from .broker.server import Listener, SocketServer
        from .broker.tls import server_tls

        cfg = self.config
        tls, sasl = server_tls(cfg), server_sasl(cfg)  # checked (one-line errors) before any port
        for listener_sasl in sasl.values():
            listener_sasl.credential_cache = self.core.credential_cache
        self.core.listener_tls = tls  # dynamic configs may reload their key stores
        try:
            bound = _bind_all(cfg)
        except SystemExit as e:  # the command's exit; in-process it is an error of this call
            raise OSError(str(e)) from None
        server = SocketServer(self.core)
        addresses = []
        for ep, sock in bound:
            listener = Listener(ep.listener_name, ep.security_protocol, tls.get(ep.listener_name),
                                sasl.get(ep.listener_name))
            addresses.append(asyncio.run_coroutine_threadsafe(server.start(sock=sock, listener=listener),
                                                              self._loop).result())
        self._server = server
        return addresses[0]

    def cluster_view(self) -> "EmbeddedCluster":
        return EmbeddedCluster(self)

    def close(self) -> None:
        """Stops serving, then shuts the broker down cleanly (clean-shutdown marker written)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._server is not None:
                asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop).result(30)
            self.call(self.core.shutdown)
        finally:
            self._stop_loop()

    def _stop_loop(self):
        async def cancel_pending():  # long-poll fetches and group waits still parked
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        try:
            asyncio.run_coroutine_threadsafe(cancel_pending(), self._loop).result(10)
        except (concurrent.futures.TimeoutError, RuntimeError):
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(30)
        self._loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class EmbeddedCluster(Cluster):
    """The client's cluster view for embedded clients: every connection is in-process."""

    def __init__(self, embedded: Broker):
        super().__init__([("embedded", 0)], client_id="kafkacore-embedded")
        self.embedded = embedded

    def _any_connection(self):
        if self._conn is None or self._conn.closed:
            self._conn = EmbeddedConnection(self.embedded, self.embedded.core.node_id, self.client_id)
        return self._conn

    def connect(self, node_id: int):
        return EmbeddedConnection(self.embedded, node_id, self.client_id)

    def connect_to(self, host, port, node_id):
        return EmbeddedConnection(self.embedded, node_id, self.client_id)


class EmbeddedConnection:
    """The BrokerConnection interface over direct handler calls on the broker's loop."""

    def __init__(self, embedded: Broker, node_id: int, client_id: str):
        if embedded._closed:
            raise ConnectionClosed("the embedded broker is closed")
        self.embedded = embedded
        self.node_id = node_id
        self.client_id = client_id
        self.host, self.port = "embedded", 0
        self.lock = threading.Lock()
        self.correlation_id = 0
        self.in_flight: dict[int, tuple] = {}
        self.closed = False
        self.connection_id = next(_connection_ids)
        # what ApiVersions would advertise: the same rule as the network server's
        # (group.coordinator.rebalance.protocols, inter-broker APIs on a cluster only)
        self.versions = {k: (e.advertised_min, e.max_version) for k in HANDLERS
                         if (e := served_by(embedded.core, k)) is not None}
        self._done: deque = deque()
        # Guards the pipe against a late answer (a long-poll fetch finishing after close()):
        # writing to a closed descriptor number could hit whatever socket reuses it.
        self._pipe_lock = threading.Lock()
        self._r, self._w = os.pipe()  # readable when a response is ready: works with select()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)

    def __repr__(self):
        return f"<EmbeddedConnection node {self.node_id}>"

    def version(self, api_key: int) -> int:
        return pick_version(self.versions, api_key, "the embedded broker")

    def fileno(self) -> int:
        return self._r

    def send(self, api_key: int, body, version: int | None = None, expect_response: bool = True,
             context=None) -> int:
        if self.closed or self.embedded._closed:
            raise ConnectionClosed("the embedded connection is closed")
        v = self.version(api_key) if version is None else version
        self.correlation_id = (self.correlation_id + 1) & 0x7FFFFFFF
        cid = self.correlation_id
        if expect_response:
            self.in_flight[cid] = (api_key, v, context)
        header = RequestHeader(api_key, v, cid, self.client_id)
        try:
            self.embedded.submit(self._dispatch, header, body, expect_response)
        except RuntimeError as e:  # the broker's loop closed under us: as a failed socket send
            self.in_flight.pop(cid, None)
            self.close()
            raise ConnectionClosed(f"the embedded broker is gone: {e}") from e
        return cid

    # on the broker's loop thread
    def _dispatch(self, header, body, expect_response):
        entry = served_by(self.embedded.core, header.api_key)
        ctx = RequestContext(self.embedded.core, header, "embedded", self.connection_id)
        try:
            if entry is None or not entry.min_version <= header.api_version <= entry.max_version:
                raise KafkaError(f"api key {header.api_key} v{header.api_version} is not served")
            resp = entry.handle(ctx, body)
        except Exception as e:  # noqa: BLE001 - answered like the server answers a failed handler
            code = e.code if isinstance(e, KafkaError) else -1
            resp = entry.error_response(body, header.api_version, code) if entry and entry.error_response else None
            if resp is None:
                self._complete(header.correlation_id, e)
                return
        if not expect_response or resp is None:
            return
        if asyncio.isfuture(resp) or asyncio.iscoroutine(resp):
            fut = asyncio.ensure_future(resp)
            fut.add_done_callback(lambda f, cid=header.correlation_id: None if f.cancelled() else self._complete(
                cid, f.exception() if f.exception() is not None else f.result()))
            return
        self._complete(header.correlation_id, resp)

    def _complete(self, cid, resp):
        with self._pipe_lock:
            if self.closed:
                return
            self._done.append((cid, resp))
            try:
                os.write(self._w, b"x")
            except (BlockingIOError, OSError):
                pass

    def read_responses(self, timeout: float | None = None) -> list:
        if self.closed:
            raise ConnectionClosed("the embedded connection is closed")
        try:
            if not self._done and (timeout is None or timeout > 0):
                select.select([self._r], [], [], timeout)
            while os.read(self._r, 4096):
                pass
        except BlockingIOError:
            pass
        except (OSError, ValueError):  # closed by another thread meanwhile
            raise ConnectionClosed("the embedded connection is closed") from None
        out = []
        while self._done:
            cid, resp = self._done.popleft()
            entry = self.in_flight.pop(cid, None)
            if entry is None:
                continue
            api_key, v, context = entry
            if isinstance(resp, BaseException):
                self.close()
                raise ConnectionClosed(f"the embedded broker failed a request: {resp!r}")
            if api_key == ApiKey.FETCH:
                _materialise_records(resp)
            out.append((context, api_key, v, resp))
        return out

    def call(self, api_key: int, body, version: int | None = None, timeout: float = 30.0):
        with self.lock:
            self.send(api_key, body, version=version)
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KafkaTimeoutError(f"the embedded broker did not answer in {timeout:.1f} s")
                got = self.read_responses(left)
                if got:
                    return got[0][3]

    def close(self):
        with self._pipe_lock:
            if self.closed:
                return
            self.closed = True
            for fd in (self._r, self._w):
                try:
                    os.close(fd)
                except OSError:
                    pass


def _materialise_records(resp):
    """Fetch responses hold file slices (sent with sendfile on a socket): read them here, on
    the consumer's thread, so the broker's loop never waits on the disk for an embedded read."""
    for t in resp.responses:
        for p in t.partitions:
            r = p.records
            if r is not None and hasattr(r, "sendfile"):
                p.records = memoryview(r.read_buffer())
