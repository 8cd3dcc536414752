"""kafkacore's clients check their security settings when made (client/security.py): each bad
one is a KafkaConfigError naming the setting and never its secret. The connections themselves
are tested against TLS and SASL listeners."""
import pytest

from kafkacore import Consumer, Producer
from kafkacore.errors import KafkaConfigError

PLAIN_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";'


@pytest.mark.parametrize("settings,why", [
    ({"security.protocol": "SASL_PLAINTEXT"}, "GSSAPI/Kerberos is not supported"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, "sasl.jaas.config is required"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
      "sasl.jaas.config": 'x.ScramLoginModule required password="hunter2";'}, "needs username and password"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
      "sasl.jaas.config": 'x.PlainLoginModule required password="hunter2"'}, "';' closing"),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
      "sasl.jaas.config": "x.OAuthBearerLoginModule required;"}, "unsecuredLoginStringClaim_sub"),
    ({"security.protocol": "TLS"}, "security.protocol='TLS': must be one of"),
    ({"security.protocol": "SSL", "ssl.truststore.location": "/nonexistent/ca.pem"}, "ssl.truststore"),
    ({"security.protocol": "SSL", "ssl.keystore.key": "-----BEGIN PRIVATE KEY-----"}, "go together"),
    ({"security.protocol": "SSL", "ssl.enabled.protocols": "TLSv1.1"}, "TLSv1.2 and TLSv1.3"),
    ({"security.protocol": "SSL", "ssl.keystore.type": "JKS"}, "ssl.keystore.type='JKS': must be one of pem"),
])
@pytest.mark.parametrize("client", [Producer, Consumer])
def test_bad_security_settings_fail_at_once_naming_the_setting(client, settings, why):
    with pytest.raises(KafkaConfigError, match=why) as e:
        client({"bootstrap.servers": "127.0.0.1:9", **settings})
    assert "hunter2" not in str(e.value)


def test_plaintext_needs_nothing_and_ssl_settings_are_known_names():
    # the Java client's names are accepted (not "unknown config") even when the protocol does not use them
    Producer({"bootstrap.servers": "127.0.0.1:9", "sasl.jaas.config": PLAIN_JAAS, "sasl.mechanism": "PLAIN",
              "ssl.endpoint.identification.algorithm": ""}).close(0)
