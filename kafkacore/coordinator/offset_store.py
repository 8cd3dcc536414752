"""Persistence of committed offsets and group metadata in ``__consumer_offsets``, in Kafka's
record format, so that Kafka's tools (and a restarted broker) read them back.

- The topic is compacted (``cleanup.policy=compact``, ``segment.bytes`` from
  ``offsets.topic.segment.bytes``) and created on first use with
  ``offsets.topic.num.partitions`` partitions (an existing topic keeps its count).
- A group lives in partition ``Utils.abs(groupId.hashCode()) % partitions`` (Java's
  String.hashCode over UTF-16 code units in int32 arithmetic; Utils.abs maps MIN_VALUE to 0).
- Keys: int16 version + OffsetCommitKey (version 1: group, topic, partition) or
  GroupMetadataKey (version 2: group). Values: int16 version + OffsetCommitValue (version 3;
  version 1 when the commit carries an expire timestamp, as Kafka writes it) or
  GroupMetadataValue (the lowest version that carries the group's data: version 2, or 3 when a
  member has a group.instance.id, the only field version 3 adds; ZooKeeper-era readers of
  __consumer_offsets such as Burrow 1.2 misread version 3 members). A null value (tombstone)
  deletes the key.
- Writes are one uncompressed v2 batch per request (producer id -1), appended to the log
  before the response is sent.
- ``read_partition`` replays a partition from its log start to its end: the caller keeps the
  last value per key, tombstones delete.
"""
from __future__ import annotations

import logging
import struct

from ..clock import wall_ms
from ..errors import (CoordinatorNotAvailableError, KafkaStorageError, MessageTooLargeError, NotCoordinatorError,
                      NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, NotLeaderOrFollowerError,
                      RecordListTooLargeError, UnknownServerError, UnknownTopicOrPartitionError)
from ..protocol.coordinator.group_metadata_key import GroupMetadataKey
from ..protocol.coordinator.group_metadata_value import GroupMetadataValue, MemberMetadata
from ..protocol.coordinator.offset_commit_key import OffsetCommitKey
from ..protocol.coordinator.offset_commit_value import OffsetCommitValue
from ..protocol.wire import ProtocolDecodeError, Reader, Writer
from .internal_topic import (READ_CHUNK_BYTES, InternalTopicLog, StoreError, java_abs, java_string_hash,  # noqa: F401
                             partition_for)

log = logging.getLogger("kafkacore.coordinator")

TOPIC = "__consumer_offsets"
OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
OFFSET_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_VALUE_VERSION = 2  # current_state_timestamp (v2) is always known
GROUP_VALUE_VERSION_STATIC = 3  # v3 adds each member's group_instance_id (KIP-345)
INVALID_COMMIT_OFFSET_SIZE = 28  # Kafka's INVALID_COMMIT_OFFSET_SIZE

_i16 = struct.Struct(">h")


# -- records ---------------------------------------------------------------------------------
class OffsetAndMetadata:
    __slots__ = ("offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp")

    def __init__(self, offset, leader_epoch=-1, metadata="", commit_timestamp=-1, expire_timestamp=None):
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = "" if metadata is None else metadata
        self.commit_timestamp = commit_timestamp
        self.expire_timestamp = expire_timestamp  # None unless an old client asked for a retention time

    def __eq__(self, other):
        return type(other) is type(self) and all(getattr(self, s) == getattr(other, s) for s in self.__slots__)

    def __repr__(self):
        return (f"OffsetAndMetadata(offset={self.offset}, leader_epoch={self.leader_epoch}, "
                f"metadata={self.metadata!r}, commit_timestamp={self.commit_timestamp}, "
                f"expire_timestamp={self.expire_timestamp})")


def make_offset(offset, leader_epoch=-1, metadata="", commit_timestamp=None, expire_timestamp=None):
    """A commit as the handlers build it: committed now unless the request says when."""
    return OffsetAndMetadata(offset, leader_epoch, metadata,
                             wall_ms() if commit_timestamp is None else commit_timestamp, expire_timestamp)


def _encode(version, obj) -> bytes:
    w = Writer()
    w.int16(version)
    obj.write(w, version)
    return w.getvalue()


def offset_key(group, topic, partition) -> bytes:
    return _encode(OFFSET_KEY_VERSION, OffsetCommitKey(group=group, topic=topic, partition=partition))


def group_key(group) -> bytes:
    return _encode(GROUP_KEY_VERSION, GroupMetadataKey(group=group))


def offset_value(om: OffsetAndMetadata) -> bytes:
    if om.expire_timestamp is not None:
        return _encode(OFFSET_VALUE_VERSION_WITH_EXPIRY, OffsetCommitValue(
            offset=om.offset, metadata=om.metadata, commit_timestamp=om.commit_timestamp,
            expire_timestamp=om.expire_timestamp))
    return _encode(OFFSET_VALUE_VERSION, OffsetCommitValue(
        offset=om.offset, leader_epoch=om.leader_epoch, metadata=om.metadata, commit_timestamp=om.commit_timestamp))


def group_value(group, assignments) -> bytes:
    """The group's metadata as Kafka's storeGroup writes it: members with their subscription
    for the selected protocol and the assignment given (by member id)."""
    members = [MemberMetadata(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                              client_host=m.client_host, rebalance_timeout=m.rebalance_timeout_ms,
                              session_timeout=m.session_timeout_ms,
                              subscription=m.metadata(group.protocol_name) if group.protocol_name else b"",
                              assignment=assignments.get(m.member_id, b""))
               for m in group.members.values()]
    static = any(m.group_instance_id is not None for m in members)
    return _encode(GROUP_VALUE_VERSION_STATIC if static else GROUP_VALUE_VERSION, GroupMetadataValue(
        protocol_type=group.protocol_type or "", generation=group.generation, protocol=group.protocol_name,
        leader=group.leader_id, current_state_timestamp=group.current_state_timestamp, members=members))


def decode_key(data):
    """("offset", group, topic, partition), ("group", group), or None for another record type
    (the KIP-848 consumer group records, versions 3-8; the KIP-932 share group records, 9-15) or a
    key that does not parse."""
    try:
        r = Reader(bytes(data))
        version = r.int16()
        if version in (0, 1):
            k = OffsetCommitKey.read(r, version)
            return ("offset", k.group, k.topic, k.partition)
        if version == 2:
            return ("group", GroupMetadataKey.read(r, version).group)
    except ProtocolDecodeError:
        pass
    return None


def decode_offset_value(data) -> OffsetAndMetadata:
    r = Reader(bytes(data))
    version = r.int16()
    v = OffsetCommitValue.read(r, min(version, OffsetCommitValue.MAX_VERSION))
    return OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp,
                             v.expire_timestamp if version == 1 and v.expire_timestamp >= 0 else None)


def decode_group_value(data) -> GroupMetadataValue:
    r = Reader(bytes(data))
    version = r.int16()
    return GroupMetadataValue.read(r, min(version, GroupMetadataValue.MAX_VERSION))


# -- the log -------------------------------------------------------------------------------------
_OFFSET_ERRORS = {  # Kafka's GroupMetadataManager.storeOffsets mapping of append errors
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    MessageTooLargeError.code: INVALID_COMMIT_OFFSET_SIZE,
    RecordListTooLargeError.code: INVALID_COMMIT_OFFSET_SIZE,
}
_GROUP_ERRORS = {  # ... and storeGroup's
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    MessageTooLargeError.code: UnknownServerError.code,
    RecordListTooLargeError.code: UnknownServerError.code,
}


class OffsetStore(InternalTopicLog):
    """``__consumer_offsets``: the group coordinator's log."""

    def __init__(self, broker):
        cfg = broker.config
        super().__init__(broker, TOPIC, cfg["offsets.topic.num.partitions"], cfg["offsets.topic.segment.bytes"])

    offset_errors = _OFFSET_ERRORS

    def append(self, group_id, records, for_offsets=True, producer=None):
        return super().append(group_id, records, _OFFSET_ERRORS if for_offsets else _GROUP_ERRORS, producer)
