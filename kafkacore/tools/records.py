"""``kafkacore records delete T --partition P --before OFFSET``: DeleteRecords, which moves a
partition's log start offset up to OFFSET (records below it are gone for every reader; whole
segments below it are deleted from disk). ``--before end`` empties the partition up to its
high watermark. Kafka's kafka-delete-records.sh does the same from a JSON file.
"""
from __future__ import annotations

import argparse

from .common import EXIT_OK, ToolError, add_noun, add_verb, admin_client, non_negative_int, plural
from .output import emit

HIGH_WATERMARK = -1  # DeleteRecords' "up to the high watermark"


def register(subparsers, common):
    verbs = add_noun(subparsers, "records", "delete the records of a partition below an offset")
    p = add_verb(verbs, "delete", common, run_delete, "delete the records below an offset",
                 "Delete the records below an offset: the partition's log start offset moves up to it.")
    p.add_argument("topic")
    p.add_argument("--partition", type=non_negative_int, action="append", metavar="P",
                   help="a partition (repeatable; default: every partition of the topic)")
    p.add_argument("--before", type=_before, required=True, metavar="OFFSET",
                   help="the first offset to keep; 'end' deletes everything up to the high watermark")


def _before(text):
    if text.strip().lower() == "end":
        return HIGH_WATERMARK
    try:
        return non_negative_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an offset (a number of 0 or more, or 'end')") from None


def run_delete(args):
    from ..client.admin import EARLIEST, LATEST
    from ..errors import OffsetOutOfRangeError

    with admin_client(args) as admin:
        topic = admin.describe_topics([args.topic])[args.topic]
        have = [p.partition for p in topic.partitions]
        wanted = sorted(set(args.partition)) if args.partition else have
        for p in wanted:
            if p not in have:
                raise ToolError(f"partition {args.topic}-{p} does not exist (the topic has {plural(len(have), 'partition')})")
        tps = [(args.topic, p) for p in wanted]
        try:
            starts = admin.delete_records({tp: args.before for tp in tps})
        except OffsetOutOfRangeError:
            # name the valid range of each partition the offset missed
            end = admin.list_offsets({tp: LATEST for tp in tps})
            start = admin.list_offsets({tp: EARLIEST for tp in tps})
            bad = [tp for tp in tps if args.before > end[tp].offset]
            t, p = bad[0] if bad else tps[0]
            raise ToolError(f"offset {args.before} is beyond the high watermark of partition {t}-{p} (valid: "
                            f"{start[(t, p)].offset} to {end[(t, p)].offset}; OFFSET_OUT_OF_RANGE)") from None
    rows = [{"topic": t, "partition": p, "log_start_offset": starts[(t, p)]} for t, p in tps]
    emit(args, rows, rows, [("topic", "TOPIC"), ("partition", "PARTITION"), ("log_start_offset", "LOG-START-OFFSET")])
    return EXIT_OK
