"""The share-partitions this broker leads and the share sessions of its share consumers
(Kafka's ``SharePartitionManager``): what ShareFetch and ShareAcknowledge work on.

- A ``SharePartition`` (coordinator/share_partition.py) exists per (group, topic, partition)
  once a member fetches it here, loaded from the ``Persister`` on first use. One that this broker
  no longer leads (the ReplicaManager's leadership changes) is dropped and loaded afresh from the
  persister at the next fetch (its acquisitions end with the old leadership, as in Kafka); one
  still led here at a newer leader epoch is kept (``on_leadership_change``).
- The persister is ``KafkaServer.share_persister`` (one attribute, set in
  ``KafkaServer._start_coordinators``, just before this manager, so never missing here).
- Releases (a share session closed with epoch -1, a closed connection) and lock expiries write
  the state through the persister in the background (an error is logged); acknowledgements
  write before they are answered (the handlers await ``write``).
- Fetches waiting for records (a ShareFetch long poll) wait on the partitions' logs; a release
  or a lock expiry wakes them like an append.
- Counters for the broker's metrics: records acquired, redelivered (acquired again) and archived.
- A share partition is never served from state that was deleted or replaced since it loaded
  (docs/groups.md, "Deleted state"): a group's share partitions go when its last share session
  here ends (Kafka 4.1's ShareGroupListener.onGroupEmpty); one goes when a write of it is
  refused with FENCED_STATE_EPOCH (as Kafka's handleFencedSharePartitionException); when a
  member opens a share session (epoch 0) the group's share partitions here are checked against
  their coordinator (one ReadShareGroupStateSummary each) and one whose state is gone or has
  another state epoch goes. A share partition loaded again first waits for the writes its
  dropped predecessor still had on their way, so they cannot land on the new state.
"""
from __future__ import annotations

import asyncio
import logging
import uuid

from ..errors import FencedStateEpochError, KafkaError
from .share_partition import SharePartition
from .share_session import ShareSessionCache

log = logging.getLogger("kafkacore.share")


class SharePartitionManager:
    def __init__(self, broker):
        self.broker = broker
        self.sessions = ShareSessionCache(broker.config["group.share.max.share.sessions"])
        self.partitions: dict[tuple[str, str, int], SharePartition] = {}
        self._loading: dict[tuple[str, str, int], asyncio.Future] = {}
        self._writes: dict[tuple[str, str, int], set] = {}  # key -> its background writes on their way
        # for the broker's metrics (broker/metrics.py)
        self.acquired_records = 0
        self.redelivered_records = 0
        self.archived_records = 0
        self.acknowledged_records = {"accept": 0, "release": 0, "reject": 0}  # by acknowledge type
        self.lock_timeouts = 0  # records whose acquisition lock expired
        broker.replica_manager.on_leadership_change.append(self.on_leadership_change)

    # -- what the share partitions ask ----------------------------------------------------------
    @property
    def persister(self):
        """The broker's one persister (``KafkaServer.share_persister``), read at each use."""
        return self.broker.share_persister

    def loop(self):
        return self.broker.loop

    @staticmethod
    def topic_uuid(topic_id: bytes) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(topic_id))

    def group_config(self, group_id, name):
        """A share group's config: the group's override, else the broker's default."""
        return self.broker.group_configs.get(group_id, name)

    def record_acquired(self, n, redelivered):
        self.acquired_records += n
        self.redelivered_records += redelivered

    def record_archived(self, n):
        self.archived_records += n

    def record_acknowledged(self, ack_type, n):
        self.acknowledged_records[ack_type] += n

    def record_lock_timeouts(self, n):
        self.lock_timeouts += n

    def state_changed(self, sp: SharePartition):
        """Records became AVAILABLE or done outside a request (a lock expired): written in the
        background, and the fetches waiting on the partition woken."""
        self._write_in_background(sp)
        lg = self.broker.get_log(sp.topic, sp.partition)
        if lg is not None:
            self.broker.wake_fetches(lg)

    def _write_in_background(self, sp):
        key = (sp.group_id, sp.topic, sp.partition)
        task = asyncio.ensure_future(self._write_logged(sp))
        writes = self._writes.setdefault(key, set())
        writes.add(task)

        def done(t):
            writes.discard(t)
            if not writes and self._writes.get(key) is writes:
                del self._writes[key]
        task.add_done_callback(done)

    async def _write_logged(self, sp):
        try:
            await sp.write_state()
        except Exception as e:  # noqa: BLE001 - a background write's failure is logged, never lost silently
            log.error("share partition %s %s-%d: writing its state failed: %r", sp.group_id, sp.topic, sp.partition, e)

    def write_refused(self, sp: SharePartition, error: Exception):
        """A write of ``sp`` failed with ``error``: on FENCED_STATE_EPOCH (its state was deleted
        or replaced since it loaded) it goes, and the next fetch loads the state anew. Not on
        FENCED_LEADER_EPOCH: a leadership lost drops it already (on_leadership_change), and a
        write of the previous epoch overtaken by one of the new epoch on the same leader (ZooKeeper
        mode raises the epoch at an ISR shrink) is no reason to forget what the newer one wrote."""
        if isinstance(error, FencedStateEpochError):
            key = (sp.group_id, sp.topic, sp.partition)
            if self.partitions.get(key) is sp:
                log.info("share partition %s %s-%d is fenced (%s): dropped", sp.group_id, sp.topic, sp.partition,
                         error)
                self.drop(key)

    # -- the share partitions ---------------------------------------------------------------------
    async def share_partition(self, group_id, topic, topic_id, partition, lg, leader_epoch) -> SharePartition:
        """The group's share partition of a partition this broker leads at ``leader_epoch``,
        loaded on first use (one load at a time per share partition)."""
        key = (group_id, topic, partition)
        sp = self.partitions.get(key)
        if sp is not None and sp.topic_id == topic_id:
            # still led here since it loaded: a leadership lost drops it (on_leadership_change). A
            # request that read the partition's epoch before a newer one arrived is no reason to
            # reload: it would race the writes on their way and forget what they record
            sp.leader_epoch = max(sp.leader_epoch, leader_epoch)
            return sp
        if sp is not None:  # a new leadership (or a re-created topic): start again from the store
            self.drop(key)
        pending = self._loading.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future = asyncio.get_running_loop().create_future()
        self._loading[key] = future
        try:
            writes = self._writes.get(key)
            if writes:  # a dropped predecessor's writes land before the state is read
                await asyncio.wait(list(writes))
            sp = SharePartition(self, group_id, topic, topic_id, partition)
            await sp.load(lg, leader_epoch)
            self.partitions[key] = sp
            future.set_result(sp)
            return sp
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: a waiter gets it, nobody else must be told
            raise
        finally:
            del self._loading[key]

    def drop(self, key):
        sp = self.partitions.pop(key, None)
        if sp is not None:
            sp.close()

    def drop_group(self, group_id):
        """The group is being deleted, or its last share session here ended: its share
        partitions here go, unwritten (their writes on the way still land)."""
        for key in [k for k in self.partitions if k[0] == group_id]:
            self.drop(key)

    async def revalidate_group(self, group_id):
        """A member of the group opens a share session: each of the group's share partitions
        here is checked against its share coordinator (ReadShareGroupStateSummary). One whose
        state is gone (its group was deleted, through another broker) or has another state epoch
        (its offsets were altered) goes, to be loaded anew. A check that fails keeps the share
        partition (logged): its next write is fenced by the coordinator if its state moved on."""
        cached = [(k, sp) for k, sp in self.partitions.items() if k[0] == group_id]
        if not cached:
            return
        results = await asyncio.gather(*(self.persister.read_summary(group_id, self.topic_uuid(sp.topic_id),
                                                                     sp.partition) for _k, sp in cached),
                                       return_exceptions=True)
        for (key, sp), summary in zip(cached, results):
            if isinstance(summary, BaseException):
                if not isinstance(summary, KafkaError):
                    raise summary
                log.warning("share partition %s %s-%d: its state could not be checked: %s", *key, summary)
            elif self.partitions.get(key) is sp and (summary is None or summary.state_epoch != sp.state_epoch):
                log.info("share partition %s %s-%d: its state %s since it loaded: dropped", *key,
                         "was deleted" if summary is None else
                         f"moved to state epoch {summary.state_epoch} from {sp.state_epoch}")
                self.drop(key)

    def on_leadership_change(self, topic, partition, is_leader, leader_epoch):
        """The ReplicaManager's word: a partition's leadership moved here, away, or to a new
        epoch. Share partitions of a partition led elsewhere now go (their locks with them); the
        next fetch on a new leader loads them from the persister. A broker that stays the leader
        at a new epoch keeps them and writes at the new epoch from then on: in ZooKeeper mode the
        controller raises the leader epoch when it shrinks the ISR (a follower died), which in
        KRaft it does not; reloading there would race the writes still on their way to the share
        coordinator and hand out again records whose acknowledgement was confirmed."""
        for key, sp in list(self.partitions.items()):
            if key[1] != topic or key[2] != partition:
                continue
            if is_leader and sp.leader_epoch <= leader_epoch:
                sp.leader_epoch = leader_epoch
            else:
                self.drop(key)

    def on_not_leader(self, topic, partition):
        """This broker does not lead the partition: its share partitions go."""
        for key in [k for k in self.partitions if k[1] == topic and k[2] == partition]:
            self.drop(key)

    # -- sessions that end ------------------------------------------------------------------------
    def release_session(self, session):
        """The member's acquired records go back, on every share partition of its group led here
        (epoch -1, a closed connection: Kafka's ShareGroupListener.onMemberLeave)."""
        for (group_id, _topic, _partition), sp in list(self.partitions.items()):
            if group_id == session.group_id and sp.release_member(session.member_id):
                self.state_changed(sp)
        if not self.sessions.has_group(session.group_id):
            # Kafka 4.1's onGroupEmpty: the next session loads the state afresh (its group may be
            # deleted and created anew meanwhile, through another broker)
            self.drop_group(session.group_id)

    def connection_closed(self, connection_id):
        for session in self.sessions.connection_closed(connection_id):
            log.debug("share session of %s/%s closed with its connection", session.group_id, session.member_id)
            self.release_session(session)

    def shutdown(self):
        for key in list(self.partitions):
            self.drop(key)
        for writes in list(self._writes.values()):
            for task in list(writes):
                task.cancel()
