"""Writing a transaction's COMMIT/ABORT marker into one partition this broker leads
(docs/transactions.md §3.5): what the transaction coordinator calls for each partition of a
transaction on a single node, and what the WriteTxnMarkers handler calls for markers sent by a
coordinator elsewhere (or by Kafka's admin tools to end a hanging transaction).

The append has coordinator origin: the partition refuses a marker whose producer epoch is older
than the one it knows for that producer (INVALID_PRODUCER_EPOCH) or whose coordinator epoch is
older than the last one seen (TRANSACTION_COORDINATOR_FENCED)."""
from __future__ import annotations

import logging

import asyncio

from ..errors import KafkaError, NotLeaderOrFollowerError, RequestTimedOutError
from ..protocol.api_table import ApiKey
from .offset_store import TOPIC as CONSUMER_OFFSETS_TOPIC

WRITE_TXN_MARKERS_VERSION = 1

log = logging.getLogger("kafkacore.transactions")


def write_marker(broker, topic, partition, producer_id, producer_epoch, coordinator_epoch, commit) -> int:
    """The Kafka error code of appending the marker on a single node (0: written)."""
    try:
        lg = broker.leader_log(topic, partition)
        lg.append_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                         leader_epoch=broker.leader_epoch_of(topic, partition))
    except KafkaError as e:
        _refused(commit, producer_id, producer_epoch, topic, partition, e)
        return e.code
    _completed(broker, topic, partition, producer_id, commit)
    return 0


async def write_marker_replicated(broker, topic, partition, producer_id, producer_epoch, coordinator_epoch, commit,
                                  timeout_s) -> int:
    """On a cluster, as the partition's leader: the marker appended, then its code once the
    high watermark passed it (acks=all, min.insync.replicas), REQUEST_TIMED_OUT after
    ``timeout_s``."""
    try:
        partition_ = broker.cluster.replica_manager.leader_partition(topic, partition)
        lg = partition_.log
        info = lg.append_marker(producer_id, producer_epoch, coordinator_epoch, commit,
                                leader_epoch=partition_.leader_epoch)
        partition_.maybe_increment_high_watermark()
        await asyncio.wait_for(partition_.wait_for_commit(info.first_offset + 1, lg.config.min_insync_replicas),
                               timeout_s)
    except asyncio.TimeoutError:
        return RequestTimedOutError.code
    except KafkaError as e:
        _refused(commit, producer_id, producer_epoch, topic, partition, e)
        return e.code
    _completed(broker, topic, partition, producer_id, commit)
    return 0


async def send_markers(broker, node_id, producer_id, producer_epoch, coordinator_epoch, commit, partitions,
                       timeout_s) -> dict:
    """WriteTxnMarkers (v1) to another broker for ``partitions`` it leads: {(topic, partition):
    code}; a broker that cannot be reached answers NOT_LEADER_OR_FOLLOWER for all of them (the
    coordinator looks the leaders up again and retries)."""
    from ..cluster.broker_channel import BrokerChannelError
    from ..protocol.messages.write_txn_markers_request import (WritableTxnMarker, WritableTxnMarkerTopic,
                                                               WriteTxnMarkersRequest)
    channel = broker.cluster.channel(node_id)
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


def _refused(commit, producer_id, producer_epoch, topic, partition, e):
    log.warning("%s marker of producer %d (epoch %d) for %s-%d not written: %s", "COMMIT" if commit else "ABORT",
                producer_id, producer_epoch, topic, partition, e)


def _completed(broker, topic, partition, producer_id, commit):
    if topic == CONSUMER_OFFSETS_TOPIC and broker.group_coordinator is not None:
        # TxnOffsetCommit's offsets count (or are dropped) once the marker is in their partition
        broker.group_coordinator.on_transaction_completed(partition, producer_id, commit)
