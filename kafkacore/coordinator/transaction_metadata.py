"""The transaction coordinator's state of one transactional id (Kafka's TransactionMetadata) and
its state machine (docs/transactions.md §3.2-3.3).

Transitions are two-phase, as in Kafka: a ``prepare_*`` method checks that the move is allowed,
marks the id as having a pending transition and returns a :class:`TxnTransition` (the target
state, which the coordinator writes to ``__transaction_state``); once that write succeeded,
:meth:`TransactionMetadata.complete_transition` applies it; when it failed,
:meth:`TransactionMetadata.abort_pending` forgets it. While a transition is pending, requests
for the id answer CONCURRENT_TRANSACTIONS (the coordinator checks ``pending_state``).

State ids are Kafka's TransactionState ids, which ``__transaction_state`` records carry."""
from __future__ import annotations

from enum import IntEnum

from ..errors import ConcurrentTransactionsError, InvalidTxnStateError, ProducerFencedError

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767  # Java's Short.MAX_VALUE: the epoch is an int16 on the wire


class TxnState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's tools show (DescribeTransactions, ListTransactions)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


# Kafka's TransactionState.validPreviousStates: which states each state may be entered from.
VALID_PREVIOUS = {
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_EPOCH_FENCE: {TxnState.ONGOING},
}

# States whose id may expire (transactional.id.expiration.ms) and where a new transaction may begin.
TERMINAL_STATES = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})


class TxnTransitionError(Exception):
    """A transition the state machine does not allow. ``code`` is the Kafka error the client
    gets (INVALID_TXN_STATE unless said otherwise); an internal misuse carries -1."""

    def __init__(self, message, code=InvalidTxnStateError.code):
        super().__init__(message)
        self.code = code


class TxnTransition:
    """The target state of one transition: what is written to __transaction_state."""

    __slots__ = ("producer_id", "previous_producer_id", "producer_epoch", "last_producer_epoch", "txn_timeout_ms",
                 "state", "partitions", "txn_start_ms", "txn_last_update_ms")

    def __init__(self, producer_id, previous_producer_id, producer_epoch, last_producer_epoch, txn_timeout_ms, state,
                 partitions, txn_start_ms, txn_last_update_ms):
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = state
        self.partitions = frozenset(partitions)
        self.txn_start_ms = txn_start_ms
        self.txn_last_update_ms = txn_last_update_ms

    def __repr__(self):
        return (f"TxnTransition({self.state.kafka_name}, pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"partitions={sorted(self.partitions)})")


class TransactionMetadata:
    """One transactional id at its coordinator. ``last_producer_epoch`` is not persisted: -1
    after a load, as in Kafka (it only serves KIP-360 retries of a bump whose answer was lost)."""

    def __init__(self, transactional_id, producer_id, producer_epoch, txn_timeout_ms, state=TxnState.EMPTY,
                 partitions=(), txn_start_ms=-1, txn_last_update_ms=-1, previous_producer_id=NO_PRODUCER_ID,
                 last_producer_epoch=NO_PRODUCER_EPOCH):
        self.transactional_id = transactional_id
        self.producer_id = producer_id
        self.previous_producer_id = previous_producer_id
        self.producer_epoch = producer_epoch
        self.last_producer_epoch = last_producer_epoch
        self.txn_timeout_ms = txn_timeout_ms
        self.state = TxnState(state)
        self.partitions = set(partitions)
        self.txn_start_ms = txn_start_ms
        self.txn_last_update_ms = txn_last_update_ms
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def __repr__(self):
        return (f"TransactionMetadata({self.transactional_id!r}, {self.state.kafka_name}, pid={self.producer_id}, "
                f"epoch={self.producer_epoch}, partitions={sorted(self.partitions)}, pending={self.pending_state})")

    # -- epochs ---------------------------------------------------------------------------------
    @staticmethod
    def is_epoch_exhausted(epoch) -> bool:
        """Kafka keeps one epoch in reserve (Short.MAX_VALUE - 1): at this epoch the coordinator
        moves the id to a new producer id, so it can always fence with one more bump."""
        return epoch >= MAX_PRODUCER_EPOCH - 1

    @property
    def producer_epoch_exhausted(self) -> bool:
        return self.is_epoch_exhausted(self.producer_epoch)

    # -- preparing transitions ------------------------------------------------------------------
    def _transition(self, state, producer_epoch=None, last_producer_epoch=None, txn_timeout_ms=None, partitions=None,
                    txn_start_ms=None, now=None, producer_id=None, previous_producer_id=None) -> TxnTransition:
        if self.pending_state is not None:
            raise TxnTransitionError(
                f"transactional id {self.transactional_id!r}: a transition to {self.pending_state.kafka_name} is "
                f"still being written", code=ConcurrentTransactionsError.code)
        if self.state not in VALID_PREVIOUS[state]:
            raise TxnTransitionError(
                f"transactional id {self.transactional_id!r}: cannot move from {self.state.kafka_name} to "
                f"{state.kafka_name}")
        self.pending_state = state
        return TxnTransition(
            self.producer_id if producer_id is None else producer_id,
            self.previous_producer_id if previous_producer_id is None else previous_producer_id,
            self.producer_epoch if producer_epoch is None else producer_epoch,
            self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state,
            self.partitions if partitions is None else partitions,
            self.txn_start_ms if txn_start_ms is None else txn_start_ms,
            self.txn_last_update_ms if now is None else now)

    def prepare_incr_producer_epoch(self, txn_timeout_ms, expected_epoch, now) -> TxnTransition:
        """InitProducerId on an id in Empty/CompleteCommit/CompleteAbort: the epoch + 1, the
        state Empty. ``expected_epoch`` is the epoch a KIP-360 request names (None for an older
        request): the current one bumps; the one before it is the retry of a bump whose answer
        was lost and gets the current epoch again; any other is PRODUCER_FENCED."""
        if self.producer_epoch_exhausted:
            raise TxnTransitionError(f"transactional id {self.transactional_id!r}: epoch {self.producer_epoch} is "
                                     f"exhausted; rotate the producer id instead", code=-1)
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise TxnTransitionError(
                f"transactional id {self.transactional_id!r}: epoch {expected_epoch} is not the current epoch "
                f"{self.producer_epoch}", code=ProducerFencedError.code)
        return self._transition(TxnState.EMPTY, producer_epoch=epoch, last_producer_epoch=last,
                                txn_timeout_ms=txn_timeout_ms, partitions=(), txn_start_ms=-1, now=now)

    def prepare_producer_id_rotation(self, new_producer_id, txn_timeout_ms, now, record_last_epoch) -> TxnTransition:
        """InitProducerId when the epoch is exhausted: a new producer id with epoch 0. The
        previous id is kept so a KIP-360 client naming it is recognised."""
        return self._transition(TxnState.EMPTY, producer_id=new_producer_id, previous_producer_id=self.producer_id,
                                producer_epoch=0,
                                last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                txn_timeout_ms=txn_timeout_ms, partitions=(), txn_start_ms=-1, now=now)

    def prepare_fence_producer_epoch(self) -> None:
        """The first half of fencing an Ongoing transaction (InitProducerId from a new instance,
        or a timeout): the epoch + 1 in memory, pending PrepareEpochFence, followed by
        prepare_abort_or_commit(PREPARE_ABORT). After a fence whose write failed
        (``has_failed_epoch_fence``) the epoch is not bumped again."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise TxnTransitionError(f"transactional id {self.transactional_id!r}: cannot fence at the maximum "
                                     f"epoch {self.producer_epoch}", code=-1)
        if self.state is not TxnState.ONGOING:
            raise TxnTransitionError(f"transactional id {self.transactional_id!r}: only an Ongoing transaction is "
                                     f"fenced, not one in {self.state.kafka_name}", code=-1)
        if not self.has_failed_epoch_fence:
            self.producer_epoch += 1
        self.pending_state = TxnState.PREPARE_EPOCH_FENCE

    def prepare_add_partitions(self, partitions, now) -> TxnTransition:
        """AddPartitionsToTxn / AddOffsetsToTxn: Ongoing with the partitions added; a new
        transaction starts now."""
        start = now if self.state in TERMINAL_STATES else self.txn_start_ms
        return self._transition(TxnState.ONGOING, partitions=self.partitions | set(partitions), txn_start_ms=start,
                                now=now)

    def prepare_abort_or_commit(self, state, now) -> TxnTransition:
        """EndTxn on an Ongoing transaction (or the abort after a fence)."""
        if state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            raise TxnTransitionError(f"{state.kafka_name} is not a prepare state", code=-1)
        if self.pending_state is TxnState.PREPARE_EPOCH_FENCE:
            if state is not TxnState.PREPARE_ABORT:
                raise TxnTransitionError("a fenced transaction can only be aborted", code=-1)
            self.pending_state = None  # the fence's bump is in memory already; the abort carries it
        return self._transition(state, now=now)

    def prepare_complete(self, now) -> TxnTransition:
        """Every marker written: PrepareCommit -> CompleteCommit, PrepareAbort -> CompleteAbort,
        the partitions cleared."""
        if self.state is TxnState.PREPARE_COMMIT:
            state = TxnState.COMPLETE_COMMIT
        elif self.state is TxnState.PREPARE_ABORT:
            state = TxnState.COMPLETE_ABORT
        else:
            raise TxnTransitionError(f"transactional id {self.transactional_id!r}: nothing to complete in "
                                     f"{self.state.kafka_name}", code=-1)
        return self._transition(state, partitions=(), now=now)

    def prepare_dead(self) -> TxnTransition:
        """Expiry (transactional.id.expiration.ms): the id's tombstone is written next."""
        return self._transition(TxnState.DEAD, partitions=())

    # -- applying -------------------------------------------------------------------------------
    def complete_transition(self, t: TxnTransition) -> None:
        """The write of ``t`` succeeded: memory follows it (Kafka's completeTransitionTo, with
        its checks that the write is the one that was prepared)."""
        if self.pending_state is None or self.pending_state is not t.state:
            raise TxnTransitionError(
                f"transactional id {self.transactional_id!r}: completing {t.state.kafka_name} but the pending "
                f"transition is {self.pending_state and self.pending_state.kafka_name}", code=-1)
        if t.state is not TxnState.EMPTY or t.producer_id == self.producer_id:
            # outside a producer id rotation the id and (but for bumps to Empty) the epoch stay
            if t.producer_id != self.producer_id:
                raise TxnTransitionError(f"transactional id {self.transactional_id!r}: producer id changed from "
                                         f"{self.producer_id} to {t.producer_id} outside a rotation", code=-1)
            if t.state is not TxnState.EMPTY and t.producer_epoch != self.producer_epoch:
                raise TxnTransitionError(f"transactional id {self.transactional_id!r}: epoch changed from "
                                         f"{self.producer_epoch} to {t.producer_epoch} in {t.state.kafka_name}",
                                         code=-1)
        self.producer_id = t.producer_id
        self.previous_producer_id = t.previous_producer_id
        self.producer_epoch = t.producer_epoch
        self.last_producer_epoch = t.last_producer_epoch
        self.txn_timeout_ms = t.txn_timeout_ms
        self.state = t.state
        self.partitions = set(t.partitions)
        self.txn_start_ms = t.txn_start_ms
        self.txn_last_update_ms = t.txn_last_update_ms
        self.pending_state = None
        self.has_failed_epoch_fence = False

    def abort_pending(self, fence_failed=False) -> None:
        """The write of the pending transition failed: nothing changes. After a failed fence
        the bumped epoch stays in memory and ``has_failed_epoch_fence`` stops the next fence
        from bumping again (Kafka's rule, so a retried fence does not skip an epoch)."""
        self.pending_state = None
        if fence_failed:
            self.has_failed_epoch_fence = True
