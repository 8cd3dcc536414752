"""Heartbeat (API key 12), versions 0-4.

Keeps a member's session alive. Answers: NONE (Stable, or CompletingRebalance: the member
gets its assignment from SyncGroup), REBALANCE_IN_PROGRESS (PreparingRebalance: rejoin),
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID (unknown group or member, or the group is Empty),
FENCED_INSTANCE_ID (v3+: a static member known under another member id), INVALID_GROUP_ID.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.heartbeat_response import HeartbeatResponse
from ...errors import GroupAuthorizationFailedError
from ..authorization import GROUP, READ, require
from ._group_common import coordinator

API_KEY = ApiKey.HEARTBEAT
VERSIONS = (0, 4)


def handle(ctx, req):
    v = ctx.api_version
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    code = coordinator(ctx).heartbeat(req.group_id, req.member_id, req.group_instance_id if v >= 3 else None,
                                      req.generation_id)
    return HeartbeatResponse(error_code=code)


def error_response(req, version, code):
    return HeartbeatResponse(error_code=code)
