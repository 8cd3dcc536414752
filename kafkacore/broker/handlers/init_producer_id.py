"""InitProducerId (API key 22), versions 0-5.

Idempotent producers (no transactional id) get a new producer id with epoch 0 from the
ProducerIdManager (never reused, across restarts too). A producer that sends its current id and
epoch (v3+, KIP-360: recovering after an error) gets the same id with the epoch bumped; at the
maximum epoch it gets a new id. Transactional producers go to the transaction coordinator
(docs/transactions.md §3.3): a new id or epoch, fencing of the previous instance. PRODUCER_FENCED
is INVALID_PRODUCER_EPOCH for v0-3, as Kafka answers them.
"""
import logging

from ...protocol.api_table import ApiKey
from ...protocol.messages.init_producer_id_response import InitProducerIdResponse
from ...errors import ClusterAuthorizationFailedError, TransactionalIdAuthorizationFailedError
from ..authorization import (IDEMPOTENT_WRITE, TOPIC, TRANSACTIONAL_ID, WRITE, authorize_by_resource_type,
                             authorize_cluster, require)
from ._txn_common import NOT_AVAILABLE, fenced_for, transaction_coordinator

API_KEY = ApiKey.INIT_PRODUCER_ID
VERSIONS = (0, 5)
MAX_EPOCH = 32767
log = logging.getLogger("kafkacore.broker")


def handle(ctx, req):
    # Kafka's checks: WRITE on the transactional id; an idempotent producer IDEMPOTENT_WRITE on
    # the cluster or WRITE on some topic (KIP-679)
    if req.transactional_id is not None:
        require(ctx, WRITE, TRANSACTIONAL_ID, req.transactional_id, TransactionalIdAuthorizationFailedError)
    elif not (authorize_cluster(ctx, IDEMPOTENT_WRITE) or authorize_by_resource_type(ctx, WRITE, TOPIC)):
        raise ClusterAuthorizationFailedError("not authorized to produce idempotently")
    if req.transactional_id is not None:
        tc = transaction_coordinator(ctx)
        if tc is None:
            return InitProducerIdResponse(error_code=NOT_AVAILABLE)
        pid, epoch = (req.producer_id, req.producer_epoch) if ctx.api_version >= 3 else (-1, -1)

        async def run():
            code, new_pid, new_epoch = await tc.init_producer_id(req.transactional_id, req.transaction_timeout_ms,
                                                                 pid, epoch)
            return InitProducerIdResponse(error_code=fenced_for(code, ctx.api_version, 4), producer_id=new_pid,
                                          producer_epoch=new_epoch)
        return run()
    ids = ctx.broker.producer_ids
    if ctx.api_version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0:
        if req.producer_epoch + 1 < MAX_EPOCH:
            return InitProducerIdResponse(producer_id=req.producer_id, producer_epoch=req.producer_epoch + 1)
    return InitProducerIdResponse(producer_id=ids.next_id(), producer_epoch=0)


def error_response(req, version, code):
    return InitProducerIdResponse(error_code=code)
