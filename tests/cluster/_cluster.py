"""What the cluster's tests share (a module of its own: several test directories have a
conftest, so `from conftest import ...` would find the wrong one)."""
import signal
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

import _kcutil
from kafkacore.storage.segment_files import walk_batch_headers

CLUSTER_SETTINGS = {
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "num.partitions": "3",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "log.segment.bytes": "1048576",
    "auto.leader.rebalance.enable": "false",
}


def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def create_topic(cluster, name, partitions=3, rf=3, configs=None):
    client = admin(cluster)  # kept alive until the future resolves: its handle owns the request
    fut = client.create_topics([NewTopic(name, partitions, rf, config=configs or {})], operation_timeout=30)[name]
    fut.result(60)
    # every partition listed (an empty answer - the topic not known yet where the request went -
    # is not "all led"), each led with a full ISR
    wait_for(lambda: (lambda md: len(md) == partitions and all(p.leader >= 0 and len(p.isrs) == rf
                                                              for p in md.values()))(topic_metadata(cluster, name)),
             f"every partition of {name} led with a full ISR", 60)


def topic_metadata(cluster, name):
    md = admin(cluster).list_topics(name, timeout=10)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        return {}
    return dict(t.partitions)


def wait_for(predicate, what, timeout=30.0, interval=0.1):
    """The suite's wait (_kcutil.wait_for), through a broker's restart: its errors meanwhile are
    "not yet"."""
    return _kcutil.wait_for(predicate, what, timeout, interval, tolerate=(Exception,))


def partition_logs(cluster, topic, partition):
    """{broker id: bytes of the partition's .log segments, in order}."""
    out = {}
    for bid, b in cluster.brokers.items():
        d = Path(b.data_dir) / f"{topic}-{partition}"
        if d.is_dir():
            out[bid] = b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
    return out


def batch_headers(log_bytes):
    """(base offset, last offset, leader epoch, producer id, size) of each batch in ``log_bytes``."""
    return [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.producer_id, h.size)
            for h in walk_batch_headers(log_bytes, 0, len(log_bytes))]


def describe_replica_difference(cluster, topic, partitions):
    """Where the replicas' logs part: for each partition whose replicas differ, each replica's
    size and the batches from the first one that differs."""
    lines = []
    for p in range(partitions):
        logs = partition_logs(cluster, topic, p)
        if len(set(logs.values())) <= 1 and len(logs) == len(cluster.brokers):
            continue
        headers = {bid: batch_headers(data) for bid, data in logs.items()}
        first = min((next((i for i, (a, b) in enumerate(zip(h, other)) if a != b), min(len(h), len(other)))
                     for h in headers.values() for other in headers.values()), default=0)
        for bid in sorted(headers):
            lines.append(f"{topic}-{p} broker {bid}: {len(logs[bid])} bytes, {len(headers[bid])} batches, "
                         f"from batch {first}: {headers[bid][first:first + 6]}")
        missing = sorted(set(cluster.brokers) - set(logs))
        if missing:
            lines.append(f"{topic}-{p}: no directory on brokers {missing}")
    return "; ".join(lines) or "(identical by now)"


def wait_replicas_identical(cluster, topic, partitions, timeout=60):
    def same():
        for p in range(partitions):
            logs = partition_logs(cluster, topic, p)
            if len(logs) != len(cluster.brokers) or len(set(logs.values())) != 1:
                return False
        return True
    wait_for(same, lambda: f"every replica's .log of {topic} byte-identical: "
             f"{describe_replica_difference(cluster, topic, partitions)}", timeout)


def ensure_all_running(cluster):
    """Every broker running and registered (a broker paused past its ZooKeeper session comes
    back with a new one a moment after SIGCONT)."""
    for b in cluster.brokers.values():
        b.signal(signal.SIGCONT)
        if not b.running:
            b.start()
    wait_for(lambda: sorted(admin(cluster).list_topics(timeout=10).brokers) == sorted(cluster.brokers),
             "every broker registered", 60)
