"""Records of ``__share_group_state`` (KIP-932's share coordinator), in Kafka's format: a key of
int16 version + ShareSnapshotKey (version 0) or ShareUpdateKey (version 1) - the key version is
the record type - and a value of int16 version 0 + ShareSnapshotValue / ShareUpdateValue
(kafkacore/protocol/newer_schemas/coordinator/). A snapshot holds a share partition's whole
state; an update holds what one WriteShareGroupState changed (its batches, a new start offset or
-1, its leader epoch) and applies on the snapshot of the same snapshot epoch. A null value is a
tombstone: the state was deleted.

The share partition's key, as the coordinator and FindCoordinator (key type 2) see it, is
Kafka's SharePartitionKey text "group:topicId:partition" (the topic id as Kafka prints a Uuid);
its ``__share_group_state`` partition is abs(String.hashCode) % partitions, as for groups."""
from __future__ import annotations

import logging
from typing import NamedTuple

from ..protocol.coordinator.share_snapshot_key import ShareSnapshotKey
from ..protocol.coordinator.share_snapshot_value import ShareSnapshotValue
from ..protocol.coordinator.share_snapshot_value import StateBatch as SnapshotBatch
from ..protocol.coordinator.share_update_key import ShareUpdateKey
from ..protocol.coordinator.share_update_value import ShareUpdateValue
from ..protocol.coordinator.share_update_value import StateBatch as UpdateBatch
from ..protocol.kafka_uuid import uuid_to_text
from ..protocol.wire import ProtocolDecodeError, Reader, Writer
from .share_state import ACKNOWLEDGED, ACQUIRED, ARCHIVED, AVAILABLE, StateBatch

log = logging.getLogger("kafkacore.share")

SHARE_GROUP_STATE_TOPIC = "__share_group_state"
SNAPSHOT_KEY_VERSION = 0  # the record types, as Kafka's ShareCoordinatorRecordSerde numbers them
UPDATE_KEY_VERSION = 1
VALUE_VERSION = 0
UINT16_MAX = 0xFFFF
RECORD_STATES = frozenset({AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED})


def coordinator_key(group_id: str, topic_id: bytes, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "group:topicId:partition"."""
    return f"{group_id}:{uuid_to_text(topic_id)}:{partition}"


class ShareGroupOffset(NamedTuple):
    """A share partition's state as the coordinator keeps it (Kafka's ShareGroupOffset)."""
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    batches: tuple[StateBatch, ...]


class ShareRecord(NamedTuple):
    """A decoded record: ``snapshot`` (True: ShareSnapshot, False: ShareUpdate), the share
    partition, and the value (a ShareGroupOffset for a snapshot; for an update a
    ShareGroupOffset whose state epoch is -1 and whose start offset may be -1), None for a
    tombstone."""
    snapshot: bool
    group_id: str
    topic_id: bytes
    partition: int
    value: ShareGroupOffset | None


def _encode(version, obj) -> bytes:
    w = Writer()
    w.int16(version)
    obj.write(w, version)
    return w.getvalue()


def snapshot_key(group_id, topic_id, partition) -> bytes:
    return _encode(SNAPSHOT_KEY_VERSION, ShareSnapshotKey(group_id=group_id, topic_id=topic_id, partition=partition))


def update_key(group_id, topic_id, partition) -> bytes:
    return _encode(UPDATE_KEY_VERSION, ShareUpdateKey(group_id=group_id, topic_id=topic_id, partition=partition))


def snapshot_value(s: ShareGroupOffset) -> bytes:
    return _encode(VALUE_VERSION, ShareSnapshotValue(
        snapshot_epoch=s.snapshot_epoch, state_epoch=s.state_epoch, leader_epoch=s.leader_epoch,
        start_offset=s.start_offset, state_batches=[SnapshotBatch(**b._asdict()) for b in s.batches]))


def update_value(snapshot_epoch, leader_epoch, start_offset, batches) -> bytes:
    return _encode(VALUE_VERSION, ShareUpdateValue(
        snapshot_epoch=snapshot_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
        state_batches=[UpdateBatch(**b._asdict()) for b in batches]))


def check_state(start_offset, batches):
    """ValueError with a one-line reason for what no share partition's state holds: a start
    offset below -1 (-1: not set, or unchanged in an update), a batch whose range is negative or
    reversed, an unknown record state, a negative delivery count. (Overlapping or unordered
    batches are well formed: ``combine_batches`` lays the later over the earlier.)"""
    if start_offset < -1:
        raise ValueError(f"start offset {start_offset} is below -1")
    for b in batches:
        if not 0 <= b.first_offset <= b.last_offset or b.delivery_state not in RECORD_STATES or b.delivery_count < 0:
            raise ValueError(f"state batch {b.first_offset}-{b.last_offset} (state {b.delivery_state}, count "
                             f"{b.delivery_count}) is not valid")


def _batches(raw):
    return tuple(StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in raw or ())


def decode(key, value) -> ShareRecord | None:
    """The record, or None (with a warning) for a key version this broker does not know, which
    loading skips as Kafka does. Raises ProtocolDecodeError for a key or value that does not
    parse, or whose state is not well formed (``check_state``)."""
    r = Reader(bytes(key))
    version = r.int16()
    if version == SNAPSHOT_KEY_VERSION:
        k = ShareSnapshotKey.read(r, version)
    elif version == UPDATE_KEY_VERSION:
        k = ShareUpdateKey.read(r, version)
    else:
        log.warning("%s: skipping a record with unknown key version %d", SHARE_GROUP_STATE_TOPIC, version)
        return None
    snapshot = version == SNAPSHOT_KEY_VERSION
    if value is None:
        return ShareRecord(snapshot, k.group_id, k.topic_id, k.partition, None)
    r = Reader(bytes(value))
    vv = r.int16()
    if vv != VALUE_VERSION:
        raise ProtocolDecodeError(f"{SHARE_GROUP_STATE_TOPIC} value version {vv} is not supported")
    if snapshot:
        v = ShareSnapshotValue.read(r, vv)
        offset = ShareGroupOffset(v.snapshot_epoch, v.state_epoch, v.leader_epoch, v.start_offset,
                                  _batches(v.state_batches))
    else:
        v = ShareUpdateValue.read(r, vv)
        offset = ShareGroupOffset(v.snapshot_epoch, -1, v.leader_epoch, v.start_offset, _batches(v.state_batches))
    try:
        check_state(offset.start_offset, offset.batches)
    except ValueError as e:
        where = coordinator_key(k.group_id, k.topic_id, k.partition)
        raise ProtocolDecodeError(f"{SHARE_GROUP_STATE_TOPIC} record of {where}: {e}") from None
    return ShareRecord(snapshot, k.group_id, k.topic_id, k.partition, offset)


def combine_batches(current, new, start_offset) -> tuple[StateBatch, ...]:
    """``new`` laid over ``current`` (Kafka's PersisterStateBatchCombiner): where they overlap the
    newer batch wins (a later one of ``new`` over an earlier), records below ``start_offset`` (the
    SPSO, -1: none) are dropped, and touching batches of the same state and delivery count are
    merged. The result is sorted by offset and has no overlaps."""
    out: list[StateBatch] = sorted(current)
    for b in new:
        if b.last_offset < b.first_offset:
            continue
        kept = []
        for c in out:
            if c.last_offset < b.first_offset or c.first_offset > b.last_offset:
                kept.append(c)
                continue
            if c.first_offset < b.first_offset:
                kept.append(c._replace(last_offset=b.first_offset - 1))
            if c.last_offset > b.last_offset:
                kept.append(c._replace(first_offset=b.last_offset + 1))
        kept.append(b)
        out = sorted(kept)
    if start_offset >= 0:
        out = [c if c.first_offset >= start_offset else c._replace(first_offset=start_offset)
               for c in out if c.last_offset >= start_offset]
    merged: list[StateBatch] = []
    for c in out:
        p = merged[-1] if merged else None
        if (p is not None and p.last_offset + 1 == c.first_offset and p.delivery_state == c.delivery_state
                and p.delivery_count == c.delivery_count):
            merged[-1] = p._replace(last_offset=c.last_offset)
        else:
            merged.append(c)
    return tuple(merged)


def apply_update(current: ShareGroupOffset, update: ShareGroupOffset) -> ShareGroupOffset:
    """A ShareUpdate applied on the state it follows: -1 leaves the start offset and the leader
    epoch as they were; the state epoch is the snapshot's."""
    start = current.start_offset if update.start_offset == -1 else update.start_offset
    leader_epoch = current.leader_epoch if update.leader_epoch == -1 else update.leader_epoch
    return ShareGroupOffset(current.snapshot_epoch, current.state_epoch, leader_epoch, start,
                            combine_batches(current.batches, update.batches, start))
