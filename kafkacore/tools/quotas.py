"""``kafkacore quotas describe | alter``: client quotas (producer_byte_rate, consumer_byte_rate,
request_percentage, controller_mutation_rate) of users, client ids and users' client ids, with
the defaults of each (what Kafka's ``kafka-configs.sh --entity-type users/clients`` manages),
through DescribeClientQuotas and AlterClientQuotas.

An entity is named with ``--user NAME`` or ``--user-default`` and/or ``--client-id NAME`` or
``--client-default``. ``describe`` without an entity lists every quota.
"""
from __future__ import annotations

from .common import EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client, config_changes, key_value
from .output import emit, report


def register(subparsers, common):
    verbs = add_noun(subparsers, "quotas", "client quotas of users and client ids")
    p = add_verb(verbs, "describe", common, run_describe, "the quotas of an entity, or of every entity")
    _entity(p)
    p = add_verb(verbs, "alter", common, run_alter, "set or remove quotas of an entity")
    _entity(p)
    p.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a quota to set, e.g. producer_byte_rate=1048576 (repeatable)")
    p.add_argument("--delete", action="append", default=[], metavar="KEY", help="a quota to remove (repeatable)")


def _entity(parser):
    user = parser.add_mutually_exclusive_group()
    user.add_argument("--user", metavar="NAME", help="a user principal's name (without User:)")
    user.add_argument("--user-default", action="store_true", help="the default of every user")
    client = parser.add_mutually_exclusive_group()
    client.add_argument("--client-id", metavar="NAME", help="a client id")
    client.add_argument("--client-default", action="store_true", help="the default of every client id")


def _components(args):
    out = []
    if args.user is not None or args.user_default:
        out.append(("user", None if args.user_default else args.user))
    if args.client_id is not None or args.client_default:
        out.append(("client-id", None if args.client_default else args.client_id))
    return out


def _name(entity):
    return ", ".join(f"{t} {'<default>' if n is None else n}" for t, n in entity)


def run_describe(args):
    components = _components(args)
    with admin_client(args) as admin:
        entries = admin.describe_client_quotas(components, strict=bool(components))
    rows = [{"entity": _name(e), "quota": k, "value": v} for e, quotas in entries for k, v in sorted(quotas.items())]
    obj = [{"entity": [{"type": t, "name": n} for t, n in e], "quotas": q} for e, q in entries]
    emit(args, obj, rows, [("entity", "ENTITY"), ("quota", "QUOTA"), ("value", "VALUE")])
    return EXIT_OK


def run_alter(args):
    entity = _components(args)
    if not entity:
        raise ToolError("name the entity: --user NAME | --user-default and/or --client-id NAME | --client-default",
                        EXIT_USAGE)
    settings = config_changes(args.set, args.delete, "--set", "--delete")
    values = {}
    for key, text in settings.items():
        try:
            values[key] = float(text)
        except ValueError:
            raise ToolError(f"--set {key}={text!r}: a quota is a number", EXIT_USAGE) from None
    with admin_client(args) as admin:
        admin.alter_client_quotas(entity, values, args.delete)
    changes = [f"{k}={v}" for k, v in settings.items()] + [f"{k} removed" for k in args.delete]
    report(args, {"entity": [{"type": t, "name": n} for t, n in entity], "set": values, "deleted": args.delete},
           f"Altered the quotas of {_name(entity)}: {', '.join(changes)}.")
    return EXIT_OK
