"""Kafka's ReplicaFetcherThread, as one asyncio task per source broker: the follower side of
replication.

- Every partition this broker follows from that leader is fetched with one Fetch (v12, by
  name) carrying this broker's id as ``replica_id``, from the follower's log end offset, waiting
  up to ``replica.fetch.wait.max.ms`` on the leader. The leader's batches are appended as they
  are (``Log.append_as_follower``: same offsets, same bytes, same leader epochs), and the
  follower's high watermark becomes min(leader's high watermark, own log end).
- Before a partition's first fetch under a new leader epoch it truncates away what the leader
  does not have (KIP-101 with KIP-279's fix): it asks the leader, with OffsetForLeaderEpoch, where
  its own latest epoch ends there; when the leader answers a smaller epoch, the follower's own
  end of that epoch bounds the truncation too. A leader without epoch information means the
  follower falls back to its high watermark.
- OFFSET_OUT_OF_RANGE: a fetch offset past the leader's end truncates to the leader's end; one
  before the leader's log start starts the log over at the leader's log start.
- FENCED_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION leave the partition
  alone until the controller's next LeaderAndIsr; a lost connection backs off
  ``replica.fetch.backoff.ms`` and retries.
"""
from __future__ import annotations

import asyncio
import logging

from ..errors import KafkaError
from ..protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from ..protocol.messages.offset_for_leader_epoch_request import (OffsetForLeaderEpochRequest,
                                                                  OffsetForLeaderPartition, OffsetForLeaderTopic)
from .broker_channel import BrokerChannel, BrokerChannelError

log = logging.getLogger("kafkacore.cluster")

FETCH, OFFSET_FOR_LEADER_EPOCH = 1, 23
FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
NONE, OFFSET_OUT_OF_RANGE = 0, 1
UNDEFINED_EPOCH = -1


class FetchState:
    __slots__ = ("partition", "leader_epoch", "truncating")

    def __init__(self, partition):
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.truncating = True  # a new leader epoch: truncate before fetching


class ReplicaFetcher:
    def __init__(self, replica_manager, source_id, host, port):
        self.rm = replica_manager
        self.source_id = source_id
        cfg = replica_manager.config
        self.channel = BrokerChannel(source_id, host, port, client_id=f"broker-{replica_manager.node_id}-fetcher",
                                     connect_timeout=cfg["replica.socket.timeout.ms"] / 1000)
        self.max_wait_ms = cfg["replica.fetch.wait.max.ms"]
        self.min_bytes = cfg["replica.fetch.min.bytes"]
        self.max_bytes = cfg["replica.fetch.response.max.bytes"]
        self.partition_max_bytes = cfg["replica.fetch.max.bytes"]
        self.backoff = cfg["replica.fetch.backoff.ms"] / 1000
        self.timeout = cfg["replica.socket.timeout.ms"] / 1000
        self.states: dict[tuple, FetchState] = {}
        self._changed = asyncio.Event()
        self._task = None
        self.closed = False

    def __repr__(self):
        return f"ReplicaFetcher(from broker {self.source_id}, {len(self.states)} partitions)"

    # -- partitions ---------------------------------------------------------------------------
    def add_partition(self, partition):
        self.states[(partition.topic, partition.partition)] = FetchState(partition)
        self._changed.set()
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def remove_partition(self, key):
        self.states.pop(key, None)
        self._changed.set()

    def close(self):
        self.closed = True
        self.channel.close()
        if self._task is not None:
            self._task.cancel()

    # -- the loop -------------------------------------------------------------------------------
    async def _run(self):
        while not self.closed:
            if not self.states:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                if any(s.truncating for s in self.states.values()):
                    await self._truncate()
                await self._fetch_once()
            except BrokerChannelError as e:
                log.info("fetcher from broker %d: %s; retrying in %.1f s", self.source_id, e, self.backoff)
                await asyncio.sleep(self.backoff)
            except asyncio.CancelledError:
                return
            except Exception:  # noqa: BLE001 - a bug must not stop replication silently forever
                log.exception("fetcher from broker %d failed; retrying", self.source_id)
                await asyncio.sleep(self.backoff)

    async def _truncate(self):
        todo = {k: s for k, s in self.states.items() if s.truncating}
        topics = {}
        for (topic, p), s in todo.items():
            epoch = s.partition.log.leader_epoch_cache.latest_epoch
            if epoch == UNDEFINED_EPOCH:
                # nothing written under an epoch we know: keep what is committed
                self._truncate_to(s, s.partition.log.high_watermark)
                continue
            topics.setdefault(topic, []).append(OffsetForLeaderPartition(
                partition=p, current_leader_epoch=s.leader_epoch, leader_epoch=epoch))
        if not topics:
            return
        req = OffsetForLeaderEpochRequest(replica_id=self.rm.node_id, topics=[
            OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        resp = await self.channel.call(OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, req, self.timeout)
        for t in resp.topics:
            for r in t.partitions:
                s = self.states.get((t.topic, r.partition))
                if s is None or not s.truncating:
                    continue
                if r.error_code:
                    log.info("%s-%d: OffsetForLeaderEpoch from broker %d: error %d", t.topic, r.partition,
                             self.source_id, r.error_code)
                    continue  # retried at the next round, or the controller moves the partition
                lg = s.partition.log
                if r.leader_epoch == UNDEFINED_EPOCH or r.end_offset < 0:
                    target = lg.high_watermark
                else:
                    ours = lg.leader_epoch_cache.latest_epoch
                    target = min(r.end_offset, lg.log_end_offset)
                    if r.leader_epoch < ours:
                        # KIP-279: the leader never had our epoch; our end of its epoch bounds it
                        _e, our_end = lg.leader_epoch_cache.end_offset_for(r.leader_epoch, lg.log_end_offset)
                        if our_end >= 0:
                            target = min(target, our_end)
                self._truncate_to(s, target)

    def _truncate_to(self, s, offset):
        lg = s.partition.log
        if offset < lg.log_end_offset:
            log.info("%s: truncating from %d to %d (leader %d, epoch %d)", s.partition.name, lg.log_end_offset,
                     offset, self.source_id, s.leader_epoch)
            lg.truncate_to(offset)
        s.truncating = False

    async def _fetch_once(self):
        topics = {}
        for (topic, p), s in self.states.items():
            if s.truncating:
                continue
            lg = s.partition.log
            topics.setdefault(topic, []).append(FetchPartition(
                partition=p, current_leader_epoch=s.leader_epoch, fetch_offset=lg.log_end_offset,
                last_fetched_epoch=-1, log_start_offset=lg.log_start_offset,
                partition_max_bytes=self.partition_max_bytes))
        if not topics:
            return
        req = FetchRequest(replica_id=self.rm.node_id, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                           max_bytes=self.max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                           forgotten_topics_data=[], rack_id="")
        resp = await self.channel.call(FETCH, FETCH_VERSION, req, self.timeout + self.max_wait_ms / 1000)
        if resp.error_code:
            log.info("fetch from broker %d: error %d", self.source_id, resp.error_code)
            await asyncio.sleep(self.backoff)
            return
        for t in resp.responses:
            for pd in t.partitions:
                s = self.states.get((t.topic, pd.partition_index))
                if s is None or s.truncating:
                    continue  # removed or re-targeted while the fetch was out
                self._process(s, pd)

    def _process(self, s, pd):
        lg = s.partition.log
        if pd.error_code == NONE:
            records = pd.records
            if records is not None and len(records):
                try:
                    lg.append_as_follower(records)
                except KafkaError as e:
                    log.error("%s: the leader's batches could not be appended: %s", s.partition.name, e)
                    return
                metrics = self.rm.broker.metrics
                if metrics is not None:
                    metrics.replication_bytes_in += len(records)
            lg.update_high_watermark(min(pd.high_watermark, lg.log_end_offset))
            if pd.log_start_offset > lg.log_start_offset and pd.log_start_offset <= lg.high_watermark:
                lg.delete_records(pd.log_start_offset)
            return
        if pd.error_code == OFFSET_OUT_OF_RANGE:
            self._out_of_range(s, pd)
            return
        log.info("%s: fetch from broker %d: error %d; waiting for the controller", s.partition.name,
                 self.source_id, pd.error_code)
        self.remove_partition((s.partition.topic, s.partition.partition))

    def _out_of_range(self, s, pd):
        """Kafka's handleOutOfRangeError: past the leader's end, truncate to it; before its
        log start, start over there."""
        lg = s.partition.log
        leader_end, leader_start = pd.high_watermark, pd.log_start_offset
        if leader_end >= 0 and lg.log_end_offset > leader_end:
            lg.truncate_to(leader_end)
        elif leader_start > lg.log_end_offset:
            log.info("%s: behind the leader's log start %d; starting over there", s.partition.name, leader_start)
            lg.truncate_fully_and_start_at(leader_start)
        else:
            s.truncating = True  # ask again where our epoch ends
