"""Unmodified clients against the replicated cluster, each bootstrapped from ONE broker, on RF=3
topics whose partition leaders are spread over the three brokers: kcat (librdkafka),
kafka-python, aiokafka, kafkacore's own Producer/Consumer and the kafkacore_spark sink and
source. The bootstrap broker only follows most partitions and a follower refuses consumer
fetches and produces (NOT_LEADER_OR_FOLLOWER), so every exact read-back here shows the client
found and used each partition's leader. The Spark read is repeated after a leader moved, and
a Spark task's read (read_split) goes on through a leader change in the middle of its split.

(confluent-kafka is the driver of every test in test_replication.py; test_replication's
test_other_clients_work_against_the_cluster bootstraps the same Python clients from all
three brokers.)"""
import asyncio
import json
import os
import shutil
import subprocess
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from _cluster import wait_for
from kafkacore.client.cluster import Cluster

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


# -- helpers --------------------------------------------------------------------------------------
def seen_by(broker, topic):
    """{partition: (leader, replicas, isr)} in the Metadata answer of that one broker (a fresh
    kafkacore Cluster view asks its bootstrap server first, and only it)."""
    resp = _metadata_from(broker, [topic])
    return {p.partition_index: (p.leader_id, list(p.replica_nodes), sorted(p.isr_nodes))
            for t in resp.topics if t.name == topic and not t.error_code for p in t.partitions}


def _metadata_from(broker, topics):
    host, port = broker.address.rsplit(":", 1)
    view = Cluster([(host, int(port))], client_id="cluster-clients-test", request_timeout_ms=10000)
    try:
        return view.refresh(topics, allow_auto_create=False)
    finally:
        view.close()


def running(cluster):
    return [b for b in cluster.brokers.values() if b.running]


def agreed_state(cluster, topic, expect):
    """Every running broker's metadata for the topic equals ``expect`` (also a predicate)."""
    return all(seen_by(b, topic) == expect for b in running(cluster))


def create_spread_topic(cluster, name, partitions):
    """An RF=3 topic whose partition p prefers broker p % 3 + 1 as leader: each broker leads a
    third of it and follows the rest. Waits until every broker's metadata shows those leaders
    with full ISRs."""
    ids = sorted(cluster.brokers)
    assignment = [[ids[(p + i) % len(ids)] for i in range(len(ids))] for p in range(partitions)]
    client = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})  # alive until the future resolves
    client.create_topics([NewTopic(name, num_partitions=partitions, replica_assignment=assignment)],
                         operation_timeout=30)[name].result(60)
    expect = {p: (a[0], a, sorted(a)) for p, a in enumerate(assignment)}
    wait_for(lambda: agreed_state(cluster, name, expect),
             f"{name}: leaders {[a[0] for a in assignment]}, full ISRs", 60)
    return assignment


def brokers_seen_by(broker):
    return sorted(b.node_id for b in _metadata_from(broker, []).brokers)


def ensure_all_running(cluster):
    """Every broker running and known to every broker's metadata (a broker registers in
    ZooKeeper before the controller's UpdateMetadata tells the others, and CreateTopics with
    a manual assignment checks the metadata)."""
    for b in cluster.brokers.values():
        if not b.running:
            b.start()
    ids = sorted(cluster.brokers)
    wait_for(lambda: all(brokers_seen_by(b) == ids for b in cluster.brokers.values()),
             "every broker in every broker's metadata", 60)


# -- kcat -----------------------------------------------------------------------------------------
def kcat(args, *, input=None, timeout=60):
    proc = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()[-3000:]}"
    return proc


def test_kcat_produces_consumes_and_lists_through_one_broker(cluster):
    if KCAT is None:
        if os.environ.get("CI"):
            raise RuntimeError("kcat is not installed (ci/compat_deps.sh installs it)")
        pytest.skip("kcat is not installed (ci/compat_deps.sh installs it)")
    ensure_all_running(cluster)
    assignment = create_spread_topic(cluster, "kcat-rf3", 3)
    first = cluster.brokers[1]  # leads partition 0 only
    boot = ["-b", first.address, "-X", "client.id=cluster-kcat"]

    # -L: all three brokers, and each partition's leader, replicas and ISR as the cluster has them
    md = json.loads(kcat(["-L", "-J", *boot, "-t", "kcat-rf3"]).stdout)
    assert sorted((b["id"], b["name"]) for b in md["brokers"]) == sorted(
        (i, b.address) for i, b in cluster.brokers.items())
    [topic] = md["topics"]
    assert topic["topic"] == "kcat-rf3" and not topic.get("error")
    listed = {p["partition"]: (p["leader"], [r["id"] for r in p["replicas"]], sorted(i["id"] for i in p["isrs"]))
              for p in topic["partitions"]}
    assert listed == {p: (a[0], a, sorted(a)) for p, a in enumerate(assignment)}

    # -P with acks=all: keyed records the partitioner spreads, plus an explicit run per
    # partition so each leader gets writes whatever the key hashes are
    lines = [f"key-{i}:kcat-{i}" for i in range(90)]
    kcat(["-P", *boot, "-t", "kcat-rf3", "-X", "acks=all", "-K", ":"], input=("\n".join(lines) + "\n").encode())
    sent = {f"key-{i}": f"kcat-{i}" for i in range(90)}
    for p in range(3):
        run = [f"p{p}-{i}" for i in range(10)]
        kcat(["-P", *boot, "-t", "kcat-rf3", "-X", "acks=all", "-p", str(p)], input=("\n".join(run) + "\n").encode())

    # -C -e: everything back, offsets dense per partition, each record fetched from its
    # partition's leader (the JSON "broker" field is the broker that served the fetch)
    out = kcat(["-C", *boot, "-t", "kcat-rf3", "-o", "beginning", "-e", "-q", "-J"]).stdout.decode()
    got = [json.loads(line) for line in out.splitlines() if line.strip()]
    by_partition = {}
    for m in got:
        by_partition.setdefault(m["partition"], []).append(m)
    assert sorted(by_partition) == [0, 1, 2]
    for p, msgs in by_partition.items():
        assert [m["offset"] for m in msgs] == list(range(len(msgs))), p
        assert {m["broker"] for m in msgs} == {assignment[p][0]}, p
        assert [m["payload"] for m in msgs if m["key"] is None] == [f"p{p}-{i}" for i in range(10)]
    keyed = {m["key"]: m["payload"] for m in got if m["key"] is not None}
    assert keyed == sent and len(got) == 90 + 30
    assert all(len([m for m in msgs if m["key"] is not None]) > 0 for msgs in by_partition.values()), \
        "the keyed records all hashed to some partitions only"


# -- kafka-python, aiokafka, kafkacore ------------------------------------------------------------
def test_python_clients_bootstrapped_from_one_broker(cluster):
    """kafka-python 3 from broker 2, aiokafka from broker 3, kafkacore from broker 1: each writes
    acks=all to every partition and reads back every client's records (assigned partitions, no
    group)."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTP
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KpTP

    from kafkacore import Consumer, Producer

    ensure_all_running(cluster)
    topic = "py-clients-rf3"
    create_spread_topic(cluster, topic, 3)
    b1, b2, b3 = (cluster.brokers[i].address for i in (1, 2, 3))
    per_client = 12  # per partition

    kp = KafkaProducer(bootstrap_servers=b2, acks="all", retries=5)
    futures = [kp.send(topic, key=b"kp-%d" % i, value=b"kafka-python-%d" % i, partition=i % 3)
               for i in range(3 * per_client)]
    kp.flush(30)
    kp.close(10)
    assert all(f.get(0).partition == i % 3 for i, f in enumerate(futures))

    async def aio_produce():
        ap = AIOKafkaProducer(bootstrap_servers=b3, acks="all")
        await ap.start()
        try:
            for i in range(3 * per_client):
                md = await ap.send_and_wait(topic, key=b"ap-%d" % i, value=b"aiokafka-%d" % i, partition=i % 3)
                assert md.partition == i % 3
        finally:
            await ap.stop()
    asyncio.run(aio_produce())

    with Producer({"bootstrap.servers": b1, "acks": "all"}) as kc:
        handles = [kc.send(topic, b"kafkacore-%d" % i, key=b"kc-%d" % i, partition=i % 3)
                   for i in range(3 * per_client)]
        assert kc.flush(30) == 0
    assert all(h.result(0).partition == i % 3 for i, h in enumerate(handles))

    total = 3 * 3 * per_client
    # Per partition, each producer's records are in its send order (one producer at a time).
    want = {p: [(b"%s-%d" % (k, i), b"%s-%d" % (v, i)) for k, v in ((b"kp", b"kafka-python"), (b"ap", b"aiokafka"),
                                                                     (b"kc", b"kafkacore"))
                for i in range(p, 3 * per_client, 3)] for p in range(3)}

    def check(records):  # [(partition, offset, key, value)]
        by_p = {}
        for p, o, k, v in sorted(records):
            by_p.setdefault(p, []).append((o, (k, v)))
        assert {p: [o for o, _ in rs] for p, rs in by_p.items()} == {p: list(range(len(want[p]))) for p in range(3)}
        assert {p: [kv for _, kv in rs] for p, rs in by_p.items()} == want

    kcons = KafkaConsumer(bootstrap_servers=b2, group_id=None, enable_auto_commit=False)
    kcons.assign([KpTP(topic, p) for p in range(3)])
    kcons.seek_to_beginning()
    got = []
    deadline = time.monotonic() + 30
    while len(got) < total and time.monotonic() < deadline:
        for msgs in kcons.poll(timeout_ms=500).values():
            got += [(m.partition, m.offset, m.key, m.value) for m in msgs]
    kcons.close()
    check(got)

    async def aio_read():
        c = AIOKafkaConsumer(bootstrap_servers=b3, group_id=None, enable_auto_commit=False)
        await c.start()
        try:
            c.assign([AioTP(topic, p) for p in range(3)])
            await c.seek_to_beginning()
            out = []
            deadline = time.monotonic() + 30
            while len(out) < total and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                out += [(m.partition, m.offset, m.key, m.value) for msgs in batch.values() for m in msgs]
            return out
        finally:
            await c.stop()
    check(asyncio.run(aio_read()))

    kc_consumer = Consumer({"bootstrap.servers": b1, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        kc_consumer.assign([(topic, p) for p in range(3)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < total and time.monotonic() < deadline:
            got += [(r.partition, r.offset, r.key, r.value) for r in kc_consumer.poll(0.5)]
    finally:
        kc_consumer.close(autocommit=False)
    check(got)


def test_kafkacore_consumer_offset_lookups_follow_a_moved_leader(cluster):
    """A long-lived kafkacore Consumer bootstrapped from broker 1 knows broker 3 as the leader of
    partition 2; broker 3 shuts down and broker 1 takes over. The consumer's offset lookups
    (ListOffsets, as the Spark source's planning and a stream's every micro-batch make them)
    refresh the stale metadata and ask the new leader, as Java's consumer does, instead of
    failing on the departed leader's address."""
    from kafkacore import Consumer, Producer

    ensure_all_running(cluster)
    topic = "kc-offsets-rf3"
    assignment = create_spread_topic(cluster, topic, 3)
    boot = cluster.brokers[1].address
    tps = [(topic, p) for p in range(3)]
    with Producer({"bootstrap.servers": boot, "acks": "all"}) as prod:
        for i in range(30):
            prod.send(topic, b"v%d" % i, partition=i % 3, timestamp_ms=1_700_000_000_000 + i)
        assert prod.flush(30) == 0

    consumer = Consumer({"bootstrap.servers": boot, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    moved = assignment[2][0]
    try:
        assert consumer.end_offsets(tps) == {tp: 10 for tp in tps}  # leaders cached: 1, 2 and 3
        assert cluster.brokers[moved].stop() == 0
        after = {p: (a[1] if a[0] == moved else a[0]) for p, a in enumerate(assignment)}
        wait_for(lambda: all({p: s[0] for p, s in seen_by(b, topic).items()} == after for b in running(cluster)),
                 f"leaders {after} without broker {moved}", 60)
        # nothing has refreshed the consumer's metadata since: it still names broker 3
        assert consumer._cluster.leader(topic, 2) == moved
        assert consumer.end_offsets(tps) == {tp: 10 for tp in tps}
        assert consumer.beginning_offsets(tps) == {tp: 0 for tp in tps}
        found = consumer.offsets_for_times({(topic, 2): 1_700_000_000_000 + 15})
        assert found[(topic, 2)][0] == 5  # record 17 is partition 2's 6th (i = 2, 5, 8, 11, 14, 17)
        consumer.assign(tps)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 30 and time.monotonic() < deadline:
            got += [(r.partition, r.offset, r.value) for r in consumer.poll(0.5)]
        assert sorted(got) == sorted((i % 3, i // 3, b"v%d" % i) for i in range(30))
    finally:
        consumer.close(autocommit=False)
        ensure_all_running(cluster)
    wait_for(lambda: all(s[2] == [1, 2, 3] for s in seen_by(cluster.brokers[1], topic).values()),
             f"broker {moved} back in the ISRs", 60)


# -- Spark ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    """A local[2] session as tests/spark makes it (that conftest is not visible from here); one
    already running (the whole suite in one process) is reused and left running."""
    pytest.importorskip("pyspark")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import kafkacore_spark

    existing = SparkSession.getActiveSession()
    session = existing or (
        SparkSession.builder.master("local[2]").appName("kafkacore-cluster-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("spark-warehouse")))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    kafkacore_spark.register(session)  # workers run this interpreter unless PYSPARK_PYTHON says otherwise
    yield session
    if existing is None:
        session.stop()


def _spark_write(spark, bootstrap, topic, rows):
    """rows: [(partition, key, value)], written in this order by one task (so each partition's
    records keep it) through the kafkacore sink (idempotent, acks=all)."""
    df = spark.createDataFrame(rows, "partition int, key binary, value binary").coalesce(1)
    (df.write.format("kafkacore").mode("append").option("kafka.bootstrap.servers", bootstrap)
     .option("topic", topic).save())


def _spark_read(spark, bootstrap, topic):
    """{partition: [(offset, key, value)]} from a batch read through the broker backend."""
    rows = (spark.read.format("kafkacore").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("kafkaConsumer.pollTimeoutMs", "30000").load()
            .select("partition", "offset", "key", "value").collect())
    out = {}
    for r in sorted(rows, key=lambda r: (r["partition"], r["offset"])):
        out.setdefault(r["partition"], []).append((r["offset"], bytes(r["key"]), bytes(r["value"])))
    return out


def _expected(rows):
    out = {}
    for p, k, v in rows:
        out.setdefault(p, []).append((k, v))
    return {p: [(o, k, v) for o, (k, v) in enumerate(kvs)] for p, kvs in out.items()}


def test_spark_sink_and_source_through_one_broker_follow_the_leaders(cluster, spark):
    """The sink writes and the broker-backed source reads an RF=3 topic of six partitions led by
    all three brokers, both bootstrapped from broker 1 only; after broker 2 (leader of
    partitions 1 and 4) shuts down, its partitions are led by broker 3 and a second write and
    read still give exactly every record."""
    ensure_all_running(cluster)
    topic = "spark-rf3"
    assignment = create_spread_topic(cluster, topic, 6)
    boot = cluster.brokers[1].address
    assert {a[0] for a in assignment} == {1, 2, 3}

    rows = [(p, b"k%d-%d" % (p, i), b"first-%d-%d" % (p, i)) for p in range(6) for i in range(20 + 7 * p)]
    _spark_write(spark, boot, topic, rows)
    got = _spark_read(spark, boot, topic)
    assert {p: len(rs) for p, rs in got.items()} == {p: 20 + 7 * p for p in range(6)}
    assert got == _expected(rows)

    moved = 2
    try:
        assert cluster.brokers[moved].stop() == 0  # controlled shutdown: its leaderships move
        after = {p: (a[1] if a[0] == moved else a[0]) for p, a in enumerate(assignment)}  # next replica in line
        wait_for(lambda: all({p: s[0] for p, s in seen_by(b, topic).items()} == after and
                             all(moved not in s[2] for s in seen_by(b, topic).values()) for b in running(cluster)),
                 f"leaders {after} without broker {moved}", 60)
        more = [(p, b"k%d-m%d" % (p, i), b"second-%d-%d" % (p, i)) for p in range(6) for i in range(10)]
        _spark_write(spark, boot, topic, more)
        got = _spark_read(spark, boot, topic)
        assert {p: len(rs) for p, rs in got.items()} == {p: 30 + 7 * p for p in range(6)}
        assert got == _expected(rows + more)
    finally:
        ensure_all_running(cluster)
    # leave the module's cluster whole: broker 2 back in every ISR
    wait_for(lambda: all(s[2] == [1, 2, 3] for s in seen_by(cluster.brokers[1], topic).values()),
             f"broker {moved} back in the ISRs", 60)


@pytest.mark.parametrize("moved", [2, 1], ids=["leader-is-not-the-bootstrap", "leader-is-the-bootstrap"])
def test_spark_task_read_survives_a_leader_change_mid_read(cluster, moved):
    """Issue 30's "surviving a leader change mid-read": the source's task code (read_split) reads
    a BrokerSplit its batch reader planned, bootstrapped from broker 1; after the first Arrow
    batch the partition's leader shuts down (controlled), and the rest of the split must come
    from the new leader: every record of the split exactly once, in order. Small fetches
    (kafka.max.partition.fetch.bytes) keep most of the split at the broker when the leader
    goes. Run twice: the departing leader is another broker, then the bootstrap broker itself."""
    pytest.importorskip("pyspark")
    from kafkacore import Producer
    from kafkacore_spark.backends import BrokerSplit, read_split
    from kafkacore_spark.options import parse_source_options
    from kafkacore_spark.source import KafkacoreBatchReader

    ensure_all_running(cluster)
    topic = f"spark-mid-read-{moved}"
    assignment = create_spread_topic(cluster, topic, 3)
    partition = moved - 1  # partition p is led by broker p + 1
    assert assignment[partition][0] == moved
    boot = cluster.brokers[1].address
    n = 3000
    values = [b"mid-read-%05d-" % i + b"x" * 80 for i in range(n)]
    with Producer({"bootstrap.servers": boot, "acks": "all", "batch.size": 2048, "linger.ms": 5}) as prod:
        for v in values:
            prod.send(topic, v, partition=partition)
        assert prod.flush(30) == 0

    options = {"kafka.bootstrap.servers": boot, "assign": json.dumps({topic: [partition]}),
               "kafka.max.partition.fetch.bytes": "4096", "kafkaConsumer.pollTimeoutMs": "60000"}
    reader = KafkacoreBatchReader(parse_source_options(options, streaming=False))
    [split] = reader.partitions()
    assert isinstance(split, BrokerSplit) and (split.start_offset, split.end_offset) == (0, n)

    batches = read_split(split, reader.opts)
    first = next(batches)
    got = first.column("offset").to_pylist()
    assert 0 < len(got) < n // 4, len(got)  # most of the split is still at the broker
    after = {p: (a[1] if a[0] == moved else a[0]) for p, a in enumerate(assignment)}
    try:
        assert cluster.brokers[moved].stop() == 0  # controlled shutdown: its leaderships move
        wait_for(lambda: all({p: s[0] for p, s in seen_by(b, topic).items()} == after for b in running(cluster)),
                 f"leaders {after} without broker {moved}", 60)
        values_read = first.column("value").to_pylist()
        for batch in batches:
            got += batch.column("offset").to_pylist()
            values_read += batch.column("value").to_pylist()
        assert got == list(range(n))  # every record of the split, once, in order
        assert values_read == values
    finally:
        batches.close()
        ensure_all_running(cluster)
    wait_for(lambda: all(s[2] == [1, 2, 3] for s in seen_by(cluster.brokers[1], topic).values()),
             f"broker {moved} back in the ISRs", 60)
