"""SyncGroup (API key 14), versions 0-5.

- The leader sends every member's assignment; it is written to __consumer_offsets (the
  group's metadata record) and handed to every member waiting in SyncGroup. Followers that
  sync before the leader wait (``handle`` returns a coroutine); members missing from the
  leader's assignment get an empty one. In a Stable group the member's assignment is
  returned at once.
- Errors: INVALID_GROUP_ID, UNKNOWN_MEMBER_ID (unknown group or member, or the group is
  Empty), FENCED_INSTANCE_ID (v3+ static members), ILLEGAL_GENERATION,
  REBALANCE_IN_PROGRESS (a rebalance started; rejoin), INCONSISTENT_GROUP_PROTOCOL (v5+: the
  protocol type or name given differs from the group's), and the coordinator's storage errors
  (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, UNKNOWN_SERVER_ERROR) when the assignment could
  not be written.
- v5+ responses carry the group's protocol type and name.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.sync_group_response import SyncGroupResponse
from ...errors import GroupAuthorizationFailedError
from ..authorization import GROUP, READ, require
from ._group_common import coordinator

API_KEY = ApiKey.SYNC_GROUP
VERSIONS = (0, 5)


def _response(r):
    return SyncGroupResponse(error_code=r.error, protocol_type=r.protocol_type, protocol_name=r.protocol_name,
                             assignment=r.assignment)


async def _wait(fut):
    return _response(await fut)


def handle(ctx, req):
    v = ctx.api_version
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    assignments = {}
    for a in req.assignments:
        assignments[a.member_id] = a.assignment
    fut = coordinator(ctx).sync_group(
        req.group_id, req.generation_id, req.member_id, req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None, assignments)
    if fut.done():
        return _response(fut.result())
    return _wait(fut)


def error_response(req, version, code):
    return SyncGroupResponse(error_code=code, assignment=b"")
