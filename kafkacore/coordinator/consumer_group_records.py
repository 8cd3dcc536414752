"""The records a KIP-848 consumer group keeps in ``__consumer_offsets``, in Kafka's format
(``../shared/kafka-protocol/coordinator/ConsumerGroup*.json``; Kafka's
GroupCoordinatorRecordHelpers), and their replay when a partition is loaded.

Each key is an int16 version, which names the record type, then the key struct; each value an
int16 version (0) then the value struct (flexible); a null value (tombstone) deletes the key.

- 3 ConsumerGroupMetadata (key: group): the group epoch;
- 4 ConsumerGroupPartitionMetadata (group): the subscribed topics' ids, names, partition counts;
- 5 ConsumerGroupMemberMetadata (group, member): instance id, rack, client id and host,
  subscription (names, regex), rebalance timeout, server assignor;
- 6 ConsumerGroupTargetAssignmentMetadata (group): the assignment epoch;
- 7 ConsumerGroupTargetAssignmentMember (group, member): the member's target partitions;
- 8 ConsumerGroupCurrentMemberAssignment (group, member): member epoch, previous epoch, state,
  assigned and pending-revocation partitions.

Kafka's order, kept here: a member's records before the group epoch that counts them; a
member leaves with the tombstones of its current assignment, target and metadata, in that
order; a group is deleted with the tombstones of its target-assignment metadata, partition
metadata and group metadata.
"""
from __future__ import annotations

from ..protocol.coordinator.consumer_group_current_member_assignment_key import \
    ConsumerGroupCurrentMemberAssignmentKey
from ..protocol.coordinator.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue, TopicPartitions)
from ..protocol.coordinator.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from ..protocol.coordinator.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
from ..protocol.coordinator.consumer_group_metadata_key import ConsumerGroupMetadataKey
from ..protocol.coordinator.consumer_group_metadata_value import ConsumerGroupMetadataValue
from ..protocol.coordinator.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from ..protocol.coordinator.consumer_group_partition_metadata_value import (ConsumerGroupPartitionMetadataValue,
                                                                            TopicMetadata)
from ..protocol.coordinator.consumer_group_target_assignment_member_key import \
    ConsumerGroupTargetAssignmentMemberKey
from ..protocol.coordinator.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue, TopicPartition)
from ..protocol.coordinator.consumer_group_target_assignment_metadata_key import \
    ConsumerGroupTargetAssignmentMetadataKey
from ..protocol.coordinator.consumer_group_target_assignment_metadata_value import \
    ConsumerGroupTargetAssignmentMetadataValue
from ..protocol.wire import ProtocolDecodeError, Reader, Writer
from .consumer_group import ConsumerGroup, ConsumerGroupMember

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_ASSIGNMENT_METADATA = 6
TARGET_ASSIGNMENT_MEMBER = 7
CURRENT_MEMBER_ASSIGNMENT = 8

_KEYS = {
    GROUP_METADATA: ConsumerGroupMetadataKey,
    PARTITION_METADATA: ConsumerGroupPartitionMetadataKey,
    MEMBER_METADATA: ConsumerGroupMemberMetadataKey,
    TARGET_ASSIGNMENT_METADATA: ConsumerGroupTargetAssignmentMetadataKey,
    TARGET_ASSIGNMENT_MEMBER: ConsumerGroupTargetAssignmentMemberKey,
    CURRENT_MEMBER_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentKey,
}
_VALUES = {
    GROUP_METADATA: ConsumerGroupMetadataValue,
    PARTITION_METADATA: ConsumerGroupPartitionMetadataValue,
    MEMBER_METADATA: ConsumerGroupMemberMetadataValue,
    TARGET_ASSIGNMENT_METADATA: ConsumerGroupTargetAssignmentMetadataValue,
    TARGET_ASSIGNMENT_MEMBER: ConsumerGroupTargetAssignmentMemberValue,
    CURRENT_MEMBER_ASSIGNMENT: ConsumerGroupCurrentMemberAssignmentValue,
}
VALUE_VERSION = 0


def encode_record(version, obj) -> bytes:
    """An int16 version (a key's record type, a value's version), then the struct: the
    layout of every group record in __consumer_offsets (share groups' too)."""
    w = Writer()
    w.int16(version)
    obj.write(w, version)
    return w.getvalue()


def _key(kind, group_id, member_id=None):
    cls = _KEYS[kind]
    obj = cls(group_id=group_id) if member_id is None else cls(group_id=group_id, member_id=member_id)
    return encode_record(kind, obj)


def _partitions(cls, assignment):
    return [cls(topic_id=tid, partitions=sorted(parts)) for tid, parts in sorted(assignment.items()) if parts]


# -- records (key, value) ----------------------------------------------------------------------------
def group_epoch_record(group_id, epoch):
    return _key(GROUP_METADATA, group_id), encode_record(VALUE_VERSION, ConsumerGroupMetadataValue(epoch=epoch))


def subscription_metadata_record(group_id, metadata):
    """``metadata``: {topic name: (topic id, partition count)}."""
    topics = [TopicMetadata(topic_id=tid, topic_name=name, num_partitions=n, partition_metadata=[])
              for name, (tid, n) in sorted(metadata.items())]
    return (_key(PARTITION_METADATA, group_id),
            encode_record(VALUE_VERSION, ConsumerGroupPartitionMetadataValue(topics=topics)))


def member_metadata_record(group_id, m):
    return _key(MEMBER_METADATA, group_id, m.member_id), encode_record(VALUE_VERSION, ConsumerGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        subscribed_topic_names=list(m.subscribed_topic_names), subscribed_topic_regex=m.subscribed_topic_regex,
        rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor))


def target_assignment_epoch_record(group_id, epoch):
    return (_key(TARGET_ASSIGNMENT_METADATA, group_id),
            encode_record(VALUE_VERSION, ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch)))


def target_assignment_record(group_id, member_id, assignment):
    return (_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), encode_record(VALUE_VERSION,
            ConsumerGroupTargetAssignmentMemberValue(topic_partitions=_partitions(TopicPartition, assignment))))


def current_assignment_record(group_id, m):
    return _key(CURRENT_MEMBER_ASSIGNMENT, group_id, m.member_id), encode_record(VALUE_VERSION,
        ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch, state=m.state,
            assigned_partitions=_partitions(TopicPartitions, m.assigned),
            partitions_pending_revocation=_partitions(TopicPartitions, m.pending_revocation)))


def member_tombstones(group_id, member_id):
    return [(_key(CURRENT_MEMBER_ASSIGNMENT, group_id, member_id), None),
            (_key(TARGET_ASSIGNMENT_MEMBER, group_id, member_id), None),
            (_key(MEMBER_METADATA, group_id, member_id), None)]


def group_tombstones(group_id):
    return [(_key(TARGET_ASSIGNMENT_METADATA, group_id), None), (_key(PARTITION_METADATA, group_id), None),
            (_key(GROUP_METADATA, group_id), None)]


# -- replay ------------------------------------------------------------------------------------------
def decode_key(data):
    """(record type, group id, member id or None) of a consumer group record's key, else None."""
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
    ConsumerGroup}. Members are kept bare here; ``finish`` rebuilds the derived state."""
    group = groups.get(group_id)
    if value is None:
        if group is None:
            return
        if kind == GROUP_METADATA:
            del groups[group_id]
        elif kind == PARTITION_METADATA:
            group.subscription_metadata = {}
        elif kind == MEMBER_METADATA:
            group.members.pop(member_id, None)
        elif kind == TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0
        elif kind == TARGET_ASSIGNMENT_MEMBER:
            group.target_assignment.pop(member_id, None)
        elif kind == CURRENT_MEMBER_ASSIGNMENT and member_id in group.members:
            m = group.members[member_id]
            m.member_epoch, m.previous_member_epoch, m.assigned, m.pending_revocation = -1, -1, {}, {}
        return
    if group is None:
        group = groups[group_id] = ConsumerGroup(group_id, -1)
    v = _decode_value(kind, value)
    if kind == GROUP_METADATA:
        group.group_epoch = v.epoch
    elif kind == PARTITION_METADATA:
        group.subscription_metadata = {t.topic_name: (t.topic_id, t.num_partitions) for t in v.topics}
    elif kind == TARGET_ASSIGNMENT_METADATA:
        group.assignment_epoch = v.assignment_epoch
    elif kind == TARGET_ASSIGNMENT_MEMBER:
        group.target_assignment[member_id] = _assignment(v.topic_partitions)
    else:
        m = group.members.get(member_id)
        if m is None:
            m = group.members[member_id] = ConsumerGroupMember(member_id)
        if kind == MEMBER_METADATA:
            m.instance_id, m.rack_id, m.client_id, m.client_host = v.instance_id, v.rack_id, v.client_id, v.client_host
            m.subscribed_topic_names = tuple(sorted(set(v.subscribed_topic_names or ())))
            m.subscribed_topic_regex = v.subscribed_topic_regex
            m.rebalance_timeout_ms, m.server_assignor = v.rebalance_timeout_ms, v.server_assignor
        else:
            m.member_epoch, m.previous_member_epoch, m.state = v.member_epoch, v.previous_member_epoch, v.state
            m.assigned = _assignment(v.assigned_partitions)
            m.pending_revocation = _assignment(v.partitions_pending_revocation)


def finish(group, now_ms):
    """After the replay: the owners of partitions, the static members and the state."""
    members = list(group.members.values())
    group.members.clear()
    group.static_members.clear()
    group.partition_epochs.clear()
    for m in members:
        group.put_member(m)
    group.update_state(now_ms)
