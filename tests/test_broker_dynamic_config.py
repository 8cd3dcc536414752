"""Dynamic broker configs (issue 28): AlterConfigs / IncrementalAlterConfigs on BROKER resources,
per broker and as the cluster default, through confluent-kafka's AdminClient against a real
``kafkacore serve``: Kafka's precedence and sources in DescribeConfigs, the new topic defaults
applied to running logs, Kafka's refusals, the configs kept across a restart and followed by
every broker of a cluster, and a TLS listener's key store reloaded without a restart."""
from __future__ import annotations

import socket
import ssl
import time

import pytest

from _kcutil import wait_for
from _tls import KEY_PASSWORD, keystore_with_password, make_tls_material
from broker_client import BrokerProcess, KafkaConnection, free_port, request
from kafkacore.protocol.api_table import ApiKey

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   ConfigSource, NewTopic)

pytestmark = pytest.mark.timeout(180)
BROKER = confluent_kafka.admin.ResourceType.BROKER
ENCODER_SECRET = "encoder-secret-for-tests"
NEW_KEY_PASSWORD = "the-newest-key-pass"


def _incremental(admin, name, ops):
    """confluent-kafka's IncrementalAlterConfigs; the cluster default (name "", which librdkafka
    will not send) as Kafka's kafka-configs --entity-default sends it, raw."""
    if name == "":
        return _raw_alter(admin, "", ops)
    entries = [ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops]
    fut = admin.incremental_alter_configs([ConfigResource(BROKER, name, incremental_configs=entries)])
    return list(fut.values())[0].result(30)


def _raw_alter(admin, name, ops):
    from kafkacore.protocol.messages.incremental_alter_configs_request import (AlterableConfig,
                                                                                AlterConfigsResource)
    host, port = admin.bootstrap.split(":")
    resource = AlterConfigsResource(resource_type=4, resource_name=name, configs=[
        AlterableConfig(name=k, config_operation=op.value, value=v) for k, v, op in ops])
    with KafkaConnection(host, int(port)) as conn:
        resp = conn.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, resources=[resource], validate_only=False))
    [r] = resp.responses
    if r.error_code:
        raise confluent_kafka.KafkaException(confluent_kafka.KafkaError(r.error_code, r.error_message))


def _admin(bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.bootstrap = bootstrap
    return admin


def _raw_describe(admin, name):
    from kafkacore.protocol.messages.describe_configs_request import DescribeConfigsResource
    host, port = admin.bootstrap.split(":")
    with KafkaConnection(host, int(port)) as conn:
        resp = conn.call(ApiKey.DESCRIBE_CONFIGS, 4, request(
            ApiKey.DESCRIBE_CONFIGS, resources=[DescribeConfigsResource(
                resource_type=4, resource_name=name, configuration_keys=None)], include_synonyms=True))
    return {c.name: c for c in resp.results[0].configs}


def _raw_synonyms(admin, name, key):
    return [(s.value, s.source) for s in _raw_describe(admin, name)[key].synonyms]


def _describe(admin, name):
    if name == "":
        return {k: c.value for k, c in _raw_describe(admin, "").items()}
    fut = admin.describe_configs([ConfigResource(BROKER, name)])
    return list(fut.values())[0].result(30)


def _refused(admin, name, ops):
    with pytest.raises(confluent_kafka.KafkaException) as e:
        _incremental(admin, name, ops)
    return e.value.args[0]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("dyn") / "data") as b:
        yield b


def test_precedence_sources_and_the_logs_follow(broker):
    admin = _admin(broker.bootstrap)
    for f in admin.create_topics([NewTopic("dyn-plain", 1, 1)]).values():
        f.result(30)
    SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
    _incremental(admin, "", [("log.retention.ms", "7200000", SET), ("message.max.bytes", "2000", SET)])
    entry = _describe(admin, "1")["log.retention.ms"]
    assert (entry.value, entry.source, entry.is_read_only) == (
        "7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value, False)
    assert _describe(admin, "")["message.max.bytes"] == "2000"
    _incremental(admin, "1", [("log.retention.ms", "3600000", SET)])
    entry = _describe(admin, "1")["log.retention.ms"]
    assert entry.value == "3600000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    # Kafka's synonyms, highest precedence first (confluent-kafka keys them by name: asked raw)
    assert _raw_synonyms(admin, "1", "log.retention.ms")[:2] == [
        ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("7200000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]
    topic = list(admin.describe_configs([ConfigResource(confluent_kafka.admin.ResourceType.TOPIC, "dyn-plain")])
                 .values())[0].result(30)
    assert topic["retention.ms"].value == "3600000" and topic["max.message.bytes"].value == "2000"
    # the running log takes the new max.message.bytes: a larger batch is refused
    errors = []
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "none",
                                 "message.max.bytes": 1_000_000})
    p.produce("dyn-plain", b"x" * 3000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)  # each in its own batch
    p.produce("dyn-plain", b"small", on_delivery=lambda err, _m: errors.append(err))
    p.flush(30)
    assert [e and e.code() for e in errors] == [confluent_kafka.KafkaError.MSG_SIZE_TOO_LARGE, None]
    _incremental(admin, "1", [("log.retention.ms", None, DELETE)])
    assert _describe(admin, "1")["log.retention.ms"].value == "7200000"
    broker.restart()  # stored: back after a restart
    admin = _admin(broker.bootstrap)
    assert _describe(admin, "1")["log.retention.ms"].value == "7200000"
    _incremental(admin, "", [("log.retention.ms", None, DELETE), ("message.max.bytes", None, DELETE)])
    assert _describe(admin, "1")["message.max.bytes"].source != ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value


def test_kafkas_refusals_change_nothing(broker):
    admin = _admin(broker.bootstrap)
    SET = AlterConfigOpType.SET
    err = _refused(admin, "1", [("zookeeper.connect", "elsewhere:2181", SET)])
    assert err.code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert "Cannot update these configs dynamically: zookeeper.connect" in err.str()
    err = _refused(admin, "", [("ssl.keystore.location", "/tmp/x.pem", SET)])
    assert err.code() == confluent_kafka.KafkaError.INVALID_REQUEST and "broker id must be specified" in err.str()
    err = _refused(admin, "1", [("log.retention.ms", "soon", SET)])
    assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG and "log.retention.ms" in err.str()
    # without password.encoder.secret a password config cannot be stored (Kafka's answer)
    err = _refused(admin, "1", [("ssl.key.password", "hunter2", SET)])
    assert err.code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert "Invalid config value for resource ConfigResource(type=BROKER, name='1'): Password encoder secret " \
           "not configured" in err.str()
    with pytest.raises(confluent_kafka.KafkaException) as e:  # librdkafka would send it to broker 7
        _raw_alter(admin, "7", [("log.retention.ms", "1000", SET)])
    assert e.value.args[0].code() == confluent_kafka.KafkaError.INVALID_REQUEST
    assert _describe(admin, "1")["log.retention.ms"].source not in (
        ConfigSource.DYNAMIC_BROKER_CONFIG.value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert "hunter2" not in broker.output()


def test_append_and_subtract_on_a_broker_list_config(broker):
    """APPEND / SUBTRACT on log.cleanup.policy start from its effective value, as for a topic;
    on a config that is not a list they are Kafka's INVALID_CONFIG."""
    admin = _admin(broker.bootstrap)
    APPEND, SUBTRACT, DELETE = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT, AlterConfigOpType.DELETE
    _incremental(admin, "1", [("log.cleanup.policy", "compact", APPEND)])
    assert _describe(admin, "1")["log.cleanup.policy"].value == "delete,compact"
    _incremental(admin, "1", [("log.cleanup.policy", "delete", SUBTRACT)])
    assert _describe(admin, "1")["log.cleanup.policy"].value == "compact"
    err = _refused(admin, "1", [("log.retention.ms", "5", APPEND)])
    assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG
    assert "Can't APPEND to key log.retention.ms because its type is not LIST." in err.str()
    _incremental(admin, "1", [("log.cleanup.policy", None, DELETE)])
    assert _describe(admin, "1")["log.cleanup.policy"].value == "delete"


def _server_certificate_issuer(port, ca):
    """The TLS handshake against ``ca``: the server certificate's issuer, or the SSL error."""
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw) as s:
                return dict(x[0] for x in s.getpeercert()["issuer"])["commonName"]
    except ssl.SSLError as e:
        return e.reason


def test_a_tls_listener_reloads_its_key_store_without_a_restart(tmp_path):
    old, new = make_tls_material(tmp_path / "old"), make_tls_material(tmp_path / "new")
    port, ssl_port = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}",
                "ssl.keystore.type": "PEM", "ssl.keystore.location": old["server_keystore"],
                "ssl.key.password": KEY_PASSWORD, "password.encoder.secret": ENCODER_SECRET}
    with BrokerProcess(tmp_path / "data", settings, port=port) as b:
        assert _server_certificate_issuer(ssl_port, old["ca"]) == "ca"
        assert _server_certificate_issuer(ssl_port, new["ca"]) == "CERTIFICATE_VERIFY_FAILED"
        admin = _admin(b.bootstrap)
        _incremental(admin, "1", [("listener.name.ssl.ssl.keystore.location", new["server_keystore"],
                                   AlterConfigOpType.SET)])
        assert _server_certificate_issuer(ssl_port, new["ca"]) == "ca"
        assert _server_certificate_issuer(ssl_port, old["ca"]) == "CERTIFICATE_VERIFY_FAILED"
        assert "listener SSL: key store reloaded" in b.output()
        # a key store that cannot be read is refused and the listener keeps the one it has
        err = _refused(admin, "1", [("listener.name.ssl.ssl.keystore.location", str(tmp_path / "missing.pem"),
                                     AlterConfigOpType.SET)])
        assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG
        assert _server_certificate_issuer(ssl_port, new["ca"]) == "ca"

        # a key store whose key has another password, with that password: set together, stored
        # encrypted with password.encoder.secret, never shown, and decoded again after a restart
        newest = make_tls_material(tmp_path / "newest")
        keystore = keystore_with_password(newest, NEW_KEY_PASSWORD, tmp_path / "newest-keystore.pem")
        err = _refused(admin, "1", [("listener.name.ssl.ssl.keystore.location", keystore, AlterConfigOpType.SET)])
        assert err.code() == confluent_kafka.KafkaError.INVALID_CONFIG  # the old password cannot open its key
        _incremental(admin, "1", [("listener.name.ssl.ssl.keystore.location", keystore, AlterConfigOpType.SET),
                                  ("listener.name.ssl.ssl.key.password", NEW_KEY_PASSWORD, AlterConfigOpType.SET)])
        assert _server_certificate_issuer(ssl_port, newest["ca"]) == "ca"
        described = _raw_describe(admin, "1")["listener.name.ssl.ssl.key.password"]
        assert (described.value, described.is_sensitive, described.read_only) == (None, True, False)
        assert all(s.value is None for s in described.synonyms)
        stored = b"".join(f.read_bytes() for f in (tmp_path / "data").rglob("*") if f.is_file())
        assert NEW_KEY_PASSWORD.encode() not in stored
        assert b"keyFactoryAlgorithm:PBKDF2WithHmacSHA512" in stored and b"cipherAlgorithm:AES/CBC/PKCS5Padding" in stored
        since = len(b.output())
        b.restart()
        # the stored configs are applied by the config manager's first round, just after the listeners open
        wait_for(lambda: "listener SSL: key store reloaded" in b.output()[since:], "the stored key store", 30)
        assert _server_certificate_issuer(ssl_port, newest["ca"]) == "ca"
        assert NEW_KEY_PASSWORD not in b.output() and ENCODER_SECRET not in b.output()


def test_every_broker_of_a_cluster_follows_the_cluster_default(tmp_path):
    from kafkacore.embedded_cluster import EmbeddedKafkaCluster
    with EmbeddedKafkaCluster(tmp_path, brokers=2) as cluster:
        first, second = cluster.bootstrap_servers.split(",")[:2]
        _incremental(_admin(first), "", [("log.segment.bytes", "2097152",
                                                                      AlterConfigOpType.SET)])
        admin = _admin(second)
        deadline = time.monotonic() + 30
        while True:  # the other broker learns it from the change notification
            entry = _describe(admin, "2")["log.segment.bytes"]
            if entry.value == "2097152" or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert (entry.value, entry.source) == ("2097152", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
