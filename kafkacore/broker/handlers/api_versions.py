"""ApiVersions (API key 18), versions 0-4.

Lists every API in the handler table with the versions served (Produce from 0: see
handlers/produce.py); the inter-broker APIs only on a broker of a ZooKeeper cluster. A request for a version above 4 is answered by the network layer in v0
with UNSUPPORTED_VERSION and this same list, as Kafka does; the client retries at a version it
finds there. v3+ requests carry the client's software name and version, which Kafka validates
(letters, digits, '.', '-', starting and ending alphanumeric): INVALID_REQUEST otherwise.

Feature levels (v3+, KIP-584's SupportedFeatures / FinalizedFeatures): the group protocols this
broker serves, under Kafka 4's feature names: `group.version` 1 while the KIP-848 consumer
protocol is served (Kafka's GroupVersion GV_1), `share.version` 1 while share groups are
(Kafka's ShareVersion SV_1, KIP-932). A feature not served is neither supported nor finalized.
v3 answers a supported range from 1: before v4 (KAFKA-17011) a minimum of 0 broke clients.
"""
import re

from ...protocol.api_table import ApiKey
from ...protocol.messages.api_versions_response import (ApiVersion, ApiVersionsResponse, FinalizedFeatureKey,
                                                        SupportedFeatureKey)
from ..config import served_group_protocols

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


# feature name -> the group protocol whose service it announces (level 1 of each)
GROUP_FEATURES = {"group.version": "consumer", "share.version": "share"}


def response(error_code=0, throttle_time_ms=0, clustered=False, group_protocols=None, version=4):
    """``group_protocols``: group.coordinator.rebalance.protocols (None: every one)."""
    from . import HANDLERS, served

    keys = [ApiVersion(api_key=e.api_key, min_version=e.advertised_min, max_version=e.max_version)
            for e in sorted(HANDLERS.values(), key=lambda e: e.api_key) if served(e, clustered, group_protocols)]
    features = [name for name, protocol in GROUP_FEATURES.items()
                if group_protocols is None or protocol in group_protocols]
    return ApiVersionsResponse(
        error_code=error_code, api_keys=keys, throttle_time_ms=throttle_time_ms,
        supported_features=[SupportedFeatureKey(name=n, min_version=0 if version >= 4 else 1, max_version=1)
                            for n in features],
        finalized_features_epoch=0 if features else -1,
        finalized_features=[FinalizedFeatureKey(name=n, min_version_level=1, max_version_level=1) for n in features])


def handle(ctx, req):
    clustered = ctx.broker.cluster.serves_inter_broker_apis
    protocols = served_group_protocols(ctx.broker.config)
    if ctx.api_version >= 3 and not (_SOFTWARE.match(req.client_software_name)
                                     and _SOFTWARE.match(req.client_software_version)):
        return response(error_code=42, clustered=clustered, group_protocols=protocols,  # INVALID_REQUEST
                        version=ctx.api_version)
    return response(clustered=clustered, group_protocols=protocols, version=ctx.api_version)


def error_response(req, version, code):
    return response(error_code=code)
