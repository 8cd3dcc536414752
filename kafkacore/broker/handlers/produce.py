"""Produce (API key 0), versions 3-11; advertised from version 0.

- v0-2 carry message formats v0/v1, which this broker does not store: they are answered
  UNSUPPORTED_VERSION. They are still advertised from 0 because librdkafka before 2.11.1
  silently turns compression off when a broker's Produce minimum is above 0.
- acks 0 (no response), 1 and -1; anything else is INVALID_REQUIRED_ACKS. On one broker the
  leader's write is the full ISR's. On a cluster only the partition's leader takes the write
  (NOT_LEADER_OR_FOLLOWER elsewhere); acks=-1 needs min.insync.replicas in the ISR before the
  write (NOT_ENOUGH_REPLICAS) and answers when the high watermark passes the batch, or
  REQUEST_TIMED_OUT after the request's timeout_ms, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the
  ISR shrank below the minimum meanwhile (Kafka's DelayedProduce).
- Each partition's records must be exactly one v2 batch (Kafka's rule for v3+), validated
  natively (CRC, sizes, counts) and appended by the storage engine without being decompressed;
  ``max.message.bytes`` applies per batch (MESSAGE_TOO_LARGE).
- Records that make a batch invalid (keyless records for a compacted topic) fail it whole with
  INVALID_RECORD; v8+ also names them in ``record_errors`` (index in the batch, KIP-467) with
  Kafka's summary as ``error_message``, so a client fails exactly those and the rest as innocent.
- Idempotent producers: sequences and epochs are checked by the log's producer state; a retry
  of a recent batch gets the original's offset without a second write.
- Transactional batches (docs/transactions.md §4.3) need the request's ``transactional_id``
  (else INVALID_TXN_STATE), one producer id per request (INVALID_PRODUCER_ID_MAPPING), and, when
  the producer has no transaction open in the partition yet, the partition in its Ongoing
  transaction at the coordinator (KIP-890 verification, ``transaction.partition.verification.enable``):
  not in it -> INVALID_TXN_STATE (v3-10) or TRANSACTION_ABORTABLE (v11); fenced ->
  INVALID_PRODUCER_EPOCH; a coordinator busy or elsewhere -> NOT_ENOUGH_REPLICAS (retried by
  every client). A non-transactional batch from a producer with an open transaction is
  INVALID_TXN_STATE (the log's producer state).
- Internal topics cannot be written by clients (INVALID_TOPIC_EXCEPTION), unknown topics are
  UNKNOWN_TOPIC_OR_PARTITION (Produce never creates topics, as in Kafka).
"""
import asyncio
import struct

from ...errors import (InvalidProducerEpochError, InvalidProducerIdMappingError, InvalidRecordError,
                       InvalidRequiredAcksError, InvalidTopicError, InvalidTxnStateError, KafkaError,
                       NotEnoughReplicasError, ProducerFencedError, RequestTimedOutError, TransactionAbortableError)
from ...protocol.messages.produce_response import (BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse,
                                                   TopicProduceResponse)
from ..broker import INTERNAL_TOPICS

_LENGTH = struct.Struct(">i")
_PID = struct.Struct(">q")  # a v2 batch's producer id, at byte 43
_EPOCH = struct.Struct(">h")  # its producer epoch, at byte 51

API_KEY = 0
VERSIONS = (3, 11)
ADVERTISED_MIN = 0


def _verify_transaction(broker, txn_id, topic, partition, lg, records, v):
    """KIP-890 part 1 for a transactional batch (None: go on; else the error to answer)."""
    pid, epoch = _PID.unpack_from(records, 43)[0], _EPOCH.unpack_from(records, 51)[0]
    entry = lg.producer_state.producers.get(pid)
    if entry is not None and entry.current_txn_first_offset >= 0 and entry.epoch == epoch:
        return None  # its transaction is open here already: the coordinator added the partition
    if not broker.config["transaction.partition.verification.enable"]:
        return None
    tc = broker.transaction_coordinator
    code = tc.verify_partition(txn_id, pid, epoch, topic, partition) if tc is not None and tc.available else \
        NotEnoughReplicasError.code
    if code == 0:
        return None
    if code == InvalidTxnStateError.code:
        return (TransactionAbortableError if v >= 11 else InvalidTxnStateError)(
            f"{topic}-{partition} is not in the ongoing transaction of producer {pid}")
    if code in (ProducerFencedError.code, InvalidProducerEpochError.code):
        return InvalidProducerEpochError(f"producer {pid} epoch {epoch} was fenced by a newer epoch")
    if code == InvalidProducerIdMappingError.code:
        return InvalidProducerIdMappingError(f"transactional id {txn_id!r} does not map to producer {pid}")
    return NotEnoughReplicasError(f"the transaction coordinator could not verify {topic}-{partition} (error {code})")


def _append(broker, topic, partition, records, acks, txn_id=None, v=11):
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"cannot append to internal topic {topic}")
    if records is None or len(records) < 61:
        raise InvalidRecordError(f"produce to {topic}-{partition} carries no record batch")
    if 12 + _LENGTH.unpack_from(records, 8)[0] < len(records):
        raise InvalidRecordError(
            f"produce to {topic}-{partition} must carry exactly one record batch (Kafka's rule for v3+)")
    transactional = bool(records[22] & 0x10)  # attributes (int16 at 21) bit 4
    if transactional and txn_id is None:
        raise InvalidTxnStateError(f"a transactional batch for {topic}-{partition} in a request without a "
                                   "transactional id")
    if broker.cluster is None:
        lg = broker.leader_log(topic, partition)
        if transactional:
            err = _verify_transaction(broker, txn_id, topic, partition, lg, records, v)
            if err is not None:
                raise err
        return lg, lg.append(records, leader_epoch=0), None
    partition_ = broker.cluster.replica_manager.leader_partition(topic, partition)
    lg = partition_.log
    if transactional:
        raise InvalidTxnStateError("transactions are not served on a cluster yet (docs/transactions.md, plan step 13)")
    min_isr = lg.config.min_insync_replicas
    if acks == -1:
        partition_.check_enough_replicas(min_isr)
    info = lg.append(records, leader_epoch=partition_.leader_epoch)
    partition_.maybe_increment_high_watermark()  # a single-replica ISR commits at once
    if acks != -1:
        return lg, info, None
    # a duplicate (an idempotent retry of a batch the log holds) is answered as its original was
    # to be: once the high watermark passes it. A leader cut off from its ISR holds batches only it
    # has; acknowledging their retry at once lost them when it was deposed and truncated.
    return lg, info, partition_.wait_for_commit(info.last_offset + 1, min_isr)


def handle(ctx, req):
    broker = ctx.broker
    v = ctx.api_version
    acks = req.acks
    responses = []
    bad_acks = acks not in (0, 1, -1)
    txn_id = req.transactional_id
    mixed = txn_id is not None and len({bytes(pd.records[43:51]) for td in req.topic_data for pd in td.partition_data
                                        if pd.records is not None and len(pd.records) >= 61}) > 1
    waits = []
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            resp = PartitionProduceResponse(index=pd.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            if bad_acks:
                resp.error_code = InvalidRequiredAcksError.code
            elif mixed:
                _fail(resp, InvalidProducerIdMappingError("a transactional request carries batches of several "
                                                          "producer ids"), v)
            else:
                try:
                    lg, info, commit = _append(broker, td.name, pd.index, pd.records, acks, txn_id, v)
                    resp.base_offset = info.first_offset
                    resp.log_append_time_ms = info.log_append_time
                    resp.log_start_offset = lg.log_start_offset
                    if commit is not None:
                        waits.append((resp, commit))
                except KafkaError as e:
                    _fail(resp, e, v)
            parts.append(resp)
        responses.append(TopicProduceResponse(name=td.name, partition_responses=parts))
    if acks == 0:
        for _resp, commit in waits:
            commit.cancel()
        return None
    if waits:
        return _delayed(ProduceResponse(responses=responses), waits, req.timeout_ms, v)
    return ProduceResponse(responses=responses)


def _fail(resp, e, v):
    resp.error_code = e.code
    if v >= 8:
        resp.error_message = e.message
        if isinstance(e, InvalidRecordError):
            resp.record_errors = [BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                  for i, m in e.record_errors]


async def _delayed(response, waits, timeout_ms, v):
    """Kafka's DelayedProduce: every acks=-1 partition of the request committed, failed, or the
    request's timeout passed (REQUEST_TIMED_OUT for those still waiting)."""
    futures = [commit for _resp, commit in waits]
    await asyncio.wait(futures, timeout=max(timeout_ms, 0) / 1000)
    for resp, commit in waits:
        if not commit.done():
            commit.cancel()
            _fail(resp, RequestTimedOutError(f"not replicated to the ISR within {timeout_ms} ms"), v)
            resp.base_offset = -1
        elif commit.exception() is not None:
            _fail(resp, commit.exception(), v)
            resp.base_offset = -1
    return response


def error_response(req, version, code):
    return ProduceResponse(responses=[
        TopicProduceResponse(name=td.name, partition_responses=[
            PartitionProduceResponse(index=pd.index, error_code=code, base_offset=-1) for pd in td.partition_data])
        for td in req.topic_data])
