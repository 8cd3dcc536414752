"""``kafkacore leaders elect``: ElectLeaders (KIP-460), as Kafka's kafka-leader-election.sh.

``preferred`` (the default) hands leadership back to each partition's preferred replica (the
first of its replica list) where it is alive and in sync; ``unclean`` gives a partition without
a live leader any live replica, accepting the loss of what only the old in-sync replicas had.
Partitions that need nothing are counted, not listed. Single-node brokers do not serve the
request (UNSUPPORTED_VERSION).
"""
from __future__ import annotations

from .common import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client, is_table,
                     non_negative_int)
from .output import emit, table

ELECTION_TYPES = ("preferred", "unclean")
ELECTION_NOT_NEEDED = "ELECTION_NOT_NEEDED"


def register(subparsers, common):
    verbs = add_noun(subparsers, "leaders", "partition leadership (a ZooKeeper-mode cluster)")
    p = add_verb(verbs, "elect", common, run_elect, "elect the preferred (or, unclean, any live) replica as leader")
    p.add_argument("--topic", metavar="TOPIC", help="the partitions of this topic (all, or those of --partition)")
    p.add_argument("--partition", type=non_negative_int, action="append", metavar="P",
                   help="a partition of --topic (repeatable)")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of the cluster")
    p.add_argument("--election-type", type=str.lower, choices=ELECTION_TYPES, default="preferred",
                   help="preferred (default) or unclean")


def run_elect(args):
    from ..client.admin import PREFERRED, UNCLEAN

    if bool(args.topic) == bool(args.all_topic_partitions):
        raise ToolError("give --topic TOPIC [--partition P ...] or --all-topic-partitions", EXIT_USAGE)
    if args.partition and not args.topic:
        raise ToolError("--partition needs --topic", EXIT_USAGE)
    with admin_client(args) as admin:
        partitions = None
        if args.topic:
            have = [p.partition for p in admin.describe_topics([args.topic])[args.topic].partitions]
            wanted = sorted(set(args.partition)) if args.partition else have
            for p in wanted:
                if p not in have:
                    raise ToolError(f"partition {args.topic}-{p} does not exist (the topic has {len(have)} "
                                    f"partitions)")
            partitions = [(args.topic, p) for p in wanted]
        results = admin.elect_leaders(partitions, PREFERRED if args.election_type == "preferred" else UNCLEAN)
    rows = [{"topic": t, "partition": p, "result": "elected" if err is None else err}
            for (t, p), err in sorted(results.items())]
    not_needed = [r for r in rows if r["result"].startswith(ELECTION_NOT_NEEDED)]
    failed = [r for r in rows if r["result"] != "elected" and r not in not_needed]
    if not is_table(args):
        emit(args, rows)
    else:
        shown = [r for r in rows if r not in not_needed]
        if shown:
            table(shown, [("topic", "TOPIC"), ("partition", "PARTITION"), ("result", "RESULT")])
        elected = len(shown) - len(failed)
        print(f"{args.election_type.capitalize()} election: {elected} elected, {len(not_needed)} needed none"
              + (f", {len(failed)} failed" if failed else "") + ".")
    return EXIT_FAILED if failed else EXIT_OK
