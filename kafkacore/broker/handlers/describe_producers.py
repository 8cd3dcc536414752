"""DescribeProducers (API key 61), version 0: the producers a partition's leader knows, each with
its epoch, last sequence, last timestamp, coordinator epoch and the first offset of its open
transaction (-1: none); what Kafka's ``kafka-transactions.sh find-hanging`` reads.
NOT_LEADER_OR_FOLLOWER on a broker that does not lead the partition, UNKNOWN_TOPIC_OR_PARTITION
when it does not exist."""
from ...errors import KafkaError, TopicAuthorizationFailedError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_producers_response import (DescribeProducersResponse, PartitionResponse,
                                                              ProducerState, TopicResponse)
from ..authorization import READ, TOPIC, authorized_names

API_KEY = ApiKey.DESCRIBE_PRODUCERS
VERSIONS = (0, 0)


def handle(ctx, req):
    broker = ctx.broker
    topics = []
    readable = authorized_names(ctx, READ, TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partition_indexes:
            resp = PartitionResponse(partition_index=p, active_producers=[])
            parts.append(resp)
            if t.name not in readable:
                resp.error_code = TopicAuthorizationFailedError.code
                continue
            try:
                lg = broker.leader_log(t.name, p)
            except KafkaError as e:
                resp.error_code, resp.error_message = e.code, e.message
                continue
            for pid, entry in sorted(lg.producer_state.producers.items()):
                resp.active_producers.append(ProducerState(
                    producer_id=pid, producer_epoch=entry.epoch, last_sequence=entry.last_seq,
                    last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                    current_txn_start_offset=entry.current_txn_first_offset))
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(topics=topics)


def error_response(req, version, code):
    return DescribeProducersResponse(topics=[
        TopicResponse(name=t.name, partitions=[PartitionResponse(partition_index=p, error_code=code, active_producers=[])
                                               for p in t.partition_indexes]) for t in req.topics])
