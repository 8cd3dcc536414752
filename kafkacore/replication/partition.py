"""Kafka's Partition: one replica of a topic partition on this broker, and what its role asks of
it. Kafka's cluster/Partition.scala is the model.

- The controller's LeaderAndIsr makes it leader or follower with a leader epoch, the replica
  set, the ISR and the partition's ZooKeeper version (the partition epoch).
- As leader it tracks each follower's log end offset from the follower's fetches. The high
  watermark is the smallest log end offset in the ISR (the leader's own included): what is
  committed and what consumers may read.
- A follower whose fetches stay behind the leader's log end for longer than
  ``replica.lag.time.max.ms`` leaves the ISR; one that reaches the high watermark (and this
  leader epoch's start) joins it again. The leader writes each ISR change to the partition's
  state znode with a conditional version: a leader deposed by the controller fails the check and
  learns it is no longer leader, so it cannot change the ISR behind the controller's back.
- acks=all: ``wait_for_commit`` resolves when the high watermark passes the batch, or fails with
  NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below min.insync.replicas meanwhile, or
  NOT_LEADER_OR_FOLLOWER when leadership moves (Kafka's DelayedProduce).
- DeleteRecords: the leader also tracks each follower's log start offset (sent in its fetches).
  The low watermark is the smallest log start offset of this replica and the followers on live
  brokers; ``wait_for_low_watermark`` resolves once it reaches the deleted offset, so that the
  records are gone from every live replica when the client hears so (Kafka's
  DelayedDeleteRecords).
"""
from __future__ import annotations

import asyncio
import logging

from ..clock import monotonic_ms
from ..errors import NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, NotLeaderOrFollowerError

log = logging.getLogger("kafkacore.cluster")



def always_alive(_broker_id):
    return True


class ReplicaState:
    """The leader's view of one follower."""

    __slots__ = ("broker_id", "log_end_offset", "log_start_offset", "last_caught_up_ms", "last_fetch_ms",
                 "last_fetch_leader_leo")

    def __init__(self, broker_id, now):
        self.broker_id = broker_id
        self.log_end_offset = -1
        self.log_start_offset = -1  # unknown until its first fetch of this leadership, as Kafka's
        # a replica that is in the ISR when we become leader gets the full lag time to fetch
        self.last_caught_up_ms = now
        self.last_fetch_ms = now
        self.last_fetch_leader_leo = -1

    def update_fetch(self, fetch_offset, leader_leo, now):
        """Kafka's rule: caught up at this fetch if it asked for the leader's end; or at the
        previous fetch if it now asks for what was the leader's end then."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now)
        elif fetch_offset >= self.last_fetch_leader_leo >= 0:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leader_leo
        self.last_fetch_ms = now


class Partition:
    def __init__(self, topic, partition, log, local_id, topic_id=None):
        self.topic = topic
        self.partition = partition
        self.log = log
        self.local_id = local_id
        self.topic_id = topic_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.leader_epoch_start_offset = 0
        self.partition_epoch = -1  # the state znode's version
        self.controller_epoch = -1
        self.replicas: tuple = ()
        self.isr: tuple = ()
        self.remote: dict[int, ReplicaState] = {}
        self._waiters: list = []  # [(required offset, min ISR, future)] of acks=all produces
        self._low_watermark_waiters: list = []  # [(required offset, future)] of DeleteRecords
        # whether a follower's broker is live (the metadata cache's view; set by the ReplicaManager):
        # a dead replica must not hold DeleteRecords back
        self.replica_alive = always_alive
        self.isr_update_in_flight = False

    def __repr__(self):
        return (f"Partition({self.topic}-{self.partition} leader={self.leader_id} epoch={self.leader_epoch} "
                f"isr={list(self.isr)} hw={self.log.high_watermark} leo={self.log.log_end_offset})")

    @property
    def name(self):
        return f"{self.topic}-{self.partition}"

    @property
    def is_leader(self):
        return self.leader_id == self.local_id

    # -- role changes (LeaderAndIsr) ----------------------------------------------------------
    def make_leader(self, state, now=None) -> bool:
        """Becomes (or stays) leader. Returns True when this is a new leadership (a new epoch)."""
        now = monotonic_ms() if now is None else now
        new_epoch = state.leader_epoch != self.leader_epoch or not self.is_leader
        self._apply(state)
        if new_epoch:
            # records from here on carry the new epoch; followers truncate to this start
            self.leader_epoch_start_offset = self.log.log_end_offset
            self.log.maybe_assign_epoch_start_offset(self.leader_epoch, self.log.log_end_offset)
            self.remote = {r: ReplicaState(r, now) for r in self.replicas if r != self.local_id}
        else:
            for r in self.replicas:
                if r != self.local_id and r not in self.remote:
                    self.remote[r] = ReplicaState(r, now)
            for r in list(self.remote):
                if r not in self.replicas:
                    del self.remote[r]
        self.maybe_increment_high_watermark()
        return new_epoch

    def make_follower(self, state) -> bool:
        """Becomes (or stays) a follower of state.leader. Returns True when the leader or the
        epoch changed (the fetcher must then truncate and start over)."""
        changed = state.leader != self.leader_id or state.leader_epoch != self.leader_epoch
        was_leader = self.is_leader
        self._apply(state)
        self.remote = {}
        if was_leader:
            self.fail_waiters(NotLeaderOrFollowerError(f"{self.name}: leadership moved to broker {state.leader}"))
        return changed

    def _apply(self, state):
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.replicas = tuple(state.replicas)
        self.isr = tuple(state.isr)

    # -- the leader's bookkeeping ----------------------------------------------------------------
    def update_follower_fetch_state(self, replica_id, fetch_offset, now=None, log_start_offset=-1):
        """A follower fetched from fetch_offset: its log end offset; log_start_offset is its log
        start. Returns True when it should join the ISR."""
        now = monotonic_ms() if now is None else now
        state = self.remote.get(replica_id)
        if state is None:
            return False
        if log_start_offset != state.log_start_offset:
            state.log_start_offset = log_start_offset
            self._complete_low_watermark_waiters()
        moved = fetch_offset != state.log_end_offset
        state.update_fetch(fetch_offset, self.log.log_end_offset, now)
        if moved:  # else the HW has nothing new from it: idle partitions of a session stay cheap
            self.maybe_increment_high_watermark()
        return (replica_id not in self.isr and fetch_offset >= self.log.high_watermark
                and fetch_offset >= self.leader_epoch_start_offset)

    def lagging_isr_members(self, max_lag_ms, now=None):
        now = monotonic_ms() if now is None else now
        out = []
        leo = self.log.log_end_offset
        for r in self.isr:
            if r == self.local_id:
                continue
            state = self.remote.get(r)
            if state is None:
                continue
            if state.log_end_offset < leo and now - state.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return out

    def maybe_increment_high_watermark(self):
        """HW = the smallest log end offset of the ISR. Resolves acks=all waiters it passes."""
        if not self.is_leader:
            return
        hw = self.log.log_end_offset
        for r in self.isr:
            if r == self.local_id:
                continue
            state = self.remote.get(r)
            leo = state.log_end_offset if state is not None else -1
            if leo < 0:
                return  # an ISR member we have not heard from this epoch: keep the HW
            hw = min(hw, leo)
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
        self._complete_waiters()

    def isr_changed(self, isr, partition_epoch):
        """Our conditional write of the ISR succeeded."""
        self.isr = tuple(isr)
        self.partition_epoch = partition_epoch
        self.maybe_increment_high_watermark()
        self._complete_waiters()

    # -- the leader's appends and acks=all ----------------------------------------------------------
    def append_records_to_leader(self, records, origin, required_acks):
        """Kafka's Partition.appendRecordsToLeader: with required_acks -1 the ISR must hold
        min.insync.replicas before anything is written (NOT_ENOUGH_REPLICAS, nothing appended:
        a retried write then adds nothing either); the batch carries this leadership's epoch;
        the high watermark moves at once when the ISR is this replica alone. Returns the
        LogAppendInfo."""
        if required_acks == -1:
            min_isr = self.log.config.min_insync_replicas
            if len(self.isr) < min_isr:
                raise NotEnoughReplicasError(
                    f"{self.name}: the ISR {list(self.isr)} has fewer than min.insync.replicas={min_isr} replicas")
        lg = self.log
        info = lg.append(records, leader_epoch=self.leader_epoch, origin=origin)
        if lg.replicated:  # else the log moved its high watermark itself: its replica set is this one
            self.maybe_increment_high_watermark()
        return info

    def commit_wait(self, required_offset, min_isr):
        """None when the high watermark already passed required_offset with the ISR at
        min_isr or more (nothing to wait for: a one-replica ISR answers at once), else
        wait_for_commit's future."""
        if self.log.high_watermark >= required_offset and len(self.isr) >= min_isr:
            return None
        return self.wait_for_commit(required_offset, min_isr)

    def wait_for_commit(self, required_offset, min_isr):
        """A future resolved when HW >= required_offset (the end of the batch)."""
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((required_offset, min_isr, fut))
        self._complete_waiters()
        return fut

    def _complete_waiters(self):
        if not self._waiters:
            return
        hw = self.log.high_watermark
        keep = []
        for required, min_isr, fut in self._waiters:
            if fut.done():
                continue
            if hw >= required:
                if len(self.isr) < min_isr:
                    fut.set_exception(NotEnoughReplicasAfterAppendError(
                        f"{self.name}: written, but the ISR {list(self.isr)} fell below "
                        f"min.insync.replicas={min_isr}"))
                else:
                    fut.set_result(None)
            else:
                keep.append((required, min_isr, fut))
        self._waiters = keep

    def fail_waiters(self, exc):
        """Leadership moved or the replica stopped: every acks=all produce and DeleteRecords
        waiting on this partition fails with exc."""
        waiters, self._waiters = self._waiters, []
        futures = [fut for _r, _m, fut in waiters]
        low_waiters, self._low_watermark_waiters = self._low_watermark_waiters, []
        futures += [fut for _r, fut in low_waiters]
        for fut in futures:
            if not fut.done():
                fut.set_exception(exc)

    # -- DeleteRecords ---------------------------------------------------------------------------
    def low_watermark(self):
        """Kafka's lowWatermarkIfLeader: the smallest log start offset of this replica and of the
        followers on live brokers (-1 while one of them has not fetched in this leadership)."""
        low = self.log.log_start_offset
        for broker_id, state in self.remote.items():
            if state.log_start_offset < low and self.replica_alive(broker_id):
                low = state.log_start_offset
        return low

    def wait_for_low_watermark(self, required_offset):
        """A future resolved with the low watermark once it reaches required_offset."""
        fut = asyncio.get_running_loop().create_future()
        self._low_watermark_waiters.append((required_offset, fut))
        self._complete_low_watermark_waiters()
        return fut

    def replica_liveness_changed(self):
        self._complete_low_watermark_waiters()

    def _complete_low_watermark_waiters(self):
        if not self._low_watermark_waiters:
            return
        low = self.low_watermark()
        keep = []
        for required, fut in self._low_watermark_waiters:
            if fut.done():
                continue  # answered already (the request timed out)
            if low >= required:
                fut.set_result(low)
            else:
                keep.append((required, fut))
        self._low_watermark_waiters = keep
