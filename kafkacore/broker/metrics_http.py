"""A small HTTP/1.1 server on the broker's own event loop, for ``metrics.port``:

- ``GET /metrics``: the broker's metrics in Prometheus' text exposition format 0.0.4
  (``Content-Type: text/plain; version=0.0.4; charset=utf-8``), rendered at each scrape by
  metrics.py;
- ``GET /healthz``: ``200 ok`` while the broker serves (its listener bound, its storage open and,
  on a cluster, its registration in ZooKeeper live), else ``503`` with the reason on one line;
- ``HEAD`` of either; anything else is 404 (unknown path) or 405 (another method).

Connections are kept alive (HTTP/1.1; HTTP/1.0 and ``Connection: close`` close after the
response), as Prometheus scrapes over one connection. Request heads above 16 KiB, bodies, and
connections idle for 60 s are closed. Nothing a client sends can raise out of here.
"""
from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("kafkacore.broker.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_HEAD_BYTES = 16 * 1024
IDLE_TIMEOUT_S = 60.0
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            500: "Internal Server Error", 503: "Service Unavailable"}


def health(broker, server, stopping=False):
    """None while the broker serves, else why not (one line)."""
    if stopping:
        return "shutting down"
    servers = server.servers if server is not None else {}
    down = [name for name, srv in servers.items() if not srv.is_serving()]
    if not servers:
        return "the Kafka listener is not serving"
    if down:
        return f"the Kafka listener {down[0]} is not serving" if len(servers) > 1 else "the Kafka listener is not serving"
    if broker.log_manager.closed:
        return "the storage is closed"
    return broker.cluster.health()


class MetricsServer:
    """Serves ``metrics`` (a BrokerMetrics) and ``health()`` (None or a reason) on ``sock``, a
    socket bound by bind_listener."""

    def __init__(self, metrics, health_fn):
        self.metrics = metrics
        self.health = health_fn
        self.server = None
        self._clients = set()

    async def start(self, sock):
        self.server = await asyncio.start_server(self._serve, sock=sock, limit=MAX_HEAD_BYTES)
        return self.server.sockets[0].getsockname()[:2]

    async def stop(self):
        if self.server is None:
            return
        self.server.close()
        for w in list(self._clients):
            w.transport.abort()
        await self.server.wait_closed()

    async def _serve(self, reader, writer):
        self._clients.add(writer)
        try:
            while True:
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
                except (asyncio.IncompleteReadError, asyncio.TimeoutError, ConnectionError):
                    return
                except asyncio.LimitOverrunError:
                    self._respond(writer, 400, "request head too large\n", close=True)
                    return
                keep = self._handle(writer, head)
                await writer.drain()
                if not keep:
                    return
        except (ConnectionError, OSError):
            pass
        finally:
            self._clients.discard(writer)
            writer.close()  # what was written is still sent

    def _handle(self, writer, head: bytes) -> bool:
        """Answers one request; returns whether to keep the connection."""
        try:
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
        except ValueError:
            self._respond(writer, 400, "malformed request line\n", close=True)
            return False
        headers = {}
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    self._respond(writer, 400, "malformed header\n", close=True)
                    return False
                headers[name.strip().lower()] = value.strip()
        if headers.get("content-length", "0") != "0" or "transfer-encoding" in headers:
            self._respond(writer, 400, "request bodies are not accepted\n", close=True)
            return False
        connection = headers.get("connection", "").lower()
        close = version != "HTTP/1.1" or connection == "close"
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            self._respond(writer, 400, "HTTP/1.0 or HTTP/1.1 only\n", close=True)
            return False
        path = target.split("?", 1)[0]
        if path not in ("/metrics", "/healthz", "/"):
            self._respond(writer, 404, f"no {path} here: /metrics or /healthz\n", close=close, head=method == "HEAD")
            return not close
        if method not in ("GET", "HEAD"):
            self._respond(writer, 405, f"{method} is not allowed: GET or HEAD\n", close=close,
                          extra=("Allow: GET, HEAD",))
            return not close
        head_only = method == "HEAD"
        if path == "/healthz":
            try:
                reason = self.health()
            except Exception as e:  # noqa: BLE001 - a health check that fails says so
                log.exception("the health check failed")
                reason = f"the health check failed: {e!r}"
            if reason is None:
                self._respond(writer, 200, "ok\n", close=close, head=head_only)
            else:
                self._respond(writer, 503, reason + "\n", close=close, head=head_only)
            return not close
        if path == "/":
            self._respond(writer, 200, "kafkacore broker: /metrics (Prometheus), /healthz\n", close=close,
                          head=head_only)
            return not close
        try:
            body = self.metrics.render()
        except Exception as e:  # noqa: BLE001 - a bug in a gauge must not take the broker down
            log.exception("rendering /metrics failed")
            self._respond(writer, 500, f"rendering the metrics failed: {e!r}\n", close=close, head=head_only)
            return not close
        self._respond(writer, 200, body, close=close, head=head_only, content_type=CONTENT_TYPE)
        return not close

    @staticmethod
    def _respond(writer, status, body, close=False, head=False, content_type="text/plain; charset=utf-8",
                 extra=()):
        data = body.encode("utf-8")
        lines = [f"HTTP/1.1 {status} {_REASONS[status]}", f"Content-Type: {content_type}",
                 f"Content-Length: {len(data)}", *extra]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head:
            writer.write(data)
