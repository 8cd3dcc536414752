"""DeleteAcls (API key 31), versions 1-3 (Kafka 4 dropped 0): deletes the ACLs each filter
matches and answers, per filter, the bindings it deleted (Kafka's filter semantics, see
security/acl.py; every filter sees the ACLs as they were before the request). A filter with
UNKNOWN values is INVALID_REQUEST (Kafka's "Unknown patternFilter." / "Unknown entryFilter.");
without an authorizer every filter is SECURITY_DISABLED. Written to the metadata store by
kafkacore/cluster/acl_store.py, which every broker's authorizer follows."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.delete_acls_response import (DeleteAclsFilterResult, DeleteAclsMatchingAcl,
                                                       DeleteAclsResponse)
from ._acls import alter_acls, filter_of

API_KEY = ApiKey.DELETE_ACLS
VERSIONS = (1, 3)


def handle(ctx, req):
    return alter_acls(ctx, req, _respond, error_response)


def _matching(binding):
    p, e = binding
    return DeleteAclsMatchingAcl(error_code=0, error_message=None, resource_type=int(p.resource_type),
                                 resource_name=p.name, pattern_type=int(p.pattern_type), principal=e.principal,
                                 host=e.host, operation=int(e.operation), permission_type=int(e.permission_type))


def _respond(store, req):
    results = []
    for error, deleted in store.delete_acls([filter_of(f) for f in req.filters]):
        if error is not None:
            results.append(DeleteAclsFilterResult(error_code=error.code, error_message=error.message, matching_acls=[]))
        else:
            results.append(DeleteAclsFilterResult(error_code=0, error_message=None,
                                                  matching_acls=[_matching(b) for b in deleted]))
    return DeleteAclsResponse(filter_results=results)


def error_response(req, version, code, message=None):
    return DeleteAclsResponse(filter_results=[DeleteAclsFilterResult(error_code=code, error_message=message,
                                                                     matching_acls=[]) for _f in req.filters])
