"""KIP-932's share state across a share-coordinator failover, on three `kafkacore serve` brokers
and a real ZooKeeper: a share partition's state is written to its coordinator (the leader of its
``__share_group_state`` partition, replicated to three brokers with min.insync.replicas 2) and
acknowledged; the coordinator is killed (SIGKILL); FindCoordinator names the new leader, which
replayed the partition's records and answers the read with the same state, and fences the writer
of an older state epoch as the first one did."""
import signal
import uuid

import pytest

from _cluster import CLUSTER_SETTINGS, connect, ensure_all_running, new_cluster, wait_for
from _zookeeper import skip_or_fail_without_zookeeper
from broker_client import request
from kafkacore.coordinator.share_state import ACKNOWLEDGED, ARCHIVED, AVAILABLE
from kafkacore.coordinator.share_state_log import coordinator_key
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.kafka_uuid import uuid_from_text
from kafkacore.protocol.messages import initialize_share_group_state_request as init_rq
from kafkacore.protocol.messages import read_share_group_state_request as read_rq
from kafkacore.protocol.messages import write_share_group_state_request as write_rq

pytestmark = pytest.mark.timeout(240)

GROUP = "share-failover"
NOT_COORDINATOR, FENCED_STATE_EPOCH = 16, 124


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    skip_or_fail_without_zookeeper()
    c = new_cluster(tmp_path_factory.mktemp("share-cluster"), brokers=3, protocol="plaintext", settings={
        **CLUSTER_SETTINGS, "share.coordinator.state.topic.num.partitions": "3"})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def _coordinator(cluster, ask, key):
    with connect(cluster, ask) as conn:
        c = conn.call(ApiKey.FIND_COORDINATOR, 6, request(ApiKey.FIND_COORDINATOR, key_type=2,
                                                          coordinator_keys=[key])).coordinators[0]
    return c.node_id if c.error_code == 0 else -1


def _write(conn, topic_id, state_epoch, start, batches):
    r = conn.call(ApiKey.WRITE_SHARE_GROUP_STATE, 0, write_rq.WriteShareGroupStateRequest(
        group_id=GROUP, topics=[write_rq.WriteStateData(topic_id=topic_id, partitions=[write_rq.PartitionData(
            partition=0, state_epoch=state_epoch, leader_epoch=1, start_offset=start,
            state_batches=[write_rq.StateBatch(first_offset=f, last_offset=last, delivery_state=s, delivery_count=c)
                           for f, last, s, c in batches])])]))
    return r.results[0].partitions[0].error_code


def _read(conn, topic_id):
    r = conn.call(ApiKey.READ_SHARE_GROUP_STATE, 0, read_rq.ReadShareGroupStateRequest(
        group_id=GROUP, topics=[read_rq.ReadStateData(topic_id=topic_id, partitions=[
            read_rq.PartitionData(partition=0, leader_epoch=1)])]))
    p = r.results[0].partitions[0]
    return p.error_code, p.state_epoch, p.start_offset, [
        (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches]


def test_the_new_share_coordinator_answers_with_the_acknowledged_state(cluster):
    ensure_all_running(cluster)
    topic_id = uuid.uuid4().bytes
    key = coordinator_key(GROUP, topic_id, 0)
    first = wait_for(lambda: _coordinator(cluster, 1, key) if _coordinator(cluster, 1, key) > 0 else None,
                     "a share coordinator", 60)
    other = next(b for b in cluster.brokers if b != first)
    with connect(cluster, other) as conn:
        assert _write(conn, topic_id, 1, 0, []) == NOT_COORDINATOR
    batches = [(5, 9, ACKNOWLEDGED, 1), (10, 12, ARCHIVED, 5), (13, 20, AVAILABLE, 2)]
    with connect(cluster, first) as conn:
        r = conn.call(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, init_rq.InitializeShareGroupStateRequest(
            group_id=GROUP, topics=[init_rq.InitializeStateData(topic_id=topic_id, partitions=[
                init_rq.PartitionData(partition=0, state_epoch=3, start_offset=0)])]))
        assert r.results[0].partitions[0].error_code == 0
        assert _write(conn, topic_id, 3, 5, batches) == 0  # acknowledged: in the ISR (min.insync.replicas 2)
        acknowledged = _read(conn, topic_id)
    assert acknowledged == (0, 3, 5, batches)

    cluster.brokers[first].signal(signal.SIGKILL)
    try:
        survivor = other
        second = wait_for(lambda: (lambda n: n if n not in (first, -1) else None)(_coordinator(cluster, survivor, key)),
                          "a new share coordinator", 60)

        def read_at_new():
            with connect(cluster, second) as conn:
                got = _read(conn, topic_id)
            return got if got[0] == 0 else None
        assert wait_for(read_at_new, "the state at the new coordinator", 30) == acknowledged
        with connect(cluster, second) as conn:
            assert _write(conn, topic_id, 2, 30, []) == FENCED_STATE_EPOCH
    finally:
        cluster.brokers[first].start()


def test_share_group_offsets_reach_the_share_coordinators_on_other_brokers(cluster):
    """The group coordinator's persister sends InitializeShareGroupState / ReadShareGroupStateSummary
    / DeleteShareGroupState over the inter-broker listener to each share partition's coordinator,
    wherever it is (three partitions, three __share_group_state partitions: several brokers)."""
    from _cluster import create_topic, java_conf
    from kafkacore.client.admin import AdminClient

    ensure_all_running(cluster)
    topic = "share-offsets-cluster"
    create_topic(cluster, topic, partitions=3, rf=3)
    with AdminClient(java_conf(cluster)["bootstrap.servers"]) as admin:
        topic_id = uuid_from_text(admin.describe_topics([topic])[topic].topic_id)

        def remote(group):  # a share partition coordinated away from the group's coordinator
            here = admin.coordinator(group)
            found = {_coordinator(cluster, 1, coordinator_key(group, topic_id, p)) for p in range(3)}
            assert -1 not in found, "every share partition has a coordinator"
            return bool(found - {here})
        group = next(g for g in (f"share-offsets-cluster-{i}" for i in range(20)) if remote(g))
        admin.alter_share_group_offsets(group, {(topic, p): 10 + p for p in range(3)})
        assert admin.describe_share_group_offsets(group) == {(topic, p): (10 + p, -1) for p in range(3)}
        admin.delete_share_group_offsets(group, [topic])
        assert admin.describe_share_group_offsets(group) == {}
