"""What the share-state handlers (InitializeShareGroupState, ReadShareGroupState,
WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary: KIP-932's inter-broker
APIs 83-87) share: Kafka's authorization (CLUSTER_ACTION on the cluster: only brokers send
them), the walk over the request's share partitions, each answered by the share coordinator or
with the KafkaError it raises."""
import asyncio
import logging

from ...errors import ClusterAuthorizationFailedError, InvalidRequestError, KafkaError, UnknownServerError
from ..authorization import CLUSTER_ACTION, authorize_cluster

log = logging.getLogger("kafkacore.share")


async def answer_each(ctx, req, ask):
    """{(topic id, partition): (error code, message, what ``ask`` returned)} for every share
    partition of ``req``; ``ask(group, topic id, partition data)`` may be a coroutine function.
    Everything CLUSTER_AUTHORIZATION_FAILED for a caller without CLUSTER_ACTION."""
    if not authorize_cluster(ctx, CLUSTER_ACTION):
        return {(t.topic_id, p.partition): (ClusterAuthorizationFailedError.code, None, None)
                for t in req.topics for p in t.partitions}
    out = {}
    for t in req.topics:
        for p in t.partitions:
            out[(t.topic_id, p.partition)] = await _one(ctx, req.group_id, t.topic_id, p, ask)
    return out


async def _one(ctx, group_id, topic_id, p, ask):
    if not group_id or p.partition < 0:
        return InvalidRequestError.code, "a share partition needs a group id and a partition >= 0", None
    try:
        r = ask(ctx.broker.share_coordinator, group_id, topic_id, p)
        if asyncio.iscoroutine(r):
            r = await r
        return 0, None, r
    except KafkaError as e:
        return e.code, e.message, None
    except Exception as e:  # noqa: BLE001 - one share partition's failure is its own answer
        log.exception("share state request for %s/%d failed", group_id, p.partition)
        return UnknownServerError.code, str(e), None


def by_topic(results):
    """{topic id: [(partition, (code, message, value))]} in request order."""
    out = {}
    for (topic_id, partition), r in results.items():
        out.setdefault(topic_id, []).append((partition, r))
    return out
