"""The embedded broker with all of issue 28's security (kafkacore.Broker): its configured
listeners served with TLS and SASL, an authorizer, SCRAM users; network clients log in and are
authorized, embedded clients act as User:ANONYMOUS, and a wrong password is refused."""
from __future__ import annotations

import pytest

from _tls import KEY_PASSWORD, make_tls_material
from broker_client import free_port
from kafkacore import Broker

confluent_kafka = pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.timeout(120)
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw" '
        'user_alice="alice-pw";')


def test_embedded_broker_with_tls_sasl_and_acls(tmp_path):
    tls = make_tls_material(tmp_path / "tls")
    sasl_ssl, sasl_plain = free_port(), free_port()
    config = {"listeners": f"SASL_SSL://127.0.0.1:{sasl_ssl},SASL_PLAINTEXT://127.0.0.1:{sasl_plain}",
              "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
              "ssl.keystore.type": "PEM", "ssl.keystore.location": tls["server_keystore"],
              "ssl.key.password": KEY_PASSWORD,
              "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              # every listener authenticates: ANONYMOUS is only ever the embedded clients
              "super.users": "User:admin;User:ANONYMOUS"}
    with Broker(tmp_path / "data", config) as broker:
        host, port = broker.serve()
        assert (host, port) == ("127.0.0.1", sasl_ssl)
        broker.create_topic("secured", partitions=1)
        p = broker.producer({})
        for i in range(3):
            p.send("secured", b"embedded-%d" % i)
        p.flush()

        def conf(user, password, port=sasl_ssl):
            c = {"bootstrap.servers": f"127.0.0.1:{port}", "sasl.mechanism": "PLAIN", "sasl.username": user,
                 "sasl.password": password}
            if port == sasl_ssl:
                c.update({"security.protocol": "SASL_SSL", "ssl.ca.location": tls["ca"]})
            else:
                c["security.protocol"] = "SASL_PLAINTEXT"
            return c

        c = confluent_kafka.Consumer({**conf("admin", "admin-pw"), "group.id": "net", "auto.offset.reset": "earliest"})
        c.subscribe(["secured"])
        got = []
        while len(got) < 3:
            m = c.poll(30)
            assert m is not None and m.error() is None, m and m.error()
            got.append(m.value())
        c.close()
        assert got == [b"embedded-%d" % i for i in range(3)]
        # alice logs in (plaintext SASL) but holds no ACL: refused the topic
        errors = []
        prod = confluent_kafka.Producer({**conf("alice", "alice-pw", sasl_plain), "message.timeout.ms": 5000})
        prod.produce("secured", b"nope", on_delivery=lambda err, _m: errors.append(err))
        prod.flush(30)
        assert [e.code() for e in errors] == [confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED]
        # a wrong password never gets in
        bad = []
        prod = confluent_kafka.Producer({**conf("alice", "wrong"), "message.timeout.ms": 5000,
                                         "error_cb": lambda e: bad.append(e)})
        prod.produce("secured", b"nope")
        prod.flush(10)
        assert any(e.code() == confluent_kafka.KafkaError._AUTHENTICATION for e in bad), bad
        assert broker.call(lambda: broker.core.log_manager.get_log("secured", 0).log_end_offset) == 3
