"""Authorization: Kafka's ACL model and its authorizer's decisions (Kafka's
org.apache.kafka.common.acl / .resource classes, AclEntry, and the rules of its AclAuthorizer and
StandardAuthorizer).

An ACL binds a resource pattern (type, name, LITERAL or PREFIXED) to an entry: a principal
(``User:alice``, ``User:*`` for everyone), a host (``*`` for any), an operation and ALLOW or
DENY. A request is allowed when

- its principal is one of ``super.users``; or
- no DENY ACL matches it, and an ALLOW ACL does; an ALLOW of READ, WRITE, DELETE or ALTER also
  allows DESCRIBE, and of ALTER_CONFIGS also DESCRIBE_CONFIGS (never for DENY), ALL matches every
  operation; or
- no ACL at all is set on the resource and ``allow.everyone.if.no.acl.found`` is true.

An ACL matches a resource when its pattern is LITERAL with the same name or ``*``, or PREFIXED
with a prefix of the name. Filters (DescribeAcls, DeleteAcls) match bindings as Kafka's
AclBindingFilter does: ANY matches every value, a null name/principal/host any, and the MATCH
pattern type every pattern that would apply to the named resource.

Nothing here touches the metadata store: kafkacore/cluster/acl_store.py loads the ACLs into an
``Authorizer`` and writes the changes the ACL APIs make."""
from __future__ import annotations

import enum
import threading
from typing import NamedTuple

from ..errors import InvalidRequestError

CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"


class _KafkaEnum(enum.IntEnum):
    """Kafka's byte-coded enums: an unknown code or name is UNKNOWN (its fromCode/fromString)."""

    @classmethod
    def from_code(cls, code):
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN

    @classmethod
    def from_name(cls, text):
        """The enum name (``CLUSTER_ACTION``) or the name Kafka writes in ZooKeeper
        (``ClusterAction``), in any case."""
        flat = str(text).replace("_", "").upper()
        for member in cls:
            if member.name.replace("_", "") == flat:
                return member
        return cls.UNKNOWN

    @property
    def pascal_name(self) -> str:
        """Kafka's SecurityUtils names in ZooKeeper: TRANSACTIONAL_ID -> TransactionalId."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class ResourceType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_KafkaEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
# Kafka's AclEntry.supportedOperations (4.x: groups have configs since KIP-848). What an
# authorized-operations answer lists; ALL is never in it.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}
# The operations an ALLOW of each key also allows (Kafka's AclAuthorizer/StandardAuthorizer)
_IMPLIED_BY = {
    _O.DESCRIBE: (_O.READ, _O.WRITE, _O.DELETE, _O.ALTER),
    _O.DESCRIBE_CONFIGS: (_O.ALTER_CONFIGS,),
}


class ResourcePattern(NamedTuple):
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


class AccessControlEntry(NamedTuple):
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


class AclBinding(NamedTuple):
    pattern: ResourcePattern
    entry: AccessControlEntry


class ResourcePatternFilter(NamedTuple):
    resource_type: ResourceType
    name: str | None  # None: any name
    pattern_type: PatternType

    @property
    def is_unknown(self) -> bool:
        return self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ResourcePatternFilter.matches."""
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and self.pattern_type != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that apply to the resource named
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False


class AccessControlEntryFilter(NamedTuple):
    principal: str | None  # None: any
    host: str | None  # None: any
    operation: AclOperation
    permission_type: AclPermissionType

    @property
    def is_unknown(self) -> bool:
        return self.operation == AclOperation.UNKNOWN or self.permission_type == AclPermissionType.UNKNOWN

    def matches(self, entry: AccessControlEntry) -> bool:
        """Kafka's AccessControlEntryFilter.matches: exact values, no wildcard expansion."""
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and (self.operation == AclOperation.ANY or self.operation == entry.operation)
                and (self.permission_type == AclPermissionType.ANY or self.permission_type == entry.permission_type))


class AclBindingFilter(NamedTuple):
    pattern: ResourcePatternFilter
    entry: AccessControlEntryFilter

    @property
    def is_unknown(self) -> bool:
        return self.pattern.is_unknown or self.entry.is_unknown

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


def validate_new_binding(binding: AclBinding) -> None:
    """The checks an ACL passes before it is stored, with Kafka's INVALID_REQUEST messages (the
    broker's AclApis.handleCreateAcls, then the controller's AclControlManager.validateNewAcl)."""
    pattern, entry = binding
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidRequestError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
    if not pattern.name:
        raise InvalidRequestError("Invalid empty resource name")
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise InvalidRequestError(f"Invalid resourceType {pattern.resource_type.name}")
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise InvalidRequestError(f"Invalid patternType {pattern.pattern_type.name}")
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise InvalidRequestError(f"Invalid operation {entry.operation.name}")
    if entry.permission_type not in (AclPermissionType.DENY, AclPermissionType.ALLOW):
        raise InvalidRequestError(f"Invalid permissionType {entry.permission_type.name}")
    if ":" not in entry.principal:
        raise InvalidRequestError(f"Could not parse principal from `{entry.principal}` (no colon is present "
                                  "separating the principal type from the principal name)")


def validate_filter(binding_filter: AclBindingFilter) -> None:
    """DeleteAcls' check of a filter (Kafka's AclControlManager.validateFilter)."""
    if binding_filter.pattern.is_unknown:
        raise InvalidRequestError("Unknown patternFilter.")
    if binding_filter.entry.is_unknown:
        raise InvalidRequestError("Unknown entryFilter.")


def parse_super_users(text) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:ops``)."""
    return frozenset(p.strip() for p in str(text or "").split(";") if p.strip())


def to_bit_field(operations) -> int:
    """Kafka's Utils.to32BitField: bit ``code`` set for each operation (authorized operations in
    Metadata, DescribeCluster, DescribeGroups)."""
    bits = 0
    for op in operations:
        bits |= 1 << int(op)
    return bits


class Authorizer:
    """The ACLs every broker holds (filled by the ACL store) and the decisions on them.

    ACLs are indexed by (resource type, name): a decision looks up the literal name, the literal
    wildcard and each prefix of the name, then is cached per (principal, host, operation, type,
    name) until any ACL changes."""

    def __init__(self, super_users=frozenset(), allow_everyone_if_no_acl_found=False):
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = bool(allow_everyone_if_no_acl_found)
        self._lock = threading.Lock()
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._literal: dict[tuple, frozenset[AccessControlEntry]] = {}  # (type, name) -> entries
        self._prefixed: dict[tuple, frozenset[AccessControlEntry]] = {}  # (type, prefix) -> entries
        self._prefix_lengths: dict[ResourceType, set[int]] = {}  # type -> lengths of its prefixes
        self._cache: dict[tuple, bool] = {}
        self._generation = 0  # bumped on every change: a decision made before it is not cached

    # -- the ACLs --------------------------------------------------------------------------------
    def set_acls(self, pattern: ResourcePattern, entries) -> None:
        """The resource pattern's ACLs now (empty: none), as loaded from the store."""
        entries = frozenset(entries)
        key = (pattern.resource_type, pattern.name)
        with self._lock:
            if entries:
                self._acls[pattern] = entries
            else:
                self._acls.pop(pattern, None)
            if pattern.pattern_type == PatternType.LITERAL:
                _put(self._literal, key, entries)
            elif pattern.pattern_type == PatternType.PREFIXED:
                _put(self._prefixed, key, entries)
                self._prefix_lengths[pattern.resource_type] = {
                    len(name) for (rt, name) in self._prefixed if rt == pattern.resource_type}
            self._generation += 1
            self._cache = {}

    def acls_of(self, pattern: ResourcePattern) -> frozenset[AccessControlEntry]:
        return self._acls.get(pattern, frozenset())

    def acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        """Every binding the filter matches (DescribeAcls, DeleteAcls), in a stable order."""
        out = []
        for pattern, entries in list(self._acls.items()):
            if binding_filter.pattern.matches(pattern):
                out.extend(AclBinding(pattern, e) for e in entries if binding_filter.entry.matches(e))
        return sorted(out)

    # -- decisions -------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  resource_name: str) -> bool:
        key = (principal, host, operation, resource_type, resource_name)
        decision = self._cache.get(key)
        if decision is not None:
            return decision
        generation = self._generation
        decision = self._decide(principal, host, operation, resource_type, resource_name)
        with self._lock:
            if generation == self._generation:
                self._cache[key] = decision
        return decision

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              resource_name: str) -> frozenset[AclOperation]:
        """The supported operations of the resource type the principal may do (Kafka's
        AuthHelper.authorizedOperations)."""
        return frozenset(op for op in SUPPORTED_OPERATIONS.get(resource_type, ())
                         if self.authorize(principal, host, op, resource_type, resource_name))

    def matching_entries(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every pattern that applies to the resource: its literal name, the
        literal wildcard and the prefixes of its name."""
        found = []
        literal = self._literal
        found.extend(literal.get((resource_type, name), ()))
        if name != WILDCARD_RESOURCE:
            found.extend(literal.get((resource_type, WILDCARD_RESOURCE), ()))
        prefixed = self._prefixed
        for length in self._prefix_lengths.get(resource_type, ()):
            if length <= len(name):
                found.extend(prefixed.get((resource_type, name[:length]), ()))
        return found

    def _decide(self, principal, host, operation, resource_type, resource_name) -> bool:
        if principal in self.super_users:
            return True
        entries = self.matching_entries(resource_type, resource_name)
        if not entries:
            return self.allow_everyone_if_no_acl_found
        allowing = (operation, AclOperation.ALL) + _IMPLIED_BY.get(operation, ())
        allowed = False
        for e in entries:
            if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                continue
            if e.host != host and e.host != WILDCARD_HOST:
                continue
            if e.permission_type == AclPermissionType.DENY:
                if e.operation == operation or e.operation == AclOperation.ALL:
                    return False  # DENY wins over any ALLOW
            elif e.permission_type == AclPermissionType.ALLOW and e.operation in allowing:
                allowed = True
        return allowed


def _put(index, key, entries):
    if entries:
        index[key] = entries
    else:
        index.pop(key, None)
