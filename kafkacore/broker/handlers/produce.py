"""Produce (API key 0), versions 3-11; advertised from version 0.

- v0-2 carry message formats v0/v1, which this broker does not store: they are answered
  UNSUPPORTED_VERSION. They are still advertised from 0 because librdkafka before 2.11.1
  silently turns compression off when a broker's Produce minimum is above 0.
- acks 0 (no response), 1 and -1 (on one broker the leader's write is the full ISR's);
  anything else is INVALID_REQUIRED_ACKS.
- Each partition's records must be exactly one v2 batch (Kafka's rule for v3+), validated
  natively (CRC, sizes, counts) and appended by the storage engine without being decompressed;
  ``max.message.bytes`` applies per batch (MESSAGE_TOO_LARGE).
- Records that make a batch invalid (keyless records for a compacted topic) fail it whole with
  INVALID_RECORD; v8+ also names them in ``record_errors`` (index in the batch, KIP-467) with
  Kafka's summary as ``error_message``, so a client fails exactly those and the rest as innocent.
- Idempotent producers: sequences and epochs are checked by the log's producer state; a retry
  of a recent batch gets the original's offset without a second write.
- Transactional batches (and a transactional id) are refused: transactions are not supported.
- Internal topics cannot be written by clients (INVALID_TOPIC_EXCEPTION), unknown topics are
  UNKNOWN_TOPIC_OR_PARTITION (Produce never creates topics, as in Kafka).
"""
import struct

from ...errors import (InvalidRecordError, InvalidRequiredAcksError, InvalidTopicError, InvalidTxnStateError,
                       KafkaError, UnknownTopicOrPartitionError)
from ...protocol.messages.produce_response import (BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse,
                                                   TopicProduceResponse)
from ..broker import INTERNAL_TOPICS

_LENGTH = struct.Struct(">i")

API_KEY = 0
VERSIONS = (3, 11)
ADVERTISED_MIN = 0


def _append(broker, topic, partition, records):
    lg = broker.get_log(topic, partition)
    if lg is None:
        if topic in INTERNAL_TOPICS:
            raise InvalidTopicError(f"cannot append to internal topic {topic}")
        raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"cannot append to internal topic {topic}")
    if records is None or len(records) < 61:
        raise InvalidRecordError(f"produce to {topic}-{partition} carries no record batch")
    if 12 + _LENGTH.unpack_from(records, 8)[0] < len(records):
        raise InvalidRecordError(
            f"produce to {topic}-{partition} must carry exactly one record batch (Kafka's rule for v3+)")
    if records[22] & 0x10:  # attributes (int16 at 21) bit 4: transactional
        raise InvalidTxnStateError("transactional batches are not supported by this broker")
    info = lg.append(records, leader_epoch=0)
    return lg, info


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    acks = req.acks
    responses = []
    bad_acks = acks not in (0, 1, -1)
    transactional = req.transactional_id is not None
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            resp = PartitionProduceResponse(index=pd.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            if bad_acks:
                resp.error_code = InvalidRequiredAcksError.code
            elif transactional:
                resp.error_code = InvalidTxnStateError.code
                resp.error_message = "transactions are not supported by this broker"
            else:
                try:
                    lg, info = _append(broker, td.name, pd.index, pd.records)
                    resp.base_offset = info.first_offset
                    resp.log_append_time_ms = info.log_append_time
                    resp.log_start_offset = lg.log_start_offset
                except KafkaError as e:
                    resp.error_code = e.code
                    if v >= 8:
                        resp.error_message = e.message
                        if isinstance(e, InvalidRecordError):
                            resp.record_errors = [BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                                  for i, m in e.record_errors]
            parts.append(resp)
        responses.append(TopicProduceResponse(name=td.name, partition_responses=parts))
    if acks == 0:
        return None
    return ProduceResponse(responses=responses)


def error_response(req, version, code):
    return ProduceResponse(responses=[
        TopicProduceResponse(name=td.name, partition_responses=[
            PartitionProduceResponse(index=pd.index, error_code=code, base_offset=-1) for pd in td.partition_data])
        for td in req.topic_data])
