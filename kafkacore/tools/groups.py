"""``kafkacore groups list | describe | reset-offsets | delete | share-offsets | delete-share-offsets``.

Lag is the log end offset (the high watermark, what a read_uncommitted consumer can reach) minus
the committed offset, as Kafka's kafka-consumer-groups.sh computes it. ``reset-offsets`` follows
that tool: it prints the plan and changes nothing unless ``--execute`` is given, it refuses a
group with active members (their next commit would undo the reset), and new offsets outside the
log are moved to its start or end.

For a KIP-932 share group (``--share``; Kafka's kafka-share-groups.sh) the offsets are the
share-partition start offsets (SPSO): ``share-offsets`` shows them (DescribeShareGroupOffsets),
``reset-offsets --share`` moves them (AlterShareGroupOffsets: the share group must be empty, the
broker refuses with NON_EMPTY_GROUP otherwise) and ``delete-share-offsets`` deletes the group's
state on whole topics (DeleteShareGroupOffsets: the group starts again at share.auto.offset.reset).
"""
from __future__ import annotations

import argparse
import sys

from .common import (EXIT_OK, ToolError, add_noun, add_verb, admin_client, is_table, non_negative_int,
                     plural)
from .output import emit, report, table

# group states in which nobody commits: the only ones a reset may change (Kafka's rule)
INACTIVE_STATES = ("Empty", "Dead")
COMMIT_CHUNK = 500  # partitions per OffsetCommit: a progress step, and no giant request


def register(subparsers, common):
    verbs = add_noun(subparsers, "groups", "consumer groups: list, describe (lag), reset offsets, delete")
    add_verb(verbs, "list", common, run_list, "every group with its type and state")

    p = add_verb(verbs, "describe", common, run_describe,
                 "a group's state, members and, per partition, committed offset, log end and lag")
    p.add_argument("group")

    p = add_verb(verbs, "reset-offsets", common, run_reset,
                 "move a group's committed offsets (a dry run unless --execute)",
                 "Move the committed offsets of a group without active members. Prints the plan; "
                 "--execute applies it.")
    p.add_argument("group")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", action="append", type=_topic_partitions, metavar="TOPIC[:P,P...]",
                       help="a topic, or some of its partitions (repeatable)")
    which.add_argument("--all-topics", action="store_true", help="every topic the group has committed offsets for")
    p.add_argument("--share", action="store_true",
                   help="a share group: move its share-partition start offsets (the group must be empty)")
    to = p.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the log end offset")
    to.add_argument("--to-offset", type=non_negative_int, metavar="N", help="offset N (kept inside the log)")
    to.add_argument("--to-datetime", type=_datetime, metavar="ISO",
                    help="the first offset at or after a time, e.g. 2024-05-01T12:00:00Z (no zone: UTC)")
    to.add_argument("--shift-by", type=_int, metavar="N", help="the committed offset plus N (N may be negative)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="apply the plan")
    mode.add_argument("--dry-run", action="store_true", help="only print the plan (the default)")

    p = add_verb(verbs, "delete", common, run_delete, "delete a group without active members and its offsets")
    p.add_argument("group")

    p = add_verb(verbs, "share-offsets", common, run_share_offsets,
                 "a share group's start offset (SPSO) per partition, log end and lag")
    p.add_argument("group")
    p.add_argument("--topic", action="append", type=_topic_partitions, metavar="TOPIC[:P,P...]",
                   help="only these topics or partitions (repeatable; default: every partition with state)")

    p = add_verb(verbs, "delete-share-offsets", common, run_delete_share_offsets,
                 "delete an empty share group's state on whole topics")
    p.add_argument("group")
    p.add_argument("--topic", action="append", required=True, metavar="TOPIC", help="a topic (repeatable)")


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def _topic_partitions(text):
    topic, sep, parts = text.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"{text!r} names no topic")
    if not sep:
        return topic, None
    try:
        partitions = sorted({int(p) for p in parts.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not TOPIC:P,P (partition numbers)") from None
    if partitions[0] < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: partition numbers are 0 or more")
    return topic, partitions


def _datetime(text):
    """--to-datetime: ISO-8601 -> ms since the epoch, read as every tool reads times
    (clients.parse_time_ms: a time without a zone is UTC)."""
    from .clients import parse_time_ms

    try:
        return parse_time_ms(text, "--to-datetime")
    except ToolError as e:
        raise argparse.ArgumentTypeError(e.message) from None


# -- reading ----------------------------------------------------------------------------------
def run_list(args):
    with admin_client(args) as admin:
        groups = admin.list_groups()
    # Kafka's kafka-groups.sh columns (KIP-1043): the group's type (classic, consumer, share) and
    # its protocol type (both kinds of consumer group say "consumer" there)
    rows = [{"group": g.group_id, "type": g.group_type or None, "protocol": g.protocol_type or None,
             "state": g.state or None} for g in groups]
    emit(args, rows, rows, [("group", "GROUP"), ("type", "TYPE"), ("protocol", "PROTOCOL"), ("state", "STATE")])
    return EXIT_OK


def _describe(admin, group_id):
    """(GroupInfo, {(topic, partition): committed offset}); a group the coordinator does not
    know (Dead, nothing committed) is an error naming it."""
    info = admin.describe_group(group_id)
    # a share group commits no offsets (OffsetFetch answers GROUP_ID_NOT_FOUND for it, as Kafka)
    committed = {} if info.protocol_type == "share" else admin.list_group_offsets(group_id)
    if info.state == "Dead" and not committed:
        raise ToolError(f"group {group_id!r} does not exist (GROUP_ID_NOT_FOUND)")
    return info, committed


def run_describe(args):
    from ..client.admin import LATEST

    with admin_client(args) as admin:
        info, committed = _describe(admin, args.group)
        owner = {}  # (topic, partition) -> its members (a share partition may have several)
        for m in info.members:
            for tp in m.assignment:
                owner.setdefault(tp, []).append(m)
        tps = sorted(set(committed) | set(owner))
        ends = {}
        if tps:
            ends = {tp: o.offset for tp, o in admin.list_offsets({tp: LATEST for tp in tps}, partial=True).items()}
    offsets = []
    for tp in tps:
        cur, end = committed.get(tp), ends.get(tp)
        for m in owner.get(tp) or [None]:
            offsets.append({"topic": tp[0], "partition": tp[1], "committed_offset": cur, "log_end_offset": end,
                            "lag": max(end - cur, 0) if cur is not None and end is not None else None,
                            "member_id": m.member_id if m else None, "host": m.host if m else None,
                            "client_id": m.client_id if m else None})
    members = [{"member_id": m.member_id, "instance_id": m.instance_id, "client_id": m.client_id, "host": m.host,
                "member_epoch": m.member_epoch, "assignment": [f"{t}-{p}" for t, p in m.assignment]}
               for m in info.members]
    result = {"group": info.group_id, "state": info.state, "group_type": info.group_type or None,
              "protocol_type": info.protocol_type,
              "protocol": info.protocol or None, "coordinator": info.coordinator, "group_epoch": info.group_epoch,
              "assignment_epoch": info.assignment_epoch, "members": members, "offsets": offsets,
              "total_lag": sum(o["lag"] for o in offsets if o["lag"] is not None)}
    if not is_table(args):
        emit(args, result)
        return EXIT_OK
    print(f"Group: {info.group_id}  state: {info.state}  type: {info.group_type or '-'}  "
          f"protocol: {info.protocol_type or '-'}  "
          f"assignor: {info.protocol or '-'}  coordinator: {info.coordinator}  members: {len(members)}  "
          f"total lag: {result['total_lag']}"
          + (f"  group epoch: {info.group_epoch}  assignment epoch: {info.assignment_epoch}"
             if info.group_epoch is not None else ""))
    print()
    if offsets:
        table(offsets, [("topic", "TOPIC"), ("partition", "PARTITION"), ("committed_offset", "CURRENT-OFFSET"),
                        ("log_end_offset", "LOG-END-OFFSET"), ("lag", "LAG"), ("member_id", "CONSUMER-ID"),
                        ("host", "HOST"), ("client_id", "CLIENT-ID")])
    else:
        print("No committed offsets and no assigned partitions.")
    if members:
        print()
        columns = [("member_id", "CONSUMER-ID"), ("instance_id", "INSTANCE-ID"), ("client_id", "CLIENT-ID"),
                   ("host", "HOST")]
        if info.group_epoch is not None:
            columns.append(("member_epoch", "EPOCH"))
        table(members, columns + [("assignment", "ASSIGNMENT")])
    return EXIT_OK


# -- resetting --------------------------------------------------------------------------------
def _targets(admin, args, committed) -> list:
    """The (topic, partition) list the reset covers."""
    if args.all_topics:
        if not committed:
            raise ToolError(f"group {args.group!r} has no committed offsets; name the topics with --topic")
        return sorted(committed)
    names = list(dict.fromkeys(t for t, _ in args.topic))
    topics = admin.describe_topics(names)
    out = set()
    for name, partitions in args.topic:
        have = [p.partition for p in topics[name].partitions]
        for p in partitions if partitions is not None else have:
            if p not in have:
                raise ToolError(f"partition {name}-{p} does not exist (topic {name!r} has {plural(len(have), 'partition')})")
            out.add((name, p))
    return sorted(out)


def _plan(admin, args, tps, committed) -> dict:
    """{(topic, partition): new offset}, kept inside [log start, log end] as Kafka's tool does."""
    from ..client.admin import EARLIEST, LATEST

    start = {tp: o.offset for tp, o in admin.list_offsets({tp: EARLIEST for tp in tps}).items()}
    end = {tp: o.offset for tp, o in admin.list_offsets({tp: LATEST for tp in tps}).items()}
    if args.to_earliest:
        wanted = dict(start)
    elif args.to_latest:
        wanted = dict(end)
    elif args.to_offset is not None:
        wanted = {tp: args.to_offset for tp in tps}
    elif args.to_datetime is not None:
        found = admin.list_offsets({tp: args.to_datetime for tp in tps})
        wanted = {tp: found[tp].offset if found[tp].offset >= 0 else end[tp] for tp in tps}  # none later: the end
    else:
        missing = [tp for tp in tps if tp not in committed]
        if missing:
            raise ToolError(f"cannot shift partition {missing[0][0]}-{missing[0][1]}: the group has no committed "
                            f"offset for it")
        wanted = {tp: committed[tp] + args.shift_by for tp in tps}
    return {tp: min(max(wanted[tp], start[tp]), end[tp]) for tp in tps}


def run_reset(args):
    from .progress import Progress

    with admin_client(args) as admin:
        if args.share:
            committed = _share_offsets(admin, args.group)
        else:
            info, committed = admin.describe_group(args.group), admin.list_group_offsets(args.group)
            if info.state not in INACTIVE_STATES:
                raise ToolError(f"group {args.group!r} is {info.state} with {len(info.members)} active member(s): "
                                f"offsets can only be reset while the group is inactive (stop its consumers first)")
        tps = _targets(admin, args, committed)
        plan = _plan(admin, args, tps, committed)
        if args.execute:
            items = sorted(plan.items())
            if args.share:
                def alter(chunk):
                    _alter_share_offsets(admin, args.group, chunk)
            else:
                def alter(chunk):
                    admin.alter_group_offsets(args.group, chunk)
            with Progress(len(items), f"resetting {args.group}") as progress:
                for i in range(0, len(items), COMMIT_CHUNK):
                    chunk = dict(items[i:i + COMMIT_CHUNK])
                    alter(chunk)
                    progress.advance(len(chunk))
    rows = [{"group": args.group, "topic": t, "partition": p, "committed_offset": committed.get((t, p)),
             "new_offset": off} for (t, p), off in sorted(plan.items())]
    emit(args, {"group": args.group, "executed": bool(args.execute), "partitions": rows}, rows,
         [("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"), ("committed_offset", "CURRENT-OFFSET"),
          ("new_offset", "NEW-OFFSET")])
    if not args.execute and is_table(args):
        print("Dry run: nothing changed. Add --execute to apply.", file=sys.stderr)
    return EXIT_OK


def run_delete(args):
    from ..errors import GroupIdNotFoundError, NonEmptyGroupError

    with admin_client(args) as admin:
        try:
            admin.delete_group(args.group)
        except GroupIdNotFoundError:
            raise ToolError(f"group {args.group!r} does not exist (GROUP_ID_NOT_FOUND)") from None
        except NonEmptyGroupError:
            raise ToolError(f"group {args.group!r} has active members (NON_EMPTY_GROUP): stop its consumers "
                            f"first") from None
    report(args, {"group": args.group, "deleted": True}, f"Deleted group {args.group}.")
    return EXIT_OK



# -- share groups -------------------------------------------------------------------------------
def _share_offsets(admin, group, partitions=None) -> dict:
    """{(topic, partition): SPSO} of the partitions with state."""
    from ..errors import GroupIdNotFoundError

    try:
        found = admin.describe_share_group_offsets(group, partitions)
    except GroupIdNotFoundError:
        raise ToolError(f"group {group!r} is not a share group (GROUP_ID_NOT_FOUND)") from None
    return {tp: start for tp, (start, _epoch) in found.items() if start >= 0}


def _alter_share_offsets(admin, group, offsets):
    from ..errors import NonEmptyGroupError

    try:
        admin.alter_share_group_offsets(group, offsets)
    except NonEmptyGroupError:
        raise ToolError(f"share group {group!r} has active members (NON_EMPTY_GROUP): start offsets can only be "
                        f"reset while it is empty (stop its consumers first)") from None


def run_share_offsets(args):
    from ..client.admin import LATEST

    with admin_client(args) as admin:
        partitions = None
        if args.topic:
            partitions = _targets(admin, argparse.Namespace(all_topics=False, topic=args.topic), {})
        offsets = _share_offsets(admin, args.group, partitions)
        end = {tp: o.offset for tp, o in admin.list_offsets({tp: LATEST for tp in offsets}).items()} if offsets else {}
    rows = [{"group": args.group, "topic": t, "partition": p, "start_offset": start, "log_end_offset": end.get((t, p)),
             "lag": max(0, end[(t, p)] - start) if (t, p) in end else None}
            for (t, p), start in sorted(offsets.items())]
    emit(args, {"group": args.group, "partitions": rows}, rows,
         [("group", "GROUP"), ("topic", "TOPIC"), ("partition", "PARTITION"), ("start_offset", "START-OFFSET"),
          ("log_end_offset", "LOG-END-OFFSET"), ("lag", "LAG")])
    return EXIT_OK


def run_delete_share_offsets(args):
    from ..errors import GroupIdNotFoundError, NonEmptyGroupError, UnknownTopicOrPartitionError

    with admin_client(args) as admin:
        try:
            admin.delete_share_group_offsets(args.group, args.topic)
        except GroupIdNotFoundError:
            raise ToolError(f"group {args.group!r} is not a share group (GROUP_ID_NOT_FOUND)") from None
        except NonEmptyGroupError:
            raise ToolError(f"share group {args.group!r} has active members (NON_EMPTY_GROUP): stop its consumers "
                            f"first") from None
        except UnknownTopicOrPartitionError as e:
            raise ToolError(f"{e.message} (UNKNOWN_TOPIC_OR_PARTITION)") from None
    report(args, {"group": args.group, "topics": args.topic, "deleted": True},
           f"Deleted the share state of group {args.group} on {', '.join(args.topic)}.")
    return EXIT_OK
