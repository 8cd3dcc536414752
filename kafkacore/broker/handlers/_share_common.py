"""What ShareFetch and ShareAcknowledge share (not a handler): the request's checks, the
partitions' leaders, and acknowledgements applied to share partitions (KIP-932)."""
from __future__ import annotations

import asyncio
import logging

from ...errors import (GroupAuthorizationFailedError, InvalidRequestError, KafkaError, NotLeaderOrFollowerError,
                       TopicAuthorizationFailedError, UnknownTopicIdError)
from ..authorization import GROUP, READ, TOPIC, authorize, authorized_names

log = logging.getLogger("kafkacore.share")


def check_request(ctx, req):
    """The top-level refusals before any partition: READ on the group (GROUP_AUTHORIZATION_FAILED),
    a group id and a member id (INVALID_REQUEST)."""
    if not req.group_id:
        raise InvalidRequestError("the share group id must not be empty")
    if not req.member_id:
        raise InvalidRequestError("the member id must not be empty")
    if not authorize(ctx, READ, GROUP, req.group_id):
        raise GroupAuthorizationFailedError(f"not authorized to read share group {req.group_id}")


def readable_topics(ctx, names):
    """The names the principal may READ (every name for the broker itself and without ACLs)."""
    if ctx.broker.authorizer is None or ctx.trusted:
        return set(names)
    return authorized_names(ctx, READ, TOPIC, list(names))


class Leader:
    """A partition this broker leads: its name, log and leader epoch."""

    __slots__ = ("topic", "topic_id", "partition", "log", "leader_epoch")

    def __init__(self, topic, topic_id, partition, log, leader_epoch):
        self.topic = topic
        self.topic_id = topic_id
        self.partition = partition
        self.log = log
        self.leader_epoch = leader_epoch


def leader_of(ctx, topic_id, partition, readable) -> Leader:
    """The partition's ``Leader`` here, or the error its answer carries: UNKNOWN_TOPIC_ID,
    TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER."""
    broker = ctx.broker
    info = broker.topics_by_id.get(bytes(topic_id))
    if info is None:
        raise UnknownTopicIdError("unknown topic id")
    if info.name not in readable:
        raise TopicAuthorizationFailedError(f"not authorized to read topic {info.name}")
    try:
        p = broker.replica_manager.leader_partition(info.name, partition)
    except NotLeaderOrFollowerError:
        broker.share_partition_manager.on_not_leader(info.name, partition)
        raise
    return Leader(info.name, bytes(topic_id), partition, p.log, p.leader_epoch)


def current_leader(ctx, topic_id, partition):
    """(leader id, leader epoch) the metadata cache has for a partition, (-1, -1) unknown."""
    broker = ctx.broker
    info = broker.topics_by_id.get(bytes(topic_id))
    if info is None:
        return -1, -1
    state = broker.metadata_cache.partition(info.name, partition)
    leader = broker.metadata_cache.leader(info.name, partition)
    return leader, (state.leader_epoch if state is not None else -1)


def node_endpoints(ctx, leader_ids, endpoint_cls):
    """The NodeEndpoints of the leaders named in NOT_LEADER_OR_FOLLOWER answers, on the
    request's listener."""
    out = []
    listener = ctx.answering_listener
    for node_id, host, port, rack in ctx.broker.metadata_cache.live_brokers_on(listener):
        if node_id in leader_ids:
            out.append(endpoint_cls(node_id=node_id, host=host, port=port, rack=rack))
    return out


async def acknowledge(ctx, group_id, member_id, leader: Leader, batches):
    """Applies one partition's acknowledgement batches ([(first, last, [types])]) to its share
    partition and returns it; raises the partition's acknowledge error. Its state is written
    with the request's others by ``write_states``, before the request is answered."""
    mgr = ctx.broker.share_partition_manager
    sp = await mgr.share_partition(group_id, leader.topic, leader.topic_id, leader.partition, leader.log,
                                   leader.leader_epoch)
    sp.acknowledge(member_id, batches)
    return sp


async def write_states(acknowledged: dict) -> dict:
    """Writes the states of a request's acknowledged share partitions ({key: SharePartition})
    through the persister, all at once (the request waits for the slowest, not for their sum,
    as Kafka's acknowledgement response waits for its writes): {key: the exception} of those
    whose write failed."""
    keys = list(acknowledged)
    results = await asyncio.gather(*(acknowledged[k].write_state() for k in keys), return_exceptions=True)
    return {k: r for k, r in zip(keys, results) if isinstance(r, BaseException)}


def ack_batches(partition_request):
    return [(b.first_offset, b.last_offset, list(b.acknowledge_types))
            for b in partition_request.acknowledgement_batches]


def error_of(e: Exception):
    """(code, message) of a partition's failure."""
    if isinstance(e, KafkaError):
        return e.code, e.message
    log.error("share partition request failed", exc_info=e)  # a bug: seen in the log, answered UNKNOWN_SERVER_ERROR
    return -1, repr(e)
