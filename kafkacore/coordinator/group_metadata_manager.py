"""The groups' stored side: their metadata and committed offsets in ``__consumer_offsets``.

It mirrors Kafka's GroupMetadataManager: it holds the groups this broker coordinates (the
partitions of ``__consumer_offsets`` it leads and has loaded), writes group metadata and offsets
(waiting for the ISR on a cluster before an offset counts), reads them back when the broker
becomes a partition's leader and forgets them when it stops, keeps transactional offsets pending
until their marker, expires old offsets and drops those of deleted topics. Membership and
rebalances are the GroupCoordinator's; the coordinator hands the manager the store, its settings
and three hooks for what membership must do when groups come, go or die here, so that nothing in
this module knows the broker or the coordinator.

Everything runs on the broker's event loop, as in the coordinator.
"""
from __future__ import annotations

import logging
import threading

from ..clock import wall_ms
from ..errors import NotCoordinatorError, OffsetMetadataTooLargeError
from . import consumer_group_records as cg_records
from . import group as g
from . import share_group_records as sg_records
from .consumer_group import ConsumerGroup
from .share_group import ShareGroup
from .group import Group, Member, apply_committed_txn_offsets
from .offset_store import (TOPIC, StoreError, decode_group_value, decode_key, decode_offset_value, group_key,
                           group_value, offset_key, offset_value)

log = logging.getLogger("kafkacore.coordinator")

NONE = 0


class GroupMetadataManager:
    def __init__(self, store, offsets_retention_ms, retention_check_interval_ms, metadata_max_bytes,
                 on_members_loaded, on_group_unloaded, on_group_removed):
        """``store``: the OffsetStore. The hooks take a group: ``on_members_loaded`` after a
        load restored its members, ``on_group_unloaded`` when another broker coordinates it
        now, ``on_group_removed`` when it went Dead and left ``groups``."""
        self.store = store
        self.offsets_retention_ms = offsets_retention_ms
        self.retention_check_interval_ms = retention_check_interval_ms
        self.metadata_max_bytes = metadata_max_bytes
        self._on_members_loaded = on_members_loaded
        self._on_group_unloaded = on_group_unloaded
        self._on_group_removed = on_group_removed
        self.groups: dict[str, Group] = {}
        # the __consumer_offsets partitions this broker leads and has loaded: it coordinates
        # exactly their groups (a single node leads them all)
        self.owned_partitions = set()
        self.loop = None
        self.loop_thread = None
        self._expiry_timer = None
        self._closed = False

    # -- life cycle ---------------------------------------------------------------------------
    def start(self, loop, replica_manager):
        """Loads the __consumer_offsets partitions this broker leads already, follows the
        leaderships that come and go from here on, and starts the expiry check (on the event
        loop thread)."""
        self.loop = loop
        self.loop_thread = threading.get_ident()
        replica_manager.on_leadership_change.append(self.on_leadership_change)
        for partition, leader_epoch in replica_manager.led_partitions(TOPIC):
            self.on_leadership_change(TOPIC, partition, True, leader_epoch)
        self._expiry_timer = loop.call_later(self.retention_check_interval_ms / 1000, self._expire_offsets_tick)

    def shutdown(self):
        self._closed = True
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()

    # -- loading --------------------------------------------------------------------------------
    def _load(self, partitions=None):
        if not self.store.exists():
            return
        metadata: dict[str, object] = {}
        consumer_groups: dict[str, ConsumerGroup] = {}  # KIP-848 groups, replayed record by record
        share_groups: dict[str, ShareGroup] = {}  # KIP-932 groups, likewise
        offsets: dict[str, dict] = {}
        batches: dict[str, dict] = {}  # group id -> {(topic, partition): batch offset of its commit}
        records = 0
        # producer id -> {group id: {(topic, partition): (offset, batch offset)}}
        pending: dict[int, dict] = {}
        for partition in (range(self.store.partitions) if partitions is None else partitions):
            for kind_, *item in self.store.read_partition_with_markers(partition):
                if kind_ == "marker":
                    producer_id, committed = item
                    for group_id, txn_offsets in pending.pop(producer_id, {}).items():
                        if committed:
                            apply_committed_txn_offsets(offsets.setdefault(group_id, {}),
                                                        batches.setdefault(group_id, {}), txn_offsets)
                    continue
                key, value, txn_producer, batch_offset = item
                records += 1
                kind = decode_key(key)
                share_kind = sg_records.decode_key(key) if kind is None else None
                if share_kind is not None:
                    try:
                        sg_records.replay(share_groups, *share_kind, value)
                    except Exception as e:  # noqa: BLE001 - one bad record must not stop the load
                        log.error("%s-%d: skipping a share group record that does not decode: %s", TOPIC,
                                  partition, e)
                    continue
                if kind is None:
                    consumer_kind = cg_records.decode_key(key)
                    if consumer_kind is not None:
                        try:
                            cg_records.replay(consumer_groups, *consumer_kind, value)
                            if consumer_kind[0] == cg_records.GROUP_METADATA:
                                metadata.pop(consumer_kind[1], None)  # a consumer group replaced the classic one
                        except Exception as e:  # noqa: BLE001 - one bad record must not stop the load
                            log.error("%s-%d: skipping a consumer group record that does not decode: %s", TOPIC,
                                      partition, e)
                    continue
                try:
                    if kind[0] == "offset" and txn_producer is not None:
                        _k, group_id, topic, p = kind
                        if value is not None:
                            pending.setdefault(txn_producer, {}).setdefault(group_id, {})[(topic, p)] = \
                                (decode_offset_value(value), batch_offset)
                    elif kind[0] == "offset":
                        _k, group_id, topic, p = kind
                        if value is None:
                            offsets.get(group_id, {}).pop((topic, p), None)
                        else:
                            offsets.setdefault(group_id, {})[(topic, p)] = decode_offset_value(value)
                            batches.setdefault(group_id, {})[(topic, p)] = batch_offset
                    else:
                        group_id = kind[1]
                        if value is None:
                            metadata.pop(group_id, None)
                        else:
                            metadata[group_id] = decode_group_value(value)
                            consumer_groups.pop(group_id, None)  # a classic group replaced the consumer one
                except Exception as e:  # noqa: BLE001 - one bad record must not stop the load
                    log.error("%s-%d: skipping a record that does not decode: %s", TOPIC, partition, e)
        loaded = {}
        now = wall_ms()
        for group_id in sorted(set(metadata) | set(consumer_groups) | set(share_groups)
                               | {gid for gid, o in offsets.items() if o}):
            if group_id in share_groups:  # a group id has one type: a share group has no offsets
                self.groups[group_id] = loaded[group_id] = share_groups[group_id]
                continue
            if group_id in consumer_groups:
                group = loaded[group_id] = consumer_groups[group_id]
                cg_records.finish(group, now)
            else:
                group = loaded[group_id] = Group(group_id, -1)
            value = metadata.get(group_id)
            if value is not None and isinstance(group, Group):
                self._restore_metadata(group, value)
            group.offsets = offsets.get(group_id, {})
            group.offset_batches = batches.get(group_id, {})
            self.groups[group_id] = group
        for producer_id, by_group in pending.items():  # transactions still open: their offsets wait
            for group_id, txn_offsets in by_group.items():
                group = self.groups.get(group_id)
                if group is None:
                    group = self.groups[group_id] = loaded[group_id] = Group(group_id, -1)
                group.pending_txn_offsets.setdefault(producer_id, {}).update(txn_offsets)
        for group in loaded.values():  # Kafka's onGroupLoaded: every loaded member's session starts now
            self._on_members_loaded(group)
        log.log(logging.INFO if records else logging.DEBUG,
                "loaded %d groups and %d committed offsets from %d records of %s%s", len(self.groups),
                 sum(len(gr.offsets) for gr in self.groups.values()), records, TOPIC,
                 "" if partitions is None else f" partitions {sorted(partitions)}")

    @staticmethod
    def _restore_metadata(group, value):
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.current_state_timestamp = value.current_state_timestamp
        for mm in value.members:
            member = Member(mm.member_id, mm.group_instance_id, mm.client_id, mm.client_host,
                            mm.rebalance_timeout if mm.rebalance_timeout >= 0 else mm.session_timeout,
                            mm.session_timeout, group.protocol_type, [(value.protocol or "", mm.subscription)],
                            mm.assignment)
            group.members[member.member_id] = member
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
        if group.members:
            group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
            group.state = g.STABLE
            group.subscribed_topics = group.compute_subscribed_topics()
        else:
            group.state = g.EMPTY

    # -- coordinator failover (a cluster) ------------------------------------------------------------
    def on_leadership_change(self, topic, partition, is_leader, leader_epoch):
        """The ReplicaManager's word: this broker now leads (load the partition's groups) or no
        longer leads (unload them) a partition of __consumer_offsets (Kafka's
        onElection/onResignation)."""
        if topic != TOPIC:
            return
        if is_leader:
            if partition not in self.owned_partitions:
                self._load([partition])
                self.owned_partitions.add(partition)
            return
        if partition in self.owned_partitions:
            self.owned_partitions.discard(partition)
            gone = [gid for gid in self.groups if self.store.partition_for(gid) == partition]
            for gid in gone:
                self._on_group_unloaded(self.groups.pop(gid))
            log.info("unloaded %d groups of %s-%d: another broker coordinates them now", len(gone), TOPIC, partition)

    def not_coordinator(self, group_id):
        """NOT_COORDINATOR for a group whose partition this broker does not lead, else None."""
        if not group_id:
            return None
        if self.store.created_on_first_use() and self.store.partition_for(group_id) in self.owned_partitions:
            return None
        return NotCoordinatorError.code

    # -- group metadata ----------------------------------------------------------------------------
    def store_group(self, group, assignments):
        """Writes the group's metadata; returns an error code (NONE on success)."""
        try:
            self.store.append(group.group_id, [(group_key(group.group_id), group_value(group, assignments))],
                              for_offsets=False)
        except StoreError as e:
            return e.code
        return NONE

    # -- offsets ------------------------------------------------------------------------------------------
    def metadata_too_large(self, om):
        """offset.metadata.max.bytes (Kafka's validateOffsetMetadataLength)."""
        return om.metadata is not None and len(om.metadata.encode("utf-8")) > self.metadata_max_bytes

    def store_offsets(self, group, offsets, results):
        """Kafka's storeOffsets for a commit the coordinator accepted: ``offsets`` {(topic,
        partition): OffsetAndMetadata} whose metadata fits are written and count once written.
        Fills and returns ``results`` {(topic, partition): error}, or a future of it while the
        ISR has not got the write (a cluster)."""
        group_id = group.group_id
        store = {}
        for tp, om in offsets.items():
            if self.metadata_too_large(om):
                results[tp] = OffsetMetadataTooLargeError.code
            else:
                store[tp] = om
        if store:
            try:
                written = self.store.append(group_id, [(offset_key(group_id, t, p), offset_value(om))
                                                       for (t, p), om in store.items()])
            except StoreError as e:
                results.update(dict.fromkeys(store, e.code))
                return results
            batch = written.info.first_offset
            if written.replicated is not None:
                return self._after_replication(written.replicated, group, store, batch, results)
            group.offsets.update(store)
            group.offset_batches.update(dict.fromkeys(store, batch))
        results.update(dict.fromkeys(store, NONE))
        return results

    def _after_replication(self, replicated, group, store, batch, results):
        """A future of the commit's results: the offsets count once the ISR has them."""
        out = self.loop.create_future()

        def done(f):
            # the offsets count once replicated even when nobody awaits the answer any more (the
            # request was cancelled: its client went away); only the answer is dropped
            if f.exception() is None:
                group.offsets.update(store)
                group.offset_batches.update(dict.fromkeys(store, batch))
                results.update(dict.fromkeys(store, NONE))
            else:
                results.update(dict.fromkeys(store, f.exception().code))
            if not out.done():
                out.set_result(results)
        replicated.add_done_callback(done)
        return out

    def store_txn_offsets(self, group, producer_id, producer_epoch, offsets, results):
        """TxnOffsetCommit's write: ``offsets`` go as a transactional batch of the producer and
        are held pending until its transaction ends. Fills and returns ``results``, or a future
        of it (a cluster)."""
        group_id = group.group_id
        try:
            written = self.store.append(group_id, [(offset_key(group_id, t, p), offset_value(om))
                                                   for (t, p), om in offsets.items()],
                                        producer=(producer_id, producer_epoch))
        except StoreError as e:
            results.update(dict.fromkeys(offsets, e.code))
            return results

        def hold():
            batch = written.info.first_offset
            group.pending_txn_offsets.setdefault(producer_id, {}).update(
                {tp: (om, batch) for tp, om in offsets.items()})
            results.update(dict.fromkeys(offsets, NONE))
            return results
        if written.replicated is None:
            return hold()
        out = self.loop.create_future()

        def done(f):
            # the pending offsets are held once replicated even when nobody awaits the answer
            # any more (the client went away): the transaction's marker decides them
            if f.exception() is None:
                hold()
            else:
                results.update(dict.fromkeys(offsets, f.exception().code))
            if not out.done():
                out.set_result(results)
        written.replicated.add_done_callback(done)
        return out

    def on_transaction_completed(self, partition, producer_id, committed):
        """A transaction marker was written to __consumer_offsets-``partition``: the producer's
        pending offsets of the groups there count (COMMIT) or are dropped (ABORT)."""
        for group in self.groups.values():
            if producer_id not in group.pending_txn_offsets or self.store.partition_for(group.group_id) != partition:
                continue
            pending = group.pending_txn_offsets.pop(producer_id)
            if committed:
                apply_committed_txn_offsets(group.offsets, group.offset_batches, pending)

    def has_pending_txn_offsets(self, group_id, partitions=None) -> bool:
        """OffsetFetch's require_stable (KIP-447): a transaction of the group still holds offsets
        for these partitions (all when None)."""
        group = self.groups.get(group_id)
        if group is None:
            return False
        for txn_offsets in group.pending_txn_offsets.values():
            if partitions is None or any(tp in txn_offsets for tp in partitions):
                return True
        return False

    def get_offsets(self, group_id, partitions=None):
        """[(topic, partition, OffsetAndMetadata or None)] of ``partitions`` (all the group's
        when None)."""
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and group.state != g.DEAD else {}
        if partitions is None:
            return [(t, p, om) for (t, p), om in sorted(offsets.items())]
        return [(t, p, offsets.get((t, p))) for t, p in partitions]

    def remove_offsets(self, group, partitions, remove_group=False):
        """Tombstones for the offsets (and for the group when it is Empty without offsets
        left, or when asked): written first, then forgotten. Raises StoreError."""
        remaining = len(group.offsets) - len(partitions)
        # a member that got its id (MEMBER_ID_REQUIRED) and is about to join keeps its group: the
        # retention check must not pull the group from under its JoinGroup
        dead = remove_group or (group.state == g.EMPTY and remaining == 0 and not group.pending_members)
        records = [(offset_key(group.group_id, t, p), None) for t, p in partitions]
        if dead and isinstance(group, ConsumerGroup):
            records.extend(cg_records.group_tombstones(group.group_id))
        elif dead and isinstance(group, ShareGroup):
            records.extend(sg_records.group_tombstones(group.group_id))
        elif dead:
            records.append((group_key(group.group_id), None))
        if records:
            self.store.append(group.group_id, records)
        for tp in partitions:
            group.offsets.pop(tp, None)
        if dead:
            group.transition(g.DEAD, wall_ms())
            self._on_group_removed(group)
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]

    # -- expiry and topic deletion ----------------------------------------------------------------------
    def _expire_offsets_tick(self):
        self._expiry_timer = None
        if self._closed:
            return
        try:
            self.expire_offsets()
        except Exception:  # noqa: BLE001 - the check must keep running
            log.exception("offset expiration failed")
        self._expiry_timer = self.loop.call_later(self.retention_check_interval_ms / 1000, self._expire_offsets_tick)

    def expire_offsets(self, now=None):
        """Kafka's cleanupGroupMetadata with removeExpiredOffsets. Returns the number removed."""
        now = wall_ms() if now is None else now
        removed = 0
        for group in list(self.groups.values()):
            if isinstance(group, ShareGroup):
                continue  # no offsets; an Empty share group stays until deleted (its share-partition state)
            expired = self._expired_offsets(group, now)
            if not expired and not (group.state == g.EMPTY and not group.offsets and not group.pending_members):
                continue
            try:
                self.remove_offsets(group, expired)
                removed += len(expired)
            except StoreError as e:
                log.warning("could not expire the offsets of group %s: error %d", group.group_id, e.code)
        if removed:
            log.info("removed %d expired offsets", removed)
        return removed

    def _expired_offsets(self, group, now):
        retention = self.offsets_retention_ms

        def expired(base_of, skip_topics=()):
            out = []
            for tp, om in group.offsets.items():
                if tp[0] in skip_topics:
                    continue
                if om.expire_timestamp is not None:
                    if now >= om.expire_timestamp:
                        out.append(tp)
                elif now - base_of(om) >= retention:
                    out.append(tp)
            return out

        if group.protocol_type is not None and group.state == g.EMPTY:
            # retention counts from the time the group became empty (the commit when not known)
            state_ts = group.current_state_timestamp
            return expired(lambda om: state_ts if state_ts >= 0 else om.commit_timestamp)
        if group.protocol_type == g.CONSUMER_PROTOCOL_TYPE and group.subscribed_topics is not None \
                and group.state == g.STABLE:
            return expired(lambda om: om.commit_timestamp, group.subscribed_topics)
        if group.protocol_type is None:
            return expired(lambda om: om.commit_timestamp)
        return []

    def on_topic_deleted(self, topic, partitions):
        """The committed offsets of a deleted topic's partitions go too (tombstones)."""
        if self.loop is not None and threading.get_ident() != self.loop_thread:
            self.loop.call_soon_threadsafe(self.on_topic_deleted, topic, partitions)
            return
        if topic == TOPIC:
            return
        for group in list(self.groups.values()):
            gone = [tp for tp in group.offsets if tp[0] == topic and tp[1] < partitions]
            if gone:
                try:
                    self.remove_offsets(group, gone)
                except StoreError as e:
                    log.warning("could not remove the offsets of deleted topic %s from group %s: error %d", topic,
                                group.group_id, e.code)
