"""AlterClientQuotas (API key 49), versions 0-1 (KIP-546): set or remove quotas of users,
client ids and users' client ids (a null name: the default entity of that kind). Written to the
entity's config in the metadata store with a change notification (Kafka's ZooKeeper layout), so
every broker enforces it at once; other keys of the entity (a user's SCRAM credentials) are kept.

Refused per entry with INVALID_REQUEST, nothing of that entry applied, as Kafka does: an unknown
entity type or one named twice, an ``ip`` entity (connection-rate quotas are not supported), a
key that is not a client quota, a key named twice, a byte rate that is not a whole number above
0, another quota not above 0. ``validate_only`` checks without writing."""
import logging

from ...errors import InvalidRequestError, KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.alter_client_quotas_response import AlterClientQuotasResponse, EntityData, EntryData
from ...security.client_quotas import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, QUOTA_KEYS
from ._client_quotas import entity_of_components
from ..authorization import ALTER_CONFIGS, require_cluster

API_KEY = ApiKey.ALTER_CLIENT_QUOTAS
VERSIONS = (0, 1)
log = logging.getLogger("kafkacore.broker")


def handle(ctx, req):
    require_cluster(ctx, ALTER_CONFIGS)
    return ctx.broker.topic_store_call(_respond, ctx.broker.cluster.config_manager, req)


def _value_text(key, value):
    if value is None or value != value or value <= 0:  # (NaN too)
        raise InvalidRequestError(f"Invalid value {value} for {key}: must be above 0")
    if key in (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE):
        if value != int(value):
            raise InvalidRequestError(f"Invalid value {value} for {key}: a number of bytes per second is whole")
        return str(int(value))
    return repr(float(value))


def _alter(config_manager, entry, validate_only):
    entity = entity_of_components([(e.entity_type, e.entity_name) for e in entry.entity])
    keys = [op.key for op in entry.ops]
    if len(set(keys)) != len(keys):
        raise InvalidRequestError("Duplicate quota key in the entry")
    changes = {}
    for op in entry.ops:
        if op.key not in QUOTA_KEYS:
            raise InvalidRequestError(f"Invalid configuration key {op.key} (client quotas: {', '.join(QUOTA_KEYS)})")
        changes[op.key] = None if op.remove else _value_text(op.key, op.value)
    if validate_only:
        return
    configs = dict(config_manager.quota_entity_configs(entity))
    for key, text in changes.items():
        if text is None:
            configs.pop(key, None)
        else:
            configs[key] = text
    config_manager.set_quota_entity_configs(entity, configs)
    log.info("client quotas of %s: %s", [(e.entity_type, e.entity_name) for e in entry.entity],
             {k: v for k, v in changes.items()})


def _respond(config_manager, req):
    entries = []
    for entry in req.entries:
        echo = [EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity]
        try:
            _alter(config_manager, entry, req.validate_only)
            entries.append(EntryData(error_message=None, entity=echo))  # null on success, as Kafka sends
        except KafkaError as e:
            entries.append(EntryData(error_code=e.code, error_message=e.message, entity=echo))
    return AlterClientQuotasResponse(entries=entries)


def error_response(req, version, code):
    return AlterClientQuotasResponse(entries=[EntryData(error_code=code, entity=[
        EntityData(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])
