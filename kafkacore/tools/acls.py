"""``kafkacore acls add | list | remove``: Kafka's ACLs (what ``kafka-acls.sh`` manages), through
CreateAcls, DescribeAcls and DeleteAcls, with kafka-acls' options:

- principals: ``--allow-principal User:alice`` / ``--deny-principal User:bob`` (repeatable), from
  ``--allow-host`` / ``--deny-host`` (default ``*``);
- operations: ``--operation Read`` (repeatable; Kafka's names: Read, Write, Create, Delete, Alter,
  Describe, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, All);
- resources: ``--topic``, ``--group``, ``--transactional-id`` (repeatable) and ``--cluster``, with
  ``--resource-pattern-type`` literal (default) or prefixed (``list`` and ``remove`` also take any
  and match);
- kafka-acls' shortcuts: ``--producer`` (WRITE, DESCRIBE and CREATE on the topics; with
  ``--idempotent`` IDEMPOTENT_WRITE on the cluster; with ``--transactional-id`` WRITE and
  DESCRIBE on it) and ``--consumer`` (READ and DESCRIBE on the topics, READ on the groups).

``list`` without options lists every ACL; ``remove`` removes exactly the ACLs the options
describe (``remove --principal User:alice`` with no operation: every ACL of that principal on the
resources named, or on all).
"""
from __future__ import annotations

from .common import EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client
from .output import emit, report

OPERATIONS = ("Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "DescribeConfigs",
              "AlterConfigs", "IdempotentWrite", "All")


def register(subparsers, common):
    verbs = add_noun(subparsers, "acls", "ACLs: who may do what on which topics, groups, transactional ids, cluster")
    p = add_verb(verbs, "add", common, run_add, "add ACLs")
    _principals(p)
    _resources(p, ("literal", "prefixed"))
    _operations(p)
    p.add_argument("--producer", action="store_true", help="the ACLs a producer needs on the topics")
    p.add_argument("--idempotent", action="store_true", help="with --producer: IDEMPOTENT_WRITE on the cluster")
    p.add_argument("--consumer", action="store_true", help="the ACLs a consumer needs on the topics and groups")

    p = add_verb(verbs, "list", common, run_list, "list ACLs (all, or those of the resources / principal named)")
    _resources(p, ("any", "match", "literal", "prefixed"), default="any")
    p.add_argument("--principal", metavar="PRINCIPAL", help="only this principal's ACLs (e.g. User:alice)")

    p = add_verb(verbs, "remove", common, run_remove, "remove the ACLs the options describe")
    _principals(p, required=False)
    _resources(p, ("any", "match", "literal", "prefixed"))
    _operations(p)
    p.add_argument("--principal", metavar="PRINCIPAL", help="every ACL of this principal (allow and deny)")


def _principals(parser, required=True):
    parser.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="a principal the ACLs allow, e.g. User:alice (repeatable)")
    parser.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                        help="a principal the ACLs deny (repeatable)")
    parser.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                        help="the hosts the allowing ACLs apply from (default *)")
    parser.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                        help="the hosts the denying ACLs apply from (default *)")


def _resources(parser, pattern_types, default="literal"):
    parser.add_argument("--topic", action="append", default=[], metavar="NAME", help="a topic (repeatable; * for all)")
    parser.add_argument("--group", action="append", default=[], metavar="NAME", help="a consumer group (repeatable)")
    parser.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                        help="a transactional id (repeatable)")
    parser.add_argument("--cluster", action="store_true", help="the cluster")
    parser.add_argument("--resource-pattern-type", choices=pattern_types, default=default,
                        help=f"how the names match resources (default {default})")


def _operations(parser):
    parser.add_argument("--operation", action="append", default=[], metavar="OPERATION", type=_operation,
                        help=f"one of {', '.join(OPERATIONS)} (repeatable)")


def _operation(text):
    from ..security.acl import AclOperation
    op = AclOperation.from_name(text)
    if op in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise ValueError(text)
    return op


_operation.__name__ = "operation"  # argparse's message: "invalid operation value: 'x'"


def _acl():
    from ..security import acl
    return acl


def _patterns(args):
    """[(ResourcePattern or filter args)] of the resources named: (type, name)."""
    acl = _acl()
    out = [(acl.ResourceType.TOPIC, t) for t in args.topic]
    out += [(acl.ResourceType.GROUP, g) for g in args.group]
    out += [(acl.ResourceType.TRANSACTIONAL_ID, x) for x in args.transactional_id]
    if args.cluster:
        out.append((acl.ResourceType.CLUSTER, acl.CLUSTER_NAME))
    return out


def _entries(args):
    """[(principal, host, permission)] of --allow-/--deny- options."""
    acl = _acl()
    out = []
    for principals, hosts, permission in ((args.allow_principal, args.allow_host, acl.AclPermissionType.ALLOW),
                                          (args.deny_principal, args.deny_host, acl.AclPermissionType.DENY)):
        for principal in principals:
            if ":" not in principal:
                raise ToolError(f"principal {principal!r}: expected Type:name, e.g. User:alice", EXIT_USAGE)
            out.extend((principal, host, permission) for host in (hosts or ["*"]))
    return out


def _bindings(args):
    """The AclBindings ``add`` creates (kafka-acls' getResourceToAcls, shortcuts included)."""
    acl = _acl()
    O, R = acl.AclOperation, acl.ResourceType  # noqa: N806 - Kafka's enum names
    pattern_type = acl.PatternType[args.resource_pattern_type.upper()]
    wanted = {}  # (type, name) -> set of operations
    for rtype, name in _patterns(args):
        wanted.setdefault((rtype, name), set()).update(args.operation)
    if args.producer:
        for t in args.topic:
            wanted.setdefault((R.TOPIC, t), set()).update({O.WRITE, O.DESCRIBE, O.CREATE})
        for x in args.transactional_id:
            wanted.setdefault((R.TRANSACTIONAL_ID, x), set()).update({O.WRITE, O.DESCRIBE})
        if args.idempotent:
            wanted.setdefault((R.CLUSTER, acl.CLUSTER_NAME), set()).add(O.IDEMPOTENT_WRITE)
    if args.consumer:
        if not args.group:
            raise ToolError("--consumer needs --group (the consumer's group)", EXIT_USAGE)
        for t in args.topic:
            wanted.setdefault((R.TOPIC, t), set()).update({O.READ, O.DESCRIBE})
        for g in args.group:
            wanted.setdefault((R.GROUP, g), set()).add(O.READ)
    if not wanted:
        raise ToolError("name a resource: --topic, --group, --transactional-id or --cluster", EXIT_USAGE)
    empty = sorted(f"{t.name} {n}" for (t, n), ops in wanted.items() if not ops)
    if empty:
        raise ToolError(f"no operation for {', '.join(empty)}: --operation, --producer or --consumer", EXIT_USAGE)
    entries = _entries(args)
    if not entries:
        raise ToolError("name a principal: --allow-principal or --deny-principal", EXIT_USAGE)
    return [acl.AclBinding(acl.ResourcePattern(rtype, name, pattern_type), acl.AccessControlEntry(p, h, op, perm))
            for (rtype, name), ops in sorted(wanted.items()) for op in sorted(ops) for p, h, perm in entries]


def _row(b):
    return {"principal": b.entry.principal, "host": b.entry.host, "operation": b.entry.operation.pascal_name,
            "permission": b.entry.permission_type.pascal_name, "resource_type": b.pattern.resource_type.pascal_name,
            "name": b.pattern.name, "pattern_type": b.pattern.pattern_type.name}


COLUMNS = [("principal", "PRINCIPAL"), ("host", "HOST"), ("operation", "OPERATION"), ("permission", "PERMISSION"),
           ("resource_type", "RESOURCE"), ("name", "NAME"), ("pattern_type", "PATTERN")]


def run_add(args):
    bindings = _bindings(args)
    with admin_client(args) as admin:
        admin.create_acls(bindings)
    report(args, [_row(b) for b in bindings], f"Added {len(bindings)} ACL{'s' if len(bindings) != 1 else ''}.")
    return EXIT_OK


def _filters(args, principal=None, operations=(None,), entries=None):
    acl = _acl()
    pattern_type = acl.PatternType[args.resource_pattern_type.upper()]
    resources = _patterns(args) or [(acl.ResourceType.ANY, None)]
    if entries is None:
        entries = [(principal, None, acl.AclPermissionType.ANY)]
    return [acl.AclBindingFilter(acl.ResourcePatternFilter(rtype, name, pattern_type),
                                 acl.AccessControlEntryFilter(p, h, op or acl.AclOperation.ANY, perm))
            for rtype, name in resources for op in operations for p, h, perm in entries]


def run_list(args):
    with admin_client(args) as admin:
        found = {b for f in _filters(args, args.principal) for b in admin.describe_acls(f)}
    rows = [_row(b) for b in sorted(found)]
    emit(args, rows, rows, COLUMNS)
    return EXIT_OK


def run_remove(args):
    entries = _entries(args) if (args.allow_principal or args.deny_principal) else None
    if entries is None and args.principal is None and not _patterns(args):
        raise ToolError("say what to remove: a resource (--topic ...), --principal, or --allow-/--deny-principal",
                        EXIT_USAGE)
    filters = _filters(args, args.principal, args.operation or (None,), entries)
    with admin_client(args) as admin:
        deleted = {b for group in admin.delete_acls(filters) for b in group}
    rows = [_row(b) for b in sorted(deleted)]
    report(args, rows, f"Removed {len(rows)} ACL{'s' if len(rows) != 1 else ''}.")
    return EXIT_OK
