"""Connection limits (Kafka's ConnectionQuotas) and the accept loop that applies them (Kafka's
Acceptor), one ``Acceptor`` per listener, all sharing the broker's ``ConnectionQuotas``.

Kafka's settings and behaviour (docs/security.md, "Connection limits"):

- ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: a connection from an
  address that already holds its maximum is closed as soon as it is accepted. Kafka logs every
  refusal; here the first refusal of a burst is logged (INFO, one line) and the rest counted,
  so a client hammering the port cannot flood the log; the count is logged when the burst ends
  (the address gets a connection again, has none left, or a minute passes);
- ``max.connections`` (whole broker) and ``listener.name.<l>.max.connections`` (a listener;
  by default the broker-wide value, as Kafka's prefix override does): at the limit the
  listener's accept loop stops until a connection closes, as Kafka's acceptor blocks. New
  clients wait in the kernel's listen backlog and are served when a slot frees, instead of
  being accepted and dropped (a refused client reconnects at once and would turn a full broker
  into a busy one). One WARNING line when a listener stops accepting, one INFO line when it
  goes on;
- the inter-broker listener, when the broker has more than one, is exempt from the broker-wide
  limit (not from its own): when one of its connections takes the broker over
  ``max.connections`` the least recently active connection of another listener is closed
  (KIP-402), so replication and the controller always get through;
- ``max.connection.creation.rate`` and ``listener.name.<l>.max.connection.creation.rate``
  (KIP-612): new connections a second, measured as Kafka measures quotas
  (``quota.window.num`` - 1 windows of ``quota.window.size.seconds``, so an idle broker takes
  rate x window connections at once, then no more than the rate); above it the accept loop
  waits, as Kafka's acceptor is throttled. The inter-broker listener is exempt from the
  broker-wide rate.

All of them can change at run time (AlterConfigs on BROKER resources, Kafka's
DynamicConnectionQuota: broker/dynamic_config.py calls ``reconfigure``): accept loops waiting
for a slot look again, and connections over a lowered limit stay open, as in Kafka.

A connection counts from its accept to its close, whatever ends it (a client's close, a failed
TLS handshake or login, idle expiry, the broker stopping): the Connection gives its slot back
exactly once (server.Connection._forget).
"""
from __future__ import annotations

import asyncio
import collections
import errno
import ipaddress
import logging
from time import monotonic

from ..storage.config import INT_MAX

log = logging.getLogger("kafkacore.broker")

LISTEN_BACKLOG = 1024
REFUSAL_LOG_INTERVAL_S = 60.0  # a burst of refusals of one address is summed up at least this often
# accept() failures that say the process or the system is short of something (file descriptors,
# buffers): retried after a pause, as asyncio's own server does, rather than spinning
_ACCEPT_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
ACCEPT_RETRY_S = 1.0


def address_of(peer) -> str:
    """The address a peer counts under: its IP in canonical form (as the overrides are kept)."""
    host = peer[0] if isinstance(peer, tuple) and peer else str(peer)
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


class _CreationRate:
    """At most ``rate`` new connections a second averaged over ``window_s``: the connections of
    the last window are kept (at most rate x window of them), and one more waits until the
    oldest leaves the window."""

    __slots__ = ("limit", "window_s", "times")

    def __init__(self, rate, window_s):
        self.window_s = window_s
        self.limit = int(rate * window_s)
        self.times = collections.deque()

    def delay(self, now) -> float:
        times = self.times
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if len(times) < self.limit:
            return 0.0
        return (times[0] + self.window_s - now) if times else self.window_s

    def record(self, now):
        self.times.append(now)


class ConnectionQuotas:
    """The connection counts of a broker (per listener, per address, in all) and its limits."""

    def __init__(self, config, clock=monotonic):
        self._clock = clock
        self.inter_broker_listener = config.inter_broker_listener_name
        self._window_s = max(1, config["quota.window.num"] - 1) * config["quota.window.size.seconds"]
        self._broker_rate = None
        self._read_limits(config)
        self.total = 0
        self.by_listener = {}  # listener name -> open connections
        self.max_by_listener = {}
        self._listener_rate = {}  # listener name -> _CreationRate, or None without a limit
        self.by_ip = {}  # address -> open connections (addresses with none are removed)
        self._refused = {}  # address -> [refusals not yet logged, when the burst's line was logged]
        self._waiters = []  # futures of accept loops waiting for a connection to close
        self.on_over_broker_limit = None  # called when an inter-broker connection exceeds max.connections

    def _read_limits(self, config):
        self._config = config
        self.max_connections = config["max.connections"]
        self.max_per_ip = config["max.connections.per.ip"]
        self.per_ip_overrides = dict(config["max.connections.per.ip.overrides"])
        self._broker_rate = self._rate(config["max.connection.creation.rate"], self._broker_rate)

    def _rate(self, rate, current):
        """The _CreationRate for ``rate`` (None: no limit), keeping the connections ``current``
        has seen in its window."""
        if rate >= INT_MAX:
            return None
        new = _CreationRate(rate, self._window_s)
        if current is not None:
            new.times = current.times
        return new

    def _limits(self):
        rates = (self._broker_rate, *self._listener_rate.values())
        return (self.max_connections, self.max_per_ip, self.per_ip_overrides, dict(self.max_by_listener),
                tuple(r and r.limit for r in rates))

    def add_listener(self, name):
        self.by_listener.setdefault(name, 0)
        self.max_by_listener[name] = self._config.listener_quota(name, "max.connections")
        self._listener_rate[name] = self._rate(self._config.listener_quota(name, "max.connection.creation.rate"),
                                               self._listener_rate.get(name))

    def reconfigure(self, config):
        """New limits (a dynamic config change): applied to the next connections; accept loops
        waiting for a slot look again."""
        before = self._limits()
        self._read_limits(config)
        for name in self.by_listener:
            self.add_listener(name)
        if self._limits() == before:
            return  # another dynamic config changed
        log.info("connection limits now max.connections=%d, max.connections.per.ip=%d, per listener %s",
                 self.max_connections, self.max_per_ip, self.max_by_listener)
        self._wake()

    def protected(self, listener) -> bool:
        """Kafka's rule: the inter-broker listener is exempt from the broker-wide limits when the
        broker has other listeners (with one listener there would be nothing to protect it from)."""
        return listener == self.inter_broker_listener and len(self.by_listener) > 1

    def _full(self, listener):
        """Why ``listener`` cannot take a connection now, or None."""
        if self.by_listener[listener] >= self.max_by_listener[listener]:
            own = "max.connections" in self._config.listener_overrides.get(listener, {})
            key = f"listener.name.{listener.lower()}.max.connections" if own else "max.connections"
            return f"{key}={self.max_by_listener[listener]} reached ({self.by_listener[listener]} connections)"
        if not self.protected(listener) and self.total >= self.max_connections:
            return f"max.connections={self.max_connections} reached ({self.total} connections on the broker)"
        return None

    def _rate_delay(self, listener, now) -> float:
        delay = 0.0
        rate = self._listener_rate[listener]
        if rate is not None:
            delay = rate.delay(now)
        if self._broker_rate is not None and not self.protected(listener):
            delay = max(delay, self._broker_rate.delay(now))
        return delay

    async def wait_for_slot(self, listener):
        """Returns when ``listener`` may take one more connection (its count and rate, and the
        broker's), having recorded it against the creation rates: the accept loop waits here,
        as Kafka's acceptor blocks."""
        blocked_since = None
        while True:
            why = self._full(listener)
            if why is not None:
                if blocked_since is None:
                    blocked_since = self._clock()
                    log.warning("listener %s: %s; not accepting connections until one closes", listener, why)
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                await waiter
                continue
            now = self._clock()
            delay = self._rate_delay(listener, now)
            if delay > 0:
                if blocked_since is None:
                    blocked_since = now
                    log.warning("listener %s: above its connection creation rate (max.connection.creation.rate); "
                                "accepting again in %.1f s", listener, delay)
                await asyncio.sleep(delay)
                continue
            break
        if blocked_since is not None:
            log.info("listener %s: accepting connections again after %.1f s", listener, self._clock() - blocked_since)
        now = self._clock()
        if self._listener_rate[listener] is not None:
            self._listener_rate[listener].record(now)
        if self._broker_rate is not None and not self.protected(listener):
            self._broker_rate.record(now)

    def admit(self, listener, address) -> bool:
        """Counts a connection accepted on ``listener`` from ``address``; False (nothing
        counted) when that address already has its max.connections.per.ip."""
        limit = self.per_ip_overrides.get(address, self.max_per_ip)
        count = self.by_ip.get(address, 0)
        if count >= limit:
            self._note_refusal(listener, address, limit)
            return False
        self._end_burst(address)
        self.by_ip[address] = count + 1
        self.total += 1
        self.by_listener[listener] += 1
        if self.total > self.max_connections and self.protected(listener) and self.on_over_broker_limit is not None:
            self.on_over_broker_limit(listener)
        return True

    def release(self, listener, address):
        """A counted connection has closed."""
        self.total -= 1
        self.by_listener[listener] -= 1
        count = self.by_ip.get(address, 0) - 1
        if count > 0:
            self.by_ip[address] = count
        else:
            self.by_ip.pop(address, None)
            self._end_burst(address)  # an address without connections keeps no entry
        self._wake()

    def _wake(self):
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def _note_refusal(self, listener, address, limit):
        now = self._clock()
        burst = self._refused.get(address)
        if burst is None:
            log.info("listener %s: refused a connection from %s: it already has the maximum of %d connections "
                     "(max.connections.per.ip%s); further refusals are counted, not logged", listener, address, limit,
                     ".overrides" if address in self.per_ip_overrides else "")
            self._refused[address] = [0, now]
        else:
            burst[0] += 1
            if now - burst[1] >= REFUSAL_LOG_INTERVAL_S:
                self._log_burst(address, burst)
                self._refused[address] = [0, now]

    def _end_burst(self, address):
        burst = self._refused.pop(address, None)
        if burst is not None and burst[0]:
            self._log_burst(address, burst)

    def _log_burst(self, address, burst):
        log.info("%d more connections from %s refused over max.connections.per.ip in %.0f s", burst[0], address,
                 self._clock() - burst[1])


class Acceptor:
    """One listener's accept loop. It stands where an asyncio.Server would (SocketServer.servers:
    ``sockets``, ``is_serving``, ``close``, ``wait_closed``) because asyncio's server accepts
    whatever arrives, and Kafka's limits need to stop accepting."""

    def __init__(self, sock, listener_name, quotas, make_connection):
        """``sock``: bound, not listening; ``make_connection(address)``: the protocol of an
        admitted connection, which gives its slot back when it closes."""
        self.sock = sock
        self.listener_name = listener_name
        self.quotas = quotas
        self.make_connection = make_connection
        self._task = None

    @property
    def sockets(self):
        return [self.sock]

    def start(self, backlog=LISTEN_BACKLOG):
        self.sock.listen(backlog)
        self.sock.setblocking(False)
        self._task = asyncio.get_running_loop().create_task(self._run())

    def is_serving(self) -> bool:
        return self._task is not None and not self._task.done()

    def close(self):
        if self._task is not None:
            self._task.cancel()
        self.sock.close()

    async def wait_closed(self):
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self):
        loop = asyncio.get_running_loop()
        while True:
            try:
                sock, peer = await loop.sock_accept(self.sock)
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                continue  # the peer left before we took it
            except OSError as e:
                if e.errno not in _ACCEPT_RESOURCE_ERRNOS:
                    # the listening socket itself failed: said once, and /healthz reports the listener down
                    log.exception("listener %s: accepting connections failed; the listener stops", self.listener_name)
                    raise
                log.warning("listener %s: cannot accept connections: %s; trying again in %.0f s", self.listener_name,
                            e.strerror or e, ACCEPT_RETRY_S)
                await asyncio.sleep(ACCEPT_RETRY_S)
                continue
            try:
                await self._admit(loop, sock, address_of(peer))
            except asyncio.CancelledError:
                sock.close()
                raise
            except Exception:  # noqa: BLE001 - one connection's set-up must not stop the listener
                log.exception("listener %s: setting up a connection from %s failed", self.listener_name, peer)
                sock.close()

    async def _admit(self, loop, sock, address):
        await self.quotas.wait_for_slot(self.listener_name)
        if not self.quotas.admit(self.listener_name, address):
            sock.close()  # over its address's limit: closed at once, as Kafka does
            return
        made = []

        def protocol():
            made.append(self.make_connection(address))
            return made[0]
        try:
            await loop.connect_accepted_socket(protocol, sock)
        except BaseException:
            if made:
                made[0]._forget()
            else:
                self.quotas.release(self.listener_name, address)
            raise
