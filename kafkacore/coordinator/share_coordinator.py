"""The share coordinator (KIP-932; Kafka's ShareCoordinatorService with its ShareCoordinatorShard):
the durable state of share partitions, kept in ``__share_group_state`` by the leader of each of
its partitions (docs/groups.md, "Share state").

- A share partition ("group:topicId:partition") belongs to ``__share_group_state`` partition
  abs(String.hashCode(key)) % partitions; the broker leading that partition is its coordinator
  (FindCoordinator key type 2) and loads its states when the leadership arrives: the records are
  replayed from log start, a ShareSnapshot replacing the state, a ShareUpdate merged into it, a
  tombstone deleting it. Another broker's partition answers NOT_COORDINATOR.
- WriteShareGroupState: FENCED_LEADER_EPOCH for a leader epoch older than the one last seen,
  FENCED_STATE_EPOCH for a state epoch older than the stored one, and for a share partition
  whose state was deleted a state epoch at or below the deleted state's (a leader still holding
  the deleted state must not bring it back; InitializeShareGroupState starts the key anew);
  otherwise a ShareUpdate is written (a ShareSnapshot, merging every batch, for the first write
  of a key and once ``share.coordinator.snapshot.update.records.per.snapshot`` updates followed
  the last snapshot). The state in memory changes once the write is replicated (acks=all).
- ReadShareGroupState: the state (UNKNOWN_TOPIC_OR_PARTITION for a share partition never
  initialized nor written); a read with a newer leader epoch records it (a ShareUpdate with no
  batches), so the previous leader's writes are fenced here and after a failover.
- InitializeShareGroupState: a ShareSnapshot with the given state epoch and start offset and no
  batches (FENCED_STATE_EPOCH when the stored epoch is newer): how a share group starts, or
  restarts at new offsets (AlterShareGroupOffsets).
- DeleteShareGroupState: tombstones for the snapshot and update keys; the deleted state's epoch
  is kept in memory (``deleted``, also when a tombstone is replayed) to fence the writes above.
- ReadShareGroupStateSummary: the state epoch, leader epoch and start offset.

Kafka answers a key that is not well formed with INVALID_REQUEST; here the handlers do.
It runs on the broker's event loop; one write per share partition at a time (a lock per key)."""
from __future__ import annotations

import asyncio
import logging

from ..errors import (CoordinatorNotAvailableError, FencedLeaderEpochError, FencedStateEpochError, InvalidRequestError,
                      KafkaStorageError, MessageTooLargeError, NotCoordinatorError, NotEnoughReplicasAfterAppendError,
                      NotEnoughReplicasError, NotLeaderOrFollowerError, RecordListTooLargeError, RequestTimedOutError,
                      UnknownServerError, UnknownTopicOrPartitionError, error_for_code)
from .internal_topic import InternalTopicLog, StoreError, partition_for
from .share_state import ACQUIRED, AVAILABLE, StateBatch
from .share_state_log import (SHARE_GROUP_STATE_TOPIC, UINT16_MAX, ShareGroupOffset, apply_update, check_state,
                              combine_batches, coordinator_key, decode, snapshot_key, snapshot_value, update_key,
                              update_value)

log = logging.getLogger("kafkacore.share")

NONE = 0

# Kafka's CoordinatorRuntime: append errors as the share-partition leader sees them
_APPEND_ERRORS = {
    UnknownTopicOrPartitionError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasError.code: CoordinatorNotAvailableError.code,
    NotEnoughReplicasAfterAppendError.code: CoordinatorNotAvailableError.code,
    RequestTimedOutError.code: CoordinatorNotAvailableError.code,
    NotLeaderOrFollowerError.code: NotCoordinatorError.code,
    KafkaStorageError.code: NotCoordinatorError.code,
    MessageTooLargeError.code: UnknownServerError.code,
    RecordListTooLargeError.code: UnknownServerError.code,
}


class ShareStateStore(InternalTopicLog):
    """``__share_group_state`` with Kafka's ShareCoordinatorConfig topic settings (compacted;
    its replication factor and min.insync.replicas are set where internal topics are created)."""

    def __init__(self, broker):
        cfg = broker.config
        super().__init__(broker, SHARE_GROUP_STATE_TOPIC, cfg["share.coordinator.state.topic.num.partitions"],
                         cfg["share.coordinator.state.topic.segment.bytes"],
                         configs={"compression.type": "uncompressed", "unclean.leader.election.enable": "false"})


class ShareCoordinator:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.updates_per_snapshot = cfg["share.coordinator.snapshot.update.records.per.snapshot"]
        self.write_timeout_s = cfg["share.coordinator.write.timeout.ms"] / 1000
        self.store = ShareStateStore(broker)
        # (group, topic id, partition) -> its state; its updates since the last snapshot
        self.states: dict[tuple, ShareGroupOffset] = {}
        self.update_counts: dict[tuple, int] = {}
        # a deleted share partition -> the state epoch it had, until it is initialized again
        self.deleted: dict[tuple, int] = {}
        self._locks: dict[tuple, asyncio.Lock] = {}
        self.owned: dict[int, int] = {}  # __share_group_state partition led here -> its leader epoch
        self._started = False
        self.loop = None
        self.metrics = {"writes": 0, "snapshots": 0, "fenced": 0}  # read by broker/metrics.py

    # -- life cycle -----------------------------------------------------------------------------
    def start(self, loop):
        if self._started:
            return
        self._started = True
        self.loop = loop
        rm = self.broker.replica_manager
        rm.on_leadership_change.append(self.on_leadership_change)
        for partition, leader_epoch in rm.led_partitions(SHARE_GROUP_STATE_TOPIC):
            self.on_leadership_change(SHARE_GROUP_STATE_TOPIC, partition, True, leader_epoch)

    def shutdown(self):
        log.info("share coordinator stopped (%d share partitions)", len(self.states))

    def partition_of(self, group_id, topic_id, partition) -> int:
        return partition_for(coordinator_key(group_id, topic_id, partition), self.store.partitions)

    def coordinator_for(self, key: str) -> int:
        """FindCoordinator's answer for a "group:topicId:partition" key: creates the topic on
        first use; the leader of the key's partition (COORDINATOR_NOT_AVAILABLE while none)."""
        self.store.ensure_topic()
        leader = self.broker.metadata_cache.leader(SHARE_GROUP_STATE_TOPIC, self.store.partition_for(key))
        if leader < 0:
            raise CoordinatorNotAvailableError(f"the partition of {key!r} in {SHARE_GROUP_STATE_TOPIC} has no leader yet")
        return leader

    def on_leadership_change(self, topic, partition, is_leader, leader_epoch):
        """The ReplicaManager's word on a __share_group_state partition: load its share
        partitions' states, or forget them."""
        if topic != SHARE_GROUP_STATE_TOPIC:
            return
        if is_leader:
            self.owned[partition] = leader_epoch
            self._load(partition)
        elif self.owned.pop(partition, None) is not None:
            gone = [k for k in self.states if self.partition_of(*k) == partition]
            for k in gone:
                self._forget(k)
            for k in [k for k in self.deleted if self.partition_of(*k) == partition]:
                del self.deleted[k]
            log.info("unloaded %d share partitions of %s-%d: another broker coordinates them now", len(gone),
                     SHARE_GROUP_STATE_TOPIC, partition)

    def _forget(self, k):
        self.states.pop(k, None)
        self.update_counts.pop(k, None)

    def _delete(self, k):
        """The state of ``k`` is deleted: its epoch is kept to fence a leader still holding it."""
        current = self.states.get(k)
        if current is not None:
            self.deleted[k] = max(current.state_epoch, self.deleted.get(k, -1))
        self._forget(k)

    def _load(self, partition):
        """Replays one partition: a snapshot replaces a state and resets its update count, an
        update merges into the state it follows, a tombstone deletes it."""
        for k in [k for k in self.states if self.partition_of(*k) == partition]:
            self._forget(k)
        for k in [k for k in self.deleted if self.partition_of(*k) == partition]:
            del self.deleted[k]
        records = 0
        for key, value in self.store.read_partition(partition):
            records += 1
            try:
                rec = decode(key, value)
            except Exception as e:  # noqa: BLE001 - reported; the share partition keeps its earlier state
                log.error("%s-%d: a record does not decode: %s", SHARE_GROUP_STATE_TOPIC, partition, e)
                continue
            if rec is not None:
                self._replay(rec)
        log.info("loaded %d share partitions from %d records of %s-%d", sum(
            1 for k in self.states if self.partition_of(*k) == partition), records, SHARE_GROUP_STATE_TOPIC, partition)

    def _replay(self, rec):
        k = (rec.group_id, rec.topic_id, rec.partition)
        if rec.value is None:  # either key's tombstone deletes the state
            self._delete(k)
            return
        if rec.snapshot:
            self.deleted.pop(k, None)
            self.states[k] = rec.value
            self.update_counts[k] = 0
            return
        current = self.states.get(k)
        if current is None:  # an update without its snapshot (compacted away with a deletion)
            return
        self.states[k] = apply_update(current, rec.value)
        self.update_counts[k] = self.update_counts.get(k, 0) + 1

    # -- the requests -----------------------------------------------------------------------------
    def _not_coordinator(self, k):
        if not self.store.created_on_first_use() or self.partition_of(*k) not in self.owned:
            raise NotCoordinatorError(f"this broker does not coordinate share partition {coordinator_key(*k)}")

    def _lock(self, k) -> asyncio.Lock:
        lock = self._locks.get(k)
        if lock is None:
            lock = self._locks[k] = asyncio.Lock()
        return lock

    async def _append(self, k, records):
        """Writes the records for ``k`` and waits for the ISR (share.coordinator.write.timeout.ms);
        raises the KafkaError its leader sees (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
        try:
            written = self.store.append(coordinator_key(*k), records, _APPEND_ERRORS)
            if written is not None and written.replicated is not None:
                # retrieved even when nobody waits any more (a timed-out write that fails later)
                written.replicated.add_done_callback(lambda f: f.cancelled() or f.exception())
                await asyncio.wait_for(asyncio.shield(written.replicated), self.write_timeout_s)
        except asyncio.TimeoutError:
            # the record may still commit: the state in memory stays as it was, and a reload
            # (a failover) replays whatever the log holds
            raise CoordinatorNotAvailableError(f"the write of {coordinator_key(*k)} was not replicated within "
                                               f"share.coordinator.write.timeout.ms") from None
        except StoreError as e:
            raise error_for_code(e.code, f"writing the state of {coordinator_key(*k)} failed: {e.cause}") from None
        if self.partition_of(*k) not in self.owned:  # lost the leadership while waiting
            raise NotCoordinatorError(f"this broker no longer coordinates {coordinator_key(*k)}")

    async def write_state(self, group_id, topic_id, partition, state_epoch, leader_epoch, start_offset, batches):
        """WriteShareGroupState for one share partition; raises its refusal."""
        k = (group_id, topic_id, partition)
        self._not_coordinator(k)
        try:
            check_state(start_offset, batches)
        except ValueError as e:
            raise InvalidRequestError(f"{coordinator_key(*k)}: {e}") from None
        batches = tuple(StateBatch(b.first_offset, b.last_offset, AVAILABLE if b.delivery_state == ACQUIRED
                                   else b.delivery_state, b.delivery_count) for b in batches)
        async with self._lock(k):
            current = self.states.get(k)
            self._check_epochs(k, current, state_epoch, leader_epoch)
            if current is None or self.update_counts.get(k, 0) >= self.updates_per_snapshot:
                if current is None:
                    new = ShareGroupOffset(0, state_epoch, leader_epoch, start_offset,
                                           combine_batches((), batches, start_offset))
                else:
                    start = current.start_offset if start_offset == -1 else start_offset
                    new = ShareGroupOffset((current.snapshot_epoch + 1) % (UINT16_MAX + 1),
                                           current.state_epoch if state_epoch == -1 else state_epoch,
                                           current.leader_epoch if leader_epoch == -1 else leader_epoch,
                                           start, combine_batches(current.batches, batches, start))
                await self._append(k, [(snapshot_key(*k), snapshot_value(new))])
                self.deleted.pop(k, None)
                self.states[k] = new
                self.update_counts[k] = 0
                self.metrics["snapshots"] += 1
            else:
                update = ShareGroupOffset(current.snapshot_epoch, -1, leader_epoch, start_offset, batches)
                await self._append(k, [(update_key(*k), update_value(current.snapshot_epoch, leader_epoch,
                                                                     start_offset, batches))])
                self.states[k] = apply_update(current, update)
                self.update_counts[k] = self.update_counts.get(k, 0) + 1
            self.metrics["writes"] += 1

    def _check_epochs(self, k, current, state_epoch, leader_epoch):
        if current is None:
            deleted = self.deleted.get(k)
            if deleted is not None and state_epoch <= deleted:
                self.metrics["fenced"] += 1
                raise FencedStateEpochError(f"{coordinator_key(*k)}: its state was deleted at state epoch {deleted}; "
                                            f"a write at state epoch {state_epoch} does not bring it back")
            return
        if leader_epoch != -1 and current.leader_epoch > leader_epoch:
            self.metrics["fenced"] += 1
            raise FencedLeaderEpochError(f"{coordinator_key(*k)}: leader epoch {leader_epoch} is older than "
                                         f"{current.leader_epoch}")
        if state_epoch != -1 and current.state_epoch > state_epoch:
            self.metrics["fenced"] += 1
            raise FencedStateEpochError(f"{coordinator_key(*k)}: state epoch {state_epoch} is older than "
                                        f"{current.state_epoch}")

    async def read_state(self, group_id, topic_id, partition, leader_epoch) -> ShareGroupOffset:
        """ReadShareGroupState: the state; a newer leader epoch is recorded first."""
        k = (group_id, topic_id, partition)
        self._not_coordinator(k)
        async with self._lock(k):
            current = self._initialized(k)
            self._check_epochs(k, current, -1, leader_epoch)
            if leader_epoch > current.leader_epoch:
                await self._append(k, [(update_key(*k), update_value(current.snapshot_epoch, leader_epoch, -1, ()))])
                current = self.states[k] = current._replace(leader_epoch=leader_epoch)
                self.update_counts[k] = self.update_counts.get(k, 0) + 1
            return current

    def _initialized(self, k) -> ShareGroupOffset:
        current = self.states.get(k)
        if current is None:
            raise UnknownTopicOrPartitionError(f"share partition {coordinator_key(*k)} has no state")
        return current

    def read_summary(self, group_id, topic_id, partition) -> ShareGroupOffset:
        """ReadShareGroupStateSummary: the state (its batches are not answered)."""
        k = (group_id, topic_id, partition)
        self._not_coordinator(k)
        return self._initialized(k)

    async def initialize_state(self, group_id, topic_id, partition, state_epoch, start_offset):
        """InitializeShareGroupState: a snapshot with no batches; refused for an older state epoch."""
        k = (group_id, topic_id, partition)
        self._not_coordinator(k)
        try:
            check_state(start_offset, ())
        except ValueError as e:
            raise InvalidRequestError(f"{coordinator_key(*k)}: {e}") from None
        async with self._lock(k):
            current = self.states.get(k)
            if current is not None and current.state_epoch > state_epoch:
                self.metrics["fenced"] += 1
                raise FencedStateEpochError(f"{coordinator_key(*k)}: state epoch {state_epoch} is older than "
                                            f"{current.state_epoch}")
            epoch = 0 if current is None else (current.snapshot_epoch + 1) % (UINT16_MAX + 1)
            new = ShareGroupOffset(epoch, state_epoch, -1 if current is None else current.leader_epoch,
                                   start_offset, ())
            await self._append(k, [(snapshot_key(*k), snapshot_value(new))])
            self.deleted.pop(k, None)
            self.states[k] = new
            self.update_counts[k] = 0
            self.metrics["snapshots"] += 1

    def on_topic_deleted(self, topic_id):
        """A topic went (from any thread): the share state of every group on it that is kept
        here goes too, as Kafka deletes it for every share group on a deleted topic (a topic
        re-created under the same name has a new id, and its groups start afresh)."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(lambda: self.loop.create_task(self._delete_topic(topic_id)))

    async def _delete_topic(self, topic_id):
        keys = [k for k in self.states if k[1] == topic_id]
        for k in keys:
            try:
                await self.delete_state(*k)
            except Exception as e:  # another broker took the partition over, or the write failed
                log.warning("could not delete the share state of %s:%s-%d after its topic was deleted: %s",
                            k[0], k[1].hex(), k[2], e)
        for k in [k for k in self.deleted if k[1] == topic_id]:  # a topic id is never used again
            del self.deleted[k]
        if keys:
            log.info("deleted the share state of %d share partitions of deleted topic %s", len(keys), topic_id.hex())

    async def delete_state(self, group_id, topic_id, partition):
        """DeleteShareGroupState: the tombstones of both keys (nothing to do for no state)."""
        k = (group_id, topic_id, partition)
        self._not_coordinator(k)
        async with self._lock(k):
            if k not in self.states:
                return
            await self._append(k, [(snapshot_key(*k), None), (update_key(*k), None)])
            self._delete(k)
        self._locks.pop(k, None)
