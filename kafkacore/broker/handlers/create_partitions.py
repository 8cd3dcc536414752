"""CreatePartitions (API key 37), versions 0-3.

Raises a topic's partition count to ``count``. On a single node the new partitions are created
(empty, led by this node) before the response is sent, so ``timeout_ms`` has nothing to wait
for. On a cluster they are written to the topic's znode (placed over the live brokers as
CreateTopics does, with the topic's replication factor, or as ``assignments`` says) and the
answer waits, up to ``timeout_ms``, until each has a leader (Kafka's DelayedCreatePartitions);
a topic under reassignment is refused with REASSIGNMENT_IN_PROGRESS. Per topic,
with Kafka's (KRaft controller's) errors and messages:

- a topic named twice in the request: INVALID_REQUEST "Duplicate topic name.";
- an unknown topic: UNKNOWN_TOPIC_OR_PARTITION;
- ``count`` equal to the current count: INVALID_PARTITIONS "Topic already has N partition(s).";
  lower: INVALID_PARTITIONS "... would not be an increase.";
- ``assignments`` (null: the broker places the partitions) must hold one entry per new
  partition, each naming registered brokers (this node alone on a single node), once each:
  INVALID_REPLICA_ASSIGNMENT otherwise.

``validate_only`` runs the checks and creates nothing.

Deviation: internal topics (``__consumer_offsets``, ``__transaction_state``) are refused with
INVALID_TOPIC_EXCEPTION: a group's coordinator partition is a hash of its id modulo the
partition count, so more partitions would orphan the committed offsets (Kafka allows it and
warns in its documentation).

Version notes: v2+ is the flexible encoding; error messages in every version.
"""
import asyncio

from ...errors import (InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidRequestError, InvalidTopicError,
                       KafkaError, RequestTimedOutError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.create_partitions_response import CreatePartitionsResponse, CreatePartitionsTopicResult
from ..authorization import ALTER, TOPIC, authorized_names
from ..quotas import mutation_quota
from ..topic_store import INTERNAL_TOPICS
from .create_topics import _registered_brokers, check_manual_replicas

API_KEY = ApiKey.CREATE_PARTITIONS
VERSIONS = (0, 3)


def _create(broker, topic, validate_only, quota=None):
    info = broker.topics.get(topic.name)
    if info is None:
        raise UnknownTopicOrPartitionError(f"topic '{topic.name}' does not exist")
    if topic.name in INTERNAL_TOPICS:
        raise InvalidTopicError(f"cannot add partitions to internal topic {topic.name}")
    current = info.partitions
    if topic.count == current:
        raise InvalidPartitionsError(f"Topic already has {current} partition(s).")
    if topic.count < current:
        raise InvalidPartitionsError(
            f"The topic {topic.name} currently has {current} partition(s); {topic.count} would not be an increase.")
    additional = topic.count - current
    if topic.assignments is not None:
        if len(topic.assignments) != additional:
            raise InvalidReplicaAssignmentError(
                f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
                f"assignment(s) were specified.")
        registered = _registered_brokers(broker)
        for a in topic.assignments:
            check_manual_replicas(registered, a.broker_ids)
    if quota is not None:  # KIP-599: the partitions added, once the checks passed
        quota.record(additional)
    broker.create_partitions(topic.name, topic.count, validate_only=validate_only,
                             assignments=None if topic.assignments is None else
                             [list(a.broker_ids) for a in topic.assignments])


async def handle(ctx, req):
    """Written through the topic store (see create_topics); the new partitions' leaders are
    awaited on the event loop."""
    alterable = authorized_names(ctx, ALTER, TOPIC, [t.name for t in req.topics])
    quota = None if req.validate_only else mutation_quota(ctx)
    response, created = await ctx.broker.topic_store_call(_respond, ctx.broker, req, alterable, quota)
    if created and not req.validate_only and req.timeout_ms > 0:
        return await _await_leaders(ctx.broker, response, created, req.timeout_ms)
    return response


def _respond(broker, req, alterable, quota=None):
    """(the response, [(result, new partition count)] of the topics changed). A topic needs
    ALTER (else TOPIC_AUTHORIZATION_FAILED, as Kafka)."""
    counts = {}
    for t in req.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    results, created = [], []
    for t in req.topics:
        if counts[t.name] > 1:
            continue
        result = CreatePartitionsTopicResult(name=t.name, error_message=None)
        try:
            if t.name not in alterable:
                raise TopicAuthorizationFailedError("Authorization failed.")
            _create(broker, t, req.validate_only, quota)
            created.append((result, t.count))
        except KafkaError as e:
            result.error_code = e.code
            result.error_message = e.message
        results.append(result)
    results += [CreatePartitionsTopicResult(name=name, error_code=InvalidRequestError.code,
                                            error_message="Duplicate topic name.")
                for name, n in counts.items() if n > 1]
    return CreatePartitionsResponse(results=results), created


async def _await_leaders(broker, response, created, timeout_ms):
    waits = [broker.wait_for_topic(r.name, timeout_ms / 1000, partitions=count) for r, count in created]
    for (r, _count), ready in zip(created, await asyncio.gather(*waits)):
        if not ready:
            r.error_code = RequestTimedOutError.code
            r.error_message = f"the partitions were added, but not each had a leader within {timeout_ms} ms"
    return response


def error_response(req, version, code):
    return CreatePartitionsResponse(results=[CreatePartitionsTopicResult(name=t.name, error_code=code,
                                                                         error_message=None) for t in req.topics])
