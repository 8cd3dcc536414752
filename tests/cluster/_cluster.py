"""What the cluster's tests share (a module of its own: several test directories have a
conftest, so `from conftest import ...` would find the wrong one).

The security the clusters run with: KAFKACORE_CLUSTER_SECURITY=sasl_ssl (or ssl) makes every
cluster the fixtures start (``new_cluster``) a secured one - the same listeners as ``kafkacore
cluster up --security``: SASL_SSL with SCRAM-SHA-512 (or mutual TLS) on the BROKER listener
between brokers and on the CLIENT listener the tests' clients use - and the clients' settings
(``client_conf`` and its siblings) follow the cluster they are pointed at, so the fault tests run
unchanged over it. Unset or ``plaintext``: PLAINTEXT, as before."""
import os
import signal
import ssl
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

import _kcutil
from kafkacore.cluster.local_cluster import LocalCluster
from kafkacore.cluster.local_security import LocalSecurity
from kafkacore.storage.segment_files import walk_batch_headers

SECURITY_ENV = "KAFKACORE_CLUSTER_SECURITY"
SECURITY_CHOICES = ("plaintext", "ssl", "sasl_ssl")
# the replication fault tests: the modules whose clusters follow KAFKACORE_CLUSTER_SECURITY (the
# others' tests speak PLAINTEXT to the brokers on purpose, or test listeners themselves)
FAULT_SUITE = ("test_replication.py", "test_kill_loop.py", "test_controller_bounce.py",
               "test_controller_failover_race.py", "test_cluster_transactions.py", "test_control_requests.py",
               "test_reassignment.py", "test_leader_rebalance.py", "test_network_partition.py", "test_fault_run.py")

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


def cluster_security():
    """The protocol KAFKACORE_CLUSTER_SECURITY asks for (plaintext when unset)."""
    value = os.environ.get(SECURITY_ENV, "plaintext").strip().lower() or "plaintext"
    if value not in SECURITY_CHOICES:
        raise ValueError(f"{SECURITY_ENV}={value!r}: one of {', '.join(SECURITY_CHOICES)}")
    return value


# broker address ("host:port" of a CLIENT listener) -> the LocalSecurity of its cluster: a
# client finds its settings from the first address of its bootstrap list
_SECURED = {}


def new_cluster(root, brokers=3, settings=None, hosts=(), protocol=None, **kwargs):
    """A LocalCluster (not started) with the security ``protocol`` (None: the one
    KAFKACORE_CLUSTER_SECURITY selects); ``hosts``: more addresses the brokers' certificate must
    name (the network namespaces')."""
    protocol = protocol or cluster_security()
    security = None if protocol == "plaintext" else LocalSecurity(root, protocol, hosts=hosts)
    c = LocalCluster(root, brokers=brokers, settings=CLUSTER_SETTINGS if settings is None else settings,
                     security=security, **kwargs)
    for b in c.brokers.values():
        register_broker(c, b)
    return c


def register_broker(cluster, broker):
    """Clients pointed at ``broker`` use ``cluster``'s client settings (a broker added later)."""
    if cluster.security is not None:
        _SECURED[broker.address] = cluster.security


def security_of(bootstrap):
    """The LocalSecurity of the cluster ``bootstrap`` (a list or a cluster) points at; None:
    PLAINTEXT."""
    if isinstance(bootstrap, LocalCluster):
        return bootstrap.security
    return _SECURED.get(bootstrap.split(",")[0].strip())


def client_conf(bootstrap):
    """confluent-kafka's (librdkafka's) settings for a cluster: bootstrap.servers and its
    security."""
    if isinstance(bootstrap, LocalCluster):
        bootstrap = bootstrap.bootstrap_servers
    conf = {"bootstrap.servers": bootstrap}
    sec = security_of(bootstrap)
    if sec is None or sec.client_protocol == "plaintext":
        return conf
    conf["security.protocol"] = sec.client_protocol.upper()
    conf["ssl.ca.location"] = sec.files["ca"]
    if sec.client_protocol.startswith("sasl_"):
        conf.update({"sasl.mechanism": sec.mechanism, "sasl.username": sec.user, "sasl.password": sec.password})
    return conf


def java_conf(bootstrap):
    """kafkacore's clients' settings (Java's names) for a cluster."""
    if isinstance(bootstrap, LocalCluster):
        bootstrap = bootstrap.bootstrap_servers
    sec = security_of(bootstrap)
    return {"bootstrap.servers": bootstrap, **(sec.client_config() if sec is not None else {})}


def kafka_python_conf(bootstrap, aiokafka=False):
    """kafka-python's (``aiokafka=True``: aiokafka's) keyword arguments for a cluster."""
    if isinstance(bootstrap, LocalCluster):
        bootstrap = bootstrap.bootstrap_servers
    kw = {"bootstrap_servers": bootstrap}
    sec = security_of(bootstrap)
    if sec is None or sec.client_protocol == "plaintext":
        return kw
    kw["security_protocol"] = sec.client_protocol.upper()
    if aiokafka:
        kw["ssl_context"] = ssl.create_default_context(cafile=sec.files["ca"])
    else:
        kw["ssl_cafile"] = sec.files["ca"]
    if sec.client_protocol.startswith("sasl_"):
        kw.update(sasl_mechanism=sec.mechanism, sasl_plain_username=sec.user, sasl_plain_password=sec.password)
    return kw


def connect(cluster, broker_id):
    """A raw KafkaConnection (tests/broker_client.py) to a broker's CLIENT listener, through its
    TLS and SASL login when the cluster has them."""
    from broker_client import KafkaConnection

    b = cluster.brokers[broker_id]
    host, port = b.address.rsplit(":", 1)
    security = None
    if cluster.security is not None and cluster.security.client_protocol != "plaintext":
        from kafkacore.client.config import security_config
        from kafkacore.client.security import client_security
        security = client_security(security_config(cluster.security.client_config()))
    return KafkaConnection(host, int(port), security=security)


def admin(cluster):
    return AdminClient(client_conf(cluster))


def create_topic(cluster, name, partitions=3, rf=3, configs=None):
    client = admin(cluster)  # kept alive until the future resolves: its handle owns the request
    fut = client.create_topics([NewTopic(name, partitions, rf, config=configs or {})], operation_timeout=30)[name]
    fut.result(60)
    # every partition listed (an empty answer - the topic not known yet where the request went -
    # is not "all led"), each led with a full ISR
    wait_for(lambda: (lambda md: len(md) == partitions and all(p.leader >= 0 and len(p.isrs) == rf
                                                              for p in md.values()))(topic_metadata(cluster, name)),
             f"every partition of {name} led with a full ISR", 60)
    # ... and in every running broker's metadata (UpdateMetadata reaches them one by one): a
    # client's next request may go to any of them
    for bid, b in cluster.brokers.items():
        if b.running:
            wait_for(lambda: _partitions_known_at(cluster, bid, name) == partitions,
                     f"broker {bid} to know every partition of {name}", 30)


def _partitions_known_at(cluster, broker_id, name):
    from broker_client import request
    from kafkacore.protocol.messages.metadata_request import MetadataRequestTopic

    with connect(cluster, broker_id) as conn:
        resp = conn.call(3, 12, request(3, topics=[MetadataRequestTopic(name=name)], allow_auto_topic_creation=False))
    t = resp.topics[0]
    return len(t.partitions) if t.error_code == 0 else 0


def topic_metadata(cluster, name):
    md = admin(cluster).list_topics(name, timeout=10)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        return {}
    return dict(t.partitions)


def wait_for(predicate, what, timeout=30.0, interval=0.1):
    """The suite's wait (_kcutil.wait_for), through a broker's restart: its errors meanwhile are
    "not yet"."""
    return _kcutil.wait_for(predicate, what, timeout, interval, tolerate=(Exception,))


def partition_logs(cluster, topic, partition):
    """{broker id: bytes of the partition's .log segments, in order}."""
    out = {}
    for bid, b in cluster.brokers.items():
        d = Path(b.data_dir) / f"{topic}-{partition}"
        if d.is_dir():
            out[bid] = b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))
    return out


def batch_headers(log_bytes):
    """(base offset, last offset, leader epoch, producer id, size) of each batch in ``log_bytes``."""
    return [(h.base_offset, h.last_offset, h.partition_leader_epoch, h.producer_id, h.size)
            for h in walk_batch_headers(log_bytes, 0, len(log_bytes))]


def describe_replica_difference(cluster, topic, partitions):
    """Where the replicas' logs part: for each partition whose replicas differ, each replica's
    size and the batches from the first one that differs."""
    lines = []
    for p in range(partitions):
        logs = partition_logs(cluster, topic, p)
        if len(set(logs.values())) <= 1 and len(logs) == len(cluster.brokers):
            continue
        headers = {bid: batch_headers(data) for bid, data in logs.items()}
        first = min((next((i for i, (a, b) in enumerate(zip(h, other)) if a != b), min(len(h), len(other)))
                     for h in headers.values() for other in headers.values()), default=0)
        for bid in sorted(headers):
            lines.append(f"{topic}-{p} broker {bid}: {len(logs[bid])} bytes, {len(headers[bid])} batches, "
                         f"from batch {first}: {headers[bid][first:first + 6]}")
        missing = sorted(set(cluster.brokers) - set(logs))
        if missing:
            lines.append(f"{topic}-{p}: no directory on brokers {missing}")
    return "; ".join(lines) or "(identical by now)"


def wait_replicas_identical(cluster, topic, partitions, timeout=60):
    def same():
        for p in range(partitions):
            logs = partition_logs(cluster, topic, p)
            if len(logs) != len(cluster.brokers) or len(set(logs.values())) != 1:
                return False
        return True
    wait_for(same, lambda: f"every replica's .log of {topic} byte-identical: "
             f"{describe_replica_difference(cluster, topic, partitions)}", timeout)


def ensure_all_running(cluster):
    """Every broker running and registered (a broker paused past its ZooKeeper session comes
    back with a new one a moment after SIGCONT)."""
    for b in cluster.brokers.values():
        b.signal(signal.SIGCONT)
        if not b.running:
            b.start()
    wait_for(lambda: sorted(admin(cluster).list_topics(timeout=10).brokers) == sorted(cluster.brokers),
             "every broker registered", 60)
