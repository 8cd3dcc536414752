"""FindCoordinator (API key 10), versions 0-6.

- Key type 0 (group): the leader of the group's ``__consumer_offsets`` partition coordinates
  the group (on a single node: this node). The first such request creates
  ``__consumer_offsets`` (``offsets.topic.num.partitions`` partitions, compacted).
- Key type 1 (transaction): the leader of the id's ``__transaction_state`` partition (the
  first such request creates the topic); an empty transactional id is INVALID_REQUEST.
- Kafka answers COORDINATOR_NOT_AVAILABLE while the topic it just created has no leaders, and
  the client asks again after its backoff (librdkafka: up to a second). Here the answer waits
  for those leaders instead, up to ``COORDINATOR_WAIT_S``: a new single node's first group or
  transaction does not stall for a retry.
- Key type 2 (share, v6+; KIP-932): a share partition's key "group:topicId:partition" -> the
  leader of its ``__share_group_state`` partition (created on first use), the share coordinator
  the brokers' persisters send share state to. Only brokers ask: CLUSTER_ACTION on the cluster
  (CLUSTER_AUTHORIZATION_FAILED otherwise), as Kafka checks; a key of another shape, or the key
  type before v6, is INVALID_REQUEST.
- Any other key type: INVALID_REQUEST.
- v0-3 carry one key (v0 has no key type: group); v4+ carry a batch (``coordinator_keys``),
  answered one ``Coordinator`` entry per key, in request order.
- Error messages (v1+) are null on success.
"""
from ...coordinator.offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC
from ...coordinator.share_state_log import SHARE_GROUP_STATE_TOPIC
from ...coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from ...errors import (ClusterAuthorizationFailedError, CoordinatorNotAvailableError, GroupAuthorizationFailedError,
                       InvalidRequestError, KafkaError, TransactionalIdAuthorizationFailedError)
from ...protocol.api_table import ApiKey
from ...protocol.kafka_uuid import uuid_from_text
from ...protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from ..authorization import CLUSTER_ACTION, DESCRIBE, TRANSACTIONAL_ID, authorize, authorize_cluster
from ..authorization import GROUP as GROUP_RESOURCE
from ._group_common import coordinator
from ._txn_common import transaction_coordinator

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 6)
GROUP, TRANSACTION, SHARE = 0, 1, 2
COORDINATOR_WAIT_S = 5.0  # for the leaders of an internal topic this request created


def _lookup(ctx, key_type, key):
    """(error code, message, node id, host, port)"""
    if key_type == GROUP:
        if not authorize(ctx, DESCRIBE, GROUP_RESOURCE, key):
            return GroupAuthorizationFailedError.code, f"not authorized to describe group {key!r}", -1, "", -1
        try:
            node = coordinator(ctx).coordinator_for_group(key)
        except KafkaError as e:
            return e.code, e.message, -1, "", -1
        return _endpoint(ctx, node)
    if key_type == TRANSACTION:
        tc = transaction_coordinator(ctx)
        if tc is None:
            return CoordinatorNotAvailableError.code, "no transaction coordinator", -1, "", -1
        if not key:
            return InvalidRequestError.code, "empty transactional id", -1, "", -1
        if not authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, key):
            return (TransactionalIdAuthorizationFailedError.code, f"not authorized to describe transactional id "
                    f"{key!r}", -1, "", -1)
        try:
            node = tc.coordinator_for(key)
        except KafkaError as e:
            return e.code, e.message, -1, "", -1
        return _endpoint(ctx, node)
    if key_type == SHARE and ctx.api_version >= 6:
        if not authorize_cluster(ctx, CLUSTER_ACTION):
            return ClusterAuthorizationFailedError.code, "share coordinator keys are for brokers", -1, "", -1
        if not _share_key_valid(key):
            return InvalidRequestError.code, f"{key!r} is not a share partition key group:topicId:partition", -1, "", -1
        try:
            node = ctx.broker.share_coordinator.coordinator_for(key)
        except KafkaError as e:
            return e.code, e.message, -1, "", -1
        return _endpoint(ctx, node)
    return InvalidRequestError.code, f"unsupported coordinator key type {key_type}", -1, "", -1


def _share_key_valid(key) -> bool:
    """Kafka's SharePartitionKey.validate: a group id, a topic id and a partition number."""
    parts = (key or "").rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        return False
    try:
        uuid_from_text(parts[1])
        return int(parts[2]) >= 0
    except ValueError:
        return False


def _endpoint(ctx, node):
    """The coordinator's address on the request's listener (Kafka's getAliveBrokerNode with the
    listener name: a coordinator without it is not available to this client)."""
    ep = ctx.broker.metadata_cache.brokers.get(node)
    address = ep.address(ctx.answering_listener) if ep is not None else None
    if address is None:
        why = "is not live" if ep is None else f"has no listener {ctx.answering_listener}"
        return CoordinatorNotAvailableError.code, f"coordinator {node} {why}", -1, "", -1
    return 0, None, node, address[0], address[1]


def handle(ctx, req):
    resp = _answer(ctx, req)
    codes = [resp.error_code] if ctx.api_version < 4 else [c.error_code for c in resp.coordinators]
    if CoordinatorNotAvailableError.code in codes:
        topic = _internal_topic(ctx, req.key_type if ctx.api_version >= 1 else GROUP)
        if topic is not None:
            return _after_leaders(ctx, req, *topic)
    return resp


def _internal_topic(ctx, key_type):
    """(name, partitions) of the internal topic behind the key type, or None."""
    cfg = ctx.broker.config
    if key_type == GROUP:
        return CONSUMER_OFFSETS_TOPIC, cfg["offsets.topic.num.partitions"]
    if key_type == TRANSACTION:
        return TRANSACTION_STATE_TOPIC, cfg["transaction.state.log.num.partitions"]
    if key_type == SHARE:
        return SHARE_GROUP_STATE_TOPIC, cfg["share.coordinator.state.topic.num.partitions"]
    return None


async def _after_leaders(ctx, req, topic, partitions):
    await ctx.broker.wait_for_topic(topic, COORDINATOR_WAIT_S, partitions)
    return _answer(ctx, req)


def _answer(ctx, req):
    v = ctx.api_version
    key_type = req.key_type if v >= 1 else GROUP
    if v < 4:
        code, msg, node, host, port = _lookup(ctx, key_type, req.key)
        return FindCoordinatorResponse(error_code=code, error_message=msg, node_id=node, host=host, port=port)
    coordinators = []
    for key in req.coordinator_keys:
        code, msg, node, host, port = _lookup(ctx, key_type, key)
        coordinators.append(Coordinator(key=key, node_id=node, host=host, port=port, error_code=code,
                                        error_message=msg))
    return FindCoordinatorResponse(coordinators=coordinators)


def error_response(req, version, code):
    if version < 4:
        return FindCoordinatorResponse(error_code=code, error_message=None, node_id=-1, host="", port=-1)
    return FindCoordinatorResponse(coordinators=[
        Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None)
        for k in req.coordinator_keys])
