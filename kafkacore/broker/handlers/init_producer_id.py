"""InitProducerId (API key 22), versions 0-5.

Idempotent producers (no transactional id) get a new producer id with epoch 0 from the
ProducerIdManager (never reused, across restarts too). A producer that sends its current id and
epoch (v3+, KIP-360: recovering after an error) gets the same id with the epoch bumped; at the
maximum epoch it gets a new id. Transactional ids are refused with INVALID_REQUEST: this broker
has no transaction coordinator.
"""
import logging

from ...protocol.messages.init_producer_id_response import InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)
INVALID_REQUEST = 42
MAX_EPOCH = 32767
log = logging.getLogger("kafkacore.broker")


def handle(ctx, req):
    if req.transactional_id is not None:
        log.info("client %s asked for transactional id %r: transactions are not supported", ctx.client_id,
                 req.transactional_id)
        return InitProducerIdResponse(error_code=INVALID_REQUEST)
    ids = ctx.broker.producer_ids
    if ctx.api_version >= 3 and req.producer_id >= 0 and req.producer_epoch >= 0:
        if req.producer_epoch + 1 < MAX_EPOCH:
            return InitProducerIdResponse(producer_id=req.producer_id, producer_epoch=req.producer_epoch + 1)
    return InitProducerIdResponse(producer_id=ids.next_id(), producer_epoch=0)


def error_response(req, version, code):
    return InitProducerIdResponse(error_code=code)
