"""Every client over every secured listener (issue 28): confluent-kafka, kafka-python, aiokafka,
kcat and kafkacore's own clients each write and read back over SASL_PLAINTEXT with PLAIN,
SASL_SSL with SCRAM-SHA-512 and SSL with a client certificate (mutual TLS), and confluent-kafka
and kafkacore with OAUTHBEARER.

The broker has an authorizer that refuses what no ACL allows, and each user may use only the
topics and groups of its own prefix: a round trip passes only when the client authenticated as
exactly the principal expected (the mTLS one named by ssl.principal.mapping.rules).
Always a kafkacore broker, whatever KAFKACORE_COMPAT_BROKER says (tansu has no security)."""
from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import pytest

from _tls import KEY_PASSWORD, make_tls_material
from broker_client import BrokerProcess, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,  # noqa: E402
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

pytestmark = pytest.mark.timeout(180)

PLAIN_PASSWORD, SCRAM_PASSWORD = "alice-matrix-pw", "bob-matrix-pw"
# listener kind -> the principal its client authenticates as
PRINCIPALS = {"plain": "alice", "scram": "bob", "mtls": "client@test", "oauth": "svc"}
CLIENTS = ("confluent", "kafka-python", "aiokafka", "kcat", "kafkacore")
VALUES = [b"v-%d" % i for i in range(5)]


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    material = make_tls_material(d)
    keystore = d / "client-keystore.pem"  # kafkacore's ssl.keystore.location: key and chain in one PEM
    keystore.write_text(open(material["client_key"]).read() + open(material["client_cert"]).read())
    return {**material, "client_keystore": str(keystore)}


@pytest.fixture(scope="module")  # not named broker: the compat suite's fixture of that name is its own
def secured(tmp_path_factory, tls):
    port, sp, ss, mtls = free_port(), free_port(), free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sp},SASL_SSL://127.0.0.1:{ss},"
                     f"MTLS://127.0.0.1:{mtls}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
                                          "MTLS:SSL",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PLAIN_PASSWORD}";',
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": tls["server_keystore"],
        "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM", "ssl.truststore.location": tls["ca"],
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the plaintext listener sets the users and ACLs up
    }
    b = BrokerProcess(tmp_path_factory.mktemp("data") / "d", settings, port=port)
    b.ports = {"plain": sp, "oauth": sp, "scram": ss, "mtls": mtls}
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    for f in admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), SCRAM_PASSWORD.encode())]).values():
        f.result(30)
    bindings = [AclBinding(rtype, f"m-{kind}-", ResourcePatternType.PREFIXED, f"User:{user}", "*", AclOperation.ALL,
                           AclPermissionType.ALLOW)
                for kind, user in PRINCIPALS.items() for rtype in (ResourceType.TOPIC, ResourceType.GROUP)]
    for f in admin.create_acls(bindings).values():
        f.result(30)
    yield b
    b.stop()
    assert SCRAM_PASSWORD not in b.output() and PLAIN_PASSWORD not in b.output()


def librdkafka_conf(broker, tls, kind):
    """confluent-kafka's and kcat's settings (both librdkafka)."""
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ports[kind]}", "ssl.ca.location": tls["ca"]}
    if kind == "plain":
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                     "sasl.password": PLAIN_PASSWORD})
    elif kind == "scram":
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
                     "sasl.password": SCRAM_PASSWORD})
    elif kind == "mtls":
        conf.update({"security.protocol": "SSL", "ssl.certificate.location": tls["client_cert"],
                     "ssl.key.location": tls["client_key"]})
    else:
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                     "enable.sasl.oauthbearer.unsecure.jwt": True, "sasl.oauthbearer.config": "principal=svc"})
    return conf


def python_conf(broker, tls, kind):
    """kafka-python's and aiokafka's settings (the same names; aiokafka takes an SSL context)."""
    conf = {"bootstrap_servers": f"127.0.0.1:{broker.ports[kind]}"}
    if kind == "plain":
        conf.update(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_plain_username="alice",
                    sasl_plain_password=PLAIN_PASSWORD)
    elif kind == "scram":
        conf.update(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                    sasl_plain_password=SCRAM_PASSWORD)
    else:
        conf.update(security_protocol="SSL")
    return conf


def run_confluent(broker, tls, kind, topic):
    conf = librdkafka_conf(broker, tls, kind)
    p = confluent_kafka.Producer({**conf, "linger.ms": 5, "message.timeout.ms": 20000})
    errors = []
    for v in VALUES:
        p.produce(topic, v, on_delivery=lambda err, _m: err and errors.append(err))
    assert p.flush(30) == 0 and not errors, errors
    c = confluent_kafka.Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + 30
    while len(got) < len(VALUES) and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            got.append(m.value())
    c.commit(asynchronous=False)  # the group's offsets: READ on the group too
    c.close()
    return got


def run_kafka_python(broker, tls, kind, topic):
    kafka = pytest.importorskip("kafka")
    conf = python_conf(broker, tls, kind)
    conf.update(ssl_cafile=tls["ca"])
    if kind == "mtls":
        conf.update(ssl_certfile=tls["client_cert"], ssl_keyfile=tls["client_key"])
    p = kafka.KafkaProducer(**conf)
    for v in VALUES:
        p.send(topic, v).get(20)
    p.close()
    c = kafka.KafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest", consumer_timeout_ms=15000, **conf)
    got = []
    for m in c:
        got.append(m.value)
        if len(got) == len(VALUES):
            break
    c.close()
    return got


def run_aiokafka(broker, tls, kind, topic):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.helpers import create_ssl_context

    conf = python_conf(broker, tls, kind)
    if kind in ("scram", "mtls"):
        cert = {"certfile": tls["client_cert"], "keyfile": tls["client_key"]} if kind == "mtls" else {}
        conf["ssl_context"] = create_ssl_context(cafile=tls["ca"], **cert)

    async def run():
        producer = aiokafka.AIOKafkaProducer(**conf)
        await producer.start()
        try:
            for v in VALUES:
                await producer.send_and_wait(topic, v)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(topic, group_id=topic, auto_offset_reset="earliest", **conf)
        await consumer.start()
        try:
            got = []
            while len(got) < len(VALUES):
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def run_kcat(broker, tls, kind, topic):
    if shutil.which("kcat") is None:
        pytest.skip("kcat is installed by ci/compat_deps.sh")
    conf = librdkafka_conf(broker, tls, kind)
    base = ["kcat", "-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        base += ["-X", f"{k}={v}"]
    subprocess.run(base + ["-P", "-t", topic], input=b"\n".join(VALUES) + b"\n", check=True, timeout=60)
    out = subprocess.run(base + ["-C", "-t", topic, "-o", "beginning", "-e", "-q"], capture_output=True,
                         check=True, timeout=60).stdout
    return out.split()


def run_kafkacore(broker, tls, kind, topic):
    from kafkacore import Consumer, Producer

    conf = {"bootstrap.servers": f"127.0.0.1:{broker.ports[kind]}", "ssl.truststore.location": tls["ca"]}
    if kind == "plain":
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config":
                     'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" '
                     f'password="{PLAIN_PASSWORD}";'})
    elif kind == "scram":
        conf.update({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config":
                     'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" '
                     f'password="{SCRAM_PASSWORD}";'})
    elif kind == "mtls":
        conf.update({"security.protocol": "SSL", "ssl.keystore.location": tls["client_keystore"]})
    else:
        conf.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config":
                     'org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
                     'unsecuredLoginStringClaim_sub="svc";'})
    with Producer(conf) as p:
        for v in VALUES:
            p.send(topic, v)
        assert p.flush(30) == 0
    with Consumer({**conf, "group.id": topic, "auto.offset.reset": "earliest"}) as c:
        c.subscribe([topic])
        got, deadline = [], time.monotonic() + 30
        while len(got) < len(VALUES) and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(0.5))
        c.commit()
    return got


RUNS = {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "kcat": run_kcat,
        "kafkacore": run_kafkacore}
CASES = [(client, kind) for client in CLIENTS for kind in ("plain", "scram", "mtls")] + [
    ("confluent", "oauth"), ("kafkacore", "oauth")]


@pytest.mark.parametrize("client,kind", CASES, ids=[f"{c}-{k}" for c, k in CASES])
def test_each_client_round_trips_as_its_principal(secured, tls, client, kind):
    topic = f"m-{kind}-{client}"
    assert RUNS[client](secured, tls, kind, topic) == VALUES


def test_a_principal_is_refused_the_topics_of_another(secured, tls):
    """The ACLs hold: alice (PLAIN) may not write bob's topics - so the round trips above passed
    as their own principals, not by a listener letting everyone through."""
    conf = librdkafka_conf(secured, tls, "plain")
    p = confluent_kafka.Producer({**conf, "message.timeout.ms": 5000})
    errors = []
    p.produce("m-scram-not-alices", b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(15)
    assert errors and errors[0] is not None
    assert errors[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
