"""DescribeAcls (API key 29), versions 1-3 (Kafka 4 dropped 0): the ACLs a filter matches, grouped
by resource pattern, from this broker's authorizer (kept current from the metadata store by
kafkacore/cluster/acl_store.py). Kafka's filter semantics (security/acl.py): ANY, MATCH, a null
name/principal/host matching any. Without an authorizer: SECURITY_DISABLED; a filter with
UNKNOWN values: INVALID_REQUEST (Kafka refuses it while parsing the request)."""
from ...errors import InvalidRequestError
from ...protocol.api_table import ApiKey
from ...protocol.messages.describe_acls_response import AclDescription, DescribeAclsResource, DescribeAclsResponse
from ._acls import NO_AUTHORIZER, filter_of

API_KEY = ApiKey.DESCRIBE_ACLS
VERSIONS = (1, 3)


def handle(ctx, req):
    authorizer = ctx.broker.authorizer
    if authorizer is None:
        return error_response(req, None, NO_AUTHORIZER.code, NO_AUTHORIZER.message)
    binding_filter = filter_of(req)
    if binding_filter.is_unknown:
        return error_response(req, None, InvalidRequestError.code, "Filter contain UNKNOWN elements")
    by_pattern: dict = {}
    for binding in authorizer.acls(binding_filter):
        by_pattern.setdefault(binding.pattern, []).append(binding.entry)
    return DescribeAclsResponse(error_code=0, error_message=None, resources=[
        DescribeAclsResource(resource_type=int(p.resource_type), resource_name=p.name, pattern_type=int(p.pattern_type),
                             acls=[AclDescription(principal=e.principal, host=e.host, operation=int(e.operation),
                                                  permission_type=int(e.permission_type)) for e in entries])
        for p, entries in by_pattern.items()])


def error_response(req, version, code, message=None):
    return DescribeAclsResponse(error_code=code, error_message=message, resources=[])
