"""The replicated cluster's tests: a real ZooKeeper (Debian's, started by the test on a free
port) and real `kafkacore serve` brokers, through kafkacore.cluster.local_cluster - the same
launcher as `kafkacore cluster up`.

Settings are Kafka's, shortened where a test would otherwise wait minutes: a 6 s ZooKeeper
session (brokers declared dead 6 s after a SIGKILL), a 3 s replica lag limit.

    KAFKACORE_CLUSTER_SECURITY=sasl_ssl pytest tests/cluster/...   # every cluster over SASL_SSL
"""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/broker_client.py, _kcutil

from _cluster import FAULT_SUITE, new_cluster  # noqa: E402
from _zookeeper import skip_or_fail_without_zookeeper  # noqa: E402
from kafkacore.cluster.local_cluster import LocalCluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster(request, tmp_path_factory):
    """Three brokers and a ZooKeeper for the test module - for the fault suite's modules secured
    as KAFKACORE_CLUSTER_SECURITY says (_cluster.new_cluster); each test leaves it with every
    broker running again."""
    skip_or_fail_without_zookeeper()
    follows = Path(request.module.__file__).name in FAULT_SUITE
    c = new_cluster(tmp_path_factory.mktemp("cluster"), brokers=3, protocol=None if follows else "plaintext")
    try:
        c.start()
        yield c
    finally:
        c.stop()
        for b in c.brokers.values():
            _print_tail_on_failure(b.log_path)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed cluster test carries the tail of every broker's log in its report: a fault seen
    once in CI must be explainable from that run alone."""
    outcome = yield
    report = outcome.get_result()
    c = getattr(item, "funcargs", {}).get("cluster")
    if report.failed and isinstance(c, LocalCluster):
        for bid, b in sorted(c.brokers.items()):
            try:
                with open(b.log_path, errors="replace") as f:
                    tail = "".join(f.readlines()[-80:])
            except OSError as e:
                tail = f"(unreadable: {e})"
            report.sections.append((f"broker {bid} log (tail, {b.log_path})", tail))


def _print_tail_on_failure(path):
    if os.environ.get("KAFKACORE_CLUSTER_LOGS"):
        with open(path, errors="replace") as f:
            print(f"--- {path}\n" + "".join(f.readlines()[-60:]))
