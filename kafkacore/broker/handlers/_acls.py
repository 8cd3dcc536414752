"""What the ACL APIs share (CreateAcls, DescribeAcls, DeleteAcls): the wire fields as Kafka's ACL
model (kafkacore/security/acl.py), and Kafka's answer without an authorizer."""
from ...errors import SecurityDisabledError
from ...security.acl import (AccessControlEntry, AccessControlEntryFilter, AclBinding, AclBindingFilter,
                             AclOperation, AclPermissionType, PatternType, ResourcePattern, ResourcePatternFilter,
                             ResourceType)

from ..authorization import ALTER, require_cluster

# Kafka's KafkaApis/AclApis message when authorizer.class.name is not set
NO_AUTHORIZER = SecurityDisabledError("No Authorizer is configured.")


def binding_of(creation) -> AclBinding:
    return AclBinding(
        ResourcePattern(ResourceType.from_code(creation.resource_type), creation.resource_name,
                        PatternType.from_code(creation.resource_pattern_type)),
        AccessControlEntry(creation.principal, creation.host, AclOperation.from_code(creation.operation),
                           AclPermissionType.from_code(creation.permission_type)))


def filter_of(f) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter (the same fields)."""
    return AclBindingFilter(
        ResourcePatternFilter(ResourceType.from_code(f.resource_type_filter), f.resource_name_filter,
                              PatternType.from_code(f.pattern_type_filter)),
        AccessControlEntryFilter(f.principal_filter, f.host_filter, AclOperation.from_code(f.operation),
                                 AclPermissionType.from_code(f.permission_type)))


def acl_store(ctx):
    """The broker's ACL store, None without an authorizer."""
    if ctx.broker.authorizer is None:
        return None
    return ctx.broker.cluster.acl_store


def alter_acls(ctx, req, respond, error_response):
    """CreateAcls and DeleteAcls: ALTER on the cluster, then ``respond(store, req)`` through the
    topic store's thread (the store's writes are metadata-store round trips); without an
    authorizer every entry is SECURITY_DISABLED."""
    require_cluster(ctx, ALTER)
    store = acl_store(ctx)
    if store is None:
        return error_response(req, None, NO_AUTHORIZER.code, NO_AUTHORIZER.message)
    return ctx.broker.topic_store_call(respond, store, req)
