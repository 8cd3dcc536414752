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
- FENCED_LEADER_EPOCH (the leader has a newer epoch than ours) leaves the partition alone until
  the controller's LeaderAndIsr with that epoch, as Kafka's onPartitionFenced does. Every other
  partition error (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION from a leader that has just
  restarted and not yet heard from the controller, UNKNOWN_LEADER_EPOCH, ...) and an
  OffsetForLeaderEpoch error delay that partition ``replica.fetch.backoff.ms`` and retry it
  (Kafka's delayPartitions): a follower that dropped it instead would wait for a LeaderAndIsr
  that never comes when the leader keeps its epoch. A lost connection backs off the same time
  and retries.
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
import time

from ..protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from ..errors import (FencedLeaderEpochError, FetchSessionIdNotFoundError, FetchSessionTopicIdError,
                      InvalidFetchSessionEpochError, KafkaError, error_name)
from ..protocol.api_table import ApiKey
from ..protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic, ForgottenTopic
from ..protocol.messages.offset_for_leader_epoch_request import (OffsetForLeaderEpochRequest,
                                                                  OffsetForLeaderPartition, OffsetForLeaderTopic)
from .broker_channel import BrokerAuthenticationError, BrokerChannelError

log = logging.getLogger("kafkacore.cluster")

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 3
NONE, OFFSET_OUT_OF_RANGE = 0, 1
UNDEFINED_EPOCH = -1


class FetchState:
    __slots__ = ("partition", "leader_epoch", "truncating", "delayed_until", "last_error")

    def __init__(self, partition):
        self.partition = partition
        self.leader_epoch = partition.leader_epoch
        self.truncating = True  # a new leader epoch: truncate before fetching
        self.delayed_until = 0.0  # time.monotonic() before which a partition error keeps it out
        self.last_error = 0  # the error code last logged, so a retried error is logged once

    def ready(self, now):
        return self.delayed_until <= now


class ReplicaFetcher:
    def __init__(self, replica_manager, source_id, host, port):
        self.rm = replica_manager
        self.source_id = source_id
        cfg = replica_manager.config
        # over the leader's inter-broker listener, with this broker's security (BrokerChannels.open)
        self.channel = replica_manager.broker.channels.open(
            source_id, host, port, client_id=f"broker-{replica_manager.node_id}-fetcher",
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
                now = time.monotonic()
                if any(s.truncating and s.ready(now) for s in self.states.values()):
                    await self._truncate(now)
                if not await self._fetch_once():
                    await self._wait_for_ready()
            except BrokerChannelError as e:
                # a refused login or TLS handshake was logged once by the channel (an error line)
                log.log(logging.DEBUG if isinstance(e, BrokerAuthenticationError) else logging.INFO,
                        "fetcher from broker %d: %s; retrying in %.1f s", self.source_id, e, self.backoff)
                self._reset_session()
                await asyncio.sleep(self.backoff)
            except asyncio.CancelledError:
                return
            except Exception:  # noqa: BLE001 - a bug must not stop replication silently forever
                log.exception("fetcher from broker %d failed; retrying", self.source_id)
                self._reset_session()
                await asyncio.sleep(self.backoff)

    async def _wait_for_ready(self):
        """Nothing fetchable now (every partition delayed after an error): sleep until the
        first delay ends or the partitions change."""
        self._changed.clear()
        now = time.monotonic()
        delays = [s.delayed_until - now for s in self.states.values()]
        if not delays or min(delays) <= 0:
            return
        try:
            await asyncio.wait_for(self._changed.wait(), min(delays))
        except asyncio.TimeoutError:
            pass

    def _delay(self, s, error_code, what):
        """Kafka's delayPartitions: the partition sits out ``replica.fetch.backoff.ms``, then is
        tried again; the error is logged when it first appears."""
        s.delayed_until = time.monotonic() + self.backoff
        if error_code != s.last_error:
            s.last_error = error_code
            log.info("%s: %s from broker %d: %s; retrying every %.1f s", s.partition.name, what, self.source_id,
                     error_name(error_code), self.backoff)

    async def _truncate(self, now):
        todo = {k: s for k, s in self.states.items() if s.truncating and s.ready(now)}
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
        try:
            await self._offsets_for_leader_epoch(topics)
        finally:
            for s in todo.values():
                if s.truncating and s.ready(now) and self.states.get((s.partition.topic, s.partition.partition)) is s:
                    # not answered (an error, or missing from the answer): ask again after the
                    # backoff, not in a tight loop against the leader
                    s.delayed_until = time.monotonic() + self.backoff

    async def _offsets_for_leader_epoch(self, topics):
        req = OffsetForLeaderEpochRequest(replica_id=self.rm.node_id, topics=[
            OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in topics.items()])
        resp = await self.channel.call(ApiKey.OFFSET_FOR_LEADER_EPOCH, OFFSET_FOR_LEADER_EPOCH_VERSION, req,
                                       self.timeout)
        for t in resp.topics:
            for r in t.partitions:
                s = self.states.get((t.topic, r.partition))
                if s is None or not s.truncating:
                    continue
                if r.error_code:
                    self._delay(s, r.error_code, "OffsetForLeaderEpoch")
                    continue  # retried after the backoff, or the controller moves the partition
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
        s.last_error = 0

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
            await self.channel.call(ApiKey.FETCH, FETCH_VERSION, req, self.timeout)
        except BrokerChannelError as e:  # the leader is gone: so is the session
            log.debug("fetcher from broker %d: closing its fetch session: %s", self.source_id, e)

    def _fetch_request(self):
        """(request, full): the partitions to fetch, all of them in a full fetch, else those the
        session does not have at their current position, and the ones it should forget."""
        wanted = {}
        now = time.monotonic()
        for key, s in self.states.items():
            if s.truncating or not s.ready(now):
                continue  # not fetchable until truncated or its backoff ends: it leaves the session meanwhile
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
        """One fetch round trip; False when there was nothing to fetch."""
        built, full = self._fetch_request()
        if built is None:
            return False
        req, wanted = built
        try:
            resp = await self.channel.call(ApiKey.FETCH, FETCH_VERSION, req, self.timeout + self.max_wait_ms / 1000)
        except BaseException:
            self._reset_session()  # the leader may or may not have applied it: start over
            raise
        if resp.error_code:
            log.info("fetch from broker %d: error %d", self.source_id, resp.error_code)
            if resp.error_code not in (FetchSessionIdNotFoundError.code, InvalidFetchSessionEpochError.code,
                                       FetchSessionTopicIdError.code):
                await asyncio.sleep(self.backoff)
            self._reset_session()
            return True
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
                key = (t.topic, pd.partition_index)
                s = self.states.get(key)
                sent = wanted.get(key)
                if s is None or s.truncating or sent is None or sent[2] != s.leader_epoch:
                    continue  # removed or re-targeted while the fetch was out
                self._process(s, pd)
        return True

    def _process(self, s, pd):
        lg = s.partition.log
        if pd.error_code == NONE:
            if s.last_error:
                log.info("%s: fetching from broker %d again", s.partition.name, self.source_id)
                s.last_error = 0
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
        if pd.error_code == FencedLeaderEpochError.code:
            # the leader is on a newer epoch than ours: the controller's LeaderAndIsr with it is
            # on its way and re-adds the partition (Kafka's onPartitionFenced)
            log.info("%s: fenced by broker %d (epoch %d is old); waiting for the controller's LeaderAndIsr",
                     s.partition.name, self.source_id, s.leader_epoch)
            self.remove_partition((s.partition.topic, s.partition.partition))
            return
        self._delay(s, pd.error_code, "fetch")

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
