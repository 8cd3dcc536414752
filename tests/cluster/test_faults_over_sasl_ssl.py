"""One of the replication fault tests again, on a cluster secured with SASL_SSL (SCRAM-SHA-512)
between the brokers and for the clients: CI's sample of the fault suite over SASL_SSL, which runs
whole with KAFKACORE_CLUSTER_SECURITY=sasl_ssl (docs/cluster.md). The leader kill is in
test_inter_broker_security.py (its clients speak PLAINTEXT); this one adds a zombie leader
paused past its ZooKeeper session under an idempotent acks=all producer over SASL_SSL: the
connections to it hang, a new leader is elected, and when it resumes it is deposed, logs in to
the new leader and follows; every acknowledged record is read back once.

The test function is test_replication.py's, collected here again: it takes this module's
``cluster``."""
import pytest

from _cluster import new_cluster
from _zookeeper import skip_or_fail_without_zookeeper
from test_replication import test_a_zombie_leader_acknowledges_nothing_that_is_lost

__all__ = ["test_a_zombie_leader_acknowledges_nothing_that_is_lost"]  # collected here too

pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    skip_or_fail_without_zookeeper()
    c = new_cluster(tmp_path_factory.mktemp("sasl-ssl-faults"), brokers=3, protocol="sasl_ssl")
    try:
        c.start()
        yield c
    finally:
        c.stop()
    for b in c.brokers.values():  # no login between the brokers refused, through the pause
        with open(b.log_path, errors="replace") as f:
            assert "SASL login failed" not in f.read(), b.log_path
