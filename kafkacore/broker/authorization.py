"""What a request may do: the checks every handler makes with the request's principal and host
(Kafka's AuthHelper). Without ``authorizer.class.name`` every check passes at the cost of one
attribute read, and a broker's requests to itself (broker/local_channel.py) are always allowed:
they are the broker's own work, as the inter-broker principal's are in Kafka.

The authorized-operations fields (Metadata, DescribeCluster, DescribeGroups) are Kafka's bit
fields: with an authorizer the supported operations the principal is allowed, without one every
supported operation (AuthHelper.authorizedOperations)."""
from __future__ import annotations

from ..errors import ClusterAuthorizationFailedError
from ..security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType, to_bit_field

# Kafka's "not requested" value of an authorized-operations field (Integer.MIN_VALUE)
UNSET_OPERATIONS = -2147483648
_ALL_SUPPORTED = {rtype: to_bit_field(ops) for rtype, ops in SUPPORTED_OPERATIONS.items()}

READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                                                AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE)
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = (
    AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    AclOperation.IDEMPOTENT_WRITE)
TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER,
                                          ResourceType.TRANSACTIONAL_ID)


def _authorizer(ctx):
    """The authorizer that judges this request: None when every request is allowed."""
    authorizer = ctx.broker.authorizer
    if authorizer is None or ctx.trusted:
        return None
    return authorizer


def host_of(ctx) -> str:
    """The client's address without its port, as an ACL's host names it."""
    return ctx.client_host.rpartition(":")[0] or ctx.client_host


def acl_identity(ctx):
    """(principal, host) the authorizer judges this request's client by, for a decision made
    later on its behalf (a consumer group's regex, resolved again at other members'
    heartbeats); None when every request is allowed."""
    if _authorizer(ctx) is None:
        return None
    return str(ctx.principal), host_of(ctx)


def authorize(ctx, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    return authorizer.authorize(str(ctx.principal), host_of(ctx), operation, resource_type, name)


def authorize_cluster(ctx, operation: AclOperation) -> bool:
    return authorize(ctx, operation, CLUSTER, CLUSTER_NAME)


def authorized_names(ctx, operation: AclOperation, resource_type: ResourceType, names) -> set:
    """The names among ``names`` the request may act on (Kafka's filterByAuthorized)."""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return set(names)
    principal, host = str(ctx.principal), host_of(ctx)
    return {n for n in set(names) if authorizer.authorize(principal, host, operation, resource_type, n)}


def authorize_by_resource_type(ctx, operation: AclOperation, resource_type: ResourceType) -> bool:
    """Whether the principal may do the operation on some resource of the type (KIP-679: an
    idempotent producer needs WRITE on any topic or IDEMPOTENT_WRITE on the cluster)."""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return True
    return authorizer.authorize_by_resource_type(str(ctx.principal), host_of(ctx), operation, resource_type)


def authorized_operations(ctx, resource_type: ResourceType, name: str) -> int:
    """The bit field of the operations the principal may do on the resource."""
    authorizer = _authorizer(ctx)
    if authorizer is None:
        return _ALL_SUPPORTED[resource_type]
    return to_bit_field(authorizer.authorized_operations(str(ctx.principal), host_of(ctx), resource_type, name))


def require(ctx, operation: AclOperation, resource_type: ResourceType, name: str, error) -> None:
    """Raise ``error`` (a KafkaError class) unless the request may do the operation: the handler's
    error_response then answers the whole request with its code, as Kafka's handlers do."""
    if not authorize(ctx, operation, resource_type, name):
        raise error(f"not authorized to {operation.name} {resource_type.name} {name!r}")


def require_cluster(ctx, operation: AclOperation) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED unless the request may do the operation on the cluster
    (Kafka's authorizeClusterOperation)."""
    if not authorize_cluster(ctx, operation):
        raise ClusterAuthorizationFailedError(f"not authorized to {operation.name} the cluster")
