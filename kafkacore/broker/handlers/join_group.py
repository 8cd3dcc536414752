"""JoinGroup (API key 11), versions 0-9.

- A member joins (or rejoins) a classic group; the response waits until the rebalance
  completes (all members rejoined, or the rebalance timeout), so ``handle`` returns a
  coroutine for it. Errors and immediate answers come back at once.
- v4+: a member without a member id gets MEMBER_ID_REQUIRED with its new id (and must join
  again with it within its session timeout); before v4 it is added straight away.
- v0 has no rebalance timeout: the session timeout is used, as in Kafka.
- v5+: ``group_instance_id`` (static membership). v7+: the protocol type is returned and the
  protocol name may be null. v8+: the client's reason is logged. v9+: a static leader rejoining
  a Stable group gets ``skip_assignment`` (KIP-814) with the members' metadata.
- Errors: INVALID_GROUP_ID (empty id), INVALID_SESSION_TIMEOUT (outside
  group.min/max.session.timeout.ms), UNKNOWN_MEMBER_ID, INCONSISTENT_GROUP_PROTOCOL (another
  protocol type, or no protocol in common), GROUP_MAX_SIZE_REACHED, FENCED_INSTANCE_ID,
  MEMBER_ID_REQUIRED, REBALANCE_IN_PROGRESS (a second JoinGroup from the same member replaced
  this one).
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from ...errors import GroupAuthorizationFailedError
from ..authorization import GROUP, READ, require
from ._group_common import client_host, coordinator

API_KEY = ApiKey.JOIN_GROUP
VERSIONS = (0, 9)


def _response(r, v):
    return JoinGroupResponse(
        error_code=r.error, generation_id=r.generation, protocol_type=r.protocol_type,
        protocol_name=r.protocol_name if v >= 7 else (r.protocol_name or ""), leader=r.leader or "",
        skip_assignment=r.skip_assignment, member_id=r.member_id,
        members=[JoinGroupResponseMember(member_id=mid, group_instance_id=iid, metadata=md)
                 for mid, iid, md in r.members])


async def _wait(fut, v):
    return _response(await fut, v)


def handle(ctx, req):
    v = ctx.api_version
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms
    fut = coordinator(ctx).join_group(
        req.group_id, req.member_id, req.group_instance_id if v >= 5 else None, ctx.client_id, client_host(ctx),
        req.session_timeout_ms, rebalance_timeout, req.protocol_type,
        [(p.name, p.metadata) for p in req.protocols], require_known_member_id=v >= 4,
        supports_skip_assignment=v >= 9, reason=req.reason)
    if fut.done():
        return _response(fut.result(), v)
    return _wait(fut, v)


def error_response(req, version, code):
    return JoinGroupResponse(error_code=code, generation_id=-1, protocol_type=None,
                             protocol_name=None if version >= 7 else "", leader="", member_id=req.member_id)
