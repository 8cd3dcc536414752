"""kafkacore.cluster: Kafka's znode JSON (codecs, against literal JSON in Kafka's formats) and
KafkaZkClient against a real ZooKeeper (Debian's 3.8, tests/_zookeeper.py).

Every znode written is read back raw with kazoo and compared with what Kafka 3.6 writes: field
names, versions and JSON value types (Kafka's ZkData.scala). Sessions are expired for real the
standard way: a second client attaches to the session with its id and password and closes it.
"""
import json
import re
import threading
import time
import uuid

import pytest

from _kcutil import wait_for
from broker_client import free_port
from _zookeeper import show_log_on_failure, skip_or_fail_without_zookeeper
from kafkacore.cluster.local_cluster import LocalZooKeeper
from kafkacore.cluster.zk_data import (
    BrokerIdZNode, BrokerInfo, ClusterIdZNode, ConfigEntityChangeNotificationSequenceZNode, ConfigEntityZNode,
    ControllerEpochZNode, ControllerZNode, EndPoint, FeatureZNode, FeatureZNodeData,
    IsrChangeNotificationSequenceZNode, LeaderIsrAndControllerEpoch, PreferredReplicaElectionZNode, ProducerIdBlockZNode,
    ProducerIdsBlock, ReassignPartitionsZNode, ReplicaAssignment, TopicPartitionStateZNode, TopicZNode, ZkData,
    ZkDataError,
)
from kafkacore.protocol.kafka_uuid import random_uuid_text as new_uuid_text, uuid_from_text

SESSION_MS = 4000  # granted: the test server's minimum is 1 s
WAIT = 20.0


def raw_json(client, path):
    data, stat = client.raw.get(path)
    return json.loads(data.decode("utf-8")), stat


def one_line(e):
    s = str(e)
    assert s and "\n" not in s, f"error message is not one line: {s!r}"
    return s


# =============================================================================================
# Codecs: literal JSON in the formats Kafka writes and reads (kafka/zk/ZkData.scala, 3.6)
# =============================================================================================

def test_broker_v5_encode_has_kafkas_fields_and_types():
    info = BrokerInfo(1, [EndPoint("PLAINTEXT", "h1", 9092), EndPoint("SSL", "h1", 9093, "SSL")], rack="dc1",
                      timestamp_ms=1700000000123)
    js = json.loads(BrokerIdZNode.encode(info))
    assert js == {"version": 5, "host": "h1", "port": 9092, "jmx_port": -1, "timestamp": "1700000000123",
                  "endpoints": ["PLAINTEXT://h1:9092", "SSL://h1:9093"], "rack": "dc1",
                  "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}, "features": {}}
    assert BrokerIdZNode.path(1) == "/brokers/ids/1"
    # Jackson's compact form: no spaces
    assert b" " not in BrokerIdZNode.encode(info)
    # no rack: no "rack" key at all (Kafka's rack.foreach)
    assert "rack" not in json.loads(BrokerIdZNode.encode(BrokerInfo(1, ["PLAINTEXT://h:1"])))


def test_broker_without_plaintext_listener_writes_null_host_and_port_minus_one():
    js = json.loads(BrokerIdZNode.encode(BrokerInfo(3, [EndPoint("SSL", "h", 9093, "SSL")])))
    assert js["host"] is None and js["port"] == -1


@pytest.mark.parametrize("text,endpoint", [
    ('{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,"port":9091}',
     EndPoint("PLAINTEXT", "172.16.8.243", 9091)),
    ('{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"1416974968782",'
     '"endpoints":["PLAINTEXT://localhost:9092"]}', EndPoint("PLAINTEXT", "localhost", 9092)),
    ('{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     '"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],"rack":"dc1"}', EndPoint("PLAINTEXT", "host1", 9092)),
    ('{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     '"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
     '"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},"rack":null}',
     EndPoint("CLIENT", "host1", 9092, "SSL")),
    ('{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     '"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
     '"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},"rack":"dc1",'
     '"features": {"feature1": {"min_version": 1, "max_version": 2}}}', EndPoint("CLIENT", "host1", 9092, "SSL")),
    # a future version with unknown fields still reads (Kafka: forward compatible)
    ('{"foo":"bar","version":100,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"1416974968782",'
     '"endpoints":["SSL://localhost:9093"]}', EndPoint("SSL", "localhost", 9093, "SSL")),
])
def test_broker_decode_every_version_kafka_wrote(text, endpoint):
    info = BrokerIdZNode.decode(7, text.encode())
    assert info.broker_id == 7
    assert info.endpoints[0] == endpoint
    if '"rack":"dc1"' in text:
        assert info.rack == "dc1"
    else:
        assert info.rack is None
    if "feature1" in text:
        assert info.features == {"feature1": (1, 2)}


def test_endpoint_connection_strings_as_kafka_formats_them():
    assert EndPoint("PLAINTEXT", "::1", 9092).connection_string == "PLAINTEXT://[::1]:9092"
    assert EndPoint("PLAINTEXT", None, 9092).connection_string == "PLAINTEXT://:9092"
    assert EndPoint.parse("REPLICATION://[::1]:9093", {"REPLICATION": "SSL"}) == EndPoint("REPLICATION", "::1", 9093, "SSL")
    assert EndPoint.parse("plaintext://h:1") == EndPoint("PLAINTEXT", "h", 1)  # ListenerName.normalised
    with pytest.raises(ValueError, match="No security protocol defined for listener CLIENT"):
        EndPoint.parse("CLIENT://h:1")


def test_topic_znode_version_3():
    tid = "zJlZ6LBHQz2dkg6w0x2ZpA"
    data = TopicZNode.encode({1: [2, 3, 1], 0: ReplicaAssignment((1, 2, 3), (3,), (1,))}, tid)
    assert json.loads(data) == {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
                                "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}, "topic_id": tid}
    # no topic id: no "topic_id" key (Kafka's topicId.foreach)
    assert "topic_id" not in json.loads(TopicZNode.encode({0: [1]}))
    ta = TopicZNode.decode("t", data)
    assignment, topic_id = ta
    assert assignment == {0: [1, 2, 3], 1: [2, 3, 1]} and topic_id == tid
    assert ta.partitions[0] == ReplicaAssignment((1, 2, 3), (3,), (1,))
    # what Kafka 1.x-2.3 wrote still reads
    old = TopicZNode.decode("t", b'{"version":1,"partitions":{"0":[0,1],"1":[1,0]}}')
    assert old.assignment == {0: [0, 1], 1: [1, 0]} and old.topic_id is None
    assert TopicZNode.path("t") == "/brokers/topics/t"


def test_partition_state_znode():
    st = LeaderIsrAndControllerEpoch(leader=1, leader_epoch=4, isr=[1, 2, 3], controller_epoch=2)
    assert json.loads(TopicPartitionStateZNode.encode(st)) == {
        "controller_epoch": 2, "leader": 1, "version": 1, "leader_epoch": 4, "isr": [1, 2, 3]}
    # Kafka 3.2+ adds leader_recovery_state only when it is not RECOVERED (0)
    rec = LeaderIsrAndControllerEpoch(1, 4, [1], 2, leader_recovery_state=1)
    assert json.loads(TopicPartitionStateZNode.encode(rec))["leader_recovery_state"] == 1
    assert TopicPartitionStateZNode.decode(
        b'{"controller_epoch":9,"leader":-1,"version":1,"leader_epoch":0,"isr":[]}') == LeaderIsrAndControllerEpoch(-1, 0, (), 9)
    assert TopicPartitionStateZNode.decode(
        b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":1,"isr":[2],"leader_recovery_state":1}'
    ).leader_recovery_state == 1
    assert TopicPartitionStateZNode.path("t", 3) == "/brokers/topics/t/partitions/3/state"


def test_controller_znodes():
    js = json.loads(ControllerZNode.encode(3, 1700000000000))
    assert js == {"version": 2, "brokerid": 3, "timestamp": "1700000000000", "kraftControllerEpoch": -1}
    # what 2.x-3.3 wrote
    reg = ControllerZNode.decode(b'{"version":1,"brokerid":2,"timestamp":"1561468880024"}')
    assert (reg.broker_id, reg.timestamp_ms, reg.kraft_controller_epoch) == (2, 1561468880024, None)
    assert ControllerEpochZNode.encode(12) == b"12" and ControllerEpochZNode.decode(b"12") == 12


def test_config_znodes():
    assert json.loads(ConfigEntityZNode.encode({"retention.ms": "1000", "cleanup.policy": "compact"})) == {
        "version": 1, "config": {"retention.ms": "1000", "cleanup.policy": "compact"}}
    # Properties hold strings only
    assert json.loads(ConfigEntityZNode.encode({"segment.bytes": 1024, "preallocate": True}))["config"] == {
        "segment.bytes": "1024", "preallocate": "true"}
    assert ConfigEntityZNode.decode(b'{"version":1,"config":{"max.message.bytes":"100"}}') == {"max.message.bytes": "100"}
    assert ConfigEntityZNode.path("topics", "t") == "/config/topics/t"
    assert json.loads(ConfigEntityChangeNotificationSequenceZNode.encode("topics/t")) == {
        "version": 2, "entity_path": "topics/t"}
    assert ConfigEntityChangeNotificationSequenceZNode.create_path == "/config/changes/config_change_"


def test_notification_and_admin_znodes():
    assert json.loads(IsrChangeNotificationSequenceZNode.encode([("t", 1), ("t", 0)])) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]}
    assert IsrChangeNotificationSequenceZNode.path("0000000003") == "/isr_change_notification/isr_change_0000000003"
    assert IsrChangeNotificationSequenceZNode.sequence_number("isr_change_0000000003") == "0000000003"
    text = b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[2,3]}]}'
    assert ReassignPartitionsZNode.decode(text) == {("foo", 0): [2, 3]}
    assert json.loads(ReassignPartitionsZNode.encode({("foo", 0): [2, 3]})) == json.loads(text)
    assert json.loads(PreferredReplicaElectionZNode.encode({("t", 0)})) == {
        "version": 1, "partitions": [{"topic": "t", "partition": 0}]}


def test_cluster_id_producer_id_block_and_feature_znodes():
    # /cluster/id: the version is a *string* "1"
    assert json.loads(ClusterIdZNode.encode("abc")) == {"version": "1", "id": "abc"}
    assert ClusterIdZNode.decode(b'{"version":"1","id":"Iu9AFXu2Sye0Yc6yC_pFLw"}') == "Iu9AFXu2Sye0Yc6yC_pFLw"
    # /latest_producer_id_block: version and broker numbers, block bounds strings
    js = json.loads(ProducerIdBlockZNode.encode(ProducerIdsBlock(2, 1000, 1000)))
    assert js == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert ProducerIdBlockZNode.decode(b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}') == \
        ProducerIdsBlock(0, 0, 1000)
    # /feature, both versions
    assert json.loads(FeatureZNode.encode(FeatureZNodeData(2, 1, {"f": 3}))) == {
        "version": 2, "status": 1, "features": {"f": {"max_version_level": 3}}}
    assert FeatureZNode.decode(b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":2}}}') \
        == FeatureZNodeData(1, 1, {"f": 2})
    with pytest.raises(ZkDataError, match="max_version_level"):
        FeatureZNode.decode(b'{"version":2,"status":1,"features":{"f":{}}}')


def test_uuid_text_is_kafkas():
    for _ in range(200):
        t = new_uuid_text()
        assert len(t) == 22 and not t.startswith("-") and re.fullmatch(r"[A-Za-z0-9_-]{22}", t)
        assert len(uuid_from_text(t)) == 16


@pytest.mark.parametrize("decode,data,match", [
    (lambda d: BrokerIdZNode.decode(1, d), b"{not json", "/brokers/ids/1: not JSON"),
    (lambda d: BrokerIdZNode.decode(1, d), b'{"version":"5","jmx_port":-1}', "'version' must be an integer"),
    (lambda d: TopicPartitionStateZNode.decode(d, "/brokers/topics/t/partitions/0/state"),
     b'{"leader":1,"leader_epoch":0,"isr":"1","controller_epoch":1}', "'isr' must be a list of integers"),
    (ProducerIdBlockZNode.decode, b'{"version":1,"broker":0,"block_start":0,"block_end":999}',
     "'block_start' must be a string"),
    (ControllerEpochZNode.decode, b"one", "not a decimal epoch"),
    (ClusterIdZNode.decode, b"", "no data"),
])
def test_malformed_znodes_raise_one_line_errors_naming_the_znode(decode, data, match):
    with pytest.raises(ZkDataError, match=match) as e:
        decode(data)
    one_line(e.value)


def test_persistent_paths_are_kafkas():
    # Kafka's ZooKeeper mode has these; the GROUP config resource (KIP-848/932 group configs) came
    # with KRaft only, so kafkacore keeps it in the same layout as the other entity types
    assert set(ZkData.PERSISTENT_ZK_PATHS) == {
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics", "/brokers/seqid",
        "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
        "/config/topics", "/config/clients", "/config/users", "/config/brokers", "/config/ips"} | {"/config/groups"}


# =============================================================================================
# Against a real ZooKeeper
# =============================================================================================

_servers = []  # every server this module started, for the log tail on failure


@pytest.fixture(scope="module", autouse=True)
def _zookeeper_log_on_failure(request):
    unregister = show_log_on_failure(request, _servers)
    yield
    unregister()


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    skip_or_fail_without_zookeeper()
    server = LocalZooKeeper(tmp_path_factory.mktemp("zookeeper"))
    _servers.append(server)
    try:
        yield server.start()
    finally:
        server.stop()
        _servers.remove(server)


@pytest.fixture
def own_zookeeper(tmp_path):
    """A server of the test's own, for tests that stop or pause it."""
    skip_or_fail_without_zookeeper()
    server = LocalZooKeeper(tmp_path / "zookeeper")
    _servers.append(server)
    try:
        yield server.start()
    finally:
        server.stop()
        _servers.remove(server)


@pytest.fixture(params=["zookeeper", "local"])
def connect(request):
    """Where the test's clients connect, once per store: a chroot of the test's own on the shared
    real ZooKeeper (tests cannot see each other's znodes), and a fresh in-process ZnodeTree
    (kafkacore/cluster/local_znodes.py), which must behave the same."""
    if request.param == "local":
        from kafkacore.cluster.local_znodes import ZnodeTree

        tree = ZnodeTree()
        yield tree
        tree.close()
        return
    zookeeper = request.getfixturevalue("zookeeper")
    yield f"{zookeeper.connect_string}/kc-{uuid.uuid4().hex[:12]}"


def new_client(connect, session_timeout_ms=SESSION_MS, connection_timeout_ms=10000):
    """A KafkaZkClient (not started) for ``connect``: a connect string, or an in-process ZnodeTree."""
    from kafkacore.cluster.zk_client import KafkaZkClient

    if isinstance(connect, str):
        return KafkaZkClient(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=connection_timeout_ms)
    return KafkaZkClient(None, session_timeout_ms=session_timeout_ms, znodes=connect)


@pytest.fixture
def clients():
    made = []

    def make(connect, session_timeout_ms=SESSION_MS, connection_timeout_ms=10000, top_level=True):
        c = new_client(connect, session_timeout_ms, connection_timeout_ms)
        made.append(c)
        c.start()
        if top_level:
            c.create_top_level_paths()
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def zk(clients, connect):
    return clients(connect)


def expire_session(client, request):
    """Expire ``client``'s session for real: on ZooKeeper, attach to it with its id and password
    from a second client, then close that one (the standard ZooKeeper testing technique); on an
    in-process tree, as the tree expires a session."""
    if not isinstance(request.getfixturevalue("connect"), str):
        sid = client.session_id
        client.raw.expire()
        return sid
    from kazoo.client import KazooClient

    server = request.getfixturevalue("zookeeper")
    sid, passwd = client.raw.client_id
    k = KazooClient(hosts=server.connect_string, client_id=(sid, passwd), timeout=SESSION_MS / 1000)
    k.start(timeout=10)
    k.stop()
    k.close()
    return sid


class States:
    """Records a KafkaZkClient's state notifications."""

    def __init__(self, client):
        self.seen = []
        client.add_state_listener(self.seen.append)

    def wait(self, *sequence):
        def contains():
            it = iter(self.seen)
            return all(s in it for s in sequence)
        wait_for(contains, f"states {sequence} (seen {self.seen})")


def test_top_level_paths_exist_with_null_data_as_kafka_creates_them(zk):
    for path in ZkData.PERSISTENT_ZK_PATHS:
        data, stat = zk.raw.get(path)
        assert data is None and stat.ephemeralOwner == 0, path


def test_broker_registration_json_is_kafkas_v5(zk):
    before = int(time.time() * 1000)
    epoch = zk.register_broker(1, "127.0.0.1", 9092, rack="r1")
    js, stat = raw_json(zk, "/brokers/ids/1")
    assert set(js) == {"version", "host", "port", "endpoints", "jmx_port", "timestamp", "rack",
                       "listener_security_protocol_map", "features"}
    assert js["version"] == 5 and js["host"] == "127.0.0.1" and js["port"] == 9092
    assert js["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"]
    assert js["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert js["jmx_port"] == -1 and js["rack"] == "r1" and js["features"] == {}
    assert isinstance(js["timestamp"], str) and before <= int(js["timestamp"]) <= int(time.time() * 1000)
    # ephemeral, owned by this session; the broker epoch is its czxid
    assert stat.ephemeralOwner == zk.session_id and epoch == stat.czxid == zk.broker_epoch
    info = zk.get_broker(1)
    assert (info.host, info.port, info.rack, info.epoch) == ("127.0.0.1", 9092, "r1", epoch)
    assert zk.get_all_broker_ids() == [1] and zk.get_broker(2) is None
    # registering again on the same session is fine (checkedEphemeralCreate)
    assert zk.register_broker(1, "127.0.0.1", 9092, rack="r1") == epoch


def test_broker_id_in_use_by_another_session_is_a_clear_error(clients, connect):
    from kafkacore.cluster.zk_client import BrokerIdInUseError

    a, b = clients(connect), clients(connect)
    a.register_broker(5, "h", 1)
    with pytest.raises(BrokerIdInUseError, match=r"broker id 5 is already registered at /brokers/ids/5") as e:
        b.register_broker(5, "h", 2)
    one_line(e.value)
    assert b.get_broker(5).port == 1


def test_registration_disappears_when_the_session_closes(clients, connect):
    watcher, broker = clients(connect), clients(connect)
    seen = []
    watcher.watch_children("/brokers/ids", seen.append)
    broker.register_broker(2, "h", 9092)
    wait_for(lambda: seen and seen[-1] == ["2"], f"broker 2 joining (seen {seen})")
    broker.close()
    wait_for(lambda: seen[-1] == [], f"broker 2 leaving (seen {seen})")
    assert watcher.get_all_broker_ids() == []


def test_session_expiry_removes_the_registration_and_the_client_registers_again(request, clients, connect):
    watcher, broker = clients(connect), clients(connect)
    states = States(broker)
    seen = []
    watcher.watch_children("/brokers/ids", seen.append)
    on_connected = []
    # listeners may call the client, and hear "connected" only once the broker is registered again
    broker.add_state_listener(lambda s: s == "connected" and on_connected.append(broker.get_all_broker_ids()))
    epoch = broker.register_broker(3, "h", 9092)
    wait_for(lambda: seen and seen[-1] == ["3"], "broker 3 joining")
    old_sid = expire_session(broker, request)
    # the ephemeral went with the session and came back with the new one (a children watch may
    # or may not catch the moment between: its re-read can already see the new registration)
    states.wait("lost", "connected")
    # the listeners run one after the other: the second may not have answered yet
    wait_for(lambda: on_connected, "the second listener hearing 'connected'")
    assert on_connected == [[3]]
    wait_for(lambda: seen[-1] == ["3"], f"broker 3 re-registered (seen {seen})")
    _, stat = broker.raw.get("/brokers/ids/3")
    assert broker.session_id != old_sid and stat.ephemeralOwner == broker.session_id
    assert broker.broker_epoch == stat.czxid != epoch


def test_a_failed_reregistration_is_reported_to_listeners(request, clients, connect, monkeypatch, caplog):
    broker = clients(connect)
    states = States(broker)
    broker.register_broker(4, "h", 9092)

    def refuse(info):
        raise RuntimeError("refused for the test")

    monkeypatch.setattr(broker, "_register", refuse)
    expire_session(broker, request)
    states.wait("lost", "registration_failed", "connected")
    assert "could not re-register broker 4" in caplog.text and "refused for the test" in caplog.text


def test_controller_election_and_failover(request, clients, connect):
    a, b = clients(connect), clients(connect)
    won = a.try_elect_controller(1)
    assert (won.elected, won.controller_id, won.epoch, won.epoch_zk_version) == (True, 1, 1, 1)
    elected, controller = b.try_elect_controller(2)  # unpacks as (elected, controller_id)
    assert (elected, controller) == (False, 1)
    js, stat = raw_json(a, "/controller")
    assert js["version"] == 2 and js["brokerid"] == 1 and js["kraftControllerEpoch"] == -1
    assert isinstance(js["timestamp"], str) and js["timestamp"].isdigit()
    assert stat.ephemeralOwner == a.session_id
    assert a.raw.get("/controller_epoch")[0] == b"1"
    assert a.get_controller_id() == b.get_controller_id() == 1 and b.get_controller_epoch() == (1, 1)
    # the same broker asking again on its session is still the controller
    again = a.try_elect_controller(1)
    assert again.elected and again.epoch == 1

    changes = []
    b.watch_data("/controller", lambda data, stat: changes.append(data))
    expire_session(a, request)  # the winner's session is lost
    wait_for(lambda: changes and changes[-1] is None, f"/controller deleted (seen {changes})")
    won = b.try_elect_controller(2)
    assert (won.elected, won.controller_id, won.epoch, won.epoch_zk_version) == (True, 2, 2, 2)
    lost = a.try_elect_controller(1)  # the old winner, on its new session, sees the new one
    assert (lost.elected, lost.controller_id) == (False, 2)


def test_controller_epoch_conditional_increment_and_fencing(clients, connect):
    from kafkacore.cluster.zk_client import ControllerMovedError

    a, b = clients(connect), clients(connect)
    won = a.try_elect_controller(1)
    assert b.increment_controller_epoch(won.epoch_zk_version) == (2, 2)  # b bumps it (a newer controller)
    with pytest.raises(ControllerMovedError, match="not 1") as e:
        a.increment_controller_epoch(won.epoch_zk_version)
    one_line(e.value)
    assert a.get_controller_epoch() == (2, 2)
    # a's fenced writes fail: the multi-op's check of /controller_epoch's version
    a.create_topic("t", {0: [1]}, {})
    with pytest.raises(ControllerMovedError, match="controller epoch zk version check failed"):
        a.create_partition_state("t", 0, 1, 0, [1], won.epoch, expected_controller_epoch_zk_version=won.epoch_zk_version)
    assert a.get_partition_state("t", 0) is None
    with pytest.raises(ControllerMovedError):
        a.delete_controller(expected_controller_epoch_zk_version=won.epoch_zk_version)
    assert a.get_controller_id() == 1
    # with the current version they go through
    assert a.create_partition_state("t", 0, 1, 0, [1], 2, expected_controller_epoch_zk_version=2) == 0
    a.delete_controller(expected_controller_epoch_zk_version=2)
    assert a.get_controller_id() is None


def test_partition_state_conditional_updates_fence_a_stale_writer(clients, connect):
    from kafkacore.cluster.zk_client import ZkNodeExistsError, ZkVersionMismatchError

    controller, leader = clients(connect), clients(connect)
    controller.create_topic("orders", {0: [1, 2, 3]}, {})
    assert controller.create_partition_state("orders", 0, leader=1, leader_epoch=0, isr=[1, 2, 3], controller_epoch=1) == 0
    js, _ = raw_json(controller, "/brokers/topics/orders/partitions/0/state")
    assert js == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}
    assert controller.raw.get("/brokers/topics/orders/partitions")[0] is None
    assert controller.raw.get("/brokers/topics/orders/partitions/0")[0] is None
    with pytest.raises(ZkNodeExistsError):
        controller.create_partition_state("orders", 0, 1, 0, [1], 1)

    st, version = leader.get_partition_state("orders", 0)
    assert st == LeaderIsrAndControllerEpoch(1, 0, (1, 2, 3), 1) and version == 0
    # the controller moves leadership first: the old leader's ISR shrink, read at version 0, is fenced
    assert controller.update_partition_state("orders", 0, LeaderIsrAndControllerEpoch(2, 1, (2, 3), 1), 0) == 1
    with pytest.raises(ZkVersionMismatchError, match="no longer at zk version 0") as e:
        leader.update_partition_state("orders", 0, LeaderIsrAndControllerEpoch(1, 0, (1,), 1), version)
    one_line(e.value)
    assert leader.get_partition_state("orders", 0) == (LeaderIsrAndControllerEpoch(2, 1, (2, 3), 1), 1)
    # Kafka's name and fields work too, and leader_recovery_state is written when RECOVERING
    assert leader.update_leader_and_isr("orders", 0, 2, 2, [2], 1, 1, leader_recovery_state=1) == 2
    js, _ = raw_json(leader, "/brokers/topics/orders/partitions/0/state")
    assert js["leader_recovery_state"] == 1 and js["isr"] == [2]


def test_producer_id_blocks_are_unique_under_concurrent_allocation(clients, connect):
    a, b = clients(connect), clients(connect)
    blocks, errors = [], []

    def allocate(client, broker_id):
        try:
            for _ in range(15):
                blocks.append(client.allocate_producer_id_block(broker_id))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=allocate, args=(c, i)) for i, c in ((1, a), (2, b), (1, a), (2, b))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(blocks) == 60
    # disjoint and gap-free: exactly blocks 0..59 of 1000 ids
    assert sorted(blocks) == [(i * 1000, i * 1000 + 999) for i in range(60)]
    js, _ = raw_json(a, "/latest_producer_id_block")
    assert set(js) == {"version", "broker", "block_start", "block_end"}
    assert js["version"] == 1 and js["broker"] in (1, 2)
    assert (js["block_start"], js["block_end"]) == ("59000", "59999")


def test_first_producer_id_block_starts_at_zero_without_top_level_paths(clients, connect):
    c = clients(connect, top_level=False)
    assert c.allocate_producer_id_block(4, block_size=10) == (0, 9)
    assert c.allocate_producer_id_block(4, block_size=10) == (10, 19)


def test_chroot_is_created_and_everything_lives_under_it(zookeeper, clients):
    chroot = f"/kafka-{uuid.uuid4().hex[:8]}/cluster1"
    root = clients(zookeeper.connect_string, top_level=False)
    assert not root.path_exists(chroot)
    c = clients(zookeeper.connect_string + chroot)
    c.register_broker(1, "h", 9092)
    c.get_or_create_cluster_id("abc")
    assert root.path_exists(f"{chroot}/brokers/ids/1") and root.path_exists(f"{chroot}/cluster/id")
    assert c.get_all_broker_ids() == [1] and c.path_exists("/brokers/ids/1")
    assert root.raw.get(chroot)[0] is None
    assert not root.path_exists("/brokers/ids/1")


def test_connect_string_validation():
    from kafkacore.cluster.zk_client import KafkaZkClient, parse_connect_string

    assert parse_connect_string("a:1,b:2/kafka") == ("a:1,b:2", "/kafka")
    assert parse_connect_string("a:1/") == ("a:1", None)
    for bad in ("", "a:1/kafka/", "host", "/kafka"):
        with pytest.raises(ValueError) as e:
            KafkaZkClient(bad)
        one_line(e.value)


def test_topic_creation_and_deletion_znodes(clients, connect):
    from kafkacore.cluster.zk_client import (
        InvalidReplicaAssignmentError, TopicAlreadyMarkedForDeletionError, TopicExistsError, UnknownTopicError,
        ZkVersionMismatchError,
    )
    from kafkacore.errors import InvalidTopicError, TopicAlreadyExistsError

    zk = clients(connect)
    tid = zk.create_topic("events", {0: [1, 2], 1: [2, 3]}, {"retention.ms": "1000", "segment.bytes": 1048576})
    js, stat = raw_json(zk, "/brokers/topics/events")
    assert js == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 3]}, "adding_replicas": {},
                  "removing_replicas": {}, "topic_id": tid}
    assert stat.ephemeralOwner == 0 and len(uuid_from_text(tid)) == 16
    js, _ = raw_json(zk, "/config/topics/events")
    assert js == {"version": 1, "config": {"retention.ms": "1000", "segment.bytes": "1048576"}}
    assert zk.get_topic_configs("events") == {"retention.ms": "1000", "segment.bytes": "1048576"}
    assert zk.get_all_topics() == ["events"]

    with pytest.raises(TopicExistsError, match="Topic 'events' already exists.") as e:
        zk.create_topic("events", {0: [1]})
    assert isinstance(e.value, TopicAlreadyExistsError) and e.value.code == 36
    with pytest.raises(InvalidTopicError):
        zk.create_topic("a/b", {0: [1]})
    with pytest.raises(InvalidReplicaAssignmentError, match="consecutive"):
        zk.create_topic("gappy", {0: [1], 2: [1]})
    with pytest.raises(InvalidReplicaAssignmentError, match="Duplicate"):
        zk.create_topic("dup", {0: [1, 1]})

    ta = zk.get_topic_assignment("events")
    assignment, topic_id = ta
    assert assignment == {0: [1, 2], 1: [2, 3]} and topic_id == tid and ta.zk_version == 0
    assert zk.get_topic_assignment("nope") is None
    # add a partition with a reassignment in progress on partition 0, conditionally
    new = {0: ReplicaAssignment((1, 2, 4), adding_replicas=(4,), removing_replicas=()), 1: [2, 3], 2: [3, 1]}
    assert zk.set_topic_assignment("events", new, tid, ta.zk_version) == 1
    with pytest.raises(ZkVersionMismatchError):
        zk.set_topic_assignment("events", {0: [1]}, tid, 0)
    js, _ = raw_json(zk, "/brokers/topics/events")
    assert js["partitions"] == {"0": [1, 2, 4], "1": [2, 3], "2": [3, 1]} and js["adding_replicas"] == {"0": [4]}

    # a config change: the overrides and a change notification, as kafka-configs --zookeeper did
    zk.set_topic_configs("events", {"retention.ms": "5000"})
    assert raw_json(zk, "/config/topics/events")[0]["config"] == {"retention.ms": "5000"}
    changes = zk.get_children("/config/changes")
    assert len(changes) == 1 and re.fullmatch(r"config_change_\d{10}", changes[0])
    assert raw_json(zk, f"/config/changes/{changes[0]}")[0] == {"version": 2, "entity_path": "topics/events"}
    with pytest.raises(UnknownTopicError):
        zk.set_topic_configs("nope", {})

    # deletion: the admin request, then the controller removes every znode
    zk.create_partition_state("events", 0, 1, 0, [1, 2], 1)
    zk.delete_topic_request("events")
    data, _ = zk.raw.get("/admin/delete_topics/events")
    assert data is None
    assert zk.get_topic_deletions() == ["events"] and zk.is_topic_marked_for_deletion("events")
    with pytest.raises(TopicAlreadyMarkedForDeletionError, match="already marked for deletion"):
        zk.delete_topic_request("events")
    with pytest.raises(TopicExistsError, match="marked for deletion"):
        zk.create_topic("events", {0: [1]})
    with pytest.raises(UnknownTopicError, match="to delete does not exist"):
        zk.delete_topic_request("nope")
    zk.delete_topic_znodes("events")
    for path in ("/brokers/topics/events", "/config/topics/events", "/admin/delete_topics/events"):
        assert not zk.path_exists(path), path
    assert zk.get_all_topics() == [] and zk.get_topic_deletions() == []
    zk.delete_topic_znodes("events")  # idempotent


def test_partition_reassignment_znode(clients, connect):
    from kafkacore.cluster.zk_client import ZkNodeExistsError

    zk = clients(connect)
    assert zk.get_partition_reassignment() == {}
    zk.create_partition_reassignment({("t", 0): [2, 3], ("t", 1): [3, 1]})
    js, _ = raw_json(zk, "/admin/reassign_partitions")
    assert js == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]},
                                               {"topic": "t", "partition": 1, "replicas": [3, 1]}]}
    with pytest.raises(ZkNodeExistsError, match="existing assignment"):
        zk.create_partition_reassignment({("t", 0): [1]})
    zk.set_partition_reassignment({("t", 1): [3, 1]})  # partition 0 done
    assert zk.get_partition_reassignment() == {("t", 1): [3, 1]}
    zk.delete_partition_reassignment()
    assert zk.get_partition_reassignment() == {} and not zk.path_exists("/admin/reassign_partitions")
    zk.set_partition_reassignment({("u", 0): [1]})  # creates it when missing
    assert zk.get_partition_reassignment() == {("u", 0): [1]}


def test_isr_change_notifications(clients, connect):
    broker, controller = clients(connect), clients(connect)
    seen = []
    controller.watch_children("/isr_change_notification", seen.append)
    path = broker.propagate_isr_change([("t", 1), ("t", 0)])
    assert re.fullmatch(r"/isr_change_notification/isr_change_\d{10}", path)
    assert raw_json(broker, path)[0] == {"version": 1, "partitions": [{"topic": "t", "partition": 0},
                                                                      {"topic": "t", "partition": 1}]}
    broker.propagate_isr_change([("u", 0)])
    wait_for(lambda: seen and len(seen[-1]) == 2, f"two notifications (seen {seen})")
    assert controller.take_isr_change_notifications() == [("t", 0), ("t", 1), ("u", 0)]
    assert controller.get_all_isr_change_notifications() == []


def test_cluster_id_broker_sequence_and_feature_znodes(clients, connect):
    from kafkacore.cluster.zk_client import ZkNodeExistsError

    a, b = clients(connect), clients(connect)
    cid = a.get_or_create_cluster_id()
    assert b.get_or_create_cluster_id("another") == cid == b.get_cluster_id()
    assert raw_json(a, "/cluster/id")[0] == {"version": "1", "id": cid}
    assert [a.generate_broker_sequence_id() for _ in range(3)] == [1, 2, 3]
    assert a.get_feature_znode() is None
    a.create_feature_znode(FeatureZNodeData(2, 1, {}))
    assert raw_json(a, "/feature")[0] == {"version": 2, "status": 1, "features": {}}
    with pytest.raises(ZkNodeExistsError):
        a.create_feature_znode(FeatureZNodeData())
    assert b.update_feature_znode(FeatureZNodeData(2, 1, {"metadata.version": 7})) == 1
    assert a.get_feature_znode() == (FeatureZNodeData(2, 1, {"metadata.version": 7}), 1)


def test_watches_fire_on_join_leave_and_data_changes(clients, connect):
    from kafkacore.cluster.zk_client import ZkNoNodeError

    controller = clients(connect)
    ids, ctl = [], []
    watch = controller.watch_children("/brokers/ids", ids.append)
    controller.watch_data("/controller", lambda data, stat: ctl.append(data))
    assert ids == [[]] and ctl == [None]  # called once at registration
    brokers = [clients(connect) for _ in range(3)]
    for i, b in enumerate(brokers):
        b.register_broker(i, "h", 9092 + i)
    wait_for(lambda: ids[-1] == ["0", "1", "2"], f"three brokers (seen {ids})")
    brokers[1].close()
    wait_for(lambda: ids[-1] == ["0", "2"], f"broker 1 leaving (seen {ids})")
    brokers[0].try_elect_controller(0)
    wait_for(lambda: ctl[-1] is not None and json.loads(ctl[-1])["brokerid"] == 0, f"controller 0 (seen {ctl})")
    brokers[0].close()
    wait_for(lambda: ctl[-1] is None, f"controller gone (seen {ctl})")
    watch.cancel()
    n = len(ids)
    brokers[2].close()
    wait_for(lambda: controller.get_all_broker_ids() == [], "broker 2's znode gone")
    time.sleep(0.5)  # a negative check: a watch not cancelled would fire within this
    assert len(ids) == n  # cancelled
    with pytest.raises(ZkNoNodeError, match="no such znode"):
        controller.watch_children("/no/such/path", ids.append)


def test_a_failing_watch_callback_is_logged_and_the_watch_goes_on(clients, connect, caplog):
    zk = clients(connect)
    calls = []

    def boom(children):
        calls.append(children)
        raise RuntimeError("callback bug")

    zk.watch_children("/brokers/ids", boom)
    zk.register_broker(1, "h", 1)
    wait_for(lambda: len(calls) >= 2, "second call")
    clients(connect).register_broker(2, "h", 2)
    wait_for(lambda: len(calls) >= 3, "third call")
    assert "callback bug" in caplog.text


def test_zookeeper_restart_keeps_the_session_registration_and_watches(own_zookeeper, clients):
    connect = own_zookeeper.connect_string + "/kafka"
    broker = clients(connect, session_timeout_ms=10000)
    states = States(broker)
    sid = broker.session_id
    epoch = broker.register_broker(1, "h", 9092)
    ids = []
    broker.watch_children("/brokers/ids", ids.append)

    own_zookeeper.stop()
    states.wait("suspended")
    own_zookeeper.start()  # same port, same data
    states.wait("suspended", "connected")
    # ZooKeeper persists sessions: the client resumed its own, so its ephemeral is still there
    assert broker.session_id == sid and "lost" not in states.seen
    _, stat = broker.raw.get("/brokers/ids/1")
    assert stat.ephemeralOwner == sid and stat.czxid == epoch == broker.broker_epoch
    # and the watch still fires
    other = clients(connect)
    other.register_broker(2, "h", 9093)
    wait_for(lambda: ids and ids[-1] == ["1", "2"], f"broker 2 seen after the restart (seen {ids})")


def test_operations_wait_through_a_short_pause(own_zookeeper, clients):
    zk = clients(own_zookeeper.connect_string, session_timeout_ms=6000)
    own_zookeeper.pause()
    result = []
    t = threading.Thread(target=lambda: result.append(zk.get_or_create_cluster_id("paused")))
    t.start()
    time.sleep(1.5)  # a negative check: the call does not return while the server is frozen
    assert not result  # waiting: the server is frozen
    own_zookeeper.resume()
    t.join(WAIT)
    assert result == ["paused"]


def test_unreachable_zookeeper_is_a_one_line_connection_error():
    from kafkacore.cluster.zk_client import KafkaZkClient, ZkConnectionError

    port = free_port()  # nothing listens there
    for connect in (f"127.0.0.1:{port}", f"127.0.0.1:{port}/kafka"):
        c = KafkaZkClient(connect, session_timeout_ms=4000, connection_timeout_ms=1000)
        t0 = time.monotonic()
        with pytest.raises(ZkConnectionError, match=rf"could not connect to ZooKeeper at 127\.0\.0\.1:{port} within 1000 ms") as e:
            c.start()
        assert time.monotonic() - t0 < 5
        one_line(e.value)


def test_using_a_client_not_started_or_closed_is_a_clear_error(connect):
    from kafkacore.cluster.zk_client import ZkError

    c = new_client(connect)
    with pytest.raises(ZkError, match=r"start\(\) was not called \(get_children /brokers/ids\)"):
        c.get_all_broker_ids()
    c.start()
    c.close()
    with pytest.raises(ZkError, match="client is closed"):
        c.get_all_broker_ids()


def test_operations_fail_with_a_connection_error_when_zookeeper_is_gone(own_zookeeper, clients):
    from kafkacore.cluster.zk_client import ZkConnectionError

    zk = clients(own_zookeeper.connect_string, connection_timeout_ms=1500)
    own_zookeeper.stop()
    t0 = time.monotonic()
    with pytest.raises(ZkConnectionError, match=r"unreachable: no answer within 1500 ms \(get_children /brokers/ids\)") as e:
        zk.get_all_broker_ids()
    assert time.monotonic() - t0 < 5
    one_line(e.value)
