"""A broker's requests to itself, without a socket: the controller's LeaderAndIsr,
UpdateMetadata and StopReplica to its own broker, and the coordinators' WriteTxnMarkers and
AddPartitionsToTxn to partitions it leads.

Kafka sends those through its own listener like any other request. Here they go straight to
the handler, as the embedded broker's clients do: the same handlers and checks, in the same
order (a caller awaits each answer before the next, as the BrokerChannel callers do), with no
encoding and no connection - and a broker that serves no socket yet (the embedded broker before
``serve()``, a node starting up) can still control itself.
"""
from __future__ import annotations

import asyncio
import logging

from ..errors import KafkaError
from ..protocol.frames import RequestHeader
from ..replication.broker_channel import BrokerChannelError
from .handlers import HANDLERS
from .request import RequestContext

log = logging.getLogger("kafkacore.broker")

LOCAL_CONNECTION_ID = -1  # no connection: the requests a broker makes of itself


class LocalChannel:
    """BrokerChannel's interface (``call``, ``close``, ``update_address``) for this broker."""

    def __init__(self, broker, client_id):
        self.broker = broker
        self.node_id = broker.node_id
        self.client_id = client_id
        self.closed = False

    def __repr__(self):
        return f"LocalChannel(broker {self.node_id})"

    def update_address(self, host, port):
        """Nothing to reconnect: the broker is this process."""

    async def call(self, api_key, version, body, timeout=30.0):
        """The handler's response object, or BrokerChannelError as a remote broker's failure
        would be."""
        if self.closed:
            raise BrokerChannelError("channel closed")
        entry = HANDLERS.get(api_key)
        if entry is None or not entry.min_version <= version <= entry.max_version:
            raise BrokerChannelError(f"broker {self.node_id} does not serve api {api_key} v{version}")
        ctx = RequestContext(self.broker, RequestHeader(api_key, version, 0, self.client_id), "local",
                             LOCAL_CONNECTION_ID, trusted=True)
        try:
            resp = entry.handle(ctx, body)
            if asyncio.isfuture(resp) or asyncio.iscoroutine(resp):
                resp = await asyncio.wait_for(resp, timeout)
        except asyncio.TimeoutError:
            raise BrokerChannelError(f"request {api_key} v{version} to broker {self.node_id} timed out") from None
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - answered as the server answers a handler's failure
            if not isinstance(e, KafkaError):
                log.exception("%s v%d (from this broker) failed", entry.name, version)
            if entry.error_response is None:
                raise BrokerChannelError(f"broker {self.node_id} failed {entry.name}: {e}") from None
            resp = entry.error_response(body, version, e.code if isinstance(e, KafkaError) else -1)
        if resp is None:
            raise BrokerChannelError(f"broker {self.node_id} gave no answer to api {api_key}")
        return resp

    def close(self):
        self.closed = True
