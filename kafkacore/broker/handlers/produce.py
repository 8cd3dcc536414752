"""Produce (API key 0), versions 3-11; advertised from version 0.

- v0-2 carry message formats v0/v1, which this broker does not store: they are answered
  UNSUPPORTED_VERSION. They are still advertised from 0 because librdkafka before 2.11.1
  silently turns compression off when a broker's Produce minimum is above 0.
- acks 0 (no response), 1 and -1; anything else is INVALID_REQUIRED_ACKS. The request's checks
  are made here; the writes go through the replica manager's one write path
  (``ReplicaManager.append_records``), on one node as on many: only the partition's leader takes
  the write (NOT_LEADER_OR_FOLLOWER elsewhere); acks=-1 needs min.insync.replicas in the ISR
  before the write (NOT_ENOUGH_REPLICAS, nothing written) and answers when the high watermark
  passes the batch (at once when the ISR is the leader alone, as on a single node), or
  REQUEST_TIMED_OUT after the request's timeout_ms, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when the
  ISR shrank below the minimum meanwhile (Kafka's DelayedProduce).
- A partition named twice in one request: the second is INVALID_REQUEST (Kafka keeps one per
  partition; no client sends two).
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
- With an authorizer: a transactional id needs WRITE on it (else the whole request is
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED), each topic WRITE (else TOPIC_AUTHORIZATION_FAILED), as
  Kafka's KafkaApis checks.
- With metrics on (``metrics.port``), each batch appended counts its records and bytes (as
  received) in the broker's and its topic's MessagesIn / BytesIn; an idempotent retry answered
  from the log is not counted again.
"""
import asyncio
import struct

from ...errors import (InvalidProducerEpochError, InvalidProducerIdMappingError, InvalidRecordError,
                       InvalidRequestError, InvalidRequiredAcksError, InvalidTopicError, InvalidTxnStateError,
                       KafkaError, NotEnoughReplicasError, ProducerFencedError, TopicAuthorizationFailedError,
                       TransactionAbortableError, TransactionalIdAuthorizationFailedError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.produce_response import (BatchIndexAndErrorMessage, PartitionProduceResponse, ProduceResponse,
                                                   TopicProduceResponse)
from ...record.layout import (ATTRIBUTES_FLAGS_BYTE, LENGTH_OFFSET, LOG_OVERHEAD, PRODUCER_EPOCH_OFFSET,
                              PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG_MASK)
from ...coordinator.txn_verification import verify_partitions
from ...storage.producer_state import AppendOrigin
from ..authorization import TOPIC, TRANSACTIONAL_ID, WRITE, authorize, authorized_names
from ..topic_store import INTERNAL_TOPICS

_LENGTH = struct.Struct(">i")
_PID = struct.Struct(">q")  # a v2 batch's producer id
_EPOCH = struct.Struct(">h")  # its producer epoch

API_KEY = ApiKey.PRODUCE
VERSIONS = (3, 11)
ADVERTISED_MIN = 0


def _needs_verification(broker, lg, records):
    """A transactional batch whose producer has no transaction open in this partition yet (at
    this epoch): the coordinator must confirm the partition is in its Ongoing transaction."""
    if not broker.config["transaction.partition.verification.enable"]:
        return False
    entry = lg.producer_state.producers.get(_PID.unpack_from(records, PRODUCER_ID_OFFSET)[0])
    return not (entry is not None and entry.current_txn_first_offset >= 0
                and entry.epoch == _EPOCH.unpack_from(records, PRODUCER_EPOCH_OFFSET)[0])


def _verification_error(code, txn_id, topic, partition, records, v):
    """The error a produce answers for the coordinator's verification ``code`` (None: go on),
    as Kafka's ReplicaManager maps them."""
    if code == 0:
        return None
    pid, epoch = _PID.unpack_from(records, PRODUCER_ID_OFFSET)[0], _EPOCH.unpack_from(records, PRODUCER_EPOCH_OFFSET)[0]
    if code == InvalidTxnStateError.code:
        return (TransactionAbortableError if v >= 11 else InvalidTxnStateError)(
            f"{topic}-{partition} is not in the ongoing transaction of producer {pid}")
    if code in (ProducerFencedError.code, InvalidProducerEpochError.code):
        return InvalidProducerEpochError(f"producer {pid} epoch {epoch} was fenced by a newer epoch")
    if code == InvalidProducerIdMappingError.code:
        return InvalidProducerIdMappingError(f"transactional id {txn_id!r} does not map to producer {pid}")
    return NotEnoughReplicasError(f"the transaction coordinator could not verify {topic}-{partition} (error {code})")


def _to_verify(broker, req):
    """{(topic, partition): records} of the request's transactional batches that need the
    coordinator's word; (producer id, epoch) of the request."""
    out, pid_epoch = {}, None
    for td in req.topic_data:
        for pd in td.partition_data:
            records = pd.records
            if (records is None or len(records) < RECORD_BATCH_OVERHEAD
                    or not records[ATTRIBUTES_FLAGS_BYTE] & TRANSACTIONAL_FLAG_MASK or td.name in INTERNAL_TOPICS):
                continue
            try:
                lg = broker.leader_log(td.name, pd.index)
            except KafkaError:
                continue  # answered by the append's own checks
            if _needs_verification(broker, lg, records):
                out[(td.name, pd.index)] = records
                pid_epoch = (_PID.unpack_from(records, PRODUCER_ID_OFFSET)[0],
                             _EPOCH.unpack_from(records, PRODUCER_EPOCH_OFFSET)[0])
    return out, pid_epoch


def _check(topic, partition, records, txn_id, v, verified):
    """The request-level checks of one partition's batch before it goes to the replica
    manager; raises the partition's error."""
    if topic in INTERNAL_TOPICS:
        raise InvalidTopicError(f"cannot append to internal topic {topic}")
    if records is None or len(records) < RECORD_BATCH_OVERHEAD:
        raise InvalidRecordError(f"produce to {topic}-{partition} carries no record batch")
    if LOG_OVERHEAD + _LENGTH.unpack_from(records, LENGTH_OFFSET)[0] < len(records):
        raise InvalidRecordError(
            f"produce to {topic}-{partition} must carry exactly one record batch (Kafka's rule for v3+)")
    transactional = bool(records[ATTRIBUTES_FLAGS_BYTE] & TRANSACTIONAL_FLAG_MASK)
    if transactional and txn_id is None:
        raise InvalidTxnStateError(f"a transactional batch for {topic}-{partition} in a request without a "
                                   "transactional id")
    if transactional and verified is not None and (topic, partition) in verified:
        err = _verification_error(verified[(topic, partition)], txn_id, topic, partition, records, v)
        if err is not None:
            raise err


def handle(ctx, req):
    broker = ctx.broker
    if req.transactional_id is not None and not authorize(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id):
        return error_response(req, ctx.api_version, TransactionalIdAuthorizationFailedError.code)
    if req.transactional_id is not None and req.acks in (0, 1, -1):
        pending, pid_epoch = _to_verify(broker, req)
        if pending:
            return _verify_then_append(ctx, req, pending, pid_epoch)
    return _handle(ctx, req, None)


async def _verify_then_append(ctx, req, pending, pid_epoch):
    """The coordinator's word first (a call to another broker on a cluster), then the appends
    (each batch is checked again against the producer state, so a marker that arrived meanwhile
    is seen)."""
    verified = await verify_partitions(ctx.broker, req.transactional_id, pid_epoch[0], pid_epoch[1], list(pending))
    response = _handle(ctx, req, verified)
    if asyncio.iscoroutine(response):
        response = await response
    return response


def _handle(ctx, req, verified):
    broker = ctx.broker
    v = ctx.api_version
    acks = req.acks
    bad_acks = acks not in (0, 1, -1)
    txn_id = req.transactional_id
    mixed = txn_id is not None and len({
        bytes(pd.records[PRODUCER_ID_OFFSET:PRODUCER_EPOCH_OFFSET]) for td in req.topic_data for pd in td.partition_data
        if pd.records is not None and len(pd.records) >= RECORD_BATCH_OVERHEAD}) > 1
    responses = []
    answers = {}  # (topic, partition) -> its PartitionProduceResponse
    writable = authorized_names(ctx, WRITE, TOPIC, [td.name for td in req.topic_data])
    entries = {}  # what passed the request's checks, for the replica manager
    for td in req.topic_data:
        parts = []
        for pd in td.partition_data:
            resp = PartitionProduceResponse(index=pd.index, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1)
            key = (td.name, pd.index)
            if bad_acks:
                resp.error_code = InvalidRequiredAcksError.code
            elif td.name not in writable:
                resp.error_code = TopicAuthorizationFailedError.code
            elif mixed:
                _fail(resp, InvalidProducerIdMappingError("a transactional request carries batches of several "
                                                          "producer ids"), v)
            elif key in answers:
                _fail(resp, InvalidRequestError(f"{td.name}-{pd.index} appears twice in the request"), v)
            else:
                try:
                    _check(td.name, pd.index, pd.records, txn_id, v, verified)
                    entries[key] = pd.records
                except KafkaError as e:
                    _fail(resp, e, v)
            answers.setdefault(key, resp)
            parts.append(resp)
        responses.append(TopicProduceResponse(name=td.name, partition_responses=parts))
    results = broker.replica_manager.append_records(entries, acks, AppendOrigin.CLIENT) if entries else {}
    metrics = broker.metrics
    waits = False
    for key, result in results.items():
        resp = answers[key]
        if result.error is not None:
            _fail(resp, result.error, v)
            continue
        info = result.info
        resp.base_offset = info.first_offset
        resp.log_append_time_ms = info.log_append_time
        resp.log_start_offset = result.log_start_offset
        if metrics is not None and not info.duplicate:
            metrics.produced(key[0], info.records, len(entries[key]))
        waits = waits or result.commit is not None
    if metrics is not None:
        for td, topic_response in zip(req.topic_data, responses):
            for pd, resp in zip(td.partition_data, topic_response.partition_responses):
                metrics.produce_request(td.name, resp.error_code, pd.records)
    if acks == 0:
        for result in results.values():
            if result.commit is not None:
                result.commit.cancel()
        return None
    if waits:
        return _delayed(broker.replica_manager, ProduceResponse(responses=responses), answers, results,
                        req.timeout_ms, v)
    return ProduceResponse(responses=responses)


def _fail(resp, e, v):
    resp.error_code = e.code
    if v >= 8:
        resp.error_message = e.message
        if isinstance(e, InvalidRecordError):
            resp.record_errors = [BatchIndexAndErrorMessage(batch_index=i, batch_index_error_message=m)
                                  for i, m in e.record_errors]


async def _delayed(replica_manager, response, answers, results, timeout_ms, v):
    """acks=-1: the answer once every partition is committed, failed or timed out (the replica
    manager's DelayedProduce)."""
    waiting = {key: r for key, r in results.items() if r.commit is not None}
    await replica_manager.wait_for_replication(waiting, timeout_ms)
    for key, result in waiting.items():
        if result.error is not None:
            resp = answers[key]
            _fail(resp, result.error, v)
            resp.base_offset = -1
    return response


def error_response(req, version, code):
    return ProduceResponse(responses=[
        TopicProduceResponse(name=td.name, partition_responses=[
            PartitionProduceResponse(index=pd.index, error_code=code, base_offset=-1) for pd in td.partition_data])
        for td in req.topic_data])
