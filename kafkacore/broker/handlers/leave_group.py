"""LeaveGroup (API key 13), versions 0-5.

- v0-2: one member (``member_id``); its error is the response's error code.
- v3+: a batch of members, each by member id and/or group.instance.id, with an error per
  member. A static member can be removed by its instance id alone (empty member id), which is
  how an administrator removes one. v5+ carries a reason per member (logged).
- A member leaving makes the group rebalance (a pending MEMBER_ID_REQUIRED member just goes).
- An unknown group answers UNKNOWN_MEMBER_ID per member (top-level NONE, as Kafka);
  FENCED_INSTANCE_ID when the instance id belongs to another member id; INVALID_GROUP_ID
  for an empty group id.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.leave_group_response import LeaveGroupResponse, MemberResponse
from ...errors import GroupAuthorizationFailedError
from ..authorization import GROUP, READ, require
from ._group_common import coordinator

API_KEY = ApiKey.LEAVE_GROUP
VERSIONS = (0, 5)


def handle(ctx, req):
    v = ctx.api_version
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    if v < 3:
        leaving = [(req.member_id, None)]
    else:
        leaving = [(m.member_id, m.group_instance_id) for m in req.members]
    top, errors = coordinator(ctx).leave_group(req.group_id, leaving)
    if v < 3:
        code = top if top else (errors[0] if errors else 0)
        return LeaveGroupResponse(error_code=code)
    return LeaveGroupResponse(error_code=top, members=[
        MemberResponse(member_id=mid, group_instance_id=iid, error_code=code)
        for (mid, iid), code in zip(leaving, errors)])


def error_response(req, version, code):
    return LeaveGroupResponse(error_code=code)
