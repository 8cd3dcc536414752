"""The Brokers pages' answers: each broker with the replicas it holds and the partitions it
leads (from Metadata), its log directories and their sizes (DescribeLogDirs, asked of every
broker), which one is the controller, and one broker's configs (DescribeConfigs BROKER, asked
of that broker) with where each value comes from.

A broker that does not serve DescribeLogDirs shows its sizes as unknown (null), as the topic
pages do.
"""
from __future__ import annotations

from ..client.admin import BROKER_RESOURCE
from ..protocol.api_table import ApiKey
from .api import ApiError, config_rows


def _placement(topics: dict) -> dict:
    """{broker: {topic: [replicas, leaders]}} over every partition, internal topics too."""
    out = {}
    for name, info in topics.items():
        for p in info.partitions:
            for r in p.replicas:
                counts = out.setdefault(r, {}).setdefault(name, [0, 0])
                counts[0] += 1
                counts[1] += p.leader == r
    return out


def _log_dirs(admin) -> dict | None:
    """{broker: [LogDirInfo]}, or None when no broker serves DescribeLogDirs."""
    if not admin.supports(ApiKey.DESCRIBE_LOG_DIRS):
        return None
    out = {}
    for d in admin.describe_log_dirs():
        out.setdefault(d.broker, []).append(d)
    return out


def _dir_row(d) -> dict:
    return {"path": d.path, "error": d.error, "size": sum(d.sizes.values()), "partitions": len(d.sizes),
            # -1: the broker does not say (DescribeLogDirs before v4)
            "total_bytes": None if d.total_bytes < 0 else d.total_bytes,
            "usable_bytes": None if d.usable_bytes < 0 else d.usable_bytes}


def _broker_row(b, controller: int, placed: dict, dirs: dict | None) -> dict:
    mine = placed.get(b.node_id, {})
    known = dirs is not None and b.node_id in dirs
    rows = [_dir_row(d) for d in dirs.get(b.node_id, [])] if known else []
    return {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack,
            "controller": b.node_id == controller,
            "replicas": sum(r for r, _ in mine.values()), "leaders": sum(n for _, n in mine.values()),
            "size": sum(r["size"] for r in rows) if known else None, "log_dirs": rows}


def broker_list(admin) -> dict:
    cluster, topics = admin.metadata(None)
    placed = _placement(topics)
    dirs = _log_dirs(admin)
    return {"cluster_id": cluster.cluster_id, "controller": cluster.controller_id, "log_dirs_known": dirs is not None,
            "brokers": [_broker_row(b, cluster.controller_id, placed, dirs) for b in cluster.brokers]}


def broker_detail(admin, broker: str) -> dict:
    cluster, topics = admin.metadata(None)
    found = [b for b in cluster.brokers if str(b.node_id) == broker]
    if not found:
        ids = ", ".join(str(b.node_id) for b in cluster.brokers)
        raise ApiError(f"broker {broker!r} is not in the cluster (its brokers: {ids})", 404)
    b = found[0]
    placed = _placement(topics)
    dirs = _log_dirs(admin)
    row = _broker_row(b, cluster.controller_id, placed, dirs)
    sizes = {}
    for d in (dirs or {}).get(b.node_id, []):
        for (t, _p), size in d.sizes.items():
            sizes[t] = sizes.get(t, 0) + size
    row["topics"] = [{"topic": t, "internal": topics[t].internal, "replicas": r, "leaders": n,
                      "size": sizes.get(t, 0) if row["size"] is not None else None}
                     for t, (r, n) in sorted(placed.get(b.node_id, {}).items())]
    row["configs"] = config_rows(admin.describe_configs(BROKER_RESOURCE, str(b.node_id), synonyms=True))
    return row
