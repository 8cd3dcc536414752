"""``kafkacore partitions reassign``: move partitions to other brokers (KIP-455's
AlterPartitionReassignments), list the moves in progress, cancel them.

    kafkacore partitions reassign --topic T --partition P --replicas 2,3,4 [--wait]
    kafkacore partitions reassign --reassignment-json-file plan.json [--wait]
    kafkacore partitions reassign --list
    kafkacore partitions reassign --cancel --topic T --partition P   (or --reassignment-json-file)

The JSON file is Kafka's reassignment format (what kafka-reassign-partitions.sh reads):
``{"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3, 4]}]}``
(``log_dirs`` may be present; only "any" is accepted, as brokers here have one directory). A
move is started when the command returns; ``--wait`` waits until it is done. Single-node brokers
do not serve these requests (UNSUPPORTED_VERSION): there is nowhere to move to.
"""
from __future__ import annotations

import json
import time

from .common import (EXIT_FAILED, EXIT_OK, EXIT_USAGE, ToolError, add_noun, add_verb, admin_client, id_list,
                     is_table, non_negative_int)
from .output import emit

WAIT_POLL_S = 0.5


def register(subparsers, common):
    verbs = add_noun(subparsers, "partitions", "move partitions between brokers (a ZooKeeper-mode cluster)")
    p = add_verb(verbs, "reassign", common, run_reassign,
                 "move partitions to other brokers, list or cancel the moves in progress")
    p.add_argument("--topic", metavar="TOPIC", help="the topic of the partitions to move")
    p.add_argument("--partition", type=non_negative_int, action="append", metavar="P",
                   help="a partition of --topic (repeatable)")
    p.add_argument("--replicas", type=id_list, metavar="B,B,B",
                   help="the new replica list, preferred leader first, e.g. 2,3,4")
    p.add_argument("--reassignment-json-file", metavar="FILE", help="Kafka's reassignment JSON")
    p.add_argument("--list", action="store_true", help="show the reassignments in progress")
    p.add_argument("--cancel", action="store_true", help="cancel the reassignments of the partitions named")
    p.add_argument("--wait", action="store_true", help="return once the moves are done")


def read_plan(path: str) -> dict:
    """{(topic, partition): [replicas]} from Kafka's reassignment JSON; a malformed file is a
    usage error naming what is wrong."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as e:
        raise ToolError(f"cannot read {path}: {e.strerror or e}", EXIT_USAGE) from None
    except ValueError as e:
        raise ToolError(f"{path} is not JSON: {e}", EXIT_USAGE) from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ToolError(f'{path}: expected {{"version": 1, "partitions": [...]}} with at least one partition',
                        EXIT_USAGE)
    plan = {}
    for i, e in enumerate(entries):
        where = f"{path}: partitions[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("topic"), str) or type(e.get("partition")) is not int:
            raise ToolError(f"{where} needs a string \"topic\" and an integer \"partition\"", EXIT_USAGE)
        replicas = e.get("replicas")
        if replicas is not None and (not isinstance(replicas, list) or not replicas
                                     or any(type(r) is not int or r < 0 for r in replicas)):
            raise ToolError(f"{where}: \"replicas\" must be a non-empty list of broker ids", EXIT_USAGE)
        dirs = e.get("log_dirs")
        if dirs is not None and any(d != "any" for d in dirs):
            raise ToolError(f"{where}: log_dirs other than \"any\" are not supported (one data directory per "
                            f"broker)", EXIT_USAGE)
        tp = (e["topic"], e["partition"])
        if tp in plan:
            raise ToolError(f"{where}: {tp[0]}-{tp[1]} is listed twice", EXIT_USAGE)
        plan[tp] = replicas
    return plan


def _targets(args) -> dict:
    """{(topic, partition): replicas or None (cancel)} from the arguments."""
    modes = [m for m, on in (("--list", args.list), ("--reassignment-json-file", args.reassignment_json_file),
                             ("--topic", args.topic)) if on]
    if len(modes) != 1:
        raise ToolError("give one of --topic T --partition P --replicas B,B (one move), --reassignment-json-file "
                        "FILE or --list" + (f", not {' and '.join(modes)}" if modes else ""), EXIT_USAGE)
    if args.list:
        if args.cancel or args.replicas or args.partition or args.wait:
            raise ToolError("--list takes no other option", EXIT_USAGE)
        return {}
    if args.reassignment_json_file:
        if args.replicas or args.partition:
            raise ToolError("--reassignment-json-file replaces --partition and --replicas", EXIT_USAGE)
        plan = read_plan(args.reassignment_json_file)
        if args.cancel:
            return {tp: None for tp in plan}
        missing = [tp for tp, r in plan.items() if r is None]
        if missing:
            raise ToolError(f"{args.reassignment_json_file}: {missing[0][0]}-{missing[0][1]} has no \"replicas\"",
                            EXIT_USAGE)
        return plan
    if not args.partition:
        raise ToolError("--topic needs --partition P (repeatable)", EXIT_USAGE)
    if args.cancel == bool(args.replicas):
        raise ToolError("give --replicas B,B,... to move, or --cancel (not both)", EXIT_USAGE)
    return {(args.topic, p): None if args.cancel else args.replicas for p in sorted(set(args.partition))}


def _in_progress_rows(in_progress: dict) -> list:
    return [{"topic": t, "partition": p, "replicas": r, "adding": a, "removing": d}
            for (t, p), (r, a, d) in sorted(in_progress.items())]


def run_reassign(args):
    from .progress import Progress

    targets = _targets(args)
    with admin_client(args) as admin:
        if args.list:
            rows = _in_progress_rows(admin.list_partition_reassignments())
            if is_table(args) and not rows:
                print("No partition reassignment in progress.")
            else:
                emit(args, rows, rows, [("topic", "TOPIC"), ("partition", "PARTITION"), ("replicas", "REPLICAS"),
                                        ("adding", "ADDING"), ("removing", "REMOVING")])
            return EXIT_OK
        topics = admin.describe_topics(sorted({t for t, _ in targets}))
        for t, p in targets:
            if p >= len(topics[t].partitions):
                raise ToolError(f"partition {t}-{p} does not exist (topic {t!r} has {len(topics[t].partitions)} "
                                f"partitions)")
        results = admin.alter_partition_reassignments(targets)
        failed = {tp: e for tp, e in results.items() if e}
        if args.wait and not failed:
            with Progress(len(targets), "reassigning") as progress:
                while True:
                    running = set(admin.list_partition_reassignments()) & set(targets)
                    progress.update(len(targets) - len(running))
                    if not running:
                        break
                    time.sleep(WAIT_POLL_S)
    done = "cancelled" if args.cancel else ("done" if args.wait else "started")
    rows = [{"topic": t, "partition": p, "replicas": targets[(t, p)], "result": results.get((t, p)) or done}
            for t, p in sorted(targets)]
    emit(args, rows, rows, [("topic", "TOPIC"), ("partition", "PARTITION")]
         + ([] if args.cancel else [("replicas", "REPLICAS")]) + [("result", "RESULT")])
    return EXIT_FAILED if failed else EXIT_OK
