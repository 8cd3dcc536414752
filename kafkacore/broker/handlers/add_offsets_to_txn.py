"""AddOffsetsToTxn (API key 25), versions 0-4: the consumer group's ``__consumer_offsets``
partition joins the transaction, so its offsets (TxnOffsetCommit) commit or abort with it. The
topic is created if missing, so the marker has a destination. PRODUCER_FENCED is
INVALID_PRODUCER_EPOCH for v0-1."""
from ...errors import GroupAuthorizationFailedError, InvalidRequestError, TransactionalIdAuthorizationFailedError
from ...protocol.api_table import ApiKey
from ...protocol.messages.add_offsets_to_txn_response import AddOffsetsToTxnResponse
from ..authorization import GROUP, READ, TRANSACTIONAL_ID, WRITE, require
from ._group_common import coordinator
from ._txn_common import NOT_AVAILABLE, fenced_for, transaction_coordinator

API_KEY = ApiKey.ADD_OFFSETS_TO_TXN
VERSIONS = (0, 4)


def handle(ctx, req):
    require(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id, TransactionalIdAuthorizationFailedError)
    require(ctx, READ, GROUP, req.group_id, GroupAuthorizationFailedError)
    tc = transaction_coordinator(ctx)
    if tc is None:
        return AddOffsetsToTxnResponse(error_code=NOT_AVAILABLE)
    if not req.group_id:
        return AddOffsetsToTxnResponse(error_code=InvalidRequestError.code)
    store = coordinator(ctx).store
    store.ensure_topic()
    tp = (store.topic, store.partition_for(req.group_id))

    async def run():
        code = await tc.add_partitions(req.transactional_id, req.producer_id, req.producer_epoch, [tp])
        return AddOffsetsToTxnResponse(error_code=fenced_for(code, ctx.api_version, 2))
    return run()


def error_response(req, version, code):
    return AddOffsetsToTxnResponse(error_code=code)
