"""FindCoordinator (API key 10), versions 0-6.

- Key type 0 (group): on a single node this node coordinates every group; on a cluster the
  leader of the group's ``__consumer_offsets`` partition does (loading groups when leadership
  moves is not done yet: docs/cluster.md). The first such request creates
  ``__consumer_offsets`` (``offsets.topic.num.partitions`` partitions, compacted) and the
  answer names this node at once (Kafka answers COORDINATOR_NOT_AVAILABLE until its
  asynchronous creation is done; here creation is synchronous).
- Key type 1 (transaction): this node on a single node, the leader of the id's
  ``__transaction_state`` partition on a cluster (the first such request creates the topic);
  an empty transactional id is INVALID_REQUEST.
- Key type 2 (share group, v6+) and any other type: INVALID_REQUEST.
- v0-3 carry one key (v0 has no key type: group); v4+ carry a batch (``coordinator_keys``),
  answered one ``Coordinator`` entry per key, in request order.
- Error messages (v1+) are null on success.
"""
from ...errors import CoordinatorNotAvailableError, InvalidRequestError, KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse
from ._group_common import coordinator
from ._txn_common import transaction_coordinator

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = (0, 6)
GROUP, TRANSACTION, SHARE = 0, 1, 2


def _lookup(ctx, key_type, key):
    """(error code, message, node id, host, port)"""
    broker = ctx.broker
    if key_type == GROUP:
        try:
            node = coordinator(ctx).coordinator_for_group(key)
        except KafkaError as e:
            return e.code, e.message, -1, "", -1
        return _endpoint(broker, node)
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
        return _endpoint(broker, node)
    return InvalidRequestError.code, f"unsupported coordinator key type {key_type}", -1, "", -1


def _endpoint(broker, node):
    ep = broker.metadata_cache.brokers.get(node)
    if ep is None:
        return CoordinatorNotAvailableError.code, f"coordinator {node} is not live", -1, "", -1
    return 0, None, node, ep.host, ep.port


def handle(ctx, req):
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
