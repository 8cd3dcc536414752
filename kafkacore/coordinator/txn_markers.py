"""Writing a transaction's COMMIT/ABORT marker into one partition this broker leads
(docs/transactions.md §3.5): what the transaction coordinator calls for each partition of a
transaction on a single node, and what the WriteTxnMarkers handler calls for markers sent by a
coordinator elsewhere (or by Kafka's admin tools to end a hanging transaction).

The append has coordinator origin: the partition refuses a marker whose producer epoch is older
than the one it knows for that producer (INVALID_PRODUCER_EPOCH) or whose coordinator epoch is
older than the last one seen (TRANSACTION_COORDINATOR_FENCED)."""
from __future__ import annotations

import logging

from ..clock import wall_ms
from ..errors import NotLeaderOrFollowerError
from ..protocol.api_table import ApiKey
from ..record.control import end_txn_marker_batch
from ..storage.producer_state import AppendOrigin
from .offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC

WRITE_TXN_MARKERS_VERSION = 1
MARKER_TIMEOUT_S = 30.0  # a marker waits this long for the ISR (Kafka: request.timeout.ms at most)

log = logging.getLogger("kafkacore.transactions")


async def write_markers(broker, producer_id, producer_epoch, coordinator_epoch, commit, partitions,
                        timeout_s=MARKER_TIMEOUT_S) -> dict:
    """Appends the producer's COMMIT or ABORT marker to each of ``partitions`` this broker leads,
    through the replica manager as Kafka's WriteTxnMarkers does: acks=-1 with coordinator
    origin, so a partition whose ISR is below min.insync.replicas refuses the marker before
    writing it (NOT_ENOUGH_REPLICAS; the coordinator retries and nothing piles up). Returns
    {(topic, partition): error code}, 0 once the high watermark passed the marker
    (REQUEST_TIMED_OUT after ``timeout_s``)."""
    batch = end_txn_marker_batch(producer_id, producer_epoch, coordinator_epoch, commit, wall_ms())
    rm = broker.replica_manager
    # a batch each: the append stamps the partition's offset into it
    results = rm.append_records({tp: bytearray(batch) for tp in partitions}, -1, AppendOrigin.COORDINATOR)
    await rm.wait_for_replication(results, timeout_s * 1000)
    codes = {}
    for (topic, partition), result in results.items():
        if result.error is not None:
            _refused(commit, producer_id, producer_epoch, topic, partition, result.error)
            codes[(topic, partition)] = result.error.code
        else:
            _completed(broker, topic, partition, producer_id, commit)
            codes[(topic, partition)] = 0
    return codes


async def send_markers(broker, node_id, producer_id, producer_epoch, coordinator_epoch, commit, partitions,
                       timeout_s) -> dict:
    """WriteTxnMarkers (v1) to another broker for ``partitions`` it leads: {(topic, partition):
    code}; a broker that cannot be reached answers NOT_LEADER_OR_FOLLOWER for all of them (the
    coordinator looks the leaders up again and retries)."""
    from ..replication.broker_channel import BrokerChannelError
    from ..protocol.messages.write_txn_markers_request import (WritableTxnMarker, WritableTxnMarkerTopic,
                                                               WriteTxnMarkersRequest)
    channel = broker.channels.channel(node_id)
    if channel is None:
        return dict.fromkeys(partitions, NotLeaderOrFollowerError.code)
    by_topic: dict[str, list] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    req = WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=bool(commit),
        coordinator_epoch=coordinator_epoch,
        topics=[WritableTxnMarkerTopic(name=t, partition_indexes=ps) for t, ps in by_topic.items()])])
    try:
        resp = await channel.call(ApiKey.WRITE_TXN_MARKERS, WRITE_TXN_MARKERS_VERSION, req, timeout_s + 5)
    except BrokerChannelError as e:
        log.info("WriteTxnMarkers to broker %d failed: %s; retrying", node_id, e)
        return dict.fromkeys(partitions, NotLeaderOrFollowerError.code)
    codes = dict.fromkeys(partitions, NotLeaderOrFollowerError.code)  # a partition left out: again
    for m in resp.markers:
        for t in m.topics:
            for p in t.partitions:
                codes[(t.name, p.partition_index)] = p.error_code
    return codes


_last_refusal: dict = {}  # (producer id, topic, partition) -> the error code last logged
_REFUSALS_REMEMBERED = 10000


def _refused(commit, producer_id, producer_epoch, topic, partition, e):
    """A refusal is logged once per marker and error (a coordinator retries every 100 ms; a
    partition whose ISR stays too small would fill the log), again at DEBUG."""
    key = (producer_id, topic, partition)
    level = logging.DEBUG if _last_refusal.get(key) == e.code else logging.WARNING
    if len(_last_refusal) >= _REFUSALS_REMEMBERED:
        _last_refusal.clear()
    _last_refusal[key] = e.code
    log.log(level, "%s marker of producer %d (epoch %d) for %s-%d not written: %s; the coordinator retries it",
            "COMMIT" if commit else "ABORT", producer_id, producer_epoch, topic, partition, e)


def _completed(broker, topic, partition, producer_id, commit):
    _last_refusal.pop((producer_id, topic, partition), None)
    if topic == CONSUMER_OFFSETS_TOPIC and broker.group_coordinator is not None:
        # TxnOffsetCommit's offsets count (or are dropped) once the marker is in their partition
        broker.group_coordinator.on_transaction_completed(partition, producer_id, commit)
