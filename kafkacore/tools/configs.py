"""``kafkacore configs describe broker N | topic T`` and ``kafkacore configs alter ...``.

``describe`` shows, like Kafka's kafka-configs.sh, only what is set (every source but Kafka's
built-in default: a topic's overrides, a broker's server.properties and dynamic settings);
``--all`` shows every config with its source. Changes go through IncrementalAlterConfigs:
``--set`` and ``--delete`` touch only the configs they name.
"""
from __future__ import annotations

from .common import EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client, config_changes, key_value
from .output import emit, report

ENTITY_TYPES = ("broker", "topic")


def register(subparsers, common):
    verbs = add_noun(subparsers, "configs", "describe and alter broker and topic configs")
    p = add_verb(verbs, "describe", common, run_describe, "the configs of a broker or a topic")
    _entity(p)
    p.add_argument("--all", action="store_true", help="every config, defaults included (default: only those set)")

    p = add_verb(verbs, "alter", common, run_alter, "set or delete configs of a broker or a topic")
    _entity(p)
    p.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a config to set (repeatable)")
    p.add_argument("--delete", action="append", default=[], metavar="KEY",
                   help="a config to remove, back to its default (repeatable)")


def _entity(parser):
    parser.add_argument("entity_type", choices=ENTITY_TYPES, metavar="{broker,topic}",
                        help="broker (NAME: its id) or topic")
    parser.add_argument("entity_name", metavar="NAME")


def _resource(args):
    from ..client.admin import BROKER_RESOURCE, TOPIC_RESOURCE

    if args.entity_type == "broker":
        try:
            if int(args.entity_name) < 0:
                raise ValueError
        except ValueError:
            raise ToolError(f"broker {args.entity_name!r}: a broker is named by its id (a number)", EXIT_USAGE) \
                from None
        return BROKER_RESOURCE, str(int(args.entity_name))
    return TOPIC_RESOURCE, args.entity_name


def run_describe(args):
    from ..client.admin import TOPIC_RESOURCE

    rtype, name = _resource(args)
    with admin_client(args) as admin:
        if rtype == TOPIC_RESOURCE:
            admin.describe_topics([name])  # an unknown topic is named as such
        entries = admin.describe_configs(rtype, name)
    shown = [e for e in entries if args.all or not e.is_default]
    rows = [{"name": e.name, "value": None if e.sensitive else e.value, "source": e.source,
             "read_only": e.read_only, "sensitive": e.sensitive} for e in shown]
    emit(args, rows, [{**r, "value": "(sensitive)" if r["sensitive"] else r["value"]} for r in rows],
         [("name", "NAME"), ("value", "VALUE"), ("source", "SOURCE"), ("read_only", "READ-ONLY")])
    return EXIT_OK


def run_alter(args):
    from ..client.admin import TOPIC_RESOURCE

    rtype, name = _resource(args)
    settings = config_changes(args.set, args.delete, "--set", "--delete")
    with admin_client(args) as admin:
        if rtype == TOPIC_RESOURCE:
            admin.describe_topics([name])
        admin.alter_configs(rtype, name, settings, args.delete)
    changes = [f"{k}={v}" for k, v in settings.items()] + [f"{k} removed" for k in args.delete]
    report(args, {"entity_type": args.entity_type, "name": name, "set": settings, "deleted": args.delete},
           f"Altered {args.entity_type} {name}: {', '.join(changes)}.")
    return EXIT_OK
