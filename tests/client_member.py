"""A consumer-group member in its own process, for tests/test_client_groups.py.

    python tests/client_member.py BOOTSTRAP GROUP TOPIC STRATEGY OUT.jsonl STOPFILE [INSTANCE_ID]

STRATEGY is a classic partition.assignment.strategy, or ``consumer``: group.protocol=consumer
(KIP-848), the coordinator assigning.

Consumes until STOPFILE exists, committing after every poll, and writes one JSON line per
event: {"event": "assigned"|"revoked"|"records"|"closed", ...}.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from kafkacore import Consumer  # noqa: E402
from kafkacore.errors import KafkaError  # noqa: E402


def main():
    bootstrap, group, topic, strategy, out_path, stop_file = sys.argv[1:7]
    instance = sys.argv[7] if len(sys.argv) > 7 else None
    out = open(out_path, "a", buffering=1)

    def emit(**kw):
        kw["t"] = time.time()
        out.write(json.dumps(kw) + "\n")

    conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False}
    if strategy == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf.update({"partition.assignment.strategy": strategy, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 500})
    if instance:
        conf["group.instance.id"] = instance
    c = Consumer(conf)
    c.subscribe([topic], on_assign=lambda _c, tps: emit(event="assigned", partitions=tps),
                on_revoke=lambda _c, tps: emit(event="revoked", partitions=tps),
                on_lost=lambda _c, tps: emit(event="lost", partitions=tps))
    emit(event="started", pid=os.getpid())
    while not os.path.exists(stop_file):
        records = c.poll(0.2)
        if records:
            emit(event="records", items=[[r.partition, r.offset] for r in records])
            try:
                c.commit()
            except KafkaError as e:  # e.g. fenced meanwhile: the next poll gives the partitions up
                emit(event="commit-failed", error=e.name)
    c.close()
    emit(event="closed")


if __name__ == "__main__":
    main()
