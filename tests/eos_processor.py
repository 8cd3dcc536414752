"""A consume-transform-produce processor for tests/test_eos_kill_loop.py (run as a script, to be
SIGKILLed at any moment): reads topic A read_committed from the group's committed offsets,
writes b"x" + value to topic B in the same partition, and commits its input offsets in the
same transaction, a few records at a time. With EOS_EXIT_AT_END=1 it stops once it has
committed everything up to A's end.

    python tests/eos_processor.py BOOTSTRAP A B GROUP TRANSACTIONAL_ID PARTITIONS
"""
import os
import sys
import time

from confluent_kafka import OFFSET_STORED, Consumer, KafkaException, Producer, TopicPartition


def main(bootstrap, src, dst, group, txn_id, partitions):
    partitions = int(partitions)
    exit_at_end = os.environ.get("EOS_EXIT_AT_END") == "1"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(src, p, OFFSET_STORED) for p in range(partitions)])
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 2})
    p.init_transactions(60)  # fences a killed predecessor and aborts its open transaction
    idle_since = time.monotonic()
    while True:
        msgs = [m for m in c.consume(20, 0.3) if m.error() is None]
        if not msgs:
            if exit_at_end and time.monotonic() - idle_since > 2 and _at_end(c, src, partitions):
                return 0
            continue
        idle_since = time.monotonic()
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, b"x" + m.value(), partition=m.partition())
        p.flush(60)  # the output is in the log before the commit: a kill now leaves it to be aborted
        positions = c.position([TopicPartition(src, q) for q in range(partitions)])
        p.send_offsets_to_transaction([tp for tp in positions if tp.offset >= 0], c.consumer_group_metadata(), 60)
        p.commit_transaction(60)


def _at_end(c, src, partitions):
    """Every partition committed up to A's end (the committed offset: an instance that found
    nothing left to read has no position of its own)."""
    committed = c.committed([TopicPartition(src, q) for q in range(partitions)], timeout=10)
    for tp in committed:
        _lo, hi = c.get_watermark_offsets(TopicPartition(src, tp.partition), timeout=10, cached=False)
        if tp.offset < hi:
            return False
    return True


if __name__ == "__main__":
    try:
        sys.exit(main(*sys.argv[1:]))
    except KafkaException as e:
        print(f"eos_processor: {e}", file=sys.stderr)
        sys.exit(3)
