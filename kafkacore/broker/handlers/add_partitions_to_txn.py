"""AddPartitionsToTxn (API key 24), versions 0-5 (docs/transactions.md §3.3).

v0-3 (clients) carry one transaction in the ``v3_and_below_*`` fields; v4-5 carry a batch of
transactions, each of which may be ``verify_only`` (KIP-890 part 1: a partition leader asking
whether a partition is in the producer's Ongoing transaction; nothing is added). Every
partition is checked first: one that does not exist is UNKNOWN_TOPIC_OR_PARTITION and the
transaction's other partitions OPERATION_NOT_ATTEMPTED, nothing added. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH for v0-1; TRANSACTION_ABORTABLE (unverified, v5) is INVALID_TXN_STATE
below v5.
"""
import asyncio

from ...errors import (ClusterAuthorizationFailedError, InvalidTxnStateError, OperationNotAttemptedError,
                       TopicAuthorizationFailedError, TransactionAbortableError,
                       TransactionalIdAuthorizationFailedError, UnknownTopicOrPartitionError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.add_partitions_to_txn_response import (AddPartitionsToTxnPartitionResult,
                                                                 AddPartitionsToTxnResponse, AddPartitionsToTxnResult,
                                                                 AddPartitionsToTxnTopicResult)
from ..authorization import (CLUSTER_ACTION, TOPIC, TRANSACTIONAL_ID, WRITE, authorize, authorize_cluster,
                             authorized_names)
from ._txn_common import NOT_AVAILABLE, fenced_for, transaction_coordinator

API_KEY = ApiKey.ADD_PARTITIONS_TO_TXN
VERSIONS = (0, 5)


def _partitions(topics):
    return [(t.name, p) for t in topics for p in t.partitions]


def _results(codes):
    by_topic = {}
    for (topic, p), code in codes.items():
        by_topic.setdefault(topic, []).append(AddPartitionsToTxnPartitionResult(partition_index=p,
                                                                                partition_error_code=code))
    return [AddPartitionsToTxnTopicResult(name=t, results_by_partition=rs) for t, rs in by_topic.items()]


async def _one(ctx, tc, txn_id, pid, epoch, topics, verify_only, v):
    parts = _partitions(topics)
    if not authorize(ctx, WRITE, TRANSACTIONAL_ID, txn_id):
        return {tp: TransactionalIdAuthorizationFailedError.code for tp in parts}
    writable = authorized_names(ctx, WRITE, TOPIC, {topic for topic, _p in parts})
    if any(topic not in writable for topic, _p in parts):
        return {tp: (TopicAuthorizationFailedError.code if tp[0] not in writable else OperationNotAttemptedError.code)
                for tp in parts}
    missing = {tp for tp in parts if not _exists(ctx.broker, *tp)}
    if missing:
        return {tp: (UnknownTopicOrPartitionError.code if tp in missing else OperationNotAttemptedError.code)
                for tp in parts}
    if verify_only:
        out = {}
        for tp in parts:
            code = tc.verify_partition(txn_id, pid, epoch, *tp)
            if code == InvalidTxnStateError.code:
                code = TransactionAbortableError.code if v >= 5 else InvalidTxnStateError.code
            out[tp] = fenced_for(code, v, 2)
        return out
    code = fenced_for(await tc.add_partitions(txn_id, pid, epoch, parts), v, 2)
    return {tp: code for tp in parts}


def _exists(broker, topic, partition):
    info = broker.topic(topic)
    return info is not None and 0 <= partition < info.partitions


def handle(ctx, req):
    v = ctx.api_version
    tc = transaction_coordinator(ctx)
    if v < 4:
        parts = _partitions(req.v3_and_below_topics)
        if tc is None:
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results({tp: NOT_AVAILABLE for tp in parts}))

        async def run_v3():
            codes = await _one(ctx, tc, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                               req.v3_and_below_producer_epoch, req.v3_and_below_topics, False, v)
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(codes))
        return run_v3()
    if tc is None:
        return AddPartitionsToTxnResponse(error_code=NOT_AVAILABLE)
    if not authorize_cluster(ctx, CLUSTER_ACTION):  # v4+ is a broker's request (KIP-890)
        return AddPartitionsToTxnResponse(error_code=ClusterAuthorizationFailedError.code)

    async def run_batch():
        results = await asyncio.gather(*(
            _one(ctx, tc, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only, v)
            for t in req.transactions))
        return AddPartitionsToTxnResponse(results_by_transaction=[
            AddPartitionsToTxnResult(transactional_id=t.transactional_id, topic_results=_results(codes))
            for t, codes in zip(req.transactions, results)])
    return run_batch()


def error_response(req, version, code):
    if version < 4:
        return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_results(
            {tp: code for tp in _partitions(req.v3_and_below_topics)}))
    return AddPartitionsToTxnResponse(error_code=code)
