"""DeleteTopics (API key 20), versions 0-6.

Topics are named by ``topic_names`` (v0-5) or by ``topics`` entries (v6) that carry a name or a
topic id (not both: INVALID_REQUEST "You may not specify both topic name and topic id.";
neither: INVALID_REQUEST "Neither topic name nor id were specified."). A name or an id given
twice: INVALID_REQUEST "Duplicate topic name." / "Duplicate topic id."; a topic named both by
name and by id: neither is deleted, one INVALID_REQUEST answer (as Kafka). An unknown name is
UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID. A topic is marked for deletion in
the cluster's metadata and the controller deletes it; as Kafka's, the response waits up to
``timeout_ms`` for each topic to be gone from this broker's metadata (its logs deleted), and
says REQUEST_TIMED_OUT for one still there then (its deletion goes on). With ``delete.topic.enable=false`` every topic gets TOPIC_DELETION_DISABLED (v3+) or
INVALID_REQUEST (v0-2), as Kafka.

Deviation: internal topics (``__consumer_offsets``, ``__transaction_state``) are refused with
INVALID_TOPIC_EXCEPTION. A Kafka broker deletes them (only the kafka-topics tool refuses, on
the client side); here the group coordinator keeps its state in them while it runs.

Version notes: throttle_time_ms from v1; error_message from v5; v6 results carry the topic id,
and the name is null for an unknown id.
"""
import asyncio

from ...errors import (InvalidRequestError, InvalidTopicError, KafkaError, RequestTimedOutError,
                       TopicAuthorizationFailedError, TopicDeletionDisabledError, UnknownTopicIdError,
                       UnknownTopicOrPartitionError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_topics_response import DeletableTopicResult, DeleteTopicsResponse
from ...protocol.wire import ZERO_UUID
from ...protocol.kafka_uuid import uuid_to_text
from ..authorization import DELETE, DESCRIBE, TOPIC, authorize
from ..quotas import mutation_quota
from ..topic_store import INTERNAL_TOPICS

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = (0, 6)


def _requested(req, v):
    """[(name or None, topic id)] in request order."""
    if v >= 6:
        return [(t.name, t.topic_id) for t in req.topics]
    return [(name, ZERO_UUID) for name in req.topic_names]


def handle(ctx, req):
    return _delete_and_wait(ctx, req)


async def _delete_and_wait(ctx, req):
    # through the topic store: from a worker thread when its writes are ZooKeeper round trips,
    # so that a round trip (or an outage) does not stall this broker's other clients
    resp = await ctx.broker.topic_store_call(_respond, ctx, req)
    deleted = [r for r in resp.responses if r.error_code == 0]
    if deleted and req.timeout_ms > 0:  # Kafka's DelayedDeleteTopics
        gone = await asyncio.gather(*(ctx.broker.wait_for_topic_gone(r.name, req.timeout_ms / 1000)
                                      for r in deleted))
        for r, ok in zip(deleted, gone):
            if not ok:
                r.error_code = RequestTimedOutError.code
                r.error_message = f"the topic is marked for deletion, but was still there after {req.timeout_ms} ms"
    return resp


def _respond(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    wanted = _requested(req, v)
    if not broker.config["delete.topic.enable"]:
        code = TopicDeletionDisabledError.code if v >= 3 else InvalidRequestError.code
        return DeleteTopicsResponse(responses=[
            DeletableTopicResult(name=_name_field(name, v), topic_id=tid, error_code=code,
                                 error_message="Topic deletion is disabled.") for name, tid in wanted])
    results = []
    names, ids = {}, {}
    for name, tid in wanted:
        if name is not None and tid != ZERO_UUID:
            results.append(_error(name, tid, v, InvalidRequestError(
                "You may not specify both topic name and topic id.")))
        elif name is None and tid == ZERO_UUID:
            results.append(_error(None, tid, v, InvalidRequestError("Neither topic name nor id were specified.")))
        elif name is not None:
            names[name] = names.get(name, 0) + 1
        else:
            ids[tid] = ids.get(tid, 0) + 1
    targets = []  # (name, id as requested)
    by_id = {}
    for tid, n in ids.items():
        if n > 1:
            results.append(_error(None, tid, v, InvalidRequestError("Duplicate topic id.")))
            continue
        info = broker.topics_by_id.get(tid)
        if info is None:
            results.append(_error(None, tid, v, UnknownTopicIdError(f"no topic has the id {uuid_to_text(tid)}")))
        else:
            by_id[info.name] = tid
    for name, n in names.items():
        if n > 1:
            results.append(_error(name, ZERO_UUID, v, InvalidRequestError("Duplicate topic name.")))
        elif name in by_id:  # named both ways: neither is deleted, one answer (as Kafka)
            results.append(_error(name, by_id.pop(name), v, InvalidRequestError(
                "The provided topic name maps to an ID that was already supplied.")))
        else:
            targets.append((name, ZERO_UUID))
    targets += [(name, tid) for name, tid in by_id.items()]
    quota = mutation_quota(ctx)  # KIP-599: each topic's partitions, before it is deleted
    for name, tid in targets:
        info = broker.topics.get(name)
        try:
            # Kafka's order: a topic the principal may not describe is not said to exist or not
            if not authorize(ctx, DESCRIBE, TOPIC, name):
                raise TopicAuthorizationFailedError("Authorization failed.")
            if info is None:
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            if name in INTERNAL_TOPICS:
                raise InvalidTopicError(f"internal topic {name} cannot be deleted")
            if not authorize(ctx, DELETE, TOPIC, name):
                raise TopicAuthorizationFailedError("Authorization failed.")
            if quota is not None:
                quota.record(info.partitions)
            broker.delete_topic(name)
        except KafkaError as e:
            results.append(_error(name, tid, v, e))
            continue
        results.append(DeletableTopicResult(name=name, topic_id=info.topic_id, error_message=None))
    return DeleteTopicsResponse(responses=results)


def _name_field(name, v):
    return name if name is not None or v >= 6 else ""


def _error(name, tid, v, exc):
    return DeletableTopicResult(name=_name_field(name, v), topic_id=tid, error_code=exc.code,
                                error_message=exc.message)


def error_response(req, version, code):
    return DeleteTopicsResponse(responses=[DeletableTopicResult(name=_name_field(name, version), topic_id=tid,
                                                                error_code=code, error_message=None)
                                           for name, tid in _requested(req, version)])
