"""Client quotas: Kafka's entity precedence, the stored layout, the rate and throttle arithmetic
(security/client_quotas.py), and DescribeClientQuotas / AlterClientQuotas against a real broker.
Throttling real clients is tested with the connections that carry principals."""
import json
import os

import pytest
from hypothesis import given, strategies as st

from broker_client import BrokerProcess, request
from kafkacore.cluster.local_metadata import METADATA_DIR
from kafkacore.cluster.local_znodes import ZnodeTree
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.messages.alter_client_quotas_request import EntityData, EntryData, OpData
from kafkacore.protocol.messages.describe_client_quotas_request import ComponentData
from kafkacore.security.client_quotas import (ABSENT, PRODUCER_BYTE_RATE, QuotaConfigs, QuotaEntity, QuotaManager,
                                              entity_config_path, entity_from_path)


def test_the_most_specific_entity_that_sets_a_quota_wins_in_kafkas_order():
    configs = QuotaConfigs()
    order = [QuotaEntity("alice", "app"), QuotaEntity("alice", None), QuotaEntity("alice", ABSENT),
             QuotaEntity(None, "app"), QuotaEntity(None, None), QuotaEntity(None, ABSENT),
             QuotaEntity(ABSENT, "app"), QuotaEntity(ABSENT, None)]
    for rank, entity in enumerate(order):
        configs.update(entity, {PRODUCER_BYTE_RATE: str(1000 + rank)})
    for rank, entity in enumerate(order):
        assert configs.quota(PRODUCER_BYTE_RATE, "alice", "app") == (1000 + rank, entity)
        configs.update(entity, {})  # removed: the next one in Kafka's order applies
    assert configs.quota(PRODUCER_BYTE_RATE, "alice", "app") == (None, None)
    configs.update(QuotaEntity("bob", ABSENT), {PRODUCER_BYTE_RATE: "5"})
    assert configs.quota(PRODUCER_BYTE_RATE, "alice", "app") == (None, None)
    assert configs.quota("consumer_byte_rate", "bob", "app") == (None, None)


names = st.one_of(st.none(), st.text(min_size=1, max_size=12))


@given(user=st.one_of(st.just(ABSENT), names), client=st.one_of(st.just(ABSENT), names))
def test_entity_paths_round_trip_through_kafkas_sanitized_layout(user, client):
    if user is ABSENT and client is ABSENT:
        return
    entity = QuotaEntity(user, client)
    entity_type, name = entity_config_path(entity)
    assert entity_from_path(entity_type, name) == entity
    assert name.count("/") == (2 if user is not ABSENT and client is not ABSENT else 0)


def test_layout_examples():
    assert entity_config_path(QuotaEntity("alice", "app/1")) == ("users", "alice/clients/app%2F1")
    assert entity_config_path(QuotaEntity(None, ABSENT)) == ("users", "<default>")
    assert entity_config_path(QuotaEntity(ABSENT, None)) == ("clients", "<default>")


def test_throttle_time_brings_the_rate_back_to_the_quota():
    configs = QuotaConfigs()
    configs.update(QuotaEntity(ABSENT, None), {PRODUCER_BYTE_RATE: "1000"})  # every client: 1000 B/s
    manager = QuotaManager(PRODUCER_BYTE_RATE, configs, window_s=1.0, samples=11)
    assert manager.record("u", "a", 5000, now=0.0) == 0  # 5000 B over the 10 s a first burst counts for
    # 15000 B in: 1500 B/s over 10 s, 50% over: 5 s at no traffic bring it back to 1000 B/s
    assert manager.record("u", "a", 10000, now=0.5) == 5000
    assert manager.record("u", "b", 1000, now=0.5) == 0  # a default quota is each client's own
    assert manager.record("v", "c", 10 ** 9, now=1.0) == 11000  # capped at the measured window
    configs.update(QuotaEntity(ABSENT, None), {})
    assert manager.record("u", "a", 10 ** 9, now=2.0) == 0  # no quota any more


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("quotas") / "data") as b:
        yield b


def _alter(broker, entries, validate_only=False):
    with broker.client() as conn:
        resp = conn.call(ApiKey.ALTER_CLIENT_QUOTAS, 1, request(ApiKey.ALTER_CLIENT_QUOTAS, entries=entries,
                                                                 validate_only=validate_only))
    return [(e.error_code, e.error_message) for e in resp.entries]


def _entry(entity, **ops):
    return EntryData(entity=[EntityData(entity_type=t, entity_name=n) for t, n in entity],
                     ops=[OpData(key=k.replace("_remove", ""), value=0.0 if v is None else v, remove=v is None)
                          for k, v in ops.items()])


def _describe(broker, components, strict=False):
    with broker.client() as conn:
        resp = conn.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, request(
            ApiKey.DESCRIBE_CLIENT_QUOTAS, components=[ComponentData(entity_type=t, match_type=m, match=n)
                                                       for t, m, n in components], strict=strict))
    assert resp.error_code == 0, resp.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in resp.entries}


def test_quotas_are_set_described_and_removed_with_kafkas_apis(broker):
    assert _alter(broker, [_entry([("user", "alice")], producer_byte_rate=1048576.0, consumer_byte_rate=2e6),
                           _entry([("user", None)], producer_byte_rate=524288.0),
                           _entry([("user", "alice"), ("client-id", "etl")], request_percentage=50.0),
                           _entry([("client-id", None)], consumer_byte_rate=1e6)]) == [(0, None)] * 4
    everything = _describe(broker, [])
    assert everything[(("user", "alice"),)] == {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2e6}
    assert everything[(("user", None),)] == {"producer_byte_rate": 524288.0}
    assert everything[(("user", "alice"), ("client-id", "etl"))] == {"request_percentage": 50.0}
    assert everything[(("client-id", None),)] == {"consumer_byte_rate": 1e6}
    assert set(_describe(broker, [("user", 0, "alice")])) == {(("user", "alice"),),
                                                              (("user", "alice"), ("client-id", "etl"))}
    assert set(_describe(broker, [("user", 0, "alice")], strict=True)) == {(("user", "alice"),)}
    assert set(_describe(broker, [("user", 1, None)])) == {(("user", None),)}
    assert set(_describe(broker, [("client-id", 2, None)])) == {(("client-id", None),),
                                                                (("user", "alice"), ("client-id", "etl"))}
    assert _alter(broker, [_entry([("user", "alice")], consumer_byte_rate_remove=None)]) == [(0, None)]
    assert _describe(broker, [("user", 0, "alice")], strict=True) == {(("user", "alice"),):
                                                                      {"producer_byte_rate": 1048576.0}}


def test_bad_entries_are_refused_alone_with_invalid_request(broker):
    results = _alter(broker, [_entry([("user", "x"), ("user", "y")], producer_byte_rate=1.0),
                              _entry([("group", "g")], producer_byte_rate=1.0),
                              _entry([("ip", "1.2.3.4")], connection_creation_rate=1.0),
                              _entry([("user", "x")], retention_ms=1.0),
                              _entry([("user", "x")], producer_byte_rate=1.5),
                              _entry([("user", "x")], request_percentage=-1.0),
                              _entry([("user", "ok")], producer_byte_rate=100.0)])
    assert [code for code, _m in results] == [42] * 6 + [0]  # INVALID_REQUEST
    assert "Duplicate" in results[0][1] and "Unhandled" in results[1][1] and "whole" in results[4][1]
    assert _alter(broker, [_entry([("user", "dry")], producer_byte_rate=100.0)], validate_only=True) == [(0, None)]
    assert (("user", "dry"),) not in _describe(broker, [])


def test_a_users_quota_and_scram_credential_share_its_stored_entity(broker):
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "zoe", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"pw")]).values():
        f.result(30)
    assert _alter(broker, [_entry([("user", "zoe")], producer_byte_rate=2048.0),
                           _entry([("client-id", None)], consumer_byte_rate=1e6)]) == [(0, None)] * 2
    broker.stop()
    tree = ZnodeTree(os.path.join(broker.data_dir, METADATA_DIR))
    try:
        stored = json.loads(tree.get("/config/users/zoe")[0])["config"]
        default_client = json.loads(tree.get("/config/clients/<default>")[0])["config"]
    finally:
        tree.close()
    broker.start()
    assert set(stored) == {"SCRAM-SHA-256", "producer_byte_rate"} and stored["producer_byte_rate"] == "2048"
    assert default_client == {"consumer_byte_rate": "1000000"}
    assert _describe(broker, [("user", 0, "zoe")]) == {(("user", "zoe"),): {"producer_byte_rate": 2048.0}}
