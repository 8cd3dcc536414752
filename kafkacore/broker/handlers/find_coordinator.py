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
- Key type 2 (share group, v6+) and any other type: INVALID_REQUEST.
- v0-3 carry one key (v0 has no key type: group); v4+ carry a batch (``coordinator_keys``),
  answered one ``Coordinator`` entry per key, in request order.
- Error messages (v1+) are null on success.
"""
from ...coordinator.offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC
from ...coordinator.transaction_log import TRANSACTION_STATE_TOPIC
from ...errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from ._group_common import coordinator
from ._txn_common import transaction_coordinator

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 6)
GROUP, TRANSACTION, SHARE = 0, 1, 2
COORDINATOR_WAIT_S = 5.0  # for the leaders of an internal topic this request created


def _lookup(ctx, key_type, key):
    """(error code, message, node id, host, port)"""
    if key_type == GROUP:
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
        try:
            node = tc.coordinator_for(key)
        except KafkaError as e:
            return e.code, e.message, -1, "", -1
        return _endpoint(ctx, node)
    return InvalidRequestError.code, f"unsupported coordinator key type {key_type}", -1, "", -1


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
