"""WriteTxnMarkers (API key 27), versions 0-1: COMMIT/ABORT markers for partitions this broker
leads, from a transaction coordinator or from Kafka's admin ``abortTransaction`` (KIP-664,
``kafka-transactions.sh abort``) ending a hanging transaction. Each marker is appended with
coordinator origin (docs/transactions.md §3.5): INVALID_PRODUCER_EPOCH for an epoch older than
the partition's, TRANSACTION_COORDINATOR_FENCED for an older coordinator epoch,
UNKNOWN_TOPIC_OR_PARTITION / NOT_LEADER_OR_FOLLOWER as for a produce. On a single node the
leader's write is the whole ISR."""
from ...coordinator.txn_markers import write_marker
from ...protocol.messages.write_txn_markers_response import (WritableTxnMarkerPartitionResult,
                                                             WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
                                                             WriteTxnMarkersResponse)

API_KEY = 27
VERSIONS = (0, 1)
CLUSTER_REFUSED = 35  # UNSUPPORTED_VERSION: treated as done by a coordinator (Kafka's rule)


def handle(ctx, req):
    broker = ctx.broker
    results = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            parts = []
            for p in t.partition_indexes:
                if broker.cluster is not None:  # the acks=all wait of plan step 13 is not built yet
                    code = CLUSTER_REFUSED
                else:
                    code = write_marker(broker, t.name, p, m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                        bool(m.transaction_result))
                parts.append(WritableTxnMarkerPartitionResult(partition_index=p, error_code=code))
            topics.append(WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        results.append(WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=results)


def error_response(req, version, code):
    return WriteTxnMarkersResponse(markers=[
        WritableTxnMarkerResult(producer_id=m.producer_id, topics=[
            WritableTxnMarkerTopicResult(name=t.name, partitions=[
                WritableTxnMarkerPartitionResult(partition_index=p, error_code=code) for p in t.partition_indexes])
            for t in m.topics])
        for m in req.markers])
