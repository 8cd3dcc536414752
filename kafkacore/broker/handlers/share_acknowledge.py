"""ShareAcknowledge (API key 79), versions 0-1 (KIP-932; v1, Kafka 4.1's stable version, has
v0's fields; librdkafka 2.16 sends v1).

Acknowledges records a member holds without fetching more: per record range ACCEPT (1),
RELEASE (2), REJECT (3) or GAP (0) (coordinator/share_partition.py). As Kafka's KafkaApis /
SharePartitionManager.acknowledgeSessionUpdate:

- Top level: an empty group id or member id is INVALID_REQUEST; READ on the group
  (GROUP_AUTHORIZATION_FAILED). ShareSessionEpoch 0 is INVALID_SHARE_SESSION_EPOCH (a session is
  opened by ShareFetch only); otherwise the member's share session must exist
  (SHARE_SESSION_NOT_FOUND) and -1 or its next epoch be given (INVALID_SHARE_SESSION_EPOCH).
  -1 closes the session after the acknowledgements and releases what the member still holds.
- Per partition: UNKNOWN_TOPIC_ID, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
  NOT_LEADER_OR_FOLLOWER (with ``current_leader`` and ``node_endpoints``), INVALID_RECORD_STATE
  for a record the member does not hold (nothing of that partition changes), INVALID_REQUEST for
  a malformed batch or one past the last record handed out (SharePartition.acknowledge has the
  rules). The share partition's state is written through the persister before the
  answer.

Served (and advertised) while ``group.coordinator.rebalance.protocols`` names ``share`` and
``group.share.enable`` is on, as the share groups' other APIs.
"""
from __future__ import annotations

from ...errors import InvalidShareSessionEpochError, KafkaError, NotLeaderOrFollowerError, ShareSessionNotFoundError
from ...protocol.api_table import ApiKey
from ...protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH
from ...protocol.messages.share_acknowledge_response import (LeaderIdAndEpoch, NodeEndpoint, PartitionData,
                                                             ShareAcknowledgeResponse, ShareAcknowledgeTopicResponse)
from ._share_common import (ack_batches, acknowledge, check_request, current_leader, error_of, leader_of,
                            node_endpoints, readable_topics, write_states)

API_KEY = ApiKey.SHARE_ACKNOWLEDGE
VERSIONS = (0, 1)
GROUP_PROTOCOL = "share"  # served while the share protocol is switched on (config.served_group_protocols)


def _error(code, message=None):
    return ShareAcknowledgeResponse(error_code=code, error_message=message, responses=[])


def handle(ctx, req):
    try:
        check_request(ctx, req)
        session = _session(ctx, req)
    except KafkaError as e:
        return _error(e.code, e.message)
    return _acknowledge(ctx, req, session)


def _session(ctx, req):
    sessions = ctx.broker.share_partition_manager.sessions
    epoch = req.share_session_epoch
    if epoch == INITIAL_EPOCH:
        raise InvalidShareSessionEpochError("ShareAcknowledge cannot open a share session (epoch 0)")
    session = sessions.get(req.group_id, req.member_id)
    if session is None:
        raise ShareSessionNotFoundError(f"no share session for member {req.member_id} of group {req.group_id}")
    if epoch != FINAL_EPOCH:
        if session.epoch != epoch:
            raise InvalidShareSessionEpochError(f"share session epoch {epoch}, expected {session.epoch}")
        session.advance()
    return session


async def _acknowledge(ctx, req, session):
    broker = ctx.broker
    by_id = broker.topics_by_id
    readable = readable_topics(ctx, {by_id[bytes(t.topic_id)].name for t in req.topics if bytes(t.topic_id) in by_id})
    out = []
    leader_ids = set()
    answers, written = {}, {}
    for t in req.topics:
        tid = bytes(t.topic_id)
        parts = []
        for p in t.partitions:
            pd = PartitionData(partition_index=p.partition_index,
                               current_leader=LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))
            parts.append(pd)
            try:
                leader = leader_of(ctx, tid, p.partition_index, readable)
                written[(tid, p.partition_index)] = await acknowledge(ctx, req.group_id, req.member_id, leader,
                                                                     ack_batches(p))
                answers[(tid, p.partition_index)] = pd
            except Exception as e:  # noqa: BLE001 - one partition's failure is its answer, the others go on
                pd.error_code, pd.error_message = error_of(e)
                if isinstance(e, NotLeaderOrFollowerError):
                    leader_id, leader_epoch = current_leader(ctx, tid, p.partition_index)
                    pd.current_leader = LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=leader_epoch)
                    if leader_id >= 0:
                        leader_ids.add(leader_id)
        out.append(ShareAcknowledgeTopicResponse(topic_id=tid, partitions=parts))
    for key, e in (await write_states(written)).items():
        answers[key].error_code, answers[key].error_message = error_of(e)
    if req.share_session_epoch == FINAL_EPOCH:
        mgr = broker.share_partition_manager
        mgr.sessions.remove(req.group_id, req.member_id)
        mgr.release_session(session)
    return ShareAcknowledgeResponse(responses=out, node_endpoints=node_endpoints(ctx, leader_ids, NodeEndpoint))


def error_response(req, version, code):
    return _error(code)
