"""What the group handlers share: the coordinator, the client's host as Kafka reports it."""
from __future__ import annotations

from ...errors import CoordinatorNotAvailableError, KafkaError


def coordinator(ctx):
    gc = ctx.broker.group_coordinator
    if gc is None:
        raise CoordinatorNotAvailableError("the group coordinator is not running")
    return gc


def client_host(ctx):
    """Kafka reports a member's host as InetAddress.toString: "/127.0.0.1" (no port)."""
    peer = ctx.client_host or ""
    host, sep, port = peer.rpartition(":")
    if not sep or not port.isdigit():
        host = peer
    return "/" + host.strip("[]")


def error_code(exc):
    return exc.code if isinstance(exc, KafkaError) else -1
