"""EndTxn (API key 26), versions 0-4: commit or abort the producer's transaction
(docs/transactions.md §3.3). Answered once PrepareCommit/PrepareAbort is written; on a single
node the markers and CompleteX are written before the answer too. v5 (KIP-890 part 2, an epoch
bump per transaction) is not served. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH for v0-1."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.end_txn_response import EndTxnResponse
from ...errors import TransactionalIdAuthorizationFailedError
from ..authorization import TRANSACTIONAL_ID, WRITE, require
from ._txn_common import NOT_AVAILABLE, fenced_for, transaction_coordinator

API_KEY = ApiKey.END_TXN
VERSIONS = (0, 4)


def handle(ctx, req):
    require(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id, TransactionalIdAuthorizationFailedError)
    tc = transaction_coordinator(ctx)
    if tc is None:
        return EndTxnResponse(error_code=NOT_AVAILABLE)

    async def run():
        code = await tc.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, bool(req.committed))
        return EndTxnResponse(error_code=fenced_for(code, ctx.api_version, 2))
    return run()


def error_response(req, version, code):
    return EndTxnResponse(error_code=code)
