"""auto.leader.rebalance.enable (Kafka's default): a broker that comes back finds its preferred
leaderships returned to it by the controller's periodic check
(leader.imbalance.check.interval.seconds, 1 s here; Kafka's default is 300)."""
import time

from confluent_kafka.admin import AdminClient, NewTopic

from _cluster import CLUSTER_SETTINGS, client_conf, new_cluster
from _zookeeper import skip_or_fail_without_zookeeper


def test_preferred_leaders_come_back_by_themselves(tmp_path):
    skip_or_fail_without_zookeeper()
    settings = dict(CLUSTER_SETTINGS, **{"auto.leader.rebalance.enable": "true",
                                         "leader.imbalance.check.interval.seconds": "1"})
    with new_cluster(tmp_path / "c", brokers=2, settings=settings) as cluster:
        admin = AdminClient(client_conf(cluster))
        admin.create_topics([NewTopic("rebalanced", num_partitions=2, replica_assignment=[[1, 2], [1, 2]])],
                            operation_timeout=30)["rebalanced"].result(60)

        def leaders():
            t = admin.list_topics("rebalanced", timeout=10).topics["rebalanced"]
            return sorted((p, m.leader, tuple(sorted(m.isrs))) for p, m in t.partitions.items())

        def wait(predicate, timeout=60):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                got = leaders()
                if predicate(got):
                    return got
                time.sleep(0.2)
            raise AssertionError(f"timed out; last {leaders()}")

        wait(lambda got: got == [(0, 1, (1, 2)), (1, 1, (1, 2))])
        assert cluster.brokers[1].stop() == 0  # controlled shutdown: broker 2 leads both
        wait(lambda got: [leader for _p, leader, _i in got] == [2, 2])
        cluster.brokers[1].start()
        wait(lambda got: got == [(0, 1, (1, 2)), (1, 1, (1, 2))])
