"""WriteTxnMarkers (API key 27), versions 0-1: COMMIT/ABORT markers for partitions this broker
leads, from a transaction coordinator or from Kafka's admin ``abortTransaction`` (KIP-664,
``kafka-transactions.sh abort``) ending a hanging transaction. Each marker is appended with
coordinator origin (docs/transactions.md §3.5): INVALID_PRODUCER_EPOCH for an epoch older than
the partition's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch,
UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER as for a produce, NOT_ENOUGH_REPLICAS (and
nothing written) when the ISR is below min.insync.replicas. Each marker is answered once the high
watermark passed it (REQUEST_TIMED_OUT after 30 s); a one-replica ISR passes it at once."""
import asyncio

from ...coordinator.txn_markers import write_markers
from ...errors import ClusterAuthorizationFailedError
from ...protocol.api_table import ApiKey
from ...protocol.messages.write_txn_markers_response import (WritableTxnMarkerPartitionResult,
                                                             WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
                                                             WriteTxnMarkersResponse)
from ..authorization import CLUSTER_ACTION, authorize_cluster

API_KEY = ApiKey.WRITE_TXN_MARKERS
VERSIONS = (0, 1)


async def handle(ctx, req):
    """Each marker's partitions appended as one write of the replica manager, answered once the
    ISR has them (the markers of a request, one per producer, wait side by side)."""
    broker = ctx.broker
    if not authorize_cluster(ctx, CLUSTER_ACTION):  # a transaction coordinator's request
        return error_response(req, ctx.api_version, ClusterAuthorizationFailedError.code)
    keys, jobs = [], []
    for i, m in enumerate(req.markers):
        partitions = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        keys.append((i, partitions))
        jobs.append(write_markers(broker, m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                  bool(m.transaction_result), partitions))
    codes = {}
    for (i, partitions), marker_codes in zip(keys, await asyncio.gather(*jobs)):
        for tp in partitions:
            codes[(i, *tp)] = marker_codes[tp]
    return _response(req, codes)


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
