"""WriteTxnMarkers (API key 27), versions 0-1: COMMIT/ABORT markers for partitions this broker
leads, from a transaction coordinator or from Kafka's admin ``abortTransaction`` (KIP-664,
``kafka-transactions.sh abort``) ending a hanging transaction. Each marker is appended with
coordinator origin (docs/transactions.md §3.5): INVALID_PRODUCER_EPOCH for an epoch older than
the partition's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch,
UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER as for a produce. On a single node the
leader's write is the whole ISR; on a cluster each marker is answered once the high watermark
passed it (REQUEST_TIMED_OUT after 30 s)."""
import asyncio

from ...coordinator.txn_markers import write_marker, write_marker_replicated
from ...protocol.api_table import ApiKey
from ...protocol.messages.write_txn_markers_response import (WritableTxnMarkerPartitionResult,
                                                             WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
                                                             WriteTxnMarkersResponse)

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = (0, 1)
MARKER_TIMEOUT_S = 30.0  # Kafka answers after request.timeout.ms at most


def handle(ctx, req):
    broker = ctx.broker
    if broker.cluster is not None:
        return _on_cluster(broker, req)
    return _response(req, {(i, t.name, p): write_marker(broker, t.name, p, m.producer_id, m.producer_epoch,
                                                        m.coordinator_epoch, bool(m.transaction_result))
                           for i, m in enumerate(req.markers) for t in m.topics for p in t.partition_indexes})


async def _on_cluster(broker, req):
    """Each marker appended by this leader, answered once the ISR has it."""
    keys, jobs = [], []
    for i, m in enumerate(req.markers):
        for t in m.topics:
            for p in t.partition_indexes:
                keys.append((i, t.name, p))
                jobs.append(write_marker_replicated(broker, t.name, p, m.producer_id, m.producer_epoch,
                                                    m.coordinator_epoch, bool(m.transaction_result), MARKER_TIMEOUT_S))
    return _response(req, dict(zip(keys, await asyncio.gather(*jobs))))


def _response(req, codes):
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=p, error_code=codes[(i, t.name, p)])
                for p in t.partition_indexes])
            for t in m.topics])
        for i, m in enumerate(req.markers)])


def error_response(req, version, code):
    return _response(req, {(i, t.name, p): code for i, m in enumerate(req.markers) for t in m.topics
                           for p in t.partition_indexes})
