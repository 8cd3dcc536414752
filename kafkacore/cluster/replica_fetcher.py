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
- Fetches run in a KIP-227 incremental fetch session, as Kafka's followers do
  (FetchSessionHandler): the first fetch is a full one at epoch 0 that opens the session, later
  ones carry only the partitions whose fetch position changed (``forgotten_topics_data`` for the
  ones that left) and get back only partitions with something new. An idle partition then costs
  neither side anything per fetch round. A session error, a lost connection or a failed fetch
  starts over with a full fetch (which closes the old session on the leader); a leader that
  has no room for a session is fetched from with full fetches.
"""
from __future__ import annotations

import asyncio
import logging

from ..broker.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from ..errors import FetchSessionIdNotFoundError, FetchSessionTopicIdError, InvalidFetchSessionEpochError, KafkaError
from ..protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
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
        # the incremental fetch session: its id (0: none yet), the epoch the next incremental
        # fetch carries, and each partition's fetch position as the leader's session has it
        self.session_id = INVALID_SESSION_ID
        self.session_epoch = INITIAL_EPOCH
        self.session_partitions: dict[tuple, tuple] = {}
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
                if self.session_id != INVALID_SESSION_ID:
                    await self._close_session()
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                if any(s.truncating for s in self.states.values()):
                    await self._truncate()
                await self._fetch_once()
            except BrokerChannelError as e:
                log.info("fetcher from broker %d: %s; retrying in %.1f s", self.source_id, e, self.backoff)
                self._reset_session()
                await asyncio.sleep(self.backoff)
            except asyncio.CancelledError:
                return
            except Exception:  # noqa: BLE001 - a bug must not stop replication silently forever
                log.exception("fetcher from broker %d failed; retrying", self.source_id)
                self._reset_session()
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

    # -- the fetch session ----------------------------------------------------------------------
    def _reset_session(self):
        """The next fetch is a full one at epoch 0: it closes the session it names (if any) on
        the leader and opens a new one."""
        self.session_epoch = INITIAL_EPOCH
        self.session_partitions = {}

    async def _close_session(self):
        """Nothing left to fetch from this leader: close the session there (epoch -1, no
        partitions) rather than leave it to the cache's eviction."""
        req = FetchRequest(replica_id=self.rm.node_id, max_wait_ms=0, min_bytes=0, max_bytes=self.max_bytes,
                           isolation_level=0, session_id=self.session_id, session_epoch=FINAL_EPOCH, topics=[],
                           forgotten_topics_data=[], rack_id="")
        self.session_id = INVALID_SESSION_ID
        self._reset_session()
        try:
            await self.channel.call(FETCH, FETCH_VERSION, req, self.timeout)
        except BrokerChannelError as e:  # the leader is gone: so is the session
            log.debug("fetcher from broker %d: closing its fetch session: %s", self.source_id, e)

    def _fetch_request(self):
        """(request, full): the partitions to fetch, all of them in a full fetch, else those the
        session does not have at their current position, and the ones it should forget."""
        wanted = {}
        for key, s in self.states.items():
            if s.truncating:
                continue  # not fetchable until truncated: it leaves the session meanwhile
            lg = s.partition.log
            wanted[key] = (lg.log_end_offset, lg.log_start_offset, s.leader_epoch)
        full = self.session_epoch == INITIAL_EPOCH
        if full:
            send = wanted
            forgotten = {}
        else:
            known = self.session_partitions
            send = {k: pos for k, pos in wanted.items() if known.get(k) != pos}
            forgotten = {}
            for topic, p in known.keys() - wanted.keys():
                forgotten.setdefault(topic, []).append(p)
        if not wanted and (full or not forgotten):
            return None, full
        topics = {}
        for (topic, p), (fetch_offset, log_start, epoch) in send.items():
            topics.setdefault(topic, []).append(FetchPartition(
                partition=p, current_leader_epoch=epoch, fetch_offset=fetch_offset, last_fetched_epoch=-1,
                log_start_offset=log_start, partition_max_bytes=self.partition_max_bytes))
        req = FetchRequest(replica_id=self.rm.node_id, max_wait_ms=self.max_wait_ms, min_bytes=self.min_bytes,
                           max_bytes=self.max_bytes, isolation_level=0, session_id=self.session_id,
                           session_epoch=self.session_epoch,
                           topics=[FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
                           forgotten_topics_data=[ForgottenTopic(topic=t, partitions=ps) for t, ps in forgotten.items()],
                           rack_id="")
        return (req, wanted), full

    async def _fetch_once(self):
        built, full = self._fetch_request()
        if built is None:
            return
        req, wanted = built
        try:
            resp = await self.channel.call(FETCH, FETCH_VERSION, req, self.timeout + self.max_wait_ms / 1000)
        except BaseException:
            self._reset_session()  # the leader may or may not have applied it: start over
            raise
        if resp.error_code:
            log.info("fetch from broker %d: error %d", self.source_id, resp.error_code)
            if resp.error_code not in (FetchSessionIdNotFoundError.code, InvalidFetchSessionEpochError.code,
                                       FetchSessionTopicIdError.code):
                await asyncio.sleep(self.backoff)
            self._reset_session()
            return
        if full:
            self.session_id = resp.session_id
            if resp.session_id != INVALID_SESSION_ID:
                self.session_epoch = next_epoch(INITIAL_EPOCH)
        elif resp.session_id != self.session_id:
            self._reset_session()  # the leader closed it (nothing left in it): start a new one
        else:
            self.session_epoch = next_epoch(self.session_epoch)
        if self.session_id != INVALID_SESSION_ID and self.session_epoch != INITIAL_EPOCH:
            # what the leader's session holds now: the positions just sent (those it answers
            # about move on below, and are sent again at their new position)
            self.session_partitions = wanted
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
