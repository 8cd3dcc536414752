"""Producer state with transactions (kafkacore/storage/producer_state.py; docs/transactions.md
sections 2.4 and 4.1): the append rules by origin (client, coordinator, replication), opening a
transaction at a transactional batch's base offset, completing it at a marker, epoch bumps by
markers, the first unstable offset, and producer snapshots in Kafka's ProducerSnapshot v1 format
with CurrentTxnFirstOffset, CoordinatorEpoch and batch-less entries.

Expected snapshot bytes are built here field by field with struct and a bitwise CRC-32C written
in this file, not with the encoder under test."""
import os
import struct

import pytest

from kafkacore.errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceNumberError,
                              TransactionCoordinatorFencedError)
from kafkacore.record.control import ABORT, COMMIT
from kafkacore.storage.producer_state import (AppendOrigin, CompletedTxn, CorruptSnapshotError, MarkerBatch,
                                              BatchProducerFields, ProducerStateManager, decode_snapshot, encode_snapshot,
                                              snapshot_path)

CLIENT, COORDINATOR, REPLICATION = AppendOrigin.CLIENT, AppendOrigin.COORDINATOR, AppendOrigin.REPLICATION
TS = 1_700_000_000_000


def _crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli, reflected 0x82F63B78), bit by bit: independent of kafkacore's."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def test_reference_crc32c():
    assert _crc32c(b"123456789") == 0xE3069283  # the standard check value


def kafka_snapshot(entries):
    """Kafka's ProducerSnapshot v1: int16 version, uint32 crc (CRC-32C of everything after
    it), int32 entry count, then per entry int64 ProducerId, int16 Epoch, int32 LastSequence,
    int64 LastOffset, int32 OffsetDelta, int64 Timestamp, int32 CoordinatorEpoch, int64
    CurrentTxnFirstOffset."""
    body = struct.pack(">i", len(entries))
    for e in entries:
        body += struct.pack(">qhiqiqiq", *e)
    return struct.pack(">hI", 1, _crc32c(body)) + body


def data(pid, epoch, seq, n=1, transactional=False, ts=TS):
    return BatchProducerFields(pid, epoch, seq, n - 1, ts, transactional)


def marker(pid, epoch, commit, coordinator_epoch=0, ts=TS):
    return MarkerBatch(pid, epoch, -1, 0, ts, True, COMMIT if commit else ABORT, coordinator_epoch)


def apply(m, batch, first, origin=CLIENT):
    """check + update as the log does: (duplicate, completed)."""
    dup = m.check(batch, origin)
    if dup is not None:
        return dup, None
    completed = m.update(batch, first, first + batch.offset_delta, batch.max_timestamp, origin)
    if completed is not None:
        m.complete_txn(completed)
    return None, completed


@pytest.fixture
def psm(tmp_path):
    return ProducerStateManager(str(tmp_path))


# ---------------------------------------------------------------------------------------
# the rules of section 4.1, by origin


@pytest.mark.parametrize("origin,refused", [(CLIENT, True), (COORDINATOR, True), (REPLICATION, False)])
def test_an_epoch_below_the_entrys(psm, origin, refused):
    apply(psm, data(7, 3, 0), 0)
    old = data(7, 2, 1)
    if refused:
        with pytest.raises(InvalidProducerEpochError):
            psm.check(old, origin)
        assert psm.producers[7].epoch == 3
    else:
        assert psm.check(old, origin) is None
        psm.update(old, 1, 1, TS, origin)
        assert psm.producers[7].epoch == 2  # the state follows the leader's batches


@pytest.mark.parametrize("origin,refused", [(CLIENT, True), (COORDINATOR, False), (REPLICATION, False)])
def test_a_sequence_gap(psm, origin, refused):
    apply(psm, data(7, 0, 0, n=3), 0)
    gap = data(7, 0, 9)
    if refused:
        with pytest.raises(OutOfOrderSequenceNumberError):
            psm.check(gap, origin)
    else:
        assert psm.check(gap, origin) is None


@pytest.mark.parametrize("origin,is_dup", [(CLIENT, True), (COORDINATOR, False), (REPLICATION, False)])
def test_a_retried_batch_is_a_duplicate_only_for_clients(psm, origin, is_dup):
    apply(psm, data(7, 0, 0, n=3), 10)
    found = psm.check(data(7, 0, 0, n=3), origin)
    if is_dup:
        assert (found.first_offset, found.last_offset) == (10, 12)
    else:
        assert found is None


@pytest.mark.parametrize("origin,refused", [(CLIENT, True), (COORDINATOR, True), (REPLICATION, False)])
def test_a_non_transactional_batch_inside_an_open_transaction(psm, origin, refused):
    apply(psm, data(7, 0, 0, transactional=True), 5)
    plain = data(7, 0, 1)
    if refused:
        with pytest.raises(InvalidTxnStateError):
            psm.check(plain, origin)
    else:
        assert psm.check(plain, origin) is None
        psm.update(plain, 6, 6, TS, origin)
    assert psm.producers[7].current_txn_first_offset == 5  # still open either way


@pytest.mark.parametrize("origin,refused", [(COORDINATOR, True), (CLIENT, True), (REPLICATION, False)])
def test_a_marker_from_an_older_coordinator(psm, origin, refused):
    apply(psm, data(7, 0, 0, transactional=True), 0)
    apply(psm, marker(7, 0, True, coordinator_epoch=4), 1, COORDINATOR)
    apply(psm, data(7, 0, 1, transactional=True), 2)
    zombie = marker(7, 0, False, coordinator_epoch=3)
    if refused:
        with pytest.raises(TransactionCoordinatorFencedError):
            psm.check(zombie, origin)
        assert psm.producers[7].current_txn_first_offset == 2
    else:
        _dup, completed = apply(psm, zombie, 3, origin)
        assert completed == CompletedTxn(7, 2, 3, True)
        assert psm.producers[7].coordinator_epoch == 3


@pytest.mark.parametrize("origin", [CLIENT, COORDINATOR])
def test_a_marker_with_an_older_producer_epoch_is_refused(psm, origin):
    apply(psm, data(7, 5, 0, transactional=True), 0)
    with pytest.raises(InvalidProducerEpochError):
        psm.check(marker(7, 4, True), origin)


# ---------------------------------------------------------------------------------------
# transactions


def test_a_transactional_batch_opens_a_transaction_at_its_base_offset(psm):
    assert psm.first_unstable_offset() is None
    apply(psm, data(7, 0, 0, n=3, transactional=True), 100)
    apply(psm, data(7, 0, 3, n=2, transactional=True), 103)  # the same transaction
    assert psm.producers[7].current_txn_first_offset == 100
    assert psm.ongoing == {100: 7}
    assert psm.first_unstable_offset() == 100


def test_a_marker_completes_the_transaction(psm):
    apply(psm, data(7, 0, 0, n=3, transactional=True), 100)
    apply(psm, data(8, 0, 0, transactional=True), 103)
    _dup, completed = apply(psm, marker(7, 0, False, coordinator_epoch=2), 104, COORDINATOR)
    assert completed == CompletedTxn(producer_id=7, first_offset=100, last_offset=104, is_aborted=True)
    entry = psm.producers[7]
    assert (entry.current_txn_first_offset, entry.coordinator_epoch, entry.epoch) == (-1, 2, 0)
    assert psm.ongoing == {103: 8}
    assert psm.unreplicated == {100: (7, 104)}
    assert psm.first_unstable_offset() == 100  # until the high watermark passes the marker
    assert not psm.on_high_watermark_updated(104)
    assert psm.first_unstable_offset() == 100
    assert psm.on_high_watermark_updated(105)
    assert psm.unreplicated == {} and psm.first_unstable_offset() == 103


def test_a_marker_without_an_open_transaction_only_takes_the_epochs(psm):
    apply(psm, data(7, 0, 0), 0)
    _dup, completed = apply(psm, marker(7, 1, True, coordinator_epoch=6, ts=TS + 5), 1, COORDINATOR)
    assert completed is None
    e = psm.producers[7]
    assert (e.epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset) == (1, 6, TS + 5, -1)
    # a producer never seen gets an entry without batches
    apply(psm, marker(9, 3, False, coordinator_epoch=1), 2, COORDINATOR)
    assert (psm.producers[9].epoch, list(psm.producers[9].batches)) == (3, [])
    assert psm.ongoing == {} and psm.unreplicated == {}


def test_a_marker_with_a_new_epoch_resets_the_sequences(psm):
    apply(psm, data(7, 0, 0, n=5, transactional=True), 0)
    apply(psm, marker(7, 1, False), 5, COORDINATOR)  # a fence: epoch + 1
    assert list(psm.producers[7].batches) == []
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.check(data(7, 1, 5), CLIENT)  # the old sequence does not carry on
    with pytest.raises(InvalidProducerEpochError):
        psm.check(data(7, 0, 5), CLIENT)
    apply(psm, data(7, 1, 0), 6)


def test_a_marker_in_the_same_epoch_keeps_the_sequences(psm):
    apply(psm, data(7, 0, 0, n=5, transactional=True), 0)
    apply(psm, marker(7, 0, True), 5, COORDINATOR)
    assert psm.producers[7].last_seq == 4
    with pytest.raises(OutOfOrderSequenceNumberError):
        psm.check(data(7, 0, 0), CLIENT)
    apply(psm, data(7, 0, 5, transactional=True), 6)
    assert psm.producers[7].current_txn_first_offset == 6


def test_last_stable_offset_of_a_completed_transaction(psm):
    apply(psm, data(1, 0, 0, transactional=True), 10)
    apply(psm, data(2, 0, 0, transactional=True), 11)
    apply(psm, data(3, 0, 0, transactional=True), 12)
    # producer 2's abort: the earliest transaction open from another producer is 1's
    assert psm.last_stable_offset(CompletedTxn(2, 11, 13, True)) == 10
    # producer 1's: 2's is the earliest other one
    assert psm.last_stable_offset(CompletedTxn(1, 10, 13, True)) == 11
    solo = ProducerStateManager(psm.log_dir)
    apply(solo, data(1, 0, 0, transactional=True), 10)
    assert solo.last_stable_offset(CompletedTxn(1, 10, 20, True)) == 21


def test_completing_a_transaction_that_is_not_open_is_an_error(psm):
    with pytest.raises(ValueError):
        psm.complete_txn(CompletedTxn(1, 0, 3, False))


def test_truncate_head_keeps_producers_with_open_transactions(psm):
    apply(psm, data(1, 0, 0), 0)
    apply(psm, data(2, 0, 0, transactional=True), 1)
    apply(psm, data(3, 0, 0, transactional=True), 2)
    apply(psm, marker(3, 0, False), 3, COORDINATOR)  # unreplicated until the high watermark
    psm.truncate_head(10)
    assert set(psm.producers) == {2}  # 1 and 3 had their last batch below the log start
    assert psm.ongoing == {1: 2}
    assert psm.unreplicated == {}  # the marker is gone with the log start


# ---------------------------------------------------------------------------------------
# snapshots


def test_snapshot_bytes_are_kafkas(psm, tmp_path):
    apply(psm, data(11, 2, 0, n=3, ts=TS + 1), 0)  # idempotent only
    apply(psm, data(12, 0, 0, n=2, transactional=True, ts=TS + 2), 3)  # open since 3
    apply(psm, data(12, 0, 2, n=4, transactional=True, ts=TS + 3), 5)
    apply(psm, data(13, 4, 7, n=1, transactional=True, ts=TS + 4), 9)
    apply(psm, marker(13, 4, True, coordinator_epoch=9, ts=TS + 5), 10, COORDINATOR)  # committed
    apply(psm, data(14, 0, 0, n=2, transactional=True, ts=TS + 6), 11)
    apply(psm, marker(14, 1, False, coordinator_epoch=3, ts=TS + 7), 13, COORDINATOR)  # fenced: batch-less
    psm.take_snapshot(14)
    with open(snapshot_path(str(tmp_path), 14), "rb") as f:
        written = f.read()
    assert os.path.basename(snapshot_path(str(tmp_path), 14)) == "00000000000000000014.snapshot"
    expected = kafka_snapshot([
        # pid, epoch, last seq, last offset, offset delta, timestamp, coordinator epoch, txn first offset
        (11, 2, 2, 2, 2, TS + 1, -1, -1),
        (12, 0, 5, 8, 3, TS + 3, -1, 3),
        (13, 4, 7, 9, 0, TS + 5, 9, -1),  # the marker's timestamp and coordinator epoch
        (14, 1, -1, -1, 0, TS + 7, 3, -1),  # Kafka's empty entry: LastSequence/LastOffset -1, delta 0
    ])
    assert written == expected


def test_a_kafka_snapshot_loads_with_its_open_transactions(tmp_path):
    raw = kafka_snapshot([
        (21, 3, 9, 40, 4, TS, 2, 30),  # open since 30, last batch 36..40 sequences 5..9
        (22, 1, -1, -1, 0, TS + 1, 5, -1),  # batch-less
        (23, 0, 2, 41, 2, TS + 2, -1, 39),
    ])
    with open(snapshot_path(str(tmp_path), 42), "wb") as f:
        f.write(raw)
    m = ProducerStateManager(str(tmp_path))
    m.load(42, lambda start: iter(()))
    assert m.ongoing == {30: 21, 39: 23}
    assert m.first_unstable_offset() == 30
    e21, e22 = m.producers[21], m.producers[22]
    (b,) = e21.batches
    assert (b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp) == (5, 9, 36, 40, TS)
    assert (e21.epoch, e21.coordinator_epoch, e21.current_txn_first_offset) == (3, 2, 30)
    assert (list(e22.batches), e22.epoch, e22.coordinator_epoch, e22.last_timestamp) == ([], 1, 5, TS + 1)
    # the batch-less entry wants sequence 0 in its epoch, as after the marker that bumped it
    with pytest.raises(OutOfOrderSequenceNumberError):
        m.check(data(22, 1, 3), CLIENT)
    assert m.check(data(22, 1, 0), CLIENT) is None
    with pytest.raises(InvalidTxnStateError):
        m.check(data(21, 3, 10), CLIENT)  # its transaction is open again
    # and it writes the same bytes back
    assert encode_snapshot(m.producers) == raw


def test_snapshot_round_trip_and_replay_after_it(psm, tmp_path):
    apply(psm, data(1, 0, 0, n=2, transactional=True), 0)
    apply(psm, data(2, 7, 100, n=3), 2)
    apply(psm, marker(3, 2, False, coordinator_epoch=1), 5, COORDINATOR)
    psm.take_snapshot(6)
    before = encode_snapshot(psm.producers)
    replayed = [(data(1, 0, 2, transactional=True), 6, 6), (marker(1, 0, False), 7, 7),
                (data(4, 0, 0, transactional=True), 8, 8)]
    m = ProducerStateManager(str(tmp_path))
    m.load(9, lambda start: iter(replayed if start == 6 else ()))
    assert m.producers[1].current_txn_first_offset == -1
    assert m.unreplicated == {0: (1, 7)}  # the log drops it once its high watermark passes 7
    assert m.ongoing == {8: 4}
    m2 = ProducerStateManager(str(tmp_path))
    m2.load(6, lambda start: iter(()))
    assert encode_snapshot(m2.producers) == before
    assert m2.ongoing == {0: 1}


def test_a_corrupt_snapshot_is_refused(psm):
    apply(psm, data(1, 0, 0, transactional=True), 0)
    raw = bytearray(encode_snapshot(psm.producers))
    raw[-1] ^= 1
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(raw))
