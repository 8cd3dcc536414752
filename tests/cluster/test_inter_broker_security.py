"""Security between brokers (issue 28): real `kafkacore serve` processes and a real ZooKeeper,
TLS material made with openssl, each broker with a PLAINTEXT CLIENT listener (the test's clients)
and a BROKER listener that replication, the controller's requests and transaction markers use.

- SASL_SSL with SCRAM-SHA-512: the brokers' user is written into ZooKeeper before any broker
  starts (kafka-configs --zookeeper in Kafka's docs); acks=all writes survive a leader's SIGKILL
  (the history check of the fault tests), the replicas end byte-identical, and no login between
  the brokers was refused, at the start or the restart;
- a broker whose inter-broker password is wrong stays out of every ISR and says why in one log
  line per broker it cannot log in to; no password reaches any log;
- SSL with mutual TLS: the brokers replicate, and each sees the other as the principal its
  certificate maps to (User:localhost)."""
import json
import re

import pytest
from kazoo.client import KazooClient

from _cluster import (CLUSTER_SETTINGS, admin, create_topic, partition_logs, topic_metadata, wait_for,
                      wait_replicas_identical)
from _history import AckedProducer, check_history, read_all
from _zookeeper import skip_or_fail_without_zookeeper
from kafkacore.cluster.local_cluster import LocalCluster
from kafkacore.cluster.local_security import LocalSecurity, write_properties

pytestmark = pytest.mark.timeout(240)

PASSWORD = "inter-broker-scram-pw-7"
WRONG = "not-the-password-9"


def _log(b):
    with open(b.log_path, errors="replace") as f:
        return f.read()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three brokers replicating over SASL_SSL (SCRAM-SHA-512) on their BROKER listener."""
    skip_or_fail_without_zookeeper()
    root = tmp_path_factory.mktemp("sasl-ssl-cluster")
    security = LocalSecurity(root, "sasl_ssl", client_protocol="plaintext", password=PASSWORD)
    c = LocalCluster(root, brokers=3, settings=CLUSTER_SETTINGS, security=security)
    try:
        c.start()
        yield c
    finally:
        c.stop()
    for b in c.brokers.values():
        text = _log(b)
        assert PASSWORD not in text and WRONG not in text, f"a password in {b.log_path}"


def test_registrations_name_the_sasl_ssl_broker_listener(cluster):
    zk = KazooClient(cluster.zookeeper.connect_string)
    zk.start(10)
    try:
        reg = json.loads(zk.get("/brokers/ids/2")[0])
        b = cluster.brokers[2]
        assert reg["endpoints"] == [f"CLIENT://127.0.0.1:{b.port}", f"BROKER://127.0.0.1:{b.broker_port}"]
        assert reg["listener_security_protocol_map"] == {"CLIENT": "PLAINTEXT", "BROKER": "SASL_SSL"}
        # the SCRAM user was there before the brokers: written as kafka-configs --zookeeper does
        user = json.loads(zk.get("/config/users/admin")[0])
        assert list(user["config"]) == ["SCRAM-SHA-512"] and PASSWORD not in user["config"]["SCRAM-SHA-512"]
    finally:
        zk.stop()


def _add_users(cluster, n):
    """``n`` more SCRAM users, named to be read before ``admin`` (a-000...): a restarting broker
    takes a moment to read them all."""
    from kafkacore.cluster.zk_client import KafkaZkClient
    from kafkacore.cluster.zk_data import ConfigType
    from kafkacore.security import scram

    value = scram.make_credential(scram.MECHANISMS["SCRAM-SHA-512"], "user-pw-3").to_config_value()
    zk = KafkaZkClient(cluster.zookeeper.connect_string, session_timeout_ms=10000, connection_timeout_ms=10000)
    zk.start()
    try:
        for i in range(n):
            zk.set_or_create_entity_configs(ConfigType.USER, f"a-{i:03d}", {"SCRAM-SHA-512": value})
    finally:
        zk.close()


def test_acks_all_over_sasl_ssl_survives_a_leader_kill(cluster):
    create_topic(cluster, "secured", partitions=2, rf=3)
    leader = topic_metadata(cluster, "secured")[0].leader
    # users to read before the brokers' own: the restarted leader registered before it had read
    # them and refused its controller's first login as invalid credentials (the fix reads them
    # before registering)
    _add_users(cluster, 200)
    p = AckedProducer(cluster.bootstrap_servers, "secured")
    p.run_for(2.0)
    cluster.brokers[leader].kill()
    p.run_for(3.0)
    wait_for(lambda: topic_metadata(cluster, "secured")[0].leader not in (-1, leader), "a new leader", 30)
    p.run_for(1.0)
    p.flush(90)
    assert not p.failed, p.failed[:5]
    cluster.brokers[leader].start()
    # the restarted broker logs in again, truncates, catches up and is back in every ISR
    wait_for(lambda: all(sorted(m.isrs) == [1, 2, 3] for m in topic_metadata(cluster, "secured").values()),
             "the restarted broker back in the ISR", 60)
    check_history(p.acked, read_all(cluster.bootstrap_servers, "secured", 2))
    wait_replicas_identical(cluster, "secured", 2)
    # every login between the brokers was answered from the users read at start-up: a broker
    # that registered before reading them refused its controller's first login as invalid
    # credentials (and the controller logged an ERROR), at the cluster's start and at a restart
    for b in cluster.brokers.values():
        assert "SASL login failed" not in _log(b) and "invalid credentials" not in _log(b), b.log_path


def test_a_wrong_inter_broker_password_keeps_the_broker_out_and_says_why(cluster):
    create_topic(cluster, "guarded", partitions=1, rf=3)
    # a broker that is not the controller (the module's earlier tests may have moved it): it is
    # the one that fetches and is refused
    controller = admin(cluster).list_topics(timeout=10).controller_id
    victim = max(b for b in cluster.brokers if b != controller)
    bv = cluster.brokers[victim]
    good = dict(line.split("=", 1) for line in open(bv.config_file).read().splitlines())
    jaas_key = "listener.name.broker.scram-sha-512.sasl.jaas.config"
    wrong = {**good, jaas_key: good[jaas_key].replace(PASSWORD, WRONG)}
    bv.stop()
    since = len(_log(bv))
    write_properties(bv.config_file, wrong)
    try:
        bv.start()
        p = AckedProducer(cluster.bootstrap_servers, "guarded")
        p.send(200)
        p.flush(60)
        assert not p.failed
        refused = re.compile(r"ERROR kafkacore\.cluster: SASL login to broker (\d) at 127\.0\.0\.1:\d+ as 'admin' "
                             r"with SCRAM-SHA-512 over SASL_SSL failed: .*invalid credentials.*")
        leader = topic_metadata(cluster, "guarded")[0].leader
        wait_for(lambda: refused.search(_log(bv)[since:]), "the broker's line saying its login was refused", 30)
        # the leader refused several attempts meanwhile; the broker said so once per broker
        wait_for(lambda: _log(cluster.brokers[leader]).count("SASL login failed") >= 3,
                 "the leader refusing the broker's retries", 30)
        lines = [m.group(0) for m in refused.finditer(_log(bv)[since:])]
        assert len(lines) == len({m.group(1) for m in refused.finditer(_log(bv)[since:])}), lines
        assert all(WRONG not in line and PASSWORD not in line for line in lines)
        wait_for(lambda: victim not in topic_metadata(cluster, "guarded")[0].isrs, "the broker out of the ISR", 30)
        logs = {bid: len(data) for bid, data in partition_logs(cluster, "guarded", 0).items()}
        assert logs[victim] < logs[leader], logs  # nothing replicated to it
    finally:
        bv.stop()
        write_properties(bv.config_file, good)
        bv.start()
    wait_for(lambda: sorted(topic_metadata(cluster, "guarded")[0].isrs) == [1, 2, 3], "the broker back in the ISR", 60)
    wait_replicas_identical(cluster, "guarded", 1)


@pytest.fixture(scope="module")
def mtls_cluster(tmp_path_factory):
    """Two brokers replicating over SSL with client certificates required on BROKER."""
    skip_or_fail_without_zookeeper()
    root = tmp_path_factory.mktemp("mtls-cluster")
    settings = {**CLUSTER_SETTINGS, "default.replication.factor": "2"}
    c = LocalCluster(root, brokers=2, settings=settings, security=LocalSecurity(root, "ssl", client_protocol="plaintext"),
                     extra_args=["--log-level", "debug"])  # debug: each connection's principal
    try:
        c.start()
        yield c
    finally:
        c.stop()


def test_mutual_tls_between_brokers(mtls_cluster):
    c = mtls_cluster
    create_topic(c, "mtls", partitions=2, rf=2)
    p = AckedProducer(c.bootstrap_servers, "mtls")
    p.send(500)
    p.flush(60)
    assert not p.failed
    check_history(p.acked, read_all(c.bootstrap_servers, "mtls", 2))
    wait_replicas_identical(c, "mtls", 2)
    # each broker saw the other's certificate on its BROKER listener, mapped by
    # ssl.principal.mapping.rules to the principal super.users would name
    line = re.compile(r"on listener BROKER: TLS TLSv1\.[23], principal User:localhost")
    for b in c.brokers.values():
        wait_for(lambda: line.search(_log(b)), f"broker {b.broker_id}: a peer broker's mTLS principal", 30)
