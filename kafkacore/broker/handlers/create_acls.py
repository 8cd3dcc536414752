"""CreateAcls (API key 30), versions 1-3 (Kafka 4 dropped 0): adds ACLs, each answered on its own
(an ACL already there is created again: nothing changes). Without an authorizer every creation is
SECURITY_DISABLED; an invalid one is INVALID_REQUEST with Kafka's message (the CLUSTER resource
named other than kafka-cluster, an empty name, ANY/MATCH/UNKNOWN values, a principal without
``Type:``). Written to the metadata store by kafkacore/cluster/acl_store.py, which every broker's
authorizer follows."""
from ...protocol.api_table import ApiKey
from ...protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse
from ._acls import alter_acls, binding_of

API_KEY = ApiKey.CREATE_ACLS
VERSIONS = (1, 3)


def handle(ctx, req):
    return alter_acls(ctx, req, _respond, error_response)


def _result(error):
    if error is None:
        return AclCreationResult(error_code=0, error_message=None)
    return AclCreationResult(error_code=error.code, error_message=error.message)


def _respond(store, req):
    bindings = [binding_of(c) for c in req.creations]
    return CreateAclsResponse(results=[_result(e) for e in store.create_acls(bindings)])


def error_response(req, version, code, message=None):
    return CreateAclsResponse(results=[AclCreationResult(error_code=code, error_message=message)
                                       for _c in req.creations])

