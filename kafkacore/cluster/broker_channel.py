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
"""
from __future__ import annotations

import asyncio
import itertools
import logging
import struct

from ..protocol.frames import RequestHeader, decode_response, encode_request
from ..protocol.wire import ProtocolDecodeError

log = logging.getLogger("kafkacore.cluster")

_size = struct.Struct(">i")


class BrokerChannelError(Exception):
    """The destination could not be reached, or the connection failed during the call."""


class BrokerChannel:
    def __init__(self, node_id, host, port, client_id, connect_timeout=10.0):
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self.connect_timeout = connect_timeout
        self._reader = None
        self._writer = None
        self._pending = {}  # correlation id -> (future, api_key, api_version)
        self._reader_task = None
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
        if self._writer is not None:
            return
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        try:
            await asyncio.shield(self._connecting)
        finally:
            if self._connecting is not None and self._connecting.done():
                self._connecting = None

    async def _open(self):
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port),
                                                    self.connect_timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise BrokerChannelError(f"cannot connect to broker {self.node_id} at {self.host}:{self.port}: "
                                     f"{e or 'timed out'}") from None
        if self.closed:
            writer.close()
            raise BrokerChannelError("channel closed")
        self._reader, self._writer = reader, writer
        self._reader_task = asyncio.ensure_future(self._read_loop(reader))

    async def _read_loop(self, reader):
        try:
            while True:
                head = await reader.readexactly(4)
                (size,) = _size.unpack(head)
                frame = await reader.readexactly(size)
                (correlation_id,) = _size.unpack_from(frame)
                entry = self._pending.pop(correlation_id, None)
                if entry is None:
                    raise BrokerChannelError(f"broker {self.node_id} answered unknown correlation id {correlation_id}")
                fut, api_key, version = entry
                if fut.done():
                    continue
                try:
                    _cid, body = decode_response(api_key, version, frame, strict=False)
                except ProtocolDecodeError as e:
                    fut.set_exception(BrokerChannelError(f"malformed response from broker {self.node_id}: {e}"))
                    continue
                fut.set_result(body)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            self._drop(BrokerChannelError(f"connection to broker {self.node_id} lost: {e or 'closed'}"))
        except BrokerChannelError as e:
            self._drop(e)
        except asyncio.CancelledError:
            pass

    def _drop(self, exc):
        writer, self._writer, self._reader = self._writer, None, None
        if writer is not None:
            writer.close()
        pending, self._pending = self._pending, {}
        for fut, _k, _v in pending.values():
            if not fut.done():
                fut.set_exception(exc)
        task, self._reader_task = self._reader_task, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()

    async def call(self, api_key, version, body, timeout=30.0):
        """The response object, or BrokerChannelError."""
        if self.closed:
            raise BrokerChannelError("channel closed")
        await self._connect()
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
