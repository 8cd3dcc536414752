"""DescribeGroups (API key 15), versions 0-5.

Each group's state, protocol type and members (member id, v4+ group.instance.id, client id,
client host). As in Kafka the selected protocol and each member's metadata and assignment are
only given while the group is Stable. An unknown group is described as Dead with no error
(v0-5 have no GROUP_ID_NOT_FOUND); so is a KIP-848 consumer group, as in Kafka (ConsumerGroupDescribe
describes those). v3+: with ``include_authorized_operations`` the group's
operations (READ, DELETE, DESCRIBE: there are no ACLs here), otherwise the "not requested"
value.
"""
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_groups_response import (DescribedGroup, DescribedGroupMember,
                                                            DescribeGroupsResponse)
from ...errors import GroupAuthorizationFailedError
from ..authorization import DESCRIBE, GROUP, UNSET_OPERATIONS, authorize, authorized_operations
from ._group_common import coordinator

API_KEY = ApiKey.DESCRIBE_GROUPS
VERSIONS = (0, 5)


def handle(ctx, req):
    v = ctx.api_version
    gc = coordinator(ctx)
    with_ops = v >= 3 and req.include_authorized_operations
    groups = []
    for group_id in req.groups:
        if not authorize(ctx, DESCRIBE, GROUP, group_id):
            groups.append(DescribedGroup(error_code=GroupAuthorizationFailedError.code, group_id=group_id))
            continue
        s = gc.describe_group(group_id)
        ops = authorized_operations(ctx, GROUP, group_id) if with_ops else UNSET_OPERATIONS
        groups.append(DescribedGroup(
            group_id=group_id, group_state=s.state, protocol_type=s.protocol_type, protocol_data=s.protocol,
            authorized_operations=ops, members=[
                DescribedGroupMember(member_id=mid, group_instance_id=iid, client_id=cid, client_host=host,
                                     member_metadata=md, member_assignment=asg)
                for mid, iid, cid, host, md, asg in s.members]))
    return DescribeGroupsResponse(groups=groups)


def error_response(req, version, code):
    return DescribeGroupsResponse(groups=[DescribedGroup(error_code=code, group_id=gid) for gid in req.groups])
