"""The transaction coordinator's state machine (kafkacore.coordinator.transaction_metadata) and
the __transaction_state record format (kafkacore.coordinator.transaction_log): the transitions
of docs/transactions.md §3.3, KIP-360 epoch handling, fencing, and value bytes built by hand
from Kafka's TransactionLogKey/Value schemas."""
import struct

import pytest

from kafkacore.coordinator.transaction_log import (decode_key, decode_value, key_bytes,
                                                    partition_for_transactional_id, value_bytes)
from kafkacore.coordinator.transaction_metadata import (NO_PRODUCER_EPOCH, TransactionMetadata, TxnState,
                                                         TxnTransitionError)
from kafkacore.protocol.wire import ProtocolDecodeError


def _new(state=TxnState.EMPTY, epoch=0, partitions=()):
    return TransactionMetadata("txn-a", 1000, epoch, 60000, state, partitions, txn_start_ms=-1, txn_last_update_ms=1)


def _apply(md, t):
    md.complete_transition(t)
    return md


# -- the state machine --------------------------------------------------------------------------
def test_a_committed_transaction_walks_empty_ongoing_prepare_complete():
    md = _new()
    md = _apply(md, md.prepare_add_partitions({("t", 0)}, now=10))
    assert md.state is TxnState.ONGOING and md.partitions == {("t", 0)} and md.txn_start_ms == 10
    md = _apply(md, md.prepare_add_partitions({("t", 1), ("__consumer_offsets", 3)}, now=20))
    assert md.partitions == {("t", 0), ("t", 1), ("__consumer_offsets", 3)} and md.txn_start_ms == 10
    md = _apply(md, md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, now=30))
    assert md.state is TxnState.PREPARE_COMMIT and md.txn_last_update_ms == 30
    md = _apply(md, md.prepare_complete(now=40))
    assert md.state is TxnState.COMPLETE_COMMIT and md.partitions == set() and md.producer_epoch == 0
    md = _apply(md, md.prepare_add_partitions({("t", 2)}, now=50))  # the next transaction
    assert md.state is TxnState.ONGOING and md.txn_start_ms == 50


def test_an_aborted_transaction_completes_as_complete_abort():
    md = _new()
    md = _apply(md, md.prepare_add_partitions({("t", 0)}, now=1))
    md = _apply(md, md.prepare_abort_or_commit(TxnState.PREPARE_ABORT, now=2))
    md = _apply(md, md.prepare_complete(now=3))
    assert md.state is TxnState.COMPLETE_ABORT


@pytest.mark.parametrize("state,target", [
    (TxnState.EMPTY, TxnState.PREPARE_COMMIT),
    (TxnState.EMPTY, TxnState.PREPARE_ABORT),
    (TxnState.COMPLETE_COMMIT, TxnState.PREPARE_ABORT),
    (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT),
])
def test_ending_a_transaction_that_is_not_ongoing_is_invalid_txn_state(state, target):
    md = _new(state)
    with pytest.raises(TxnTransitionError) as e:
        md.prepare_abort_or_commit(target, now=5)
    assert e.value.code == 48 and md.pending_state is None and md.state is state


def test_a_pending_transition_answers_concurrent_transactions_until_written_or_dropped():
    md = _new()
    t = md.prepare_add_partitions({("t", 0)}, now=1)
    with pytest.raises(TxnTransitionError) as e:
        md.prepare_add_partitions({("t", 1)}, now=2)
    assert e.value.code == 51
    md.abort_pending()  # the write failed: nothing changed
    assert md.state is TxnState.EMPTY and md.partitions == set()
    with pytest.raises(TxnTransitionError):
        md.complete_transition(t)  # no longer pending


def test_adding_partitions_in_prepare_states_is_refused():
    for state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        with pytest.raises(TxnTransitionError) as e:
            _new(state, partitions={("t", 0)}).prepare_add_partitions({("t", 1)}, now=1)
        assert e.value.code == 48


# -- InitProducerId: epochs (KIP-360) -----------------------------------------------------------
def test_an_epoch_bump_without_a_named_epoch():
    md = _new(TxnState.COMPLETE_COMMIT, epoch=4)
    md = _apply(md, md.prepare_incr_producer_epoch(30000, None, now=9))
    assert (md.state, md.producer_epoch, md.last_producer_epoch, md.txn_timeout_ms) == (
        TxnState.EMPTY, 5, NO_PRODUCER_EPOCH, 30000)


def test_kip360_the_current_epoch_bumps_the_previous_one_is_a_retry_others_are_fenced():
    md = _new(epoch=4)
    md = _apply(md, md.prepare_incr_producer_epoch(60000, 4, now=1))
    assert (md.producer_epoch, md.last_producer_epoch) == (5, 4)
    # the answer was lost; the client retries naming epoch 4 again: it gets epoch 5 again
    md = _apply(md, md.prepare_incr_producer_epoch(60000, 4, now=2))
    assert (md.producer_epoch, md.last_producer_epoch) == (5, 4)
    with pytest.raises(TxnTransitionError) as e:
        md.prepare_incr_producer_epoch(60000, 2, now=3)
    assert e.value.code == 90 and md.pending_state is None


def test_a_fresh_id_accepts_any_named_epoch():
    md = TransactionMetadata("fresh", 7, NO_PRODUCER_EPOCH, 60000)
    md = _apply(md, md.prepare_incr_producer_epoch(60000, 12, now=1))
    assert md.producer_epoch == 0


def test_an_exhausted_epoch_rotates_to_a_new_producer_id_with_epoch_zero():
    assert not TransactionMetadata.is_epoch_exhausted(32765)
    assert TransactionMetadata.is_epoch_exhausted(32766)
    md = _new(TxnState.COMPLETE_ABORT, epoch=32766)
    with pytest.raises(TxnTransitionError):
        md.prepare_incr_producer_epoch(60000, None, now=1)
    md = _apply(md, md.prepare_producer_id_rotation(2000, 60000, now=2, record_last_epoch=True))
    assert (md.producer_id, md.previous_producer_id, md.producer_epoch, md.last_producer_epoch) == (
        2000, 1000, 0, 32766)


# -- fencing ------------------------------------------------------------------------------------
def test_fencing_an_ongoing_transaction_aborts_it_with_the_bumped_epoch():
    md = _new(epoch=3)
    md = _apply(md, md.prepare_add_partitions({("t", 0)}, now=1))
    md.prepare_fence_producer_epoch()
    assert md.producer_epoch == 4 and md.pending_state is TxnState.PREPARE_EPOCH_FENCE
    with pytest.raises(TxnTransitionError):
        md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, now=2)
    t = md.prepare_abort_or_commit(TxnState.PREPARE_ABORT, now=2)
    assert t.producer_epoch == 4 and t.state is TxnState.PREPARE_ABORT
    md = _apply(md, t)
    assert md.state is TxnState.PREPARE_ABORT and md.producer_epoch == 4


def test_a_failed_fence_does_not_bump_twice():
    md = _new(epoch=3)
    md = _apply(md, md.prepare_add_partitions({("t", 0)}, now=1))
    md.prepare_fence_producer_epoch()
    md.prepare_abort_or_commit(TxnState.PREPARE_ABORT, now=2)
    md.abort_pending(fence_failed=True)  # the PrepareAbort write failed
    assert md.producer_epoch == 4 and md.state is TxnState.ONGOING and md.has_failed_epoch_fence
    md.prepare_fence_producer_epoch()
    assert md.producer_epoch == 4  # not 5
    md = _apply(md, md.prepare_abort_or_commit(TxnState.PREPARE_ABORT, now=3))
    assert not md.has_failed_epoch_fence


def test_only_an_ongoing_transaction_is_fenced():
    with pytest.raises(TxnTransitionError):
        _new(TxnState.EMPTY).prepare_fence_producer_epoch()


# -- __transaction_state records ----------------------------------------------------------------
def _string(s):
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_key_bytes_are_kafkas():
    assert key_bytes("my-txn") == struct.pack(">h", 0) + _string("my-txn")
    assert decode_key(key_bytes("my-txn")) == "my-txn"
    assert decode_key(struct.pack(">h", 1) + _string("x")) is None  # unknown version: skipped


def test_value_bytes_are_kafkas_v0_hand_built():
    md = _new(epoch=7)
    md = _apply(md, md.prepare_add_partitions({("orders", 2), ("orders", 0), ("audit", 1)}, now=1700000000123))
    t = md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, now=1700000000456)
    expected = (struct.pack(">hqhib", 0, 1000, 7, 60000, 2)
                + struct.pack(">i", 2)  # two topics, sorted
                + _string("audit") + struct.pack(">ii", 1, 1)
                + _string("orders") + struct.pack(">iii", 2, 0, 2)
                + struct.pack(">qq", 1700000000456, 1700000000123))
    assert value_bytes(t) == expected
    back = decode_value("txn-a", expected)
    assert (back.producer_id, back.producer_epoch, back.txn_timeout_ms, back.state, back.partitions,
            back.txn_start_ms, back.txn_last_update_ms, back.last_producer_epoch) == (
        1000, 7, 60000, TxnState.PREPARE_COMMIT, {("audit", 1), ("orders", 0), ("orders", 2)},
        1700000000123, 1700000000456, NO_PRODUCER_EPOCH)


def test_empty_is_written_with_null_partitions_and_a_tombstone_is_none():
    md = _new(TxnState.COMPLETE_COMMIT, epoch=1)
    t = md.prepare_incr_producer_epoch(60000, None, now=5)
    data = value_bytes(t)
    assert data == struct.pack(">hqhib", 0, 1000, 2, 60000, 0) + struct.pack(">i", -1) + struct.pack(">qq", 5, -1)
    assert decode_value("txn-a", data).partitions == set()
    assert decode_value("txn-a", None) is None


def test_values_that_cannot_be_read_are_errors():
    with pytest.raises(ProtocolDecodeError):
        decode_value("x", struct.pack(">h", 2) + b"\0" * 40)  # a version from the future
    with pytest.raises(ProtocolDecodeError):
        decode_value("x", struct.pack(">hqhib", 0, 1, 0, 1, 9) + struct.pack(">iqq", -1, 0, 0))  # status 9
    with pytest.raises(ProtocolDecodeError):
        decode_value("x", struct.pack(">hq", 0, 1))  # cut short


def test_partition_of_a_transactional_id_is_javas():
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0
    assert partition_for_transactional_id("polygenelubricants", 50) == 0
    # "hello".hashCode() is 99162322 (the JDK's documented example value)
    assert partition_for_transactional_id("hello", 50) == 99162322 % 50
