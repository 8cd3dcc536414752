"""Kafka's ReplicaManager: the partitions this broker holds a replica of, the roles the
controller gives them, and the one write path of a leader.

- ``append_records`` is every leader write (Produce, the group and transaction coordinators'
  internal topics, transaction markers): each partition checked as leader, appended by
  ``Partition.append_records_to_leader`` (min.insync.replicas checked before the write for
  acks=-1), and ``wait_for_replication`` is Kafka's DelayedProduce for acks=-1.
- A single node runs the same ReplicaManager, with its own controller (a cluster of one:
  kafkacore/cluster/local_metadata.py); each partition's ISR is that node alone, so every
  append commits as written.

- LeaderAndIsr (from the controller, fenced by the controller epoch and this broker's epoch)
  makes each listed replica leader or follower: the log is opened (created with the topic's
  configs from ZooKeeper when new) and switched to replicated mode (the high watermark moves
  only by replication); followers are handed to the ReplicaFetcher of their leader.
- UpdateMetadata refreshes the MetadataCache and the broker's topic table.
- StopReplica stops following and, with delete, removes the replica's log.
- A follower's Fetch (replica_id >= 0) records its log end offset, which moves the high
  watermark and can bring it back into the ISR.
- Every ``replica.lag.time.max.ms / 2`` the leaders look for ISR members that stopped keeping
  up. ISR changes go through the isr_store (on a cluster the partition's state znode, written
  with a conditional version: cluster/isr_store.py); a failed check means the controller or a
  newer leader changed the partition, and this broker waits for the controller's next word.
  Changed partitions are announced (/isr_change_notification) so the controller sends the new
  ISR to every broker.
- The high watermarks are checkpointed every ``replica.high.watermark.checkpoint.interval.ms``.
"""
from __future__ import annotations

import asyncio
import logging

from ..clock import monotonic_ms
from ..protocol.kafka_uuid import uuid_to_text
from ..errors import (KafkaError, NotLeaderOrFollowerError, RequestTimedOutError, StaleBrokerEpochError,
                      StaleControllerEpochError, UnknownTopicOrPartitionError)
from .partition import Partition, always_alive
from .replica_fetcher import ReplicaFetcher

log = logging.getLogger("kafkacore.cluster")

ISR_NOTIFICATION_INTERVAL_S = 2.5  # Kafka's isrChangeNotificationInterval (ReplicaManager)


class LeaderAndIsrState:
    """One partition's state as LeaderAndIsr carries it."""

    __slots__ = ("leader", "leader_epoch", "isr", "replicas", "partition_epoch", "controller_epoch", "is_new")

    def __init__(self, leader, leader_epoch, isr, replicas, partition_epoch, controller_epoch, is_new=False):
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.isr = list(isr)
        self.replicas = list(replicas)
        self.partition_epoch = partition_epoch
        self.controller_epoch = controller_epoch
        self.is_new = is_new


class PartitionAppend:
    """One partition's outcome of ReplicaManager.append_records: the LogAppendInfo and the log
    start offset, or the KafkaError; ``commit`` is the acks=all wait still to be done (None
    when there is none)."""

    __slots__ = ("info", "log_start_offset", "error", "commit")

    def __init__(self):
        self.info = None
        self.log_start_offset = -1
        self.error = None
        self.commit = None


class ReplicaManager:
    def __init__(self, broker, isr_store=None):
        """isr_store: where a leader writes its partitions' ISR changes (write_isr) and
        announces them (propagate_isr_changes): the cluster's ZooKeeper (cluster/isr_store.py);
        None on a single node, whose partitions have no other replica and so never change their
        ISR."""
        self.broker = broker
        self.isr_store = isr_store
        self.config = broker.config
        self.node_id = broker.node_id
        self.partitions: dict[tuple, Partition] = {}
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.controller_epoch = -1
        self.roles_received = False  # a first LeaderAndIsr came (a starting broker waits for it)
        self.broker_epoch = -1  # the czxid of our registration znode (set by the cluster node)
        self._isr_changes: set = set()
        self._tasks = []
        self._closed = False
        # ISR changes written for partitions led here (Kafka's IsrShrinksPerSec / IsrExpandsPerSec)
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.on_leadership_change = []  # fn(topic, partition, is_leader, leader_epoch): the coordinators
        # whether a broker is live (the cluster's metadata cache sets it): a follower on a dead
        # broker must not hold DeleteRecords back
        self.replica_alive = always_alive

    # -- start / stop ---------------------------------------------------------------------------
    def start(self, loop):
        lag = self.config["replica.lag.time.max.ms"]
        self._tasks = [
            loop.create_task(self._every(lag / 2000, self._shrink_isrs)),
            loop.create_task(self._every(ISR_NOTIFICATION_INTERVAL_S, self._propagate_isr_changes)),
            loop.create_task(self._every(self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000,
                                         self._checkpoint_high_watermarks)),
        ]

    async def _every(self, seconds, fn):
        while not self._closed:
            await asyncio.sleep(seconds)
            try:
                result = fn()
                if asyncio.iscoroutine(result):
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the next round tries again; say so loudly
                log.exception("replica manager: %s failed", fn.__name__)

    def shutdown(self):
        self._closed = True
        for t in self._tasks:
            t.cancel()
        for f in self.fetchers.values():
            f.close()
        self.fetchers.clear()
        for p in self.partitions.values():
            p.fail_waiters(NotLeaderOrFollowerError(f"{p.name}: the broker is shutting down"))

    # -- the controller's requests ----------------------------------------------------------------
    def check_controller(self, controller_epoch, broker_epoch):
        if controller_epoch < self.controller_epoch:
            raise StaleControllerEpochError(
                f"controller epoch {controller_epoch} is older than {self.controller_epoch}")
        if broker_epoch not in (-1, self.broker_epoch) and broker_epoch < self.broker_epoch:
            raise StaleBrokerEpochError(f"broker epoch {broker_epoch} is older than this broker's {self.broker_epoch}")
        self.controller_epoch = controller_epoch

    def become_leader_or_follower(self, controller_id, states, live_leaders, topic_ids, topic_configs):
        """states: {(topic, partition): LeaderAndIsrState}; live_leaders: {id: (host, port)};
        topic_ids: {topic: uuid bytes}; topic_configs: fn(topic) -> overrides for a new log.
        Returns {(topic, partition): error code}."""
        errors = {}
        for key, st in states.items():
            topic, p = key
            if self.node_id not in st.replicas:
                errors[key] = UnknownTopicOrPartitionError.code
                continue
            partition = self.partitions.get(key)
            if partition is not None and st.leader_epoch < partition.leader_epoch:
                log.info("%s-%d: ignoring LeaderAndIsr with leader epoch %d below %d", topic, p, st.leader_epoch,
                         partition.leader_epoch)
                errors[key] = StaleControllerEpochError.code
                continue
            try:
                if partition is None:
                    partition = self._open_partition(topic, p, topic_ids.get(topic), topic_configs)
                if st.leader == self.node_id:
                    self._make_leader(partition, st)
                else:
                    self._make_follower(partition, st, live_leaders)
                errors[key] = 0
            except KafkaError as e:
                log.error("%s-%d: LeaderAndIsr failed: %s", topic, p, e)
                errors[key] = e.code
        self.roles_received = True
        return errors

    def _open_partition(self, topic, p, topic_id, topic_configs):
        lm = self.broker.log_manager
        lg = lm.get_log(topic, p)
        if lg is None:
            lg = lm.get_or_create_log(topic, p, topic_configs(topic) or None,
                                      topic_id=uuid_to_text(topic_id) if topic_id else None)
            self.broker.watch_log(lg)
        lg.make_replicated()
        partition = Partition(topic, p, lg, self.node_id, topic_id)
        partition.replica_alive = self.replica_alive
        self.partitions[(topic, p)] = partition
        return partition

    def _make_leader(self, partition, st):
        fetcher = self.fetchers.get(partition.leader_id)
        if fetcher is not None:
            fetcher.remove_partition((partition.topic, partition.partition))
        new = partition.make_leader(st)
        if new:
            # a partition with one replica has no one else to lead: its leadership is no news
            log.log(logging.INFO if len(st.replicas) > 1 else logging.DEBUG,
                    "%s: leader with epoch %d, ISR %s, log end %d, high watermark %d", partition.name,
                    st.leader_epoch, st.isr, partition.log.log_end_offset, partition.log.high_watermark)
            self._leadership_changed(partition, True)

    def _make_follower(self, partition, st, live_leaders):
        old_leader = partition.leader_id
        was_leader = partition.is_leader
        changed = partition.make_follower(st)
        key = (partition.topic, partition.partition)
        fetching = self.fetchers.get(st.leader)
        if not changed and not was_leader and fetching is not None and key in fetching.states:
            return  # the same leader and epoch, and we fetch from it: nothing to do
        old = self.fetchers.get(old_leader)
        if old is not None:
            old.remove_partition((partition.topic, partition.partition))
        if was_leader:
            self._leadership_changed(partition, False)
        address = live_leaders.get(st.leader)
        if address is None:
            log.info("%s: leader %d is not live; not fetching", partition.name, st.leader)
            return
        fetcher = self.fetchers.get(st.leader)
        if fetcher is None:
            fetcher = self.fetchers[st.leader] = ReplicaFetcher(self, st.leader, *address)
        else:
            fetcher.channel.update_address(*address)
        fetcher.add_partition(partition)
        log.info("%s: follower of broker %d with epoch %d", partition.name, st.leader, st.leader_epoch)

    def _leadership_changed(self, partition, is_leader):
        for fn in self.on_leadership_change:
            try:
                fn(partition.topic, partition.partition, is_leader, partition.leader_epoch)
            except Exception:  # noqa: BLE001 - a coordinator's failure must not stop replication
                log.exception("leadership change listener failed for %s", partition.name)

    def stop_replicas(self, partitions):
        """partitions: [(topic, partition, delete)]; returns {(topic, partition): error code}."""
        errors = {}
        for topic, p, delete in partitions:
            key = (topic, p)
            partition = self.partitions.pop(key, None)
            if partition is not None:
                fetcher = self.fetchers.get(partition.leader_id)
                if fetcher is not None:
                    fetcher.remove_partition(key)
                if partition.is_leader:
                    self._leadership_changed(partition, False)
                partition.fail_waiters(NotLeaderOrFollowerError(f"{partition.name}: replica stopped"))
            if delete and self.broker.log_manager.get_log(topic, p) is not None:
                self.broker.unwatch_log(topic, p)
                self.broker.log_manager.delete_log(topic, p)
            errors[key] = 0
        return errors

    def delete_stray_logs(self, hosted):
        """After a FULL LeaderAndIsr (sent when this broker joins or a controller takes over; it
        names every partition the broker hosts): local logs of partitions moved away while the
        broker was down, or of topics deleted meanwhile, are strays. Kafka's ZooKeeper mode left
        them on disk; here they are deleted. A partition the metadata still places on this
        broker (offline, so not in the request) is kept. Returns the keys deleted."""
        cache = self.broker.metadata_cache
        if cache.controller_id < 0:
            return []  # no UpdateMetadata yet: too early to know what is stray
        known_topics = cache.topics()
        strays = []
        for key in list(self.broker.log_manager.logs):
            if key in hosted:
                continue
            st = cache.partition(*key)
            if st is not None and self.node_id in st.replicas:
                continue
            if st is None and key[0] in known_topics:
                continue
            strays.append(key)
        for topic, p in strays:
            log.warning("%s-%d: a stray replica (not assigned to broker %d any more); deleting its log", topic, p,
                        self.node_id)
        self.stop_replicas([(topic, p, True) for topic, p in strays])
        return strays

    def led_partitions(self, topic):
        """The partitions of ``topic`` this broker leads now (a coordinator starting late asks,
        then follows on_leadership_change)."""
        return [(p.partition, p.leader_epoch) for p in list(self.partitions.values())
                if p.topic == topic and p.is_leader]

    # -- the data path -----------------------------------------------------------------------------
    def append_records(self, entries, required_acks, origin):
        """Kafka's ReplicaManager.appendRecords, its synchronous half: every write of a leader
        (Produce, the coordinators' internal topics, transaction markers) comes through here.
        entries: {(topic, partition): one v2 batch}; required_acks 0, 1 or -1; origin an
        AppendOrigin. Each partition is checked as leader (NOT_LEADER_OR_FOLLOWER,
        UNKNOWN_TOPIC_OR_PARTITION) and appended by Partition.append_records_to_leader (which
        refuses acks=-1 before the write when the ISR is too small). With acks -1 a
        partition whose high watermark has not reached the batch yet gets a ``commit`` future;
        wait_for_replication waits for them. Returns {(topic, partition): PartitionAppend}."""
        results = {}
        led = self.partitions.get
        for key, records in entries.items():
            result = results[key] = PartitionAppend()
            try:
                partition = led(key)
                if partition is None or partition.leader_id != self.node_id:
                    partition = self.leader_partition(*key)  # raises the error for the client
                info = partition.append_records_to_leader(records, origin, required_acks)
                result.info = info
                result.log_start_offset = partition.log.log_start_offset
                if required_acks == -1:
                    # a duplicate (an idempotent retry of a batch the log holds) is answered as
                    # its original is to be: once the high watermark passes it. A leader cut off
                    # from its ISR holds batches only it has; acknowledging their retry at once
                    # lost them when it was deposed and truncated.
                    result.commit = partition.commit_wait(info.last_offset + 1,
                                                          partition.log.config.min_insync_replicas)
            except KafkaError as e:
                result.error = e
        return results

    @staticmethod
    async def wait_for_replication(results, timeout_ms):
        """Kafka's DelayedProduce: waits until every acks=all partition of ``results`` is
        committed or failed, or timeout_ms passed; each one still waiting then gets
        REQUEST_TIMED_OUT, each failed one its error (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        NOT_LEADER_OR_FOLLOWER). A wait cancelled (the request's connection went away) cancels
        its partitions' waiters, so nothing is left to fail unheard."""
        waits = [r for r in results.values() if r.commit is not None]
        if not waits:
            return results
        futures = [r.commit for r in waits]
        try:
            await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
        except asyncio.CancelledError:
            for commit in futures:
                commit.cancel()
            raise
        for r in waits:
            commit, r.commit = r.commit, None
            if not commit.done():
                commit.cancel()
                r.error = RequestTimedOutError(f"not replicated to the ISR within {timeout_ms} ms")
            elif commit.exception() is not None:
                r.error = commit.exception()
        return results

    def leader_partition(self, topic, p) -> Partition:
        partition = self.partitions.get((topic, p))
        if partition is None:
            info = self.broker.topic(topic)
            if info is None or not 0 <= p < info.partitions:
                raise UnknownTopicOrPartitionError(f"{topic}-{p} does not exist")
            raise NotLeaderOrFollowerError(f"broker {self.node_id} has no replica of {topic}-{p}")
        if not partition.is_leader:
            raise NotLeaderOrFollowerError(f"broker {self.node_id} is not the leader of {topic}-{p}")
        return partition

    def live_brokers_changed(self):
        """UpdateMetadata: a follower whose broker died no longer holds DeleteRecords back."""
        for partition in self.partitions.values():
            if partition.is_leader:
                partition.replica_liveness_changed()

    def follower_fetched(self, partition, replica_id, fetch_offset, now=None, log_start_offset=-1):
        """A follower's Fetch: its log end offset (the HW, a return to the ISR) and its log start
        offset (DeleteRecords)."""
        if partition.update_follower_fetch_state(replica_id, fetch_offset, now, log_start_offset):
            self._change_isr(partition, sorted(set(partition.isr) | {replica_id}), f"broker {replica_id} caught up")

    # -- ISR maintenance ----------------------------------------------------------------------
    def _shrink_isrs(self):
        now = monotonic_ms()
        for partition in list(self.partitions.values()):
            self._maybe_shrink_isr(partition, now)

    def _maybe_shrink_isr(self, partition, now):
        if not partition.is_leader:
            return
        lag = self.config["replica.lag.time.max.ms"]
        lagging = partition.lagging_isr_members(lag, now)
        if lagging:
            new_isr = [r for r in partition.isr if r not in lagging]
            self._change_isr(partition, new_isr, f"brokers {lagging} fell behind for over {lag} ms")

    def _change_isr(self, partition, new_isr, why):
        if partition.isr_update_in_flight or tuple(new_isr) == partition.isr:
            return
        partition.isr_update_in_flight = True
        epoch, version = partition.leader_epoch, partition.partition_epoch
        loop = asyncio.get_running_loop()

        def write():
            """(the state's new version, the ISR now stored)."""
            return self.isr_store.write_isr(partition.topic, partition.partition, self.node_id, epoch, new_isr,
                                            partition.controller_epoch, version)

        async def run():
            try:
                new_version, written = await loop.run_in_executor(None, write)
            except Exception as e:  # noqa: BLE001 - a version mismatch or ZooKeeper unreachable
                log.warning("%s: ISR change to %s not written (%s): %s; waiting for the controller",
                            partition.name, new_isr, why, e)
                return
            finally:
                partition.isr_update_in_flight = False
            if partition.leader_epoch != epoch or not partition.is_leader:
                return  # the controller moved the partition meanwhile; its state wins
            before, after = set(partition.isr), set(written)
            if before - after:
                self.isr_shrinks += 1
            if after - before:
                self.isr_expands += 1
            if written != tuple(new_isr):
                log.warning("%s: the metadata store already held ISR %s at version %d (a write whose answer was lost); "
                            "adopted it", partition.name, list(written), new_version)
                partition.isr_changed(written, new_version)
                self._maybe_shrink_isr(partition, monotonic_ms())  # the shrink that failed, at once
            else:
                log.info("%s: ISR %s -> %s (%s)", partition.name, list(partition.isr), new_isr, why)
                partition.isr_changed(written, new_version)
            self._isr_changes.add((partition.topic, partition.partition))

        loop.create_task(run())

    async def _propagate_isr_changes(self):
        if not self._isr_changes:
            return
        changes, self._isr_changes = sorted(self._isr_changes), set()
        await asyncio.get_running_loop().run_in_executor(None, self.isr_store.propagate_isr_changes, changes)

    async def _checkpoint_high_watermarks(self):
        # off the event loop: the atomic write fsyncs twice, a stall every interval that
        # acks=all produces and fetches waiting on the loop would see (Kafka: a scheduler thread)
        await asyncio.get_running_loop().run_in_executor(None, self.broker.log_manager.checkpoint_high_watermarks)
