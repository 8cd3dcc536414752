"""KIP-932: a share group's share partitions recorded in ``__consumer_offsets`` (record type 15,
ShareGroupStatePartitionMetadata) and DeleteGroups deleting their share state with the group
(Kafka 4.1's rule), against a real ``kafkacore serve`` process and confluent-kafka's
ShareConsumer."""

import confluent_kafka
import confluent_kafka.admin as ka
import pytest

from _kcutil import read_offsets_topic, share_consume_accepting, wait_for
from broker_client import BrokerProcess, auto_create, find_coordinators, free_port, request
from kafkacore.coordinator import share_group_records as sg_records
from kafkacore.coordinator.offset_store import partition_for
from kafkacore.protocol.coordinator.share_group_state_partition_metadata_value import \
    ShareGroupStatePartitionMetadataValue
from kafkacore.protocol.wire import Reader

if not hasattr(confluent_kafka, "ShareConsumer"):
    pytest.skip("confluent-kafka without ShareConsumer", allow_module_level=True)

DESCRIBE = 77
OFFSETS_PARTITIONS = 1
COUNT = 20
SETTINGS = {"num.partitions": "1", "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
            "group.share.session.timeout.ms": "3000", "group.share.min.session.timeout.ms": "1000",
            "group.share.heartbeat.interval.ms": "200", "group.share.min.heartbeat.interval.ms": "100",
            "group.share.min.record.lock.duration.ms": "1000", "group.share.record.lock.duration.ms": "2000"}


def _earliest(admin, group):
    res = ka.ConfigResource(ka.ResourceType.GROUP, group, incremental_configs=[ka.ConfigEntry(
        "share.auto.offset.reset", "earliest", incremental_operation=ka.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(30)


def _state(conn, group):
    d = conn.call(DESCRIBE, 1, request(DESCRIBE, group_ids=[group], include_authorized_operations=False)).groups[0]
    return d.error_code, d.group_state


def _type15(bootstrap, group):
    """The values (None: a tombstone) of the group's type-15 records, oldest first."""
    out = []
    for k, v in read_offsets_topic(bootstrap, partition_for(group, OFFSETS_PARTITIONS)):
        key = sg_records.decode_key(k)
        if key is not None and key[0] == sg_records.STATE_PARTITION_METADATA and key[1] == group:
            out.append(None if v is None else _decode(v))
    return out


def _decode(v):
    r = Reader(v)
    assert r.int16() == 0
    return ShareGroupStatePartitionMetadataValue.read(r, 0)


def test_delete_groups_deletes_the_share_state_recorded_by_type_15(tmp_path):
    group, topic = "sdel", "sdel-t"
    with BrokerProcess(tmp_path / "data", settings={**SETTINGS, "metrics.port": str(free_port())}) as b:
        with b.client() as conn:
            auto_create(conn, topic)
            find_coordinators(conn)
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        for i in range(COUNT):
            p.produce(topic, b"%d" % i, partition=0)
        assert p.flush(30) == 0
        admin = ka.AdminClient({"bootstrap.servers": b.bootstrap})
        _earliest(admin, group)
        assert share_consume_accepting(b.bootstrap, group, topic, COUNT) == list(range(COUNT))
        # the share partition the member was assigned is recorded, in Kafka's format
        recorded = _type15(b.bootstrap, group)
        assert [[(t.topic_name, t.partitions) for t in v.initialized_topics] for v in recorded] == [[(topic, [0])]]

        b.restart()  # the group, and its type-15 record, come back from the log
        admin = ka.AdminClient({"bootstrap.servers": b.bootstrap})
        with b.client() as conn:
            find_coordinators(conn)
            wait_for(lambda: _state(conn, group) == (0, "Empty"), "the share group empty")
            admin.delete_consumer_groups([group], request_timeout=30)[group].result(30)
            assert _state(conn, group)[0] == 69  # GROUP_ID_NOT_FOUND: gone
        assert _type15(b.bootstrap, group)[-1] is None  # tombstoned with the group

        # a new group of that id starts afresh: its share state was deleted, so every record again
        _earliest(admin, group)
        assert share_consume_accepting(b.bootstrap, group, topic, COUNT) == list(range(COUNT))
