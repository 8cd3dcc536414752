"""ListTransactions (API key 66), versions 0-1: this coordinator's transactional ids, filtered
by state names (unknown names are returned in ``unknown_state_filters``), producer ids and
(v1) a minimum duration of the open transaction."""
from ...coordinator.transaction_metadata import TxnState
from ...protocol.api_table import ApiKey
from ...protocol.messages.list_transactions_response import ListTransactionsResponse, TransactionState
from ..authorization import DESCRIBE, TRANSACTIONAL_ID, authorized_names
from ._txn_common import NOT_AVAILABLE, transaction_coordinator

API_KEY = ApiKey.LIST_TRANSACTIONS
VERSIONS = (0, 1)
_KNOWN = {s.kafka_name for s in TxnState}


def handle(ctx, req):
    tc = transaction_coordinator(ctx)
    if tc is None:
        return ListTransactionsResponse(error_code=NOT_AVAILABLE)
    unknown = [s for s in req.state_filters if s not in _KNOWN]
    wanted = [s for s in req.state_filters if s in _KNOWN]
    if req.state_filters and not wanted:
        return ListTransactionsResponse(unknown_state_filters=unknown)
    duration = req.duration_filter if ctx.api_version >= 1 else -1
    found = tc.list(wanted, set(req.producer_id_filters), duration)
    visible = authorized_names(ctx, DESCRIBE, TRANSACTIONAL_ID, [md.transactional_id for md in found])
    found = [md for md in found if md.transactional_id in visible]
    return ListTransactionsResponse(unknown_state_filters=unknown, transaction_states=[
        TransactionState(transactional_id=md.transactional_id, producer_id=md.producer_id,
                         transaction_state=md.state.kafka_name) for md in found])


def error_response(req, version, code):
    return ListTransactionsResponse(error_code=code)
