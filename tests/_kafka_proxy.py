"""KafkaProxy: a TCP proxy in front of one broker, for tests that need a response to arrive late.

The broker advertises the proxy (``advertised.listeners``), so every connection a client makes,
to the group coordinator too, passes through it. Each request and response is decoded with
kafkacore's protocol modules and kept (``requests``, ``responses``: (client id, api key,
request or response object)); ``hold(predicate)`` makes the responses to the requests it
matches from then on wait until ``release()``. A held response holds back the ones after it on
its connection, as TCP would. The bytes go through unchanged.
"""
from __future__ import annotations

import socket
import struct
import threading

from broker_client import free_port
from kafkacore.protocol.frames import decode_request, decode_response, peek_header
from kafkacore.protocol.wire import ProtocolDecodeError


def _read_frame(sock) -> bytes | None:
    """A whole frame, size prefix included; None at the end of the stream."""
    head = _read_exactly(sock, 4)
    if head is None:
        return None
    body = _read_exactly(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


def _read_exactly(sock, n) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class KafkaProxy:
    def __init__(self, upstream_port: int):
        self.upstream_port = upstream_port
        self.port = free_port()
        self.requests: list = []   # (client id, api key, request)
        self.responses: list = []  # (client id, api key, response)
        self._hold = None
        self._released = threading.Event()
        self._released.set()
        self._lock = threading.Lock()
        self._socks: list = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, name="kafka-proxy", daemon=True).start()

    @property
    def advertised(self) -> str:
        return f"PLAINTEXT://127.0.0.1:{self.port}"

    def hold(self, predicate):
        """From now on, the responses to requests for which ``predicate(client_id, api_key,
        request)`` is true wait until release()."""
        with self._lock:
            self._released.clear()
            self._hold = predicate

    def release(self):
        with self._lock:
            self._hold = None
            self._released.set()

    def sent(self, client_id, api_key) -> list:
        """The requests of that api key from that client, in order."""
        with self._lock:
            return [r for c, k, r in self.requests if c == client_id and k == api_key]

    def answered(self, client_id, api_key) -> list:
        with self._lock:
            return [r for c, k, r in self.responses if c == client_id and k == api_key]

    def close(self):
        self.release()
        self._listener.close()
        for s in self._socks:
            s.close()

    def _accept(self):
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            self._socks += [client, upstream]
            pending: dict = {}  # correlation id -> (client id, api key, api version, held)
            threading.Thread(target=self._requests, args=(client, upstream, pending), daemon=True).start()
            threading.Thread(target=self._responses, args=(upstream, client, pending), daemon=True).start()

    def _requests(self, client, upstream, pending):
        try:
            while (frame := _read_frame(client)) is not None:
                try:
                    header, body = decode_request(memoryview(frame)[4:])
                    client_id, api_key, version, cid = (header.client_id, header.api_key, header.api_version,
                                                        header.correlation_id)
                except ProtocolDecodeError:  # the broker answers it as it may: forwarded as it is
                    (api_key, version, cid), client_id, body = peek_header(memoryview(frame)[4:]), None, None
                with self._lock:
                    held = self._hold is not None and body is not None and self._hold(client_id, api_key, body)
                    self.requests.append((client_id, api_key, body))
                    pending[cid] = (client_id, api_key, version, held)
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            upstream.close()

    def _responses(self, upstream, client, pending):
        try:
            while (frame := _read_frame(upstream)) is not None:
                correlation_id = struct.unpack_from(">i", frame, 4)[0]
                with self._lock:
                    client_id, api_key, version, held = pending.pop(correlation_id)
                try:
                    body = decode_response(api_key, version, memoryview(frame)[4:], strict=False)[1]
                except (ProtocolDecodeError, KeyError):
                    body = None
                if held:
                    self._released.wait()
                with self._lock:
                    self.responses.append((client_id, api_key, body))
                client.sendall(frame)
        except OSError:
            pass
        finally:
            client.close()
