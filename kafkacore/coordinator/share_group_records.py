"""The records a KIP-932 share group keeps in ``__consumer_offsets``, in Kafka's format
(``../shared/kafka-protocol/coordinator/ShareGroup*.json``; Kafka's
GroupCoordinatorRecordHelpers), and their replay when a partition is loaded.

The layout is the consumer group's (``consumer_group_records.encode_record``): an int16 record
type then the key, an int16 version (0) then the value; a null value deletes the key.

- 9 ShareGroupPartitionMetadata (key: group): the subscribed topics' ids, names, partition counts;
- 10 ShareGroupMemberMetadata (group, member): rack, client id and host, subscribed topics;
- 11 ShareGroupMetadata (group): the group epoch;
- 12 ShareGroupTargetAssignmentMetadata (group): the assignment epoch;
- 13 ShareGroupTargetAssignmentMember (group, member): the member's target partitions;
- 14 ShareGroupCurrentMemberAssignment (group, member): member epoch, previous epoch, state,
  assigned partitions.

- 15 ShareGroupStatePartitionMetadata (group): the share partitions whose state may exist (every
  partition ever assigned to a member; the share-partition leader initializes the state itself
  when it first loads the partition), which DeleteGroups deletes with the group.

Kafka's order,
as for consumer groups: a member's records before the group epoch that counts them; a member
leaves with the tombstones of its current assignment, target and metadata; a group is deleted
with those of its target-assignment metadata, partition metadata and group metadata.
"""
from __future__ import annotations

from ..protocol.coordinator.share_group_current_member_assignment_key import ShareGroupCurrentMemberAssignmentKey
from ..protocol.coordinator.share_group_current_member_assignment_value import (
    ShareGroupCurrentMemberAssignmentValue, TopicPartitions)
from ..protocol.coordinator.share_group_member_metadata_key import ShareGroupMemberMetadataKey
from ..protocol.coordinator.share_group_member_metadata_value import ShareGroupMemberMetadataValue
from ..protocol.coordinator.share_group_metadata_key import ShareGroupMetadataKey
from ..protocol.coordinator.share_group_metadata_value import ShareGroupMetadataValue
from ..protocol.coordinator.share_group_partition_metadata_key import ShareGroupPartitionMetadataKey
from ..protocol.coordinator.share_group_partition_metadata_value import (ShareGroupPartitionMetadataValue,
                                                                         TopicMetadata)
from ..protocol.coordinator.share_group_state_partition_metadata_key import ShareGroupStatePartitionMetadataKey
from ..protocol.coordinator.share_group_state_partition_metadata_value import (
    ShareGroupStatePartitionMetadataValue, TopicPartitionsInfo)
from ..protocol.coordinator.share_group_target_assignment_member_key import ShareGroupTargetAssignmentMemberKey
from ..protocol.coordinator.share_group_target_assignment_member_value import (
    ShareGroupTargetAssignmentMemberValue, TopicPartition)
from ..protocol.coordinator.share_group_target_assignment_metadata_key import \
    ShareGroupTargetAssignmentMetadataKey
from ..protocol.coordinator.share_group_target_assignment_metadata_value import \
    ShareGroupTargetAssignmentMetadataValue
from ..protocol.wire import ProtocolDecodeError, Reader
from .consumer_group_records import encode_record
from .share_group import MEMBER_STABLE, ShareGroup, ShareGroupMember

PARTITION_METADATA = 9
MEMBER_METADATA = 10
GROUP_METADATA = 11
TARGET_ASSIGNMENT_METADATA = 12
TARGET_ASSIGNMENT_MEMBER = 13
CURRENT_MEMBER_ASSIGNMENT = 14
STATE_PARTITION_METADATA = 15

_KEYS = {
    PARTITION_METADATA: ShareGroupPartitionMetadataKey,
    MEMBER_METADATA: ShareGroupMemberMetadataKey,
    GROUP_METADATA: ShareGroupMetadataKey,
    TARGET_ASSIGNMENT_METADATA: ShareGroupTargetAssignmentMetadataKey,
    TARGET_ASSIGNMENT_MEMBER: ShareGroupTargetAssignmentMemberKey,
    CURRENT_MEMBER_ASSIGNMENT: ShareGroupCurrentMemberAssignmentKey,
    STATE_PARTITION_METADATA: ShareGroupStatePartitionMetadataKey,
}
_VALUES = {
    PARTITION_METADATA: ShareGroupPartitionMetadataValue,
    MEMBER_METADATA: ShareGroupMemberMetadataValue,
    GROUP_METADATA: ShareGroupMetadataValue,
    TARGET_ASSIGNMENT_METADATA: ShareGroupTargetAssignmentMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: ShareGroupTargetAssignmentMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: ShareGroupCurrentMemberAssignmentValue,
    STATE_PARTITION_METADATA: ShareGroupStatePartitionMetadataValue,
}
VALUE_VERSION = 0


def _key(kind, group_id, member_id=None):
    cls = _KEYS[kind]
    obj = cls(group_id=group_id) if member_id is None else cls(group_id=group_id, member_id=member_id)
    return encode_record(kind, obj)


def _value(obj):
    return encode_record(VALUE_VERSION, obj)


def _partitions(cls, assignment):
    return [cls(topic_id=tid, partitions=sorted(parts)) for tid, parts in sorted(assignment.items()) if parts]


# -- records (key, value) ----------------------------------------------------------------------------
def group_epoch_record(group_id, epoch):
    return _key(GROUP_METADATA, group_id), _value(ShareGroupMetadataValue(epoch=epoch))


def subscription_metadata_record(group_id, metadata):
    """``metadata``: {topic name: (topic id, partition count)}."""
    topics = [TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
              for name, (tid, n) in sorted(metadata.items())]
    return _key(PARTITION_METADATA, group_id), _value(ShareGroupPartitionMetadataValue(topics=topics))


def member_metadata_record(group_id, m):
    return _key(MEMBER_METADATA, group_id, m.member_id), _value(ShareGroupMemberMetadataValue(
        rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names)))


def target_assignment_epoch_record(group_id, epoch):
    return (_key(TARGET_ASSIGNMENT_METADATA, group_id),
            _value(ShareGroupTargetAssignmentMetadataValue(assignment_epoch=epoch)))


def target_assignment_record(group_id, member_id, assignment):
    return (_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            _value(ShareGroupTargetAssignmentMemberValue(topic_partitions=_partitions(TopicPartition, assignment))))


def current_assignment_record(group_id, m):
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), _value(ShareGroupCurrentMemberAssignmentValue(
        member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=MEMBER_STABLE,
        assigned_partitions=_partitions(TopicPartitions, m.assigned)))


def state_partition_metadata_record(group_id, initialized):
    """``initialized``: {topic id: (topic name, set of partitions)}."""
    topics = [TopicPartitionsInfo(topic_id=tid, topic_name=name, partitions=sorted(parts))
              for tid, (name, parts) in sorted(initialized.items())]
    return (_key(STATE_PARTITION_METADATA, group_id),
            _value(ShareGroupStatePartitionMetadataValue(initialized_topics=topics, deleting_topics=[])))


def member_tombstones(group_id, member_id):
    return [(_key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
            (_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
            (_key(MEMBER_METADATA, group_id, member_id), None)]


def group_tombstones(group_id):
    return [(_key(TARGET_ASSIGNMENT_METADATA, group_id), None), (_key(PARTITION_METADATA, group_id), None),
            (_key(STATE_PARTITION_METADATA, group_id), None), (_key(GROUP_METADATA, group_id), None)]


# -- replay ------------------------------------------------------------------------------------------
def decode_key(data):
    """(record type, group id, member id or None) of a share group record's key, else None."""
    try:
        r = Reader(bytes(data))
        version = r.int16()
        cls = _KEYS.get(version)
        if cls is None:
            return None
        k = cls.read(r, version)
    except ProtocolDecodeError:
        return None
    return version, k.group_id, getattr(k, "member_id", None)


def _decode_value(kind, data):
    r = Reader(bytes(data))
    version = r.int16()
    cls = _VALUES[kind]
    return cls.read(r, min(version, cls.MAX_VERSION))


def _assignment(topic_partitions):
    return {tp.topic_id: set(tp.partitions) for tp in topic_partitions or () if tp.partitions}


def replay(groups, kind, group_id, member_id, value):
    """Applies one record (read back from the log, oldest first) to ``groups`` {group id:
    ShareGroup}."""
    group = groups.get(group_id)
    if value is None:
        if group is None:
            return
        if kind == GROUP_METADATA:
            del groups[group_id]
        elif kind == PARTITION_METADATA:
            group.subscription_metadata = {}
        elif kind == STATE_PARTITION_METADATA:
            group.initialized = {}
        elif kind == MEMBER_METADATA:
            group.members.pop(member_id, None)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            group.target_assignment.pop(member_id, None)
        elif kind == CURRENT_MEMBER_ASSIGNMENT and member_id in group.members:
            m = group.members[member_id]
            m.member_epoch, m.previous_member_epoch, m.assigned = -1, -1, {}
        return
    if group is None:
        group = groups[group_id] = ShareGroup(group_id, -1)
    v = _decode_value(kind, value)
    if kind == GROUP_METADATA:
        group.group_epoch = v.epoch
    elif kind == PARTITION_METADATA:
        group.subscription_metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
    elif kind == STATE_PARTITION_METADATA:
        group.initialized = {t.topic_id: (t.topic_name, set(t.partitions)) for t in v.initialized_topics}
    elif kind == TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = v.assignment_epoch
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        group.target_assignment[member_id] = _assignment(v.topic_partitions)
    else:
        m = group.members.get(member_id)
        if m is None:
            m = group.members[member_id] = ShareGroupMember(member_id)
        if kind == MEMBER_METADATA:
            m.rack_id, m.client_id, m.client_host = v.rack_id, v.client_id, v.client_host
            m.subscribed_topic_names = tuple(sorted(set(v.subscribed_topic_names or ())))
        else:
            m.member_epoch, m.previous_member_epoch = v.member_epoch, v.previous_member_epoch
            m.assigned = _assignment(v.assigned_partitions)
