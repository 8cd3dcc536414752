"""The replicated cluster against real processes: three `kafkacore serve` brokers and a real
ZooKeeper on 127.0.0.1, driven by unmodified confluent-kafka (librdkafka). Every fault test
checks a history: all that was acknowledged is read back exactly once, in order per key."""
import json
import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.client import KazooClient

from _cluster import (admin, client_conf, connect, create_topic, java_conf, kafka_python_conf, ensure_all_running, partition_logs, topic_metadata,  # noqa: F401
                      wait_for, wait_replicas_identical)
from _history import AckedProducer, check_history, read_all


# -- the layout and the happy path -------------------------------------------------------------------
def test_brokers_register_and_one_controller_is_elected(cluster):
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        reg = json.loads(zk.get("/brokers/ids/2")[0])
        b2 = cluster.brokers[2]
        assert reg["endpoints"] == ([f"PLAINTEXT://127.0.0.1:{b2.port}"] if cluster.security is None else
                                    [f"CLIENT://127.0.0.1:{b2.port}", f"BROKER://127.0.0.1:{b2.broker_port}"])
        controller = json.loads(zk.get("/controller")[0])
        assert controller["brokerid"] in (1, 2, 3) and controller["version"] == 2  # Kafka 3.4+ writes v2
        assert int(zk.get("/controller_epoch")[0]) >= 1
        assert json.loads(zk.get("/cluster/id")[0])["id"]
    finally:
        zk.stop()
    md = admin(cluster).list_topics(timeout=10)
    assert sorted(md.brokers) == [1, 2, 3] and md.controller_id == controller["brokerid"]


def test_acks_all_writes_are_replicated_byte_for_byte(cluster):
    create_topic(cluster, "replicated", partitions=3, rf=3)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        topic = json.loads(zk.get("/brokers/topics/replicated")[0])
        assert sorted(topic["partitions"]) == ["0", "1", "2"]
        assert all(sorted(r) == [1, 2, 3] for r in topic["partitions"].values())
        state = json.loads(zk.get("/brokers/topics/replicated/partitions/0/state")[0])
        assert sorted(state["isr"]) == [1, 2, 3] and state["leader"] == topic["partitions"]["0"][0]
    finally:
        zk.stop()
    p = AckedProducer(cluster.bootstrap_servers, "replicated")
    p.send(3000)
    p.flush()
    assert len(p.acked) == 3001 and not p.failed
    check_history(p.acked, read_all(cluster.bootstrap_servers, "replicated", 3))
    wait_replicas_identical(cluster, "replicated", 3)


# -- faults -------------------------------------------------------------------------------------------
def test_sigkill_of_a_leader_loses_nothing_acknowledged(cluster):
    create_topic(cluster, "failover", partitions=2, rf=3)
    leader = topic_metadata(cluster, "failover")[0].leader
    p = AckedProducer(cluster.bootstrap_servers, "failover")
    p.run_for(2.0)
    killed_at = time.monotonic()
    cluster.brokers[leader].kill()
    p.run_for(4.0)
    new_leader = wait_for(lambda: (lambda m: m.leader if m.leader not in (-1, leader) else None)(
        topic_metadata(cluster, "failover")[0]), "a new leader", 30)
    failover_s = time.monotonic() - killed_at
    p.run_for(2.0)
    p.flush(90)
    assert not p.failed, p.failed[:5]
    assert failover_s < 6 + 2 + 10  # session timeout + 2 s, plus the metadata poll of this test
    cluster.brokers[leader].start()
    # the restarted broker truncates, catches up and is back in every ISR
    wait_for(lambda: all(sorted(m.isrs) == [1, 2, 3] for m in topic_metadata(cluster, "failover").values()),
             "the restarted broker back in the ISR", 60)
    check_history(p.acked, read_all(cluster.bootstrap_servers, "failover", 2))
    wait_replicas_identical(cluster, "failover", 2)
    assert new_leader != leader


def test_a_follower_out_of_touch_leaves_the_isr_and_comes_back(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "lagging", partitions=1, rf=3)
    md = topic_metadata(cluster, "lagging")[0]
    follower = next(r for r in md.replicas if r != md.leader)
    p = AckedProducer(cluster.bootstrap_servers, "lagging")
    cluster.brokers[follower].signal(signal.SIGSTOP)
    try:
        p.run_for(1.0)
        wait_for(lambda: follower not in topic_metadata(cluster, "lagging")[0].isrs, "the ISR to shrink", 30)
        p.run_for(1.0)  # writes go on with two in-sync replicas (min.insync.replicas=2)
        p.flush(30)
    finally:
        cluster.brokers[follower].signal(signal.SIGCONT)
    wait_for(lambda: follower in topic_metadata(cluster, "lagging")[0].isrs, "the ISR to expand", 30)
    assert not p.failed
    check_history(p.acked, read_all(cluster.bootstrap_servers, "lagging", 1))
    wait_replicas_identical(cluster, "lagging", 1)


def test_not_enough_replicas_refuses_acks_all(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "min-isr", partitions=1, rf=3)
    md = topic_metadata(cluster, "min-isr")[0]
    followers = [r for r in md.replicas if r != md.leader]
    p = AckedProducer(cluster.bootstrap_servers, "min-isr", **{"message.timeout.ms": 3000})
    before = dict(p.acked)
    for f in followers:
        cluster.brokers[f].signal(signal.SIGSTOP)
    try:
        wait_for(lambda: topic_metadata(cluster, "min-isr")[0].isrs == [md.leader], "the ISR to be the leader alone",
                 30)
        p.send(5)
        p.producer.flush(10)
        codes = {err.name() for _ident, err in p.failed}
        assert p.acked == before and codes & {"NOT_ENOUGH_REPLICAS", "_MSG_TIMED_OUT"}, codes
    finally:
        for f in followers:
            cluster.brokers[f].signal(signal.SIGCONT)
    wait_for(lambda: len(topic_metadata(cluster, "min-isr")[0].isrs) == 3, "the ISR to be whole again", 30)
    p = AckedProducer(cluster.bootstrap_servers, "min-isr")
    p.send(10)
    p.flush(30)
    assert len(p.acked) == 11


def test_controlled_shutdown_moves_leadership_without_errors(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "graceful", partitions=1, rf=3)
    leader = topic_metadata(cluster, "graceful")[0].leader
    p = AckedProducer(cluster.bootstrap_servers, "graceful")
    p.run_for(1.0)
    stopped = time.monotonic()
    assert cluster.brokers[leader].stop() == 0
    stop_s = time.monotonic() - stopped
    p.run_for(2.0)
    p.flush(30)
    assert not p.failed
    new = topic_metadata(cluster, "graceful")[0]
    assert new.leader not in (-1, leader)
    cluster.brokers[leader].start()
    wait_for(lambda: len(topic_metadata(cluster, "graceful")[0].isrs) == 3, "the ISR to be whole again", 60)
    check_history(p.acked, read_all(cluster.bootstrap_servers, "graceful", 1))
    assert stop_s < 30
    assert os.path.exists(Path(cluster.brokers[leader].data_dir) / ".kafka_cleanshutdown") or \
        cluster.brokers[leader].running


def test_producer_ids_are_unique_across_the_cluster(cluster):
    """Idempotent producers keep their state with the partition as leadership moves, so two
    producers must never share an id: each broker takes blocks from /latest_producer_id_block."""
    from broker_client import request

    ensure_all_running(cluster)
    ids = []
    for bid in cluster.brokers:
        with connect(cluster, bid) as c:
            for _ in range(3):
                resp = c.call(22, 4, request(22, transactional_id=None, transaction_timeout_ms=-1,
                                             producer_id=-1, producer_epoch=-1))
                assert resp.error_code == 0
                ids.append(resp.producer_id)
    assert len(set(ids)) == len(ids)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        block = json.loads(zk.get("/latest_producer_id_block")[0])
        assert block["version"] == 1 and int(block["block_end"]) >= max(ids)
    finally:
        zk.stop()


def test_leader_adopts_its_own_isr_write_whose_answer_was_lost(cluster):
    """The leader's conditional ISR write can land in ZooKeeper with its answer lost (a timeout
    under load); the leader then holds a stale zk version. Simulated by rewriting the same state
    behind its back: the next ISR shrink must still succeed (the leader adopts the state of its
    own epoch), or acks=all would wait forever on a stopped follower."""
    ensure_all_running(cluster)
    name = "isr-lost-answer"
    client = admin(cluster)
    new = NewTopic(name, num_partitions=1, replica_assignment=[[1, 2]], config={"min.insync.replicas": "1"})
    client.create_topics([new], operation_timeout=30)[name].result(60)
    wait_for(lambda: (lambda m: m and m[0].leader == 1 and sorted(m[0].isrs) == [1, 2])(topic_metadata(cluster, name)),
             "leader 1 with ISR [1, 2]", 60)
    p = AckedProducer(cluster.bootstrap_servers, name, keys=1)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        path = f"/brokers/topics/{name}/partitions/0/state"
        data, stat = zk.get(path)
        zk.set(path, data, version=stat.version)  # same bytes, one zk version on
        cluster.brokers[2].signal(signal.SIGSTOP)
        try:
            p.send(100)
            p.flush(30)  # acknowledged once the ISR has shrunk to [1]
            state = json.loads(zk.get(path)[0])
            assert state["isr"] == [1] and state["leader"] == 1
            # the leader shrank it itself (3 s lag limit), in its own epoch; the controller would
            # only have rescued it with a new epoch once broker 2's 6 s session expired
            assert state["leader_epoch"] == json.loads(data)["leader_epoch"], state
        finally:
            cluster.brokers[2].signal(signal.SIGCONT)
    finally:
        zk.stop()
    assert not p.failed
    wait_for(lambda: sorted(topic_metadata(cluster, name)[0].isrs) == [1, 2], "broker 2 back in the ISR", 60)
    check_history(p.acked, read_all(cluster.bootstrap_servers, name, 1))


@pytest.mark.parametrize("unclean", [False, True])
def test_the_seed_scenario_stale_follower_and_dead_leader(cluster, unclean):
    """RF=2: the follower drops out of the ISR, the leader takes more acknowledged writes alone
    (min.insync.replicas=1), then dies, and the stale follower returns. Clean election: the
    partition stays offline and, once the old leader is back, nothing acknowledged is lost.
    Unclean: the stale follower leads, and exactly the records only the old leader had are
    gone."""
    ensure_all_running(cluster)
    name = f"seed-{'unclean' if unclean else 'clean'}"
    client = admin(cluster)
    new = NewTopic(name, num_partitions=1, replica_assignment=[[1, 2]],
                   config={"min.insync.replicas": "1", "unclean.leader.election.enable": str(unclean).lower()})
    client.create_topics([new], operation_timeout=30)[name].result(60)
    wait_for(lambda: (lambda m: m and m[0].leader == 1 and sorted(m[0].isrs) == [1, 2])(topic_metadata(cluster, name)),
             "leader 1 with ISR [1, 2]", 60)
    p = AckedProducer(cluster.bootstrap_servers, name, keys=1)
    p.send(199)
    p.flush(30)
    both = dict(p.acked)
    cluster.brokers[2].signal(signal.SIGSTOP)  # the follower goes stale (less than a session)
    try:
        p.send(50)
        wait_for(lambda: topic_metadata(cluster, name)[0].isrs == [1], "the ISR to shrink to [1]", 20)
        p.send(100)
        p.flush(30)
        only_leader = {k: v for k, v in p.acked.items() if k not in both}
        assert len(only_leader) == 150 and not p.failed
        cluster.brokers[1].kill()
    finally:
        cluster.brokers[2].signal(signal.SIGCONT)
    if not unclean:
        wait_for(lambda: (lambda m: m and m[0].leader == -1)(topic_metadata(cluster, name)), "the partition offline",
                 30)
        time.sleep(2)
        assert topic_metadata(cluster, name)[0].leader == -1  # it stays offline: no unclean election
        cluster.brokers[1].start()
        wait_for(lambda: (lambda m: m and m[0].leader == 1 and sorted(m[0].isrs) == [1, 2])(
            topic_metadata(cluster, name)), "leader 1 back, the follower caught up", 60)
        check_history(p.acked, read_all(cluster.bootstrap_servers, name, 1))
    else:
        wait_for(lambda: (lambda m: m and m[0].leader == 2)(topic_metadata(cluster, name)), "broker 2 leading", 30)
        read = read_all(cluster.bootstrap_servers, name, 1)
        # the new leader's log is a prefix of what was acknowledged: everything from before the
        # follower went stale, plus at most what its last fetch had in flight; the rest, which
        # only the dead leader had, is gone
        idents = [(k, int(v.split(b":")[1])) for _o, k, v in read[0]]
        n = len(idents)
        assert idents == [(b"k0", s) for s in range(n)], "the new leader's log is not a prefix of the history"
        assert 200 <= n < 350, n
        lost = {k for k in p.acked if k[1] >= n}
        assert lost and lost <= set(only_leader)
        check_history({k: v for k, v in p.acked.items() if k not in lost}, read)
        cluster.brokers[1].start()
        wait_for(lambda: (lambda m: m and sorted(m[0].isrs) == [1, 2])(topic_metadata(cluster, name)),
                 "the old leader truncated and back in the ISR", 60)
        assert read_all(cluster.bootstrap_servers, name, 1) == read
        wait_for(lambda: len(set(partition_logs(cluster, name, 0).values())) == 1, "identical replicas", 30)


def test_zookeeper_restarted_briefly_loses_nothing(cluster):
    """ZooKeeper stops for a moment and comes back on the same port and data: brokers keep
    serving acks=all writes (nothing needed ZooKeeper meanwhile), reconnect within their
    sessions, and the cluster goes on."""
    ensure_all_running(cluster)
    create_topic(cluster, "zk-restart", partitions=2, rf=3)
    p = AckedProducer(cluster.bootstrap_servers, "zk-restart")
    p.run_for(1.0)
    cluster.zookeeper.stop()
    try:
        p.run_for(2.0)
    finally:
        cluster.zookeeper.start()
    p.run_for(1.0)
    p.flush(60)
    assert not p.failed
    ensure_all_running(cluster)
    check_history(p.acked, read_all(cluster.bootstrap_servers, "zk-restart", 2))
    # the controller still works: a new topic is created and led
    create_topic(cluster, "after-zk-restart", partitions=1, rf=3)


def test_deleting_a_topic_removes_every_replica(cluster):
    ensure_all_running(cluster)
    create_topic(cluster, "doomed", partitions=2, rf=3)
    # No client of this test may auto-create "doomed" again once it is deleted (the broker
    # allows auto-creation, as Kafka's default): a librdkafka handle that still knows the topic
    # asks for it by name in its metadata refreshes (the producer every second here), and a
    # producer's Metadata requests allow auto-creation by default.
    no_create = {"allow.auto.create.topics": False}
    p = AckedProducer(cluster.bootstrap_servers, "doomed", **no_create)
    p.send(100)
    p.close(30)

    def no_create_admin():
        return AdminClient({**client_conf(cluster), **no_create})
    client = no_create_admin()
    client.delete_topics(["doomed"], operation_timeout=30)["doomed"].result(60)
    # a listing of every topic: asking for "doomed" by name could auto-create it again
    wait_for(lambda: "doomed" not in no_create_admin().list_topics(timeout=10).topics, "the topic gone from metadata",
             30)
    wait_for(lambda: not any((Path(b.data_dir) / f"doomed-{p}").exists() for b in cluster.brokers.values()
                             for p in range(2)), "every replica's log deleted", 30)
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        # the controller removes the znodes last, after the brokers have dropped the topic from
        # their metadata and deleted its logs (Kafka's TopicDeletionManager does the same)
        wait_for(lambda: not any(zk.exists(f"{path}/doomed") for path in ("/brokers/topics", "/admin/delete_topics",
                                                                          "/config/topics")),
                 "the topic's znodes removed", 30)
    finally:
        zk.stop()


def test_the_group_coordinator_fails_over_with_its_committed_offsets(cluster):
    """Kill the broker coordinating a group: the group's __consumer_offsets partition gets a new
    leader, which loads the group; a consumer of the same group resumes exactly after what was
    committed."""
    from confluent_kafka import Consumer, TopicPartition

    from kafkacore.coordinator.offset_store import partition_for

    ensure_all_running(cluster)
    create_topic(cluster, "grp", partitions=2, rf=3)
    p = AckedProducer(cluster.bootstrap_servers, "grp")
    p.send(599)
    p.flush(30)
    conf = {**client_conf(cluster), "group.id": "failover-group", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    first = Consumer(conf)
    first.subscribe(["grp"])
    seen = []
    deadline = time.monotonic() + 60
    while len(seen) < 300 and time.monotonic() < deadline:
        seen += [m for m in first.consume(300 - len(seen), 1.0) if not m.error()]
    assert len(seen) == 300
    first.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in first.committed([TopicPartition("grp", 0), TopicPartition("grp", 1)])}
    first.close()
    offsets_partition = partition_for("failover-group", 4)  # offsets.topic.num.partitions=4 here
    coordinator = topic_metadata(cluster, "__consumer_offsets")[offsets_partition].leader
    cluster.brokers[coordinator].kill()
    try:
        wait_for(lambda: topic_metadata(cluster, "__consumer_offsets")[offsets_partition].leader not in (-1, coordinator),
                 "a new leader of the group's offsets partition", 30)
        second = Consumer(conf)
        second.subscribe(["grp"])
        rest = []
        deadline = time.monotonic() + 60
        while len(rest) < 300 and time.monotonic() < deadline:
            rest += [m for m in second.consume(300, 1.0) if not m.error()]
        second.close()
    finally:
        cluster.brokers[coordinator].start()
    got = {(m.partition(), m.offset()) for m in rest}
    assert len(rest) == 300 and len(got) == 300
    assert all(off >= committed[part] for part, off in got), "records before the committed offsets came again"
    assert {(m.partition(), m.offset()) for m in seen}.isdisjoint(got)


def test_a_zombie_leader_acknowledges_nothing_that_is_lost(cluster):
    """SIGSTOP the leader past its ZooKeeper session: a new leader is elected. SIGCONT: the old
    one, until it learns it was deposed, can neither grow its ISR nor move its high watermark
    (its followers follow the new leader, its ISR write fails the version check), so no acks=all
    write it takes is acknowledged and then lost."""
    ensure_all_running(cluster)
    create_topic(cluster, "zombie", partitions=1, rf=3)
    old = topic_metadata(cluster, "zombie")[0].leader
    p = AckedProducer(cluster.bootstrap_servers, "zombie", **{"message.timeout.ms": 30000})
    p.run_for(1.0)
    cluster.brokers[old].signal(signal.SIGSTOP)
    try:
        wait_for(lambda: topic_metadata(cluster, "zombie")[0].leader not in (-1, old), "a new leader", 30)
        p.run_for(1.0)
    finally:
        cluster.brokers[old].signal(signal.SIGCONT)
    p.run_for(2.0)
    p.flush(60)
    ensure_all_running(cluster)
    wait_for(lambda: len(topic_metadata(cluster, "zombie")[0].isrs) == 3, "the old leader back as a follower", 60)
    check_history(p.acked, read_all(cluster.bootstrap_servers, "zombie", 1))
    wait_replicas_identical(cluster, "zombie", 1)


def test_other_clients_work_against_the_cluster(cluster):
    """kafka-python, aiokafka and kafkacore's own clients, unmodified, on a replicated topic."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from kafka import KafkaConsumer, KafkaProducer

    from kafkacore import Consumer, Producer

    ensure_all_running(cluster)
    create_topic(cluster, "clients", partitions=3, rf=3)
    kp = KafkaProducer(**kafka_python_conf(cluster), acks="all")
    for i in range(50):
        kp.send("clients", key=b"kp%d" % i, value=b"kafka-python")
    kp.flush(30)
    kp.close()

    async def aio():
        ap = AIOKafkaProducer(**kafka_python_conf(cluster, aiokafka=True), acks="all")
        await ap.start()
        try:
            for i in range(50):
                await ap.send_and_wait("clients", key=b"ap%d" % i, value=b"aiokafka")
        finally:
            await ap.stop()
    asyncio.run(aio())
    with Producer({**java_conf(cluster), "acks": "all"}) as kc:
        for i in range(50):
            kc.send("clients", b"kafkacore", key=b"kc%d" % i)
        kc.flush(30)
    expected = {b"kafka-python": 50, b"aiokafka": 50, b"kafkacore": 50}

    def count(values):
        out = {}
        for v in values:
            out[v] = out.get(v, 0) + 1
        return out

    kc_consumer = Consumer({**java_conf(cluster), "group.id": "clients-kc",
                            "auto.offset.reset": "earliest"})
    kc_consumer.subscribe(["clients"])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 150 and time.monotonic() < deadline:
        got += [r.value for r in kc_consumer.poll(1.0)]
    kc_consumer.close()
    assert count(got) == expected

    kcons = KafkaConsumer("clients", **kafka_python_conf(cluster), auto_offset_reset="earliest",
                          group_id="clients-kp", consumer_timeout_ms=20000)
    got = [m.value for _, m in zip(range(150), kcons)]
    kcons.close()
    assert count(got) == expected

    async def aio_read():
        c = AIOKafkaConsumer("clients", **kafka_python_conf(cluster, aiokafka=True), auto_offset_reset="earliest",
                             group_id="clients-aio")
        await c.start()
        try:
            out = []
            while len(out) < 150:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                out += [m.value for msgs in batch.values() for m in msgs]
            return out
        finally:
            await c.stop()
    assert count(asyncio.run(aio_read())) == expected


def test_elect_leaders_brings_the_preferred_replica_back(cluster):
    """After a controlled shutdown and restart of the preferred replica, another broker leads;
    ElectLeaders (PREFERRED) through confluent-kafka's AdminClient makes the preferred replica
    leader again, and a second call answers ELECTION_NOT_NEEDED."""
    from confluent_kafka import ElectionType, TopicPartition

    ensure_all_running(cluster)
    client = admin(cluster)
    client.create_topics([NewTopic("preferred", num_partitions=1, replica_assignment=[[1, 2, 3]])],
                         operation_timeout=30)["preferred"].result(60)
    wait_for(lambda: (lambda m: m and m[0].leader == 1 and len(m[0].isrs) == 3)(topic_metadata(cluster, "preferred")),
             "broker 1 leading with a full ISR", 60)
    assert cluster.brokers[1].stop() == 0
    wait_for(lambda: topic_metadata(cluster, "preferred")[0].leader in (2, 3), "leadership moved", 30)
    cluster.brokers[1].start()
    wait_for(lambda: len(topic_metadata(cluster, "preferred")[0].isrs) == 3, "broker 1 back in the ISR", 60)
    assert topic_metadata(cluster, "preferred")[0].leader != 1  # no automatic rebalance in these tests
    tp = TopicPartition("preferred", 0)
    client = admin(cluster)  # kept alive until its futures resolve
    result = client.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    assert list(result.values()) == [None], result  # no error
    wait_for(lambda: topic_metadata(cluster, "preferred")[0].leader == 1, "broker 1 leading again", 30)
    again = client.elect_leaders(ElectionType.PREFERRED, [tp]).result(30)
    [err] = again.values()
    assert err is not None and err.name() == "ELECTION_NOT_NEEDED", again
