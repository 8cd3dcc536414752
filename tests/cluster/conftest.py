"""The replicated cluster's tests: a real ZooKeeper (Debian's, started by the test on a free
port) and real `kafkacore serve` brokers, through kafkacore.cluster.local_cluster - the same
launcher as `kafkacore cluster up`.

Settings are Kafka's, shortened where a test would otherwise wait minutes: a 6 s ZooKeeper
session (brokers declared dead 6 s after a SIGKILL), a 3 s replica lag limit."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/broker_client.py, _kcutil

from kafkacore.cluster.local_cluster import LocalCluster, LocalClusterError, find_zookeeper  # noqa: E402

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers and a ZooKeeper for the test module; each test leaves it with every broker
    running again."""
    _require_zookeeper()
    c = LocalCluster(tmp_path_factory.mktemp("cluster"), brokers=3, settings=CLUSTER_SETTINGS)
    try:
        c.start()
        yield c
    finally:
        c.stop()
        for b in c.brokers.values():
            _print_tail_on_failure(b.log_path)


def _print_tail_on_failure(path):
    if os.environ.get("KAFKACORE_CLUSTER_LOGS"):
        with open(path, errors="replace") as f:
            print(f"--- {path}\n" + "".join(f.readlines()[-60:]))
