"""The GROUP config resource (type 32; Kafka 4.1's GroupConfig) through confluent-kafka's
AdminClient on a two-broker in-process cluster: IncrementalAlterConfigs and DescribeConfigs,
Kafka's validation, the change notification reaching every broker, a restart reading the
stored configs back, and the share group using the override."""
import pytest

from _kcutil import wait_for
from kafkacore.embedded_cluster import EmbeddedKafkaCluster

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   ConfigSource, ResourceType)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with EmbeddedKafkaCluster(tmp_path_factory.mktemp("groupcfg"), brokers=2, settings={
            "group.share.min.record.lock.duration.ms": 1000}) as c:
        yield c


@pytest.fixture(scope="module")
def admin(cluster):
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers})


def alter(admin, group, *entries):
    """entries: (name, value or None for DELETE)."""
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry(n, v, incremental_operation=AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)
        for n, v in entries])
    return admin.incremental_alter_configs([res])[res].result(30)


def describe(admin, group):
    res = ConfigResource(ResourceType.GROUP, group)
    return admin.describe_configs([res])[res].result(30)


def test_incremental_alter_and_describe_reach_every_broker(cluster, admin):
    before = describe(admin, "orders")
    assert before["share.record.lock.duration.ms"].value == "30000"
    assert before["share.record.lock.duration.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert before["share.auto.offset.reset"].value == "latest"
    assert before["share.isolation.level"].value == "read_uncommitted"
    alter(admin, "orders", ("share.record.lock.duration.ms", "2000"), ("share.auto.offset.reset", "earliest"))
    after = describe(admin, "orders")
    assert after["share.record.lock.duration.ms"].value == "2000"
    assert after["share.record.lock.duration.ms"].source == ConfigSource.GROUP_CONFIG.value
    assert after["share.auto.offset.reset"].value == "earliest"
    # every broker applies it (the change notification), each one's share partitions use it
    for b in cluster.brokers.values():
        wait_for(lambda b=b: b.server.group_configs.get("orders", "share.record.lock.duration.ms") == 2000,
                 what=f"broker {b.broker_id} applied the group config")
    alter(admin, "orders", ("share.auto.offset.reset", None))
    assert describe(admin, "orders")["share.auto.offset.reset"].value == "latest"
    for b in cluster.brokers.values():
        wait_for(lambda b=b: b.server.group_configs.get("orders", "share.auto.offset.reset") == "latest",
                 what=f"broker {b.broker_id} applied the deletion")


@pytest.mark.parametrize("name,value,message", [
    ("share.record.lock.duration.ms", "999999", "group.share.max.record.lock.duration.ms"),
    ("share.record.lock.duration.ms", "500", "at least 1000"),
    ("share.auto.offset.reset", "sometimes", "by_duration"),
    ("share.auto.offset.reset", "by_duration:yesterday", "ISO-8601"),
    ("share.isolation.level", "read_dirty", "read_committed"),
    ("share.heartbeat.interval.ms", "60000", "group.share.max.heartbeat.interval.ms"),
    ("no.such.config", "1", "Unknown group config name"),
])
def test_invalid_group_configs_are_invalid_config(admin, name, value, message):
    with pytest.raises(confluent_kafka.KafkaException) as e:
        alter(admin, "bad", (name, value))
    err = e.value.args[0]
    assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert message in err.str()
    assert describe(admin, "bad")[name if name != "no.such.config" else "share.isolation.level"].source \
        == ConfigSource.DEFAULT_CONFIG.value


def test_a_restarted_broker_reads_the_group_configs_back(cluster, admin):
    alter(admin, "kept", ("share.isolation.level", "read_committed"))
    cluster.restart(2)
    # the config manager reads the stored entities once the restarted broker runs (asynchronously,
    # as it follows the change notifications): waited for, with a bound
    wait_for(lambda: cluster.brokers[2].server.group_configs.get("kept", "share.isolation.level") == "read_committed",
             what="the restarted broker's group config read back", timeout=30)
