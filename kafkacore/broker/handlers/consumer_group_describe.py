"""ConsumerGroupDescribe (API key 69), version 0: KIP-848 consumer groups.

Each group's state (Empty, Assigning, Reconciling, Stable), group epoch, assignment epoch,
assignor (the one the group's members prefer, else the first of ``group.consumer.assignors``)
and members: member and instance ids, rack, member epoch, client id and host, subscription,
current and target assignments (topic id and name). A group that is unknown or of another
type is GROUP_ID_NOT_FOUND, as in Kafka. DESCRIBE on the group, else
GROUP_AUTHORIZATION_FAILED; with ``include_authorized_operations`` the group's operations.
"""
from ...coordinator.consumer_group import preferred_assignor
from ...errors import GroupAuthorizationFailedError, GroupIdNotFoundError
from ...protocol.api_table import ApiKey
from ...protocol.messages.consumer_group_describe_response import (Assignment, ConsumerGroupDescribeResponse,
                                                                    DescribedGroup, Member, TopicPartitions)
from ..authorization import DESCRIBE, GROUP, UNSET_OPERATIONS, authorize, authorized_operations
from ._group_common import coordinator

API_KEY = ApiKey.CONSUMER_GROUP_DESCRIBE
VERSIONS = (0, 0)
GROUP_PROTOCOL = "consumer"  # served while group.coordinator.rebalance.protocols names it


def _assignment(cg, assignment):
    return Assignment(topic_partitions=[
        TopicPartitions(topic_id=tid, topic_name=cg.topic_name(tid), partitions=sorted(parts))
        for tid, parts in sorted(assignment.items()) if parts])


def _describe(ctx, cg, group_id, with_ops):
    if not authorize(ctx, DESCRIBE, GROUP, group_id):
        return DescribedGroup(group_id=group_id, error_code=GroupAuthorizationFailedError.code)
    error, group = cg.describe(group_id)
    if group is None:
        message = f"Group {group_id} not found." if error == GroupIdNotFoundError.code else None
        return DescribedGroup(group_id=group_id, error_code=error, error_message=message)
    return DescribedGroup(
        group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=preferred_assignor(group.members.values(), cg.assignors[0]),
        authorized_operations=authorized_operations(ctx, GROUP, group_id) if with_ops else UNSET_OPERATIONS,
        members=[Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                        member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                        subscribed_topic_names=list(m.subscribed_topic_names),
                        subscribed_topic_regex=m.subscribed_topic_regex or None,
                        assignment=_assignment(cg, m.assigned),
                        target_assignment=_assignment(cg, group.target_assignment.get(m.member_id, {})))
                 for m in group.members.values()])


def handle(ctx, req):
    cg = coordinator(ctx).consumer
    return ConsumerGroupDescribeResponse(groups=[_describe(ctx, cg, gid, req.include_authorized_operations)
                                                 for gid in req.group_ids])


def error_response(req, version, code):
    return ConsumerGroupDescribeResponse(groups=[DescribedGroup(group_id=gid, error_code=code)
                                                 for gid in req.group_ids])
