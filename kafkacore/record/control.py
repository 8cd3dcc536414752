"""Control records (KIP-98): the transaction markers a transaction coordinator writes to each
partition of a transaction when it ends. Formats are Kafka's (clients' ControlRecordType and
EndTransactionMarker; docs/transactions.md, section 2.1):

- A marker is a control batch of magic 2: attributes TRANSACTIONAL | CONTROL (0x30, never
  compressed), the transaction's producer id and epoch, base sequence -1, one record at offset
  delta 0 without headers.
- Its key is 4 bytes: int16 version (0), int16 type (0 ABORT, 1 COMMIT).
- Its value is 6 bytes: int16 version (0), int32 coordinator epoch.

Readers accept a key or value of a newer version as long as it carries at least these fields
(Kafka reads the fields it knows and ignores the rest)."""
from __future__ import annotations

import struct

from ..checksum import crc32c
from .errors import CorruptRecordError
from .varint import size_of_varlong, write_varlong

ABORT, COMMIT = 0, 1  # ControlRecordType
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0
TRANSACTIONAL_FLAG, CONTROL_FLAG = 0x10, 0x20  # record batch attributes, bits 4 and 5
MAGIC_V2 = 2
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc | attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordCount
_PREFIX = struct.Struct(">qiib")
_CRC = struct.Struct(">I")
_AFTER_CRC = struct.Struct(">hiqqqhii")
_CRC_START = _PREFIX.size + _CRC.size  # 21: the CRC covers the attributes to the end


def control_key(marker_type: int) -> bytes:
    if marker_type not in (ABORT, COMMIT):
        raise ValueError(f"unknown control record type {marker_type} (0 ABORT, 1 COMMIT)")
    return _KEY.pack(CONTROL_KEY_VERSION, marker_type)


def parse_control_key(key) -> int:
    """The control record type of a control record's key; CorruptRecordError when malformed."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"a control record key needs {_KEY.size} bytes, got "
                                 f"{None if key is None else len(key)}", 0)
    version, marker_type = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version} is negative", 0)
    return marker_type


def end_txn_marker_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def parse_end_txn_marker_value(value) -> int:
    """The coordinator epoch of an end-transaction marker's value."""
    if value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"an end-transaction marker value needs {_VALUE.size} bytes, got "
                                 f"{None if value is None else len(value)}", 0)
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"end-transaction marker version {version} is negative", 0)
    return coordinator_epoch


def end_txn_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                         timestamp_ms: int, base_offset: int = 0,
                         partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A COMMIT or ABORT marker as the one-record control batch Kafka writes."""
    key = control_key(COMMIT if commit else ABORT)
    value = end_txn_marker_value(coordinator_epoch)
    body = bytearray()
    body.append(0)  # record attributes
    write_varlong(body, 0)  # timestamp delta
    write_varlong(body, 0)  # offset delta
    write_varlong(body, len(key))
    body += key
    write_varlong(body, len(value))
    body += value
    write_varlong(body, 0)  # no headers
    record = bytearray()
    write_varlong(record, len(body))
    record += body
    assert size_of_varlong(len(body)) + len(body) == len(record)
    after_crc = _AFTER_CRC.pack(TRANSACTIONAL_FLAG | CONTROL_FLAG, 0, timestamp_ms, timestamp_ms, producer_id,
                                producer_epoch, NO_SEQUENCE, 1) + bytes(record)
    batch_length = _CRC.size + len(after_crc) + 5  # from partitionLeaderEpoch (4) and magic (1) on
    return (_PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC_V2)
            + _CRC.pack(crc32c(after_crc)) + after_crc)


def is_control_batch(attributes: int) -> bool:
    return bool(attributes & CONTROL_FLAG)


def is_transactional_batch(attributes: int) -> bool:
    return bool(attributes & TRANSACTIONAL_FLAG)
