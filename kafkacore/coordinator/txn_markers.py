"""Writing a transaction's COMMIT/ABORT marker into one partition this broker leads
(docs/transactions.md §3.5): what the transaction coordinator calls for each partition of a
transaction on a single node, and what the WriteTxnMarkers handler calls for markers sent by a
coordinator elsewhere (or by Kafka's admin tools to end a hanging transaction).

The append has coordinator origin: the partition refuses a marker whose producer epoch is older
than the one it knows for that producer (INVALID_PRODUCER_EPOCH) or whose coordinator epoch is
older than the last one seen (TRANSACTION_COORDINATOR_FENCED)."""
from __future__ import annotations

import logging

from ..errors import KafkaError
from .offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC

log = logging.getLogger("kafkacore.transactions")


def write_marker(broker, topic, partition, producer_id, producer_epoch, coordinator_epoch, commit) -> int:
    """The Kafka error code of appending the marker (0: written)."""
    try:
        lg = broker.leader_log(topic, partition)
        lg.append_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                         leader_epoch=broker.leader_epoch_of(topic, partition))
    except KafkaError as e:
        log.warning("%s marker of producer %d (epoch %d) for %s-%d not written: %s", "COMMIT" if commit else "ABORT",
                    producer_id, producer_epoch, topic, partition, e)
        return e.code
    if topic == CONSUMER_OFFSETS_TOPIC and broker.group_coordinator is not None:
        # TxnOffsetCommit's offsets count (or are dropped) once the marker is in their partition
        broker.group_coordinator.on_transaction_completed(partition, producer_id, commit)
    return 0
