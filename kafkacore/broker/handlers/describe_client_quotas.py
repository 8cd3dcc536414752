"""DescribeClientQuotas (API key 48), versions 0-1 (KIP-546): the quotas of the entities that
match a filter. Each filter component names an entity type and how to match its name: 0 the
exact name (``match``), 1 the default entity, 2 any name (the default included). ``strict``: the
entity has no other component than those filtered. No components: every entity (strict: none).
A component named twice, or a match inconsistent with its type, is INVALID_REQUEST. Read from
the metadata store, so every broker answers the same."""
from ...errors import InvalidRequestError, KafkaError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_client_quotas_response import (DescribeClientQuotasResponse, EntityData,
                                                                  EntryData, ValueData)
from ...security.client_quotas import CLIENT_ID, IP, QUOTA_KEYS, USER, entity_from_path
from ._client_quotas import components_of_entity
from ..authorization import DESCRIBE_CONFIGS, require_cluster

API_KEY = ApiKey.DESCRIBE_CLIENT_QUOTAS
VERSIONS = (0, 1)
MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2


def handle(ctx, req):
    require_cluster(ctx, DESCRIBE_CONFIGS)
    return ctx.broker.topic_store_call(_respond, ctx.broker.cluster.config_manager, req)


def _filter(req):
    wanted = {}
    for c in req.components:
        if c.entity_type in wanted:
            raise InvalidRequestError(f"Duplicate {c.entity_type} filter component entity type")
        if c.entity_type not in (USER, CLIENT_ID, IP):
            raise InvalidRequestError(f"Custom entity type {c.entity_type!r} not supported")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise InvalidRequestError(f"{c.entity_type}: an exact match needs a name")
        if c.match_type in (MATCH_DEFAULT, MATCH_ANY) and c.match is not None:
            raise InvalidRequestError(f"{c.entity_type}: a default or any-name match takes no name")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise InvalidRequestError(f"Unexpected match type {c.match_type}")
        wanted[c.entity_type] = (c.match_type, c.match)
    return wanted


def _matches(components, wanted, strict):
    have = dict(components)
    if strict and set(have) != set(wanted):
        return False
    for entity_type, (match_type, match) in wanted.items():
        if entity_type not in have:
            return False
        name = have[entity_type]
        if match_type == MATCH_EXACT and name != match or match_type == MATCH_DEFAULT and name is not None:
            return False
    return True


def _respond(config_manager, req):
    try:
        wanted = _filter(req)
        entries = []
        for entity_type, name in config_manager.quota_entity_paths():
            entity = entity_from_path(entity_type, name)
            if entity is None:
                continue
            components = components_of_entity(entity)
            if not _matches(components, wanted, req.strict):
                continue
            configs = config_manager.quota_entity_configs(entity)
            values = [ValueData(key=k, value=float(configs[k])) for k in QUOTA_KEYS if k in configs]
            if values:
                entries.append(EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in components],
                                         values=values))
        return DescribeClientQuotasResponse(entries=entries)
    except (KafkaError, ValueError) as e:
        code = e.code if isinstance(e, KafkaError) else InvalidRequestError.code
        return DescribeClientQuotasResponse(error_code=code, error_message=getattr(e, "message", str(e)), entries=None)


def error_response(req, version, code):
    return DescribeClientQuotasResponse(error_code=code, entries=None)
