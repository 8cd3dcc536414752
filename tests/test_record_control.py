"""Transaction markers (kafkacore/record/control.py): Kafka's control batch layout, read back by
kafkacore's batch readers (the compiled one and its pure-Python twin) and by the decoders of
another client (kafka-python), and the key/value parsers' errors."""
import struct

import pytest

from kafkacore.record import batch_py, iter_batches
from kafkacore.record.control import (ABORT, COMMIT, CONTROL_FLAG, TRANSACTIONAL_FLAG, control_key,
                                      end_txn_marker_batch, end_txn_marker_value, parse_control_key,
                                      parse_end_txn_marker_value)
from kafkacore.record.errors import CorruptRecordError

TS = 1_700_000_000_123


@pytest.mark.parametrize("reader", [iter_batches, batch_py.iter_batches], ids=["default", "twin"])
@pytest.mark.parametrize("commit", [True, False])
def test_a_marker_is_kafkas_78_byte_control_batch(reader, commit):
    raw = end_txn_marker_batch(producer_id=4242, producer_epoch=7, coordinator_epoch=31, commit=commit,
                               timestamp_ms=TS, base_offset=1000, partition_leader_epoch=5)
    assert len(raw) == 78  # 61-byte header + one 17-byte record, as Kafka's markers on disk
    (batch,) = list(reader(raw))
    batch.validate()  # the CRC-32C over attributes..end
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.magic) == (1000, 1000, 5, 2)
    assert batch.attributes == TRANSACTIONAL_FLAG | CONTROL_FLAG
    assert batch.is_control and batch.is_transactional and batch.compression == "none"
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.count) == (4242, 7, -1, 1)
    assert batch.base_timestamp == batch.max_timestamp == TS
    (record,) = list(batch)
    assert (record.offset, record.timestamp_ms) == (1000, TS)
    assert record.key == struct.pack(">hh", 0, COMMIT if commit else ABORT)
    assert record.value == struct.pack(">hi", 0, 31)
    assert parse_control_key(record.key) == (COMMIT if commit else ABORT)
    assert parse_end_txn_marker_value(record.value) == 31


def test_kafka_python_reads_the_marker_as_a_control_batch():
    from kafka.record.default_records import DefaultRecordBatch

    raw = end_txn_marker_batch(9, 1, 2, commit=False, timestamp_ms=TS, base_offset=3)
    batch = DefaultRecordBatch(bytearray(raw))
    assert batch.validate_crc()
    assert batch.is_control_batch and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 1, -1)


def test_newer_versions_with_more_fields_are_read_by_the_fields_known():
    assert parse_control_key(struct.pack(">hh", 1, COMMIT) + b"more") == COMMIT
    assert parse_end_txn_marker_value(struct.pack(">hi", 3, 12) + b"\x00\x01") == 12


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", struct.pack(">hh", -1, 0)])
def test_a_malformed_control_key_is_a_corrupt_record(key):
    with pytest.raises(CorruptRecordError):
        parse_control_key(key)


@pytest.mark.parametrize("value", [None, b"\x00\x00\x00\x00\x00", struct.pack(">hi", -2, 0)])
def test_a_malformed_marker_value_is_a_corrupt_record(value):
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker_value(value)


def test_only_abort_and_commit_are_marker_types():
    assert control_key(ABORT) == b"\x00\x00\x00\x00" and control_key(COMMIT) == b"\x00\x00\x00\x01"
    with pytest.raises(ValueError, match="unknown control record type 2"):
        control_key(2)
    assert end_txn_marker_value(-1) == b"\x00\x00\xff\xff\xff\xff"
