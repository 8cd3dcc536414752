"""The transaction coordinator (Kafka's TransactionCoordinator with its TransactionStateManager),
docs/transactions.md §3: one TransactionMetadata per transactional id, every transition written
to ``__transaction_state`` before it takes effect, COMMIT/ABORT markers written to every partition
of a transaction when it ends, hung transactions aborted after their timeout and idle ids
expired.

It runs on the broker's event loop (no locks): a transactional id with a write in flight has a
pending transition, and other requests for it answer CONCURRENT_TRANSACTIONS meanwhile.

On a single node it coordinates every transactional id, with coordinator epoch 0, and markers
are local appends. On a cluster (docs/transactions.md §3.1, §3.5) it coordinates the ids of the
``__transaction_state`` partitions this broker leads: a partition is loaded when its leadership
arrives (the coordinator epoch is its leader epoch) and dropped when it leaves; every write
waits for the ISR; markers go to each partition's leader (WriteTxnMarkers, or a local append
that waits for the high watermark)."""
from __future__ import annotations

import asyncio
import logging

from ..clock import wall_ms
from ..errors import (ConcurrentTransactionsError, CoordinatorNotAvailableError, InvalidProducerIdMappingError,
                      InvalidRequestError, InvalidTransactionTimeoutError, InvalidTxnStateError,
                      KafkaStorageError, MessageTooLargeError, NotCoordinatorError, NotEnoughReplicasAfterAppendError,
                      NotEnoughReplicasError, NotLeaderOrFollowerError, ProducerFencedError, RecordListTooLargeError,
                      RequestTimedOutError, UnknownServerError, UnknownTopicOrPartitionError)
from .internal_topic import InternalTopicLog, StoreError
from .transaction_log import TRANSACTION_STATE_TOPIC, decode_key, decode_value, key_bytes, value_bytes
from .transaction_metadata import (NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TERMINAL_STATES, TransactionMetadata,
                                   TxnState, TxnTransition, TxnTransitionError)
from .txn_markers import MARKER_TIMEOUT_S, send_markers, write_markers

log = logging.getLogger("kafkacore.transactions")

NONE = 0
END_TXN_WAIT_S = 5.0  # how long EndTxn's answer waits for the markers before leaving them to the background
MARKER_RETRY_S = 0.1  # a partition whose marker failed (a storage error) is retried this often

# Kafka's TransactionStateManager.appendTransactionToLog: append errors as the client sees them
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


class TransactionStateStore(InternalTopicLog):
    """``__transaction_state`` with Kafka's transactionTopicConfigs."""

    def __init__(self, broker):
        cfg = broker.config
        super().__init__(broker, TRANSACTION_STATE_TOPIC, cfg["transaction.state.log.num.partitions"],
                         cfg["transaction.state.log.segment.bytes"],
                         configs={"compression.type": "uncompressed", "unclean.leader.election.enable": "false"})


class TransactionCoordinator:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.max_timeout_ms = cfg["transaction.max.timeout.ms"]
        self.expiration_ms = cfg["transactional.id.expiration.ms"]
        self.abort_interval_ms = cfg["transaction.abort.timed.out.transaction.cleanup.interval.ms"]
        self.expiry_interval_ms = cfg["transaction.remove.expired.transaction.cleanup.interval.ms"]
        self.store = TransactionStateStore(broker)
        self.transactions: dict[str, TransactionMetadata] = {}
        self.loop = None
        self._timers = {}  # "abort" / "expiry": the pending TimerHandle of each periodic job
        self._tasks = set()
        self._started = False
        # {__transaction_state partition this broker leads: its leader epoch, the coordinator
        # epoch of its ids' markers} (a single node leads them all)
        self.owned = {}

    # -- life cycle -----------------------------------------------------------------------------
    available = True  # the handlers ask; kept so a broker without a coordinator could say so

    def start(self, loop):
        if self._started:
            return
        self._started = True
        self.loop = loop
        rm = self.broker.replica_manager
        rm.on_leadership_change.append(self.on_leadership_change)
        for partition, leader_epoch in rm.led_partitions(TRANSACTION_STATE_TOPIC):
            self.on_leadership_change(TRANSACTION_STATE_TOPIC, partition, True, leader_epoch)
        self._timers["abort"] = loop.call_later(self.abort_interval_ms / 1000, self._abort_timed_out_tick)
        self._timers["expiry"] = loop.call_later(self.expiry_interval_ms / 1000, self._expire_tick)

    def shutdown(self):
        for t in self._timers.values():
            t.cancel()
        for task in list(self._tasks):
            task.cancel()
        log.info("transaction coordinator stopped (%d transactional ids)", len(self.transactions))

    def _spawn(self, coro):
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def coordinator_epoch(self, txn_id) -> int:
        return self.owned.get(self.store.partition_for(txn_id), -1)

    def not_coordinator(self, txn_id):
        """NOT_COORDINATOR when another broker coordinates ``txn_id``, else None. The first
        request creates __transaction_state, as FindCoordinator does (a single node then leads
        its partitions at once)."""
        if self.store.created_on_first_use() and self.store.partition_for(txn_id) in self.owned:
            return None
        return NotCoordinatorError.code

    def on_leadership_change(self, topic, partition, is_leader, leader_epoch):
        """The ReplicaManager's word on a __transaction_state partition (Kafka's
        onElection/onResignation): load its ids, or forget them."""
        if topic != TRANSACTION_STATE_TOPIC:
            return
        if is_leader:
            self.owned[partition] = leader_epoch
            self._load([partition])
        elif self.owned.pop(partition, None) is not None:
            gone = [tid for tid in self.transactions if self.store.partition_for(tid) == partition]
            for tid in gone:
                del self.transactions[tid]
            log.info("unloaded %d transactional ids of %s-%d: another broker coordinates them now", len(gone),
                     TRANSACTION_STATE_TOPIC, partition)

    def _load(self, partitions=None):
        """Replays __transaction_state partitions (all: a single node), last value per id wins,
        tombstones delete; transactions found in PrepareCommit/PrepareAbort are completed: their
        markers are written again (harmless twice) and CompleteX follows."""
        if not self.store.exists():
            return
        found: dict[str, TransactionMetadata | None] = {}
        records = 0
        for partition in (range(self.store.partitions) if partitions is None else partitions):
            for key, value in self.store.read_partition(partition):
                records += 1
                txn_id = decode_key(key)
                if txn_id is None:
                    continue
                try:
                    found[txn_id] = decode_value(txn_id, value)
                except Exception as e:  # noqa: BLE001 - reported; the id keeps its previous record
                    log.error("%s-%d: a record of transactional id %r does not decode: %s", TRANSACTION_STATE_TOPIC,
                              partition, txn_id, e)
        loaded = {tid: md for tid, md in found.items() if md is not None}
        if partitions is not None:
            for tid in [t for t in self.transactions if self.store.partition_for(t) in partitions]:
                del self.transactions[tid]
        self.transactions.update(loaded)
        unfinished = [md for md in loaded.values() if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]
        log.info("loaded %d transactional ids from %d records of %s; %d to complete", len(self.transactions),
                 records, TRANSACTION_STATE_TOPIC, len(unfinished))
        for md in unfinished:
            self._spawn(self._complete(md))

    # -- writing ----------------------------------------------------------------------------------
    async def _write(self, md: TransactionMetadata, t: TxnTransition | None, fence=False) -> int:
        """Writes ``t`` (None: the id's tombstone) and applies it; the error code for the client
        (NONE on success). A failed write leaves memory as it was."""
        value = None if t is None else value_bytes(t)
        try:
            written = self.store.append(md.transactional_id, [(key_bytes(md.transactional_id), value)], _APPEND_ERRORS)
            if written.replicated is not None:
                await written.replicated
        except StoreError as e:
            md.abort_pending(fence_failed=fence)
            log.warning("transactional id %r: writing %s failed: %s", md.transactional_id,
                        "its tombstone" if t is None else t.state.kafka_name, e.cause)
            return e.code
        if t is None:
            self.transactions.pop(md.transactional_id, None)
        else:
            md.complete_transition(t)
        return NONE

    # -- InitProducerId ---------------------------------------------------------------------------
    async def init_producer_id(self, txn_id, txn_timeout_ms, producer_id=NO_PRODUCER_ID,
                               producer_epoch=NO_PRODUCER_EPOCH):
        """(error code, producer id, epoch) for a transactional producer (docs/transactions.md
        §3.3, InitProducerId steps 1-6). PRODUCER_FENCED is left to the handler to turn into
        INVALID_PRODUCER_EPOCH for old request versions."""
        if txn_id == "":
            return InvalidRequestError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if self.not_coordinator(txn_id) is not None:
            return NotCoordinatorError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not 0 < txn_timeout_ms <= self.max_timeout_ms:
            return InvalidTransactionTimeoutError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if (producer_id == NO_PRODUCER_ID) != (producer_epoch == NO_PRODUCER_EPOCH):
            return InvalidRequestError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        now = wall_ms()
        md = self.transactions.get(txn_id)
        if md is None:
            md = TransactionMetadata(txn_id, self.broker.producer_ids.next_id(), NO_PRODUCER_EPOCH, txn_timeout_ms,
                                     TxnState.EMPTY, txn_last_update_ms=now)
            self.transactions[txn_id] = md
        if md.pending_state is not None or md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                                                         TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return ConcurrentTransactionsError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        expected = None
        if producer_id != NO_PRODUCER_ID:  # KIP-360: the client names the id and epoch it has
            known = (md.producer_epoch == NO_PRODUCER_EPOCH or producer_id == md.producer_id
                     or (producer_id == md.previous_producer_id
                         and TransactionMetadata.is_epoch_exhausted(producer_epoch)))
            if not known:
                return ProducerFencedError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            expected = producer_epoch
        if md.state is TxnState.ONGOING:
            # a new instance: fence the old one (epoch + 1) and abort its transaction; the client
            # retries and, once the abort is complete, bumps the epoch once more
            md.prepare_fence_producer_epoch()
            self._spawn(self._end(md, commit=False, fence=True))
            return ConcurrentTransactionsError.code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        try:
            if md.producer_epoch_exhausted and (expected is None or expected == md.producer_epoch):
                t = md.prepare_producer_id_rotation(self.broker.producer_ids.next_id(), txn_timeout_ms, now,
                                                    record_last_epoch=expected is not None)
            else:
                t = md.prepare_incr_producer_epoch(txn_timeout_ms, expected, now)
        except TxnTransitionError as e:
            return _code(e), NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        code = await self._write(md, t)
        if code:
            return code, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        log.info("transactional id %r: producer id %d, epoch %d", txn_id, md.producer_id, md.producer_epoch)
        return NONE, md.producer_id, md.producer_epoch

    # -- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------------
    def _check(self, txn_id, producer_id, producer_epoch):
        """The checks before the state table (§3.3): (error code or None, metadata)."""
        if not txn_id:
            return InvalidRequestError.code, None
        if self.not_coordinator(txn_id) is not None:
            return NotCoordinatorError.code, None
        md = self.transactions.get(txn_id)
        if md is None or md.producer_id != producer_id:
            return InvalidProducerIdMappingError.code, md
        if md.producer_epoch != producer_epoch:
            return ProducerFencedError.code, md
        if md.pending_state is not None:
            return ConcurrentTransactionsError.code, md
        return None, md

    async def add_partitions(self, txn_id, producer_id, producer_epoch, partitions) -> int:
        """One error code for all the partitions (they are existing ones: the handler checked)."""
        code, md = self._check(txn_id, producer_id, producer_epoch)
        if code is not None:
            return code
        if md.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return ConcurrentTransactionsError.code
        if md.state is TxnState.ONGOING and set(partitions) <= md.partitions:
            return NONE
        try:
            t = md.prepare_add_partitions(partitions, wall_ms())
        except TxnTransitionError as e:
            return _code(e)
        return await self._write(md, t)

    def verify_partition(self, txn_id, producer_id, producer_epoch, topic, partition) -> int:
        """KIP-890 verification for a produce (§4.3): NONE when the partition is in the
        producer's Ongoing transaction."""
        code, md = self._check(txn_id, producer_id, producer_epoch)
        if code is not None:
            return code
        if md.state is TxnState.ONGOING and (topic, partition) in md.partitions:
            return NONE
        return InvalidTxnStateError.code

    # -- EndTxn -----------------------------------------------------------------------------------
    async def end_txn(self, txn_id, producer_id, producer_epoch, commit: bool) -> int:
        code, md = self._check(txn_id, producer_id, producer_epoch)
        if code is not None:
            return code
        state = md.state
        if state is TxnState.ONGOING:
            return await self._end(md, commit)
        if state is TxnState.COMPLETE_COMMIT:
            return NONE if commit else InvalidTxnStateError.code
        if state is TxnState.COMPLETE_ABORT:
            return InvalidTxnStateError.code if commit else NONE
        if state is TxnState.PREPARE_COMMIT:
            return ConcurrentTransactionsError.code if commit else InvalidTxnStateError.code
        if state is TxnState.PREPARE_ABORT:
            return InvalidTxnStateError.code if commit else ConcurrentTransactionsError.code
        return InvalidTxnStateError.code

    async def _end(self, md, commit, fence=False) -> int:
        """PrepareX written, then the markers, then CompleteX. The outcome is decided once
        PrepareX is written: the rest is retried until done, in the background. The answer
        (NONE) waits for that completion at most END_TXN_WAIT_S: usually the markers are in
        when the producer hears back, so a read_committed consumer started next sees the
        transaction; a partition that keeps refusing its marker does not hold the producer
        (Kafka answers at once and leaves the markers to its channel manager)."""
        try:
            t = md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, wall_ms())
        except TxnTransitionError as e:
            if fence:
                md.abort_pending(fence_failed=True)
            return _code(e)
        code = await self._write(md, t, fence=fence)
        if code:
            return code
        log.info("transactional id %r: %s %d partition(s)%s", md.transactional_id,
                 "committing" if commit else "aborting", len(md.partitions), " (fenced)" if fence else "")
        await asyncio.wait({self._spawn(self._complete(md))}, timeout=END_TXN_WAIT_S)  # never cancels it
        return NONE

    async def _complete(self, md):
        """Markers to every partition of the transaction, retried on storage errors, then
        CompleteCommit/CompleteAbort."""
        commit = md.state is TxnState.PREPARE_COMMIT
        coordinator_epoch = self.coordinator_epoch(md.transactional_id)
        todo = set(md.partitions)
        while todo:
            codes = await self._markers_round(md, todo, coordinator_epoch, commit)
            for (topic, partition), code in codes.items():
                if code in _MARKER_DONE:  # a deleted partition is skipped, as Kafka
                    todo.discard((topic, partition))
                elif code in _MARKER_STOP:
                    log.warning("transactional id %r: the marker for %s-%d was refused (error %d): a newer epoch "
                                "or coordinator took over", md.transactional_id, topic, partition, code)
                    return
            if self.transactions.get(md.transactional_id) is not md:
                return  # the id's partition moved to another coordinator, which completes it
            if todo:
                await asyncio.sleep(MARKER_RETRY_S)
        while True:
            try:
                t = md.prepare_complete(wall_ms())
            except TxnTransitionError as e:
                log.error("transactional id %r: cannot complete: %s", md.transactional_id, e)
                return
            code = await self._write(md, t)
            if code in (NONE, NotCoordinatorError.code):
                return
            await asyncio.sleep(MARKER_RETRY_S)

    async def _markers_round(self, md, todo, coordinator_epoch, commit):
        """{(topic, partition): code} of one round: each partition's marker to its leader (a
        local append waiting for the high watermark, or one WriteTxnMarkers per broker)."""
        cache = self.broker.metadata_cache
        by_leader: dict[int, list] = {}
        codes = {}
        for tp in sorted(todo):
            if cache.partition(*tp) is None and self.broker.topic(tp[0]) is None:
                codes[tp] = UnknownTopicOrPartitionError.code  # the topic is gone: nothing to mark
                continue
            leader = cache.leader(*tp)
            if leader < 0:
                codes[tp] = NotLeaderOrFollowerError.code  # an election is under way: next round
                continue
            by_leader.setdefault(leader, []).append(tp)

        async def to_broker(node, tps):
            if node == self.broker.node_id:
                return await write_markers(self.broker, md.producer_id, md.producer_epoch, coordinator_epoch, commit,
                                           tps, MARKER_TIMEOUT_S)
            return await send_markers(self.broker, node, md.producer_id, md.producer_epoch, coordinator_epoch,
                                      commit, tps, MARKER_TIMEOUT_S)
        for part in await asyncio.gather(*(to_broker(n, tps) for n, tps in by_leader.items())):
            codes.update(part)
        return codes

    # -- timeouts and expiry (§3.6) ---------------------------------------------------------------
    def _abort_timed_out_tick(self):
        now = wall_ms()
        try:
            for md in list(self.transactions.values()):
                if (md.state is TxnState.ONGOING and md.pending_state is None
                        and md.txn_start_ms + md.txn_timeout_ms < now):
                    log.info("transactional id %r: transaction open for over %d ms; aborting it",
                             md.transactional_id, md.txn_timeout_ms)
                    try:
                        md.prepare_fence_producer_epoch()
                    except TxnTransitionError as e:  # the maximum epoch: reported, the others go on
                        log.error("transactional id %r: cannot fence its hung transaction: %s", md.transactional_id, e)
                        continue
                    self._spawn(self._end(md, commit=False, fence=True))
        finally:  # the next round is always scheduled
            self._timers["abort"] = self.loop.call_later(self.abort_interval_ms / 1000, self._abort_timed_out_tick)

    def _expire_tick(self):
        try:
            self._spawn(self._expire())
        finally:
            self._timers["expiry"] = self.loop.call_later(self.expiry_interval_ms / 1000, self._expire_tick)

    async def _expire(self):
        limit = wall_ms() - self.expiration_ms
        for md in list(self.transactions.values()):
            if md.state in TERMINAL_STATES and md.pending_state is None and md.txn_last_update_ms <= limit:
                try:
                    md.prepare_dead()
                except TxnTransitionError:
                    continue
                if await self._write(md, None) == NONE:
                    log.info("transactional id %r expired (idle for over %d ms)", md.transactional_id,
                             self.expiration_ms)

    def coordinator_for(self, txn_id):
        """FindCoordinator's answer: creates __transaction_state on first use; the leader of the
        id's partition (COORDINATOR_NOT_AVAILABLE while it has none)."""
        self.store.ensure_topic()
        leader = self.broker.metadata_cache.leader(TRANSACTION_STATE_TOPIC, self.store.partition_for(txn_id))
        if leader < 0:
            raise CoordinatorNotAvailableError(
                f"the partition of transactional id {txn_id!r} in {TRANSACTION_STATE_TOPIC} has no leader yet")
        return leader

    # -- describing -------------------------------------------------------------------------------
    def describe(self, txn_id):
        if self.not_coordinator(txn_id) is not None:
            return None
        return self.transactions.get(txn_id)

    def list(self, states=(), producer_ids=(), min_duration_ms=-1):
        now = wall_ms()
        out = []
        for md in self.transactions.values():
            if states and md.state.kafka_name not in states:
                continue
            if producer_ids and md.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (md.state is not TxnState.ONGOING or now - md.txn_start_ms < min_duration_ms):
                continue
            out.append(md)
        return out


# InvalidProducerEpoch (47) and TransactionCoordinatorFenced (52) from a partition: stop; NONE, a
# deleted partition, UNSUPPORTED_FOR_MESSAGE_FORMAT (43) and UNSUPPORTED_VERSION (35): done (as
# Kafka's TransactionMarkerRequestCompletionHandler); anything else: again next round
_MARKER_STOP = frozenset({47, 52})
_MARKER_DONE = frozenset({NONE, UnknownTopicOrPartitionError.code, 43, 35})


def _code(e: TxnTransitionError) -> int:
    return e.code if e.code >= 0 else UnknownServerError.code
