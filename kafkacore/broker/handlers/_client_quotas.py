"""What DescribeClientQuotas and AlterClientQuotas share: entities as the requests name them
([(entity type, name or None for the default)]) and as kafkacore stores them (QuotaEntity)."""
from ...errors import InvalidRequestError
from ...security.client_quotas import ABSENT, CLIENT_ID, IP, USER, QuotaEntity


def entity_of_components(components) -> QuotaEntity:
    """[(entity_type, entity_name)] -> QuotaEntity; INVALID_REQUEST as Kafka words it."""
    parts = {}
    for entity_type, name in components:
        if entity_type in parts:
            raise InvalidRequestError(f"Duplicate {entity_type} entity type in the entity")
        if entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Unhandled client quota entity type: {entity_type}")
        parts[entity_type] = name
    if not parts:
        raise InvalidRequestError("Invalid empty client quota entity")
    if IP in parts:
        raise InvalidRequestError("IP connection-rate quotas are not supported by kafkacore")
    return QuotaEntity(parts.get(USER, ABSENT), parts.get(CLIENT_ID, ABSENT))


def components_of_entity(entity: QuotaEntity):
    """QuotaEntity -> [(entity_type, name or None)], users first, as Kafka lists them."""
    out = []
    if entity.user is not ABSENT:
        out.append((USER, entity.user))
    if entity.client_id is not ABSENT:
        out.append((CLIENT_ID, entity.client_id))
    return out
