"""ConsumerGroupHeartbeat (API key 68), versions 0-1: KIP-848 consumer groups.

A member joins (epoch 0), heartbeats (its epoch), leaves (-1) or, static, leaves for now (-2);
the answer carries its member id and epoch, the heartbeat interval and, when it asked in full
or its assignment changed, its assigned partitions by topic id. librdkafka 2.16 sends v1 only
(its member id made by the client, KIP-1082). The rules and errors are the coordinator's
(``coordinator/consumer_group_coordinator.py``); the answer waits for the group's records to be
written (on a cluster: replicated). READ on the group, else GROUP_AUTHORIZATION_FAILED; with an
authorizer, a regex subscription gets only the matching topics the member's principal may
DESCRIBE (Kafka 4's rule), judged by the principal and host of its latest heartbeat.
"""
import asyncio

from ...coordinator.consumer_group_coordinator import HeartbeatRequest
from ...errors import GroupAuthorizationFailedError
from ...protocol.api_table import ApiKey
from ...protocol.messages.consumer_group_heartbeat_response import (Assignment, ConsumerGroupHeartbeatResponse,
                                                                     TopicPartitions)
from ..authorization import GROUP, READ, acl_identity, require
from ._group_common import client_host, coordinator

API_KEY = ApiKey.CONSUMER_GROUP_HEARTBEAT
VERSIONS = (0, 1)
GROUP_PROTOCOL = "consumer"  # served while group.coordinator.rebalance.protocols names it


def _response(r):
    assignment = None
    if r.assignment is not None:
        assignment = Assignment(topic_partitions=[TopicPartitions(topic_id=tid, partitions=sorted(parts))
                                                  for tid, parts in sorted(r.assignment.items())])
    return ConsumerGroupHeartbeatResponse(error_code=r.error, error_message=r.message,
                                          member_id=r.member_id if r.error == 0 else None,
                                          member_epoch=r.member_epoch, heartbeat_interval_ms=r.heartbeat_interval_ms,
                                          assignment=assignment)


async def _wait(fut):
    return _response(await fut)


def handle(ctx, req):
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    owned = None if req.topic_partitions is None else [(tp.topic_id, list(tp.partitions))
                                                       for tp in req.topic_partitions]
    result = coordinator(ctx).consumer.heartbeat(HeartbeatRequest(
        req.group_id, req.member_id, req.member_epoch, req.instance_id, req.rack_id, req.rebalance_timeout_ms,
        req.subscribed_topic_names, req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        req.server_assignor, owned, ctx.client_id or "", client_host(ctx), ctx.api_version, acl_identity(ctx)))
    if asyncio.isfuture(result):
        return _wait(result)
    return _response(result)


def error_response(req, version, code):
    return ConsumerGroupHeartbeatResponse(error_code=code, member_epoch=-1)
