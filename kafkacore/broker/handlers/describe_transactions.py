"""DescribeTransactions (API key 65), version 0: per transactional id its state, timeout, start
time, producer id and epoch and partitions; TRANSACTIONAL_ID_NOT_FOUND for an unknown id."""
from ...errors import TransactionalIdAuthorizationFailedError, TransactionalIdNotFoundError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_transactions_response import (DescribeTransactionsResponse, TopicData,
                                                                 TransactionState)
from ..authorization import DESCRIBE, TOPIC, TRANSACTIONAL_ID, authorize, authorized_names
from ._txn_common import NOT_AVAILABLE, transaction_coordinator

API_KEY = ApiKey.DESCRIBE_TRANSACTIONS
VERSIONS = (0, 0)


def handle(ctx, req):
    tc = transaction_coordinator(ctx)
    states = []
    for txn_id in req.transactional_ids:
        if not authorize(ctx, DESCRIBE, TRANSACTIONAL_ID, txn_id):
            states.append(TransactionState(error_code=TransactionalIdAuthorizationFailedError.code,
                                           transactional_id=txn_id))
            continue
        if tc is None:
            states.append(TransactionState(error_code=NOT_AVAILABLE, transactional_id=txn_id))
            continue
        md = tc.describe(txn_id)
        if md is None:
            states.append(TransactionState(error_code=TransactionalIdNotFoundError.code, transactional_id=txn_id))
            continue
        by_topic = {}
        describable = authorized_names(ctx, DESCRIBE, TOPIC, {topic for topic, _p in md.partitions})
        for topic, p in sorted(tp for tp in md.partitions if tp[0] in describable):
            by_topic.setdefault(topic, []).append(p)
        states.append(TransactionState(
            transactional_id=txn_id, transaction_state=md.state.kafka_name, transaction_timeout_ms=md.txn_timeout_ms,
            transaction_start_time_ms=md.txn_start_ms, producer_id=md.producer_id, producer_epoch=md.producer_epoch,
            topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(transaction_states=states)


def error_response(req, version, code):
    return DescribeTransactionsResponse(transaction_states=[
        TransactionState(error_code=code, transactional_id=t) for t in req.transactional_ids])
