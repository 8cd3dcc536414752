"""TxnOffsetCommit (API key 28), versions 0-4: a transactional producer commits a consumer
group's offsets inside its transaction (docs/transactions.md §2.5, §5). The offsets are written
to the group's __consumer_offsets partition as a transactional batch of the producer and count
only once its COMMIT marker lands there (an ABORT drops them).

Checks, in order: the group's partition must be in the producer's Ongoing transaction
(AddOffsetsToTxn; KIP-890 verification: INVALID_TXN_STATE, TRANSACTION_ABORTABLE for v4);
unknown producer id: INVALID_PRODUCER_ID_MAPPING; an old epoch: INVALID_PRODUCER_EPOCH; then the
group checks of v3+ (member id, generation, group.instance.id) as Kafka's
handleTxnCommitOffsets, and per partition UNKNOWN_TOPIC_OR_PARTITION /
OFFSET_METADATA_TOO_LARGE.
"""
import asyncio

from ...clock import wall_ms
from ...coordinator.offset_store import make_offset
from ...coordinator.txn_verification import verify_partitions
from ...errors import (GroupAuthorizationFailedError, InvalidProducerEpochError, InvalidTxnStateError,
                       ProducerFencedError, TopicAuthorizationFailedError, TransactionAbortableError,
                       TransactionalIdAuthorizationFailedError)
from ...protocol.api_table import ApiKey
from ...protocol.messages.txn_offset_commit_response import (TxnOffsetCommitResponse, TxnOffsetCommitResponsePartition,
                                                             TxnOffsetCommitResponseTopic)
from ..authorization import GROUP, READ, TOPIC, TRANSACTIONAL_ID, WRITE, authorized_names, require
from ._group_common import coordinator
from ._txn_common import NOT_AVAILABLE, transaction_coordinator

API_KEY = ApiKey.TXN_OFFSET_COMMIT
VERSIONS = (0, 4)


def _verification_code(ctx, code):
    if code == ProducerFencedError.code:
        return InvalidProducerEpochError.code
    if code == InvalidTxnStateError.code and ctx.api_version >= 4:
        return TransactionAbortableError.code
    return code


def handle(ctx, req):
    v = ctx.api_version
    require(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id, TransactionalIdAuthorizationFailedError)
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    readable = authorized_names(ctx, READ, TOPIC, [t.name for t in req.topics])
    tc = transaction_coordinator(ctx)
    if tc is None:
        return error_response(req, v, NOT_AVAILABLE)
    gc = coordinator(ctx)
    if not readable and req.topics:  # nothing the principal may commit: no coordinator involved (Kafka's)
        return _response({(t.name, p.partition_index): TopicAuthorizationFailedError.code
                          for t in req.topics for p in t.partitions}, req)

    async def run():
        tp = (gc.store.topic, gc.store.partition_for(req.group_id))
        codes = await verify_partitions(ctx.broker, req.transactional_id, req.producer_id, req.producer_epoch, [tp])
        code = _verification_code(ctx, codes[tp])
        if code:
            return error_response(req, v, code)
        now = wall_ms()
        offsets = {(t.name, p.partition_index): make_offset(p.committed_offset,
                                                            p.committed_leader_epoch if v >= 2 else -1,
                                                            p.committed_metadata, now, None)
                   for t in req.topics if t.name in readable for p in t.partitions}
        denied = {(t.name, p.partition_index): TopicAuthorizationFailedError.code
                  for t in req.topics if t.name not in readable for p in t.partitions}
        errors = gc.commit_txn_offsets(req.group_id, req.producer_id, req.producer_epoch,
                                       req.member_id if v >= 3 else "", req.group_instance_id if v >= 3 else None,
                                       req.generation_id if v >= 3 else -1, offsets)
        if asyncio.isfuture(errors):
            errors = await errors
        return _response({**errors, **denied}, req)
    return run()


def _response(errors, req):
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                             error_code=errors.get((t.name, p.partition_index), 0))
            for p in t.partitions])
        for t in req.topics])


def error_response(req, version, code):
    return TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponseTopic(name=t.name, partitions=[
            TxnOffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
            for p in t.partitions])
        for t in req.topics])
