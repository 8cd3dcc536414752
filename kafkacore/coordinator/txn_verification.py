"""KIP-890 part 1 verification (docs/transactions.md §4.3): before a partition leader appends
a producer's first transactional batch to a partition (or a group coordinator its transactional
offsets), it asks the transaction coordinator whether the partition is in the producer's
Ongoing transaction, so a late or zombie batch cannot open a transaction nobody will end.

On a single node, or when this broker coordinates the id, the answer is local; on a cluster
otherwise it is AddPartitionsToTxn v4 with ``verify_only`` to the coordinator's broker (the
leader of the id's ``__transaction_state`` partition)."""
from __future__ import annotations

import logging

from ..errors import CoordinatorNotAvailableError
from ..protocol.api_table import ApiKey
from .transaction_log import TRANSACTION_STATE_TOPIC, partition_for_transactional_id

log = logging.getLogger("kafkacore.transactions")

VERIFY_VERSION = 4
VERIFY_TIMEOUT_S = 30.0


async def verify_partitions(broker, txn_id, producer_id, producer_epoch, partitions) -> dict:
    """{(topic, partition): code}: 0 when in the Ongoing transaction, INVALID_TXN_STATE when
    not, or the coordinator's error (PRODUCER_FENCED, CONCURRENT_TRANSACTIONS, ...);
    COORDINATOR_NOT_AVAILABLE when it cannot be asked."""
    tc = broker.transaction_coordinator
    if tc.not_coordinator(txn_id) is None:
        return {tp: tc.verify_partition(txn_id, producer_id, producer_epoch, *tp) for tp in partitions}
    from ..replication.broker_channel import BrokerChannelError
    from ..protocol.messages.add_partitions_to_txn_request import (AddPartitionsToTxnRequest,
                                                                    AddPartitionsToTxnTopic,
                                                                    AddPartitionsToTxnTransaction)
    cache = broker.metadata_cache
    count = cache.partition_counts.get(TRANSACTION_STATE_TOPIC, 0)
    unavailable = dict.fromkeys(partitions, CoordinatorNotAvailableError.code)
    if not count:
        return unavailable
    node = cache.leader(TRANSACTION_STATE_TOPIC, partition_for_transactional_id(txn_id, count))
    channel = broker.channels.channel(node) if node >= 0 else None
    if channel is None:
        return unavailable
    by_topic: dict[str, list] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    req = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        transactional_id=txn_id, producer_id=producer_id, producer_epoch=producer_epoch, verify_only=True,
        topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in by_topic.items()])])
    try:
        resp = await channel.call(ApiKey.ADD_PARTITIONS_TO_TXN, VERIFY_VERSION, req, VERIFY_TIMEOUT_S)
    except BrokerChannelError as e:
        log.info("verifying %s with the coordinator of %r (broker %d) failed: %s", sorted(partitions), txn_id, node, e)
        return unavailable
    if resp.error_code:
        return dict.fromkeys(partitions, resp.error_code)
    codes = dict(unavailable)
    for result in resp.results_by_transaction:
        for t in result.topic_results:
            for p in t.results_by_partition:
                codes[(t.name, p.partition_index)] = p.partition_error_code
    return codes
