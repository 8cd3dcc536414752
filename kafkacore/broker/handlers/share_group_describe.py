"""ShareGroupDescribe (API key 77), versions 0-1: KIP-932 share groups.

Each group's state (Empty, Stable), group epoch, assignment epoch, assignor (``simple``, the
first of ``group.share.assignors``) and members: member id, rack, member epoch, client id and
host, subscribed topic names and current assignment (topic id and name). A group that is
unknown or of another type is GROUP_ID_NOT_FOUND, as in Kafka. DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED; a group whose members read a topic the caller may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED (Kafka 4.1's rule: the caller must not learn of hidden topics); with
``include_authorized_operations`` the group's operations. Served while the share protocol is.
"""
from ...errors import GroupAuthorizationFailedError, GroupIdNotFoundError, TopicAuthorizationFailedError
from ...protocol.api_table import ApiKey
from ...protocol.messages.share_group_describe_response import (Assignment, DescribedGroup, Member,
                                                                 ShareGroupDescribeResponse, TopicPartitions)
from ..authorization import (DESCRIBE, GROUP, TOPIC, UNSET_OPERATIONS, authorize, authorized_names,
                             authorized_operations)
from ._group_common import coordinator

API_KEY = ApiKey.SHARE_GROUP_DESCRIBE
VERSIONS = (0, 1)
GROUP_PROTOCOL = "share"  # served while the share protocol is switched on (config.served_group_protocols)


def _assignment(sc, assignment):
    return Assignment(topic_partitions=[
        TopicPartitions(topic_id=tid, topic_name=sc.topic_name(tid), partitions=sorted(parts))
        for tid, parts in sorted(assignment.items()) if parts])


def _describe(ctx, sc, group_id, with_ops):
    if not authorize(ctx, DESCRIBE, GROUP, group_id):
        return DescribedGroup(group_id=group_id, error_code=GroupAuthorizationFailedError.code)
    error, group = sc.describe(group_id)
    if group is None:
        message = f"Group {group_id} not found." if error == GroupIdNotFoundError.code else None
        return DescribedGroup(group_id=group_id, error_code=error, error_message=message)
    topics = {t for m in group.members.values() for t in m.subscribed_topic_names}
    topics |= {sc.topic_name(tid) for m in group.members.values() for tid in m.assigned}
    topics.discard("")
    if topics - authorized_names(ctx, DESCRIBE, TOPIC, topics):
        return DescribedGroup(group_id=group_id, error_code=TopicAuthorizationFailedError.code,
                              error_message="The group has subscribed topics that are not authorized.")
    return DescribedGroup(
        group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=sc.assignors[0],
        authorized_operations=authorized_operations(ctx, GROUP, group_id) if with_ops else UNSET_OPERATIONS,
        members=[Member(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                        client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        assignment=_assignment(sc, m.assigned))
                 for m in group.members.values()])


def handle(ctx, req):
    sc = coordinator(ctx).share
    return ShareGroupDescribeResponse(groups=[_describe(ctx, sc, gid, req.include_authorized_operations)
                                              for gid in req.group_ids])


def error_response(req, version, code):
    return ShareGroupDescribeResponse(groups=[DescribedGroup(group_id=gid, error_code=code)
                                              for gid in req.group_ids])
