"""ShareGroupHeartbeat (API key 76), versions 0-1: KIP-932 share groups' membership.

A member joins (epoch 0, with its subscribed topic names), heartbeats (its epoch) or leaves
(-1); the answer carries its member id and epoch, ``group.share.heartbeat.interval.ms`` and,
when it joined or its assignment changed, its assigned partitions by topic id (null: unchanged).
librdkafka 2.16's ShareConsumer sends v1 only, its member id made by the client (KIP-1082); v0
(Kafka 4.0's early access) gets one made here when it joins without. The rules and errors are
the coordinator's (``coordinator/share_group_coordinator.py``); the answer waits for the group's
records to be written (on a cluster: replicated). Kafka's checks first: READ on the group, else
GROUP_AUTHORIZATION_FAILED; DESCRIBE on every subscribed topic given, else
TOPIC_AUTHORIZATION_FAILED. Served while ``group.coordinator.rebalance.protocols`` names
``share`` and ``group.share.enable`` is on.
"""
import asyncio

from ...coordinator.share_group_coordinator import ShareHeartbeatRequest
from ...errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from ...protocol.api_table import ApiKey
from ...protocol.messages.share_group_heartbeat_response import (Assignment, ShareGroupHeartbeatResponse,
                                                                  TopicPartitions)
from ..authorization import DESCRIBE, GROUP, READ, TOPIC, authorized_names, require
from ._group_common import client_host, coordinator

API_KEY = ApiKey.SHARE_GROUP_HEARTBEAT
VERSIONS = (0, 1)
GROUP_PROTOCOL = "share"  # served while the share protocol is switched on (config.served_group_protocols)


def _response(r):
    assignment = None
    if r.assignment is not None:
        assignment = Assignment(topic_partitions=[TopicPartitions(topic_id=tid, partitions=sorted(parts))
                                                  for tid, parts in sorted(r.assignment.items())])
    return ShareGroupHeartbeatResponse(error_code=r.error, error_message=r.message,
                                       member_id=r.member_id if r.error == 0 else None,
                                       member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
                                       assignment=assignment)


async def _wait(fut):
    return _response(await fut)


def handle(ctx, req):
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    if req.subscribed_topic_names:
        topics = set(req.subscribed_topic_names)
        hidden = topics - authorized_names(ctx, DESCRIBE, TOPIC, topics)
        if hidden:
            raise TopicAuthorizationFailedError(f"not authorized to DESCRIBE the subscribed topics "
                                                f"{', '.join(sorted(hidden))}")
    result = coordinator(ctx).share.heartbeat(ShareHeartbeatRequest(
        req.group_id, req.member_id, req.member_epoch, req.rack_id, req.subscribed_topic_names, ctx.client_id or "",
        client_host(ctx), ctx.api_version))
    if asyncio.isfuture(result):
        return _wait(result)
    return _response(result)


def error_response(req, version, code):
    return ShareGroupHeartbeatResponse(error_code=code, member_epoch=-1)
