"""Records of ``__transaction_state`` (docs/transactions.md §2.2), in Kafka's format: a key of
int16 version 0 + TransactionLogKey, a value of int16 version + TransactionLogValue (schemas in
kafka-protocol/coordinator/). kafkacore writes value version 0 (Kafka does until its
``transaction.version`` feature is 1 or more) and reads 0 and 1. A null value is a tombstone: the
id expired."""
from __future__ import annotations

import logging

from ..protocol.coordinator.transaction_log_key import TransactionLogKey
from ..protocol.coordinator.transaction_log_value import PartitionsSchema, TransactionLogValue
from ..protocol.wire import ProtocolDecodeError, Reader, Writer
from .internal_topic import partition_for
from .transaction_metadata import TransactionMetadata, TxnState, TxnTransition

log = logging.getLogger("kafkacore.transactions")

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0  # written; 1 (flexible, tagged fields) is read too


def partition_for_transactional_id(transactional_id: str, partitions: int) -> int:
    """Kafka's partitionFor: abs(String.hashCode) % the topic's partition count (the same rule as
    the group coordinator's)."""
    return partition_for(transactional_id, partitions)


def _encode(version, obj) -> bytes:
    w = Writer()
    w.int16(version)
    obj.write(w, version)
    return w.getvalue()


def key_bytes(transactional_id: str) -> bytes:
    return _encode(KEY_VERSION, TransactionLogKey(transactional_id=transactional_id))


def value_bytes(t: TxnTransition) -> bytes:
    """The record value of a transition. Empty carries null partitions, as Kafka writes it; Dead
    is never written as a value (its record is the tombstone)."""
    if t.state is TxnState.DEAD:
        raise ValueError("a Dead transactional id is written as a tombstone, not a value")
    if t.state is TxnState.EMPTY and t.partitions:
        raise ValueError(f"a transaction in Empty cannot hold partitions {sorted(t.partitions)}")
    if t.state is TxnState.EMPTY:
        partitions = None
    else:
        by_topic = {}
        for topic, p in sorted(t.partitions):
            by_topic.setdefault(topic, []).append(p)
        partitions = [PartitionsSchema(topic=topic, partition_ids=ps) for topic, ps in by_topic.items()]
    return _encode(VALUE_VERSION, TransactionLogValue(
        producer_id=t.producer_id, producer_epoch=t.producer_epoch, transaction_timeout_ms=t.txn_timeout_ms,
        transaction_status=int(t.state), transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=t.txn_last_update_ms,
        transaction_start_timestamp_ms=t.txn_start_ms))


def decode_key(data) -> str | None:
    """The transactional id of a record key; None (with a warning) for a key version this
    broker does not know, which loading skips as Kafka does."""
    try:
        r = Reader(bytes(data))
        version = r.int16()
        if version != KEY_VERSION:
            log.warning("__transaction_state: skipping a record with unknown key version %d", version)
            return None
        return TransactionLogKey.read(r, version).transactional_id
    except ProtocolDecodeError as e:
        log.warning("__transaction_state: skipping a record whose key does not parse: %s", e)
        return None


def decode_value(transactional_id: str, data) -> TransactionMetadata | None:
    """The metadata a record value holds; None for a tombstone. Raises ProtocolDecodeError for
    a value that does not parse or a version above 1 (the load reports it and stops: a record
    it cannot read would otherwise lose a transaction's outcome)."""
    if data is None:
        return None
    r = Reader(bytes(data))
    version = r.int16()
    if version < TransactionLogValue.MIN_VERSION or version > TransactionLogValue.MAX_VERSION:
        raise ProtocolDecodeError(f"__transaction_state value version {version} is not supported")
    v = TransactionLogValue.read(r, version)
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise ProtocolDecodeError(f"unknown transaction status {v.transaction_status}") from None
    partitions = set()
    for tp in v.transaction_partitions or ():
        partitions.update((tp.topic, p) for p in tp.partition_ids)
    return TransactionMetadata(transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms, state,
                               partitions, v.transaction_start_timestamp_ms, v.transaction_last_update_timestamp_ms,
                               previous_producer_id=v.previous_producer_id)
