"""``kafkacore cluster describe``: the cluster id, the brokers (with their data directory's size
and free space where they serve DescribeLogDirs), the controller, how many topics and partitions
there are, and the partitions that need attention: under-replicated (ISR smaller than the
replica set) and offline (no leader).

The ``cluster`` noun belongs to kafkacore/cli.py (``cluster up`` starts a local cluster); this
module adds its ``describe`` verb.
"""
from __future__ import annotations

from .common import EXIT_OK, add_verb, admin_client, is_table, plural
from .output import emit, human_bytes, table


def register_verbs(cluster_verbs, common):
    add_verb(cluster_verbs, "describe", common, run_describe,
             "brokers, controller, topic and partition counts, under-replicated and offline partitions")


def run_describe(args):
    with admin_client(args) as admin:
        cluster = admin.describe_cluster()
        _, topics = admin.metadata(None)
        dirs = {d.broker: d for d in admin.describe_log_dirs()}
    partitions = [(t, p) for t in topics.values() for p in t.partitions]
    brokers = []
    for b in cluster.brokers:
        d = dirs.get(b.node_id)
        brokers.append({
            "id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
            "controller": b.node_id == cluster.controller_id,
            "leader_partitions": sum(1 for _, p in partitions if p.leader == b.node_id),
            "replicas": sum(1 for _, p in partitions if b.node_id in p.replicas),
            "log_dir": d.path if d else None,
            "data_bytes": sum(d.sizes.values()) if d and not d.error else None,
            "usable_bytes": d.usable_bytes if d and d.usable_bytes >= 0 else None,
            "total_bytes": d.total_bytes if d and d.total_bytes >= 0 else None})

    def entry(t, p):
        return {"topic": t.name, "partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
                "replicas": p.replicas, "isr": p.isr}

    offline = [entry(t, p) for t, p in partitions if p.leader < 0]
    under = [entry(t, p) for t, p in partitions if p.leader >= 0 and p.under_replicated]
    result = {"cluster_id": cluster.cluster_id, "controller": cluster.controller_id if cluster.controller_id >= 0
              else None, "brokers": brokers, "topics": len(topics),
              "internal_topics": sum(1 for t in topics.values() if t.internal), "partitions": len(partitions),
              "under_replicated_partitions": under, "offline_partitions": offline}
    if not is_table(args):
        emit(args, result)
        return EXIT_OK
    print(f"Cluster id:   {cluster.cluster_id or '-'}")
    print(f"Controller:   {result['controller'] if result['controller'] is not None else '- (none elected)'}")
    print(f"Topics:       {len(topics)} ({result['internal_topics']} internal), {plural(len(partitions), 'partition')}")
    print()
    table([{**b, "data": human_bytes(b["data_bytes"]), "free": human_bytes(b["usable_bytes"]),
            "total": human_bytes(b["total_bytes"])} for b in brokers],
          [("id", "BROKER"), ("host", "HOST"), ("port", "PORT"), ("rack", "RACK"), ("controller", "CONTROLLER"),
           ("leader_partitions", "LEADERS"), ("replicas", "REPLICAS"), ("data", "DATA"), ("free", "FREE"),
           ("total", "DISK")])
    columns = [("topic", "TOPIC"), ("partition", "PARTITION"), ("leader", "LEADER"), ("replicas", "REPLICAS"),
               ("isr", "ISR")]
    for title, rows in (("Under-replicated partitions", under), ("Offline partitions", offline)):
        print()
        if rows:
            print(f"{title}: {len(rows)}")
            table(rows, columns)
        else:
            print(f"{title}: none")
    return EXIT_OK
