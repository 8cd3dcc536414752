"""SASL listeners with real clients (issue 28): one ``kafkacore serve`` with a PLAINTEXT
listener, a SASL_PLAINTEXT and a SASL_SSL listener offering PLAIN, SCRAM-SHA-256/512 and
OAUTHBEARER. confluent-kafka and kafkacore's own clients and CLI log in with each mechanism and
read back what they wrote (every other client over every secured listener:
tests/compat/test_security_matrix.py); wrong passwords, requests before the login and oversize
frames are refused with nothing written; no password reaches the broker's log."""
from __future__ import annotations

import random
import time

import pytest

from _cli import kafkacore
from _tls import KEY_PASSWORD, make_tls_material
from broker_client import BrokerProcess, KafkaConnection, free_port, request
from kafkacore.errors import SaslAuthenticationFailedError
from kafkacore.protocol.api_table import ApiKey
from kafkacore.security import plain

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,  # noqa: E402
                                   UserScramCredentialUpsertion)
pytestmark = pytest.mark.timeout(180)

PASSWORDS = {"admin": "admin-secret-pw", "alice": "alice-secret-pw", "bob": "bob-scram-pw"}
PLAIN_JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
              + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items() if u != "bob") + ";")


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls_material(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, tls):
    port, sp, ss = free_port(), free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sp},SASL_SSL://127.0.0.1:{ss}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.server.max.receive.size": "4096",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": tls["server_keystore"],
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM", "ssl.truststore.location": tls["ca"]}
    b = BrokerProcess(tmp_path_factory.mktemp("data") / "d", settings, port=port, extra_args=["--log-level", "debug"])
    b.sasl_port, b.sasl_ssl_port = sp, ss
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})  # over PLAINTEXT: no ACLs yet
    for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512):
        for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
                "bob", ScramCredentialInfo(mechanism, 4096), PASSWORDS["bob"].encode())]).values():
            f.result(30)
    yield b
    b.stop()
    assert not any(p in b.output() for p in PASSWORDS.values())


def sasl_conf(broker, tls, mechanism, user, ssl_listener=False):
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl_port if ssl_listener else broker.sasl_port}",
            "security.protocol": "SASL_SSL" if ssl_listener else "SASL_PLAINTEXT", "sasl.mechanism": mechanism}
    if mechanism == "OAUTHBEARER":
        conf.update({"enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": f"principal={user}"})
    else:
        conf.update({"sasl.username": user, "sasl.password": PASSWORDS[user]})
    if ssl_listener:
        conf["ssl.ca.location"] = tls["ca"]
    return conf


def produce(conf, topic, values):
    p = confluent_kafka.Producer({**conf, "linger.ms": 5, "message.timeout.ms": 20000})
    errors = []
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, _m: err and errors.append(err))
        p.poll(0)
    left = p.flush(30)
    return left, errors


def consume(conf, topic, n, timeout=30):
    c = confluent_kafka.Consumer({**conf, "group.id": f"g-{random.random()}", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            out.append(m.value())
    c.close()
    return out


@pytest.mark.parametrize("mechanism,user,ssl_listener", [
    ("PLAIN", "alice", False), ("SCRAM-SHA-256", "bob", False), ("SCRAM-SHA-512", "bob", True),
    ("PLAIN", "admin", True), ("OAUTHBEARER", "svc", False)])
def test_confluent_kafka_logs_in_and_round_trips(broker, tls, mechanism, user, ssl_listener):
    topic = f"sasl-{mechanism.lower()}-{int(ssl_listener)}"
    conf = sasl_conf(broker, tls, mechanism, user, ssl_listener)
    values = [b"%s-%d" % (mechanism.encode(), i) for i in range(10)]
    assert produce(conf, topic, values) == (0, [])
    assert consume(conf, topic, 10) == values
    assert f"authenticated as User:{user} with {mechanism}" in broker.output()


def test_a_wrong_password_is_refused_and_nothing_is_written(broker, tls):
    conf = sasl_conf(broker, tls, "SCRAM-SHA-512", "bob")
    conf["sasl.password"] = "not-the-password"
    p = confluent_kafka.Producer({**conf, "message.timeout.ms": 3000})
    failures = []
    p.produce("sasl-refused", b"never", on_delivery=lambda err, _m: failures.append(err))
    p.flush(10)
    assert failures and failures[0] is not None
    assert "SASL login failed: authentication failed during authentication due to invalid credentials" in \
        broker.output()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert "sasl-refused" not in admin.list_topics(timeout=20).topics


def test_kafkacore_clients_and_cli_log_in(broker, tls, tmp_path):
    from kafkacore import Consumer, Producer

    scram = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" '
             f'password="{PASSWORDS["bob"]}";')
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.sasl_ssl_port}", "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": scram, "ssl.truststore.location": tls["ca"]}
    with Producer(conf) as p:
        for i in range(20):
            p.send("sasl-kafkacore", b"kc-%d" % i, partition=0)
        assert p.flush(30) == 0
    with Consumer({**conf, "auto.offset.reset": "earliest"}) as c:
        c.assign([("sasl-kafkacore", 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(0.5))
    assert got == [b"kc-%d" % i for i in range(20)]
    wrong = {**conf, "sasl.jaas.config": scram.replace(PASSWORDS["bob"], "nope")}
    with Producer({**wrong, "max.block.ms": 5000}) as p:
        with pytest.raises(Exception) as e:
            p.send("sasl-kafkacore", b"x", partition=0).result(10)
    assert "nope" not in str(e.value)
    props = tmp_path / "client.properties"
    props.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                     f"org.apache.kafka.common.security.plain.PlainLoginModule required username=\"alice\" "
                     f"password=\"{PASSWORDS['alice']}\";\n")
    topics = kafkacore("--command-config", props, "topics", "list", "-o", "json",
                       bootstrap=f"127.0.0.1:{broker.sasl_port}").json()
    assert "sasl-kafkacore" in {t["name"] if isinstance(t, dict) else t for t in topics}


def test_the_clients_own_exchange_fails_with_the_brokers_reason(broker):
    from kafkacore.client.connection import BrokerConnection
    from kafkacore.client.security import ClientSecurity
    from kafkacore.client.config import security_config

    security = ClientSecurity(security_config({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'x.PlainLoginModule required username="alice" password="wrong-one";'}))
    with pytest.raises(SaslAuthenticationFailedError, match="invalid username or password") as e:
        BrokerConnection("127.0.0.1", broker.sasl_port, security=security)
    assert "wrong-one" not in str(e.value)


def test_requests_before_the_login_and_oversize_frames_close_the_connection(broker):
    with KafkaConnection("127.0.0.1", broker.sasl_port) as conn:
        assert conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS, client_software_name="t",
                                                          client_software_version="1")).error_code == 0
        refused = conn.call(ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, mechanism="GSSAPI"))
        assert refused.error_code == 33 and sorted(refused.mechanisms) == sorted(
            ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"])
        conn.send(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=None))
        assert conn.is_closed_by_peer()
    with KafkaConnection("127.0.0.1", broker.sasl_port) as conn:
        conn.send_raw((5000).to_bytes(4, "big") + b"\0" * 100)  # above sasl.server.max.receive.size=4096
        assert conn.is_closed_by_peer()
    with KafkaConnection("127.0.0.1", broker.sasl_port) as conn:  # a v0 handshake: raw tokens follow
        assert conn.call(ApiKey.SASL_HANDSHAKE, 0, request(ApiKey.SASL_HANDSHAKE, mechanism="PLAIN")).error_code == 0
        token = plain.plain_client_token("alice", PASSWORDS["alice"])
        conn.send_raw(len(token).to_bytes(4, "big") + token)
        assert conn.read_frame() == b""  # PLAIN's empty answer, size-prefixed
        assert conn.call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=None)).brokers
    with KafkaConnection("127.0.0.1", broker.port) as conn:  # a listener without SASL, as Kafka answers
        assert conn.call(ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, mechanism="PLAIN")).error_code == 34
