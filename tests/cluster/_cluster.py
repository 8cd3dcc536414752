"""What the cluster's tests share (a module of its own: several test directories have a
conftest, so `from conftest import ...` would find the wrong one)."""
import os

import pytest

from kafkacore.cluster.local_cluster import LocalClusterError, find_zookeeper

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


def _require_zookeeper():
    try:
        find_zookeeper()
    except LocalClusterError as e:
        if os.environ.get("CI"):
            raise RuntimeError(f"{e} (ci/compat_deps.sh installs it)") from None
        pytest.skip(str(e))
