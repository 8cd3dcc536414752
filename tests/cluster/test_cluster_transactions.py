"""Transactions on the replicated cluster (docs/transactions.md §3.1, §3.5, plan step 13), with
confluent-kafka's transactional producer and read_committed consumer against three brokers and
a real ZooKeeper: committed and aborted transactions over replicated partitions (markers reach
every replica), the transaction coordinator killed with a transaction open (its successor loads
__transaction_state and commits it), and a data partition's leader killed mid-transaction."""
import signal

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from _cluster import client_conf, create_topic, ensure_all_running, partition_logs, topic_metadata, wait_for
from _history import read_values

WAIT = 60


def _producer(cluster, txn_id):
    p = Producer({**client_conf(cluster), "transactional.id": txn_id, "linger.ms": 5,
                  "transaction.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
                  "metadata.max.age.ms": 60000})  # see _history.AckedProducer
    p.init_transactions(WAIT)
    return p


def _read(cluster, topic, partitions, isolation, timeout=WAIT):
    return read_values(cluster.bootstrap_servers, topic, partitions, isolation, timeout)


def _coordinator_of(cluster, txn_id):
    admin = AdminClient(client_conf(cluster))
    from kafkacore.coordinator.transaction_log import partition_for_transactional_id
    md = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"]
    return md.partitions[partition_for_transactional_id(txn_id, len(md.partitions))].leader


def _send(p, topic, values, partitions):
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % partitions)
    assert p.flush(WAIT) == 0


def test_transactions_over_replicated_partitions(cluster):
    ensure_all_running(cluster)
    topic = "txn-replicated"
    create_topic(cluster, topic, partitions=3, rf=3, configs={"min.insync.replicas": "2"})
    p = _producer(cluster, "cluster-txn-1")
    committed = []
    for round_ in range(4):
        values = [b"%d-%d" % (round_, i) for i in range(30)]
        p.begin_transaction()
        _send(p, topic, values, 3)
        if round_ % 2:
            p.abort_transaction(WAIT)
        else:
            p.commit_transaction(WAIT)
            committed += values
    assert sorted(_read(cluster, topic, 3, "read_committed")) == sorted(committed)
    assert len(_read(cluster, topic, 3, "read_uncommitted")) == 120
    for part in range(3):  # markers and transaction indexes replicated byte for byte
        wait_for(lambda: len(set(partition_logs(cluster, topic, part).values())) == 1, f"identical replicas of {part}",
                 30)
        txnindexes = {}
        for b in cluster.brokers.values():
            import glob
            files = sorted(glob.glob(f"{b.data_dir}/{topic}-{part}/*.txnindex"))
            txnindexes[b.broker_id] = b"".join(open(f, "rb").read() for f in files)
        assert len(set(txnindexes.values())) == 1 and all(txnindexes.values()), txnindexes


def test_a_killed_coordinator_hands_the_open_transaction_to_its_successor(cluster):
    ensure_all_running(cluster)
    topic = "txn-coordinator-failover"
    create_topic(cluster, topic, partitions=2, rf=3, configs={"min.insync.replicas": "2"})
    txn_id = "cluster-txn-failover"
    p = _producer(cluster, txn_id)
    p.begin_transaction()
    _send(p, topic, [b"a%d" % i for i in range(20)], 2)
    p.commit_transaction(WAIT)
    p.begin_transaction()
    _send(p, topic, [b"b%d" % i for i in range(20)], 2)
    victim = _coordinator_of(cluster, txn_id)
    cluster.brokers[victim].kill()  # SIGKILL with the transaction open (Ongoing, replicated)
    try:
        wait_for(lambda: _coordinator_of(cluster, txn_id) not in (victim, -1), "a new transaction coordinator", 30)
        p.commit_transaction(WAIT)  # the successor loaded the Ongoing state and commits it
        p.begin_transaction()
        _send(p, topic, [b"c%d" % i for i in range(20)], 2)
        p.abort_transaction(WAIT)
        got = sorted(_read(cluster, topic, 2, "read_committed"))
        assert got == sorted([b"a%d" % i for i in range(20)] + [b"b%d" % i for i in range(20)])
    finally:
        cluster.brokers[victim].start()


def test_a_partition_leader_killed_mid_transaction(cluster):
    ensure_all_running(cluster)
    topic = "txn-leader-failover"
    create_topic(cluster, topic, partitions=1, rf=3, configs={"min.insync.replicas": "2"})
    txn_id = "cluster-txn-leader"
    p = _producer(cluster, txn_id)
    leader = topic_metadata(cluster, topic)[0].leader
    if leader == _coordinator_of(cluster, txn_id):
        pytest.skip("the data partition's leader is also the coordinator here (covered above)")
    p.begin_transaction()
    _send(p, topic, [b"x%d" % i for i in range(20)], 1)
    cluster.brokers[leader].signal(signal.SIGKILL)
    try:
        wait_for(lambda: topic_metadata(cluster, topic)[0].leader not in (leader, -1), "a new leader", 30)
        _send(p, topic, [b"y%d" % i for i in range(20)], 1)
        p.commit_transaction(WAIT)
        got = _read(cluster, topic, 1, "read_committed")
        assert got == [b"x%d" % i for i in range(20)] + [b"y%d" % i for i in range(20)]
    finally:
        cluster.brokers[leader].start()
