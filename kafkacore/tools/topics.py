"""``kafkacore topics list | describe | create | alter | delete | add-partitions``.

``describe`` also shows each partition's newest record time (its largest record timestamp,
ListOffsets MAX_TIMESTAMP), in ISO-8601 UTC.

Sizes come from DescribeLogDirs: a partition's size is its leader's copy (what one replica
holds); a broker without the API shows "-". Message counts are log end minus log start offset
(ListOffsets): exact for plain topics, an upper bound where compaction, transaction markers or
aborted records left gaps.
"""
from __future__ import annotations

from .common import (EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client, config_changes, config_map,
                     is_table, key_value, positive_int, plural)
from .output import emit, human_bytes, iso_utc, report, table


def register(subparsers, common):
    verbs = add_noun(subparsers, "topics", "list, describe, create, alter and delete topics")
    p = add_verb(verbs, "list", common, run_list, "every topic with its partitions, replication factor, "
                                                  "messages and size")
    p.add_argument("--exclude-internal", action="store_true", help="leave out internal topics (__consumer_offsets...)")

    p = add_verb(verbs, "describe", common, run_describe,
                 "a topic's partitions (leader, replicas, ISR, offsets, size) and the configs set on it")
    p.add_argument("topic")

    p = add_verb(verbs, "create", common, run_create, "create a topic")
    p.add_argument("topic")
    p.add_argument("-p", "--partitions", type=positive_int, metavar="N",
                   help="number of partitions (default: the broker's num.partitions)")
    p.add_argument("-r", "--replication-factor", type=positive_int, metavar="R",
                   help="copies of each partition (default: the broker's default.replication.factor)")
    p.add_argument("-c", "--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a topic config (repeatable), e.g. -c retention.ms=86400000")
    p.add_argument("--replica-assignment", metavar="B:B,B:B", type=_assignment,
                   help="replicas per partition, partitions separated by commas (Kafka's format): 1:2,2:3 "
                        "makes two partitions; replaces -p and -r")
    p.add_argument("--if-not-exists", action="store_true", help="succeed quietly when the topic exists")

    p = add_verb(verbs, "alter", common, run_alter, "set or remove topic configs")
    p.add_argument("topic")
    p.add_argument("-c", "--config", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                   help="a config to set (repeatable)")
    p.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                   help="a config to remove, back to the default (repeatable)")

    p = add_verb(verbs, "delete", common, run_delete, "delete a topic and its records")
    p.add_argument("topic")
    p.add_argument("--if-exists", action="store_true", help="succeed quietly when the topic does not exist")

    p = add_verb(verbs, "add-partitions", common, run_add_partitions,
                 "grow a topic to N partitions (N is the new total, as Kafka's --partitions)")
    p.add_argument("topic")
    p.add_argument("-p", "--partitions", type=positive_int, required=True, metavar="N",
                   help="the total number of partitions after the change")


def _assignment(text):
    import argparse

    try:
        parts = [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not broker ids such as 1:2,2:3") from None
    if any(len(set(r)) != len(r) or min(r) < 0 for r in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: a partition lists each broker once, ids 0 or more")
    return parts


# -- reading ----------------------------------------------------------------------------------
def _offsets(admin, topics: dict) -> tuple[dict, dict]:
    """({(topic, partition): log start offset}, {(topic, partition): log end offset}) for the
    partitions that have a leader (the others are left out: shown as unknown)."""
    from ..client.admin import EARLIEST, LATEST

    tps = [(t.name, p.partition) for t in topics.values() for p in t.partitions if p.leader >= 0]
    if not tps:
        return {}, {}
    start = admin.list_offsets({tp: EARLIEST for tp in tps}, partial=True)
    end = admin.list_offsets({tp: LATEST for tp in tps}, partial=True)
    return {tp: o.offset for tp, o in start.items()}, {tp: o.offset for tp, o in end.items()}


def _newest(admin, topic) -> dict:
    """{(topic, partition): timestamp of its newest record} (ListOffsets MAX_TIMESTAMP, v7+);
    empty partitions, and brokers that cannot answer, are left out (tansu 0.x closes the
    connection: the next request opens another)."""
    from ..client.admin import MAX_TIMESTAMP
    from ..client.connection import ConnectionClosed
    from ..errors import KafkaError

    tps = [(topic.name, p.partition) for p in topic.partitions if p.leader >= 0]
    try:
        found = admin.list_offsets({tp: MAX_TIMESTAMP for tp in tps}, partial=True) if tps else {}
    except (KafkaError, ConnectionClosed):
        return {}
    return {tp: o.timestamp for tp, o in found.items() if o.offset >= 0 and o.timestamp >= 0}


def _sizes(admin, topics: dict) -> dict:
    """{(topic, partition): bytes of the leader's copy}; partitions whose leader did not say are
    left out (its broker does not serve DescribeLogDirs, or the partition has no leader)."""
    by_broker = admin.log_dir_sizes()
    out = {}
    for t in topics.values():
        for p in t.partitions:
            size = by_broker.get((t.name, p.partition, p.leader))
            if size is not None:
                out[(t.name, p.partition)] = size
    return out


def _sum(values):
    values = list(values)
    return None if not values or None in values else sum(values)


def run_list(args):
    with admin_client(args) as admin:
        topics = admin.list_topics(internal=not args.exclude_internal)
        start, end = _offsets(admin, topics)
        sizes = _sizes(admin, topics)
    rows = []
    for t in topics.values():
        tps = [(t.name, p.partition) for p in t.partitions]
        rows.append({
            "name": t.name, "internal": t.internal, "partitions": len(t.partitions),
            "replication_factor": max((len(p.replicas) for p in t.partitions), default=0),
            "messages": _sum(end[tp] - start[tp] if tp in start and tp in end else None for tp in tps),
            "size_bytes": _sum(sizes.get(tp) for tp in tps)})
    emit(args, rows, [{**r, "size": human_bytes(r["size_bytes"])} for r in rows],
         [("name", "TOPIC"), ("partitions", "PARTITIONS"), ("replication_factor", "REPLICATION-FACTOR"),
          ("messages", "MESSAGES"), ("size", "SIZE")])
    return EXIT_OK


def run_describe(args):
    from ..client.admin import TOPIC_RESOURCE

    with admin_client(args) as admin:
        topic = admin.describe_topics([args.topic])[args.topic]
        start, end = _offsets(admin, {topic.name: topic})
        sizes = _sizes(admin, {topic.name: topic})
        newest = _newest(admin, topic)
        configs = [c for c in admin.describe_configs(TOPIC_RESOURCE, topic.name) if not c.is_default]
    partitions = []
    for p in topic.partitions:
        tp = (topic.name, p.partition)
        partitions.append({
            "partition": p.partition, "leader": p.leader if p.leader >= 0 else None, "replicas": p.replicas,
            "isr": p.isr, "offline_replicas": p.offline, "log_start_offset": start.get(tp),
            "log_end_offset": end.get(tp), "size_bytes": sizes.get(tp), "max_timestamp_ms": newest.get(tp),
            "error": p.error})
    result = {"name": topic.name, "topic_id": topic.topic_id, "internal": topic.internal,
              "partitions": partitions,
              "configs": {c.name: {"value": None if c.sensitive else c.value, "source": c.source} for c in configs}}
    if not is_table(args):
        emit(args, result)
        return EXIT_OK
    rf = max((len(p.replicas) for p in topic.partitions), default=0)
    print(f"Topic: {topic.name}  id: {topic.topic_id or '-'}  partitions: {len(partitions)}  "
          f"replication factor: {rf}{'  (internal)' if topic.internal else ''}")
    print()
    columns = [("partition", "PARTITION"), ("leader", "LEADER"), ("replicas", "REPLICAS"), ("isr", "ISR"),
               ("log_start_offset", "LOG-START-OFFSET"), ("log_end_offset", "LOG-END-OFFSET"), ("size", "SIZE"),
               ("newest", "NEWEST-RECORD")]
    if any(p["offline_replicas"] or p["error"] for p in partitions):
        columns += [("offline_replicas", "OFFLINE"), ("error", "ERROR")]
    table([{**p, "size": human_bytes(p["size_bytes"]), "newest": iso_utc(p["max_timestamp_ms"])} for p in partitions],
          columns)
    print()
    if configs:
        print("Configs set on the topic or the broker (the others are Kafka's defaults):")
        table([{"name": c.name, "value": "(sensitive)" if c.sensitive else c.value, "source": c.source}
               for c in configs], [("name", "NAME"), ("value", "VALUE"), ("source", "SOURCE")])
    else:
        print("Configs: all defaults")
    return EXIT_OK


# -- changing ---------------------------------------------------------------------------------
def run_create(args):
    from ..errors import TopicAlreadyExistsError

    if args.replica_assignment and (args.partitions or args.replication_factor):
        raise ToolError("--replica-assignment replaces -p/--partitions and -r/--replication-factor; "
                        "give one or the other", EXIT_USAGE)
    configs = config_map(args.config)
    with admin_client(args) as admin:
        try:
            admin.create_topic(args.topic, args.partitions or -1, args.replication_factor or -1, configs,
                               assignment=args.replica_assignment)
        except TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise ToolError(f"topic {args.topic!r} already exists (TOPIC_ALREADY_EXISTS)") from None
            report(args, {"topic": args.topic, "created": False}, f"Topic {args.topic} already exists.")
            return EXIT_OK
        topic = admin.describe_topics([args.topic])[args.topic]
    rf = max((len(p.replicas) for p in topic.partitions), default=0)
    report(args, {"topic": args.topic, "created": True, "partitions": len(topic.partitions),
                   "replication_factor": rf, "configs": configs},
            f"Created topic {args.topic} ({plural(len(topic.partitions), 'partition')}, replication factor {rf}).")
    return EXIT_OK


def run_alter(args):
    from ..client.admin import TOPIC_RESOURCE

    configs = config_changes(args.config, args.delete_config, "-c", "--delete-config")
    with admin_client(args) as admin:
        admin.describe_topics([args.topic])  # an unknown topic is named as such, not as a config error
        admin.alter_configs(TOPIC_RESOURCE, args.topic, configs, args.delete_config)
    changes = [f"{k}={v}" for k, v in configs.items()] + [f"{k} removed" for k in args.delete_config]
    report(args, {"topic": args.topic, "set": configs, "deleted": args.delete_config},
            f"Altered topic {args.topic}: {', '.join(changes)}.")
    return EXIT_OK


def run_delete(args):
    from ..errors import UnknownTopicOrPartitionError

    with admin_client(args) as admin:
        try:
            admin.delete_topic(args.topic)
        except UnknownTopicOrPartitionError:
            if not args.if_exists:
                raise ToolError(f"topic {args.topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION)") from None
            report(args, {"topic": args.topic, "deleted": False}, f"Topic {args.topic} does not exist.")
            return EXIT_OK
    report(args, {"topic": args.topic, "deleted": True}, f"Deleted topic {args.topic}.")
    return EXIT_OK


def run_add_partitions(args):
    with admin_client(args) as admin:
        before = len(admin.describe_topics([args.topic])[args.topic].partitions)
        if args.partitions <= before:
            raise ToolError(f"topic {args.topic!r} has {plural(before, 'partition')} already; -p is the new total and "
                            f"must be above {before}")
        admin.create_partitions(args.topic, args.partitions)
    report(args, {"topic": args.topic, "partitions_before": before, "partitions": args.partitions},
            f"Topic {args.topic} now has {plural(args.partitions, 'partition')} (was {before}).")
    return EXIT_OK

