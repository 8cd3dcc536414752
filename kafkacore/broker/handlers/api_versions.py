"""ApiVersions (API key 18), versions 0-4.

Lists every API in the handler table with the versions served (Produce from 0: see
handlers/produce.py); the inter-broker APIs only on a broker of a ZooKeeper cluster. A request for a version above 4 is answered by the network layer in v0
with UNSUPPORTED_VERSION and this same list, as Kafka does; the client retries at a version it
finds there. v3+ requests carry the client's software name and version, which Kafka validates
(letters, digits, '.', '-', starting and ending alphanumeric): INVALID_REQUEST otherwise.
"""
import re

from ...protocol.api_table import ApiKey
from ...protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from ..config import served_group_protocols

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)
_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def response(error_code=0, throttle_time_ms=0, clustered=False, group_protocols=None):
    """``group_protocols``: group.coordinator.rebalance.protocols (None: every one)."""
    from . import HANDLERS

    keys = [ApiVersion(api_key=e.api_key, min_version=e.advertised_min, max_version=e.max_version)
            for e in sorted(HANDLERS.values(), key=lambda e: e.api_key) if (clustered or not e.cluster_only)
            and (e.group_protocol is None or group_protocols is None or e.group_protocol in group_protocols)]
    return ApiVersionsResponse(error_code=error_code, api_keys=keys, throttle_time_ms=throttle_time_ms)


def handle(ctx, req):
    clustered = ctx.broker.cluster.serves_inter_broker_apis
    protocols = served_group_protocols(ctx.broker.config)
    if ctx.api_version >= 3 and not (_SOFTWARE.match(req.client_software_name)
                                     and _SOFTWARE.match(req.client_software_version)):
        return response(error_code=42, clustered=clustered, group_protocols=protocols)  # INVALID_REQUEST
    return response(clustered=clustered, group_protocols=protocols)


def error_response(req, version, code):
    return response(error_code=code)
