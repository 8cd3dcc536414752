"""Listener and TLS settings as the broker reads them (Kafka's names, defaults and checks), and
ssl.principal.mapping.rules (KIP-371) as Kafka's SslPrincipalMapper applies them."""
import pytest

from kafkacore.broker.config import BrokerConfig
from kafkacore.broker.security import ANONYMOUS, NoMatchingRule, SslPrincipalMapper, rfc2253_name
from kafkacore.errors import InvalidConfigurationError


def names(endpoints):
    return [(e.listener_name, e.host, e.port, e.security_protocol) for e in endpoints]


def test_the_default_is_one_local_plaintext_listener():
    c = BrokerConfig({})
    assert names(c.listeners) == [("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT")]
    assert c["listener.security.protocol.map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL",
                                                   "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}
    assert c.inter_broker_listener_name == "PLAINTEXT" and (c.host, c.port) == ("127.0.0.1", 9092)


def test_custom_names_through_the_protocol_map_and_advertised_defaults():
    c = BrokerConfig({"listeners": "internal://:9092,EXTERNAL://0.0.0.0:9093",
                      "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
                      "inter.broker.listener.name": "internal"})
    assert names(c.listeners) == [("INTERNAL", None, 9092, "PLAINTEXT"), ("EXTERNAL", "0.0.0.0", 9093, "SSL")]
    # a wildcard or missing host is advertised as 127.0.0.1
    assert names(c.advertised_listeners) == [("INTERNAL", "127.0.0.1", 9092, "PLAINTEXT"),
                                             ("EXTERNAL", "127.0.0.1", 9093, "SSL")]
    assert c.inter_broker_listener_name == "INTERNAL"
    c.set_listener("127.0.0.1", 1234)  # --host/--port: the inter-broker (primary) listener
    assert names(c.listeners)[0] == ("INTERNAL", "127.0.0.1", 1234, "PLAINTEXT")
    assert names(c.listeners)[1] == ("EXTERNAL", "0.0.0.0", 9093, "SSL")


def test_inter_broker_listener_defaults_to_the_protocols_listener():
    c = BrokerConfig({"listeners": "A://127.0.0.1:1,B://127.0.0.1:2",
                      "listener.security.protocol.map": "A:SSL,B:PLAINTEXT"})
    assert c.inter_broker_listener_name == "B"
    c.check_inter_broker()
    ssl_only = BrokerConfig({"listeners": "SSL://127.0.0.1:1"})
    with pytest.raises(InvalidConfigurationError, match="security.inter.broker.protocol='PLAINTEXT': no listener"):
        ssl_only.check_inter_broker()
    tls_between = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2",
                                "inter.broker.listener.name": "SSL"})
    with pytest.raises(InvalidConfigurationError, match="brokers talk to each other over PLAINTEXT only"):
        tls_between.check_inter_broker()


@pytest.mark.parametrize("props, needle", [
    ({"listeners": "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, "each listener must have a different name"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:1"}, "each listener must have a different port"),
    ({"listeners": "INTERNAL://127.0.0.1:1"}, "No security protocol defined for listener INTERNAL"),
    ({"security.inter.broker.protocol": "SASL_SSL"}, "brokers talk to each other over PLAINTEXT only"),
    ({"listeners": "nonsense"}, "Unable to parse nonsense to a broker endpoint"),
    ({"listener.security.protocol.map": "A:TLS"}, "unknown security protocol 'TLS'"),
    ({"advertised.listeners": "SSL://h:1"}, "listener SSL is not in listeners"),
    ({"inter.broker.listener.name": "NOPE"}, "inter.broker.listener.name='NOPE': not a listener"),
    ({"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "only one of them"),
    ({"ssl.keystore.type": "JKS"}, "Java KeyStore files are not supported"),
    ({"ssl.client.auth": "always"}, "ssl.client.auth='always': one of none, requested, required"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1"}, "a rule ends before its closing '/'"),
    ({"ssl.principal.mapping.rules": "NOPE"}, "invalid rule 'NOPE'"),
    ({"listener.name.ssl.ssl.keystore.type": "JKS"}, "listener.name.ssl.ssl.keystore.type='JKS'"),
])
def test_a_bad_listener_or_tls_setting_is_one_line_naming_key_and_value(props, needle):
    with pytest.raises(InvalidConfigurationError) as e:
        BrokerConfig(props)
    assert needle in e.value.message and "\n" not in e.value.message


def test_a_mistyped_password_key_is_refused_without_showing_the_value():
    with pytest.raises(InvalidConfigurationError) as e:
        BrokerConfig({"ssl.keystore.pasword": "hunter2"})
    assert "ssl.keystore.pasword=[hidden]: unknown broker config" == e.value.message


def test_per_listener_ssl_settings_win_for_that_listener():
    c = BrokerConfig({"listeners": "SSL://127.0.0.1:1,MTLS://127.0.0.1:2",
                      "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
                      "ssl.client.auth": "none", "listener.name.mtls.ssl.client.auth": "required"})
    assert c.ssl_settings("SSL")["ssl.client.auth"] == "none"
    assert c.ssl_settings("MTLS")["ssl.client.auth"] == "required"
    assert c.ssl_settings("MTLS")["ssl.enabled.protocols"] == ["TLSv1.2", "TLSv1.3"]


# -- principals ---------------------------------------------------------------------------------
SUBJECT = ((("countryName", "DE"),), (("organizationName", "kafkacore"),), (("organizationalUnitName", "test"),),
           (("commonName", "client"),))


def test_a_certificate_subject_in_rfc2253_form():
    assert rfc2253_name(SUBJECT) == "CN=client,OU=test,O=kafkacore,C=DE"
    assert rfc2253_name(((("commonName", "a,b+c"),),)) == "CN=a\\,b\\+c"
    assert rfc2253_name(((("commonName", "x"), ("userId", "7")),)) == "CN=x+UID=7"


@pytest.mark.parametrize("rules, dn, expected", [
    ("DEFAULT", "CN=client,OU=test,O=kafkacore", "CN=client,OU=test,O=kafkacore"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/", "CN=client,OU=test,O=kafkacore", "client@test"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/U", "CN=client,OU=test,O=kafkacore", "CLIENT@TEST"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1/L", "CN=Admin,OU=test,O=kafkacore", "admin"),
    # the first rule that matches the whole name wins; the next rules are not tried
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),.*$/other-$1/,DEFAULT",
     "CN=svc,OU=ServiceUsers,O=kafkacore", "svc"),
    ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),.*$/other-$1/,DEFAULT",
     "CN=bob,OU=People,O=kafkacore", "other-bob"),
    # a pattern that matches only part of the name does not apply: DEFAULT does
    ("RULE:CN=bob/x/,DEFAULT", "CN=bob,O=a", "CN=bob,O=a"),
    # rules on lines of their own, escaped slashes in a pattern
    ("RULE:^CN=(.*)\\/x$/$1/\n  DEFAULT", "CN=a/x", "a"),
])
def test_mapping_rules(rules, dn, expected):
    assert SslPrincipalMapper(rules).name(dn) == expected


def test_no_matching_rule_fails_and_no_certificate_is_anonymous():
    mapper = SslPrincipalMapper("RULE:^CN=admin$/admin/")
    with pytest.raises(NoMatchingRule):
        mapper.name("CN=someone")
    assert mapper.principal(None) == ANONYMOUS and str(ANONYMOUS) == "User:ANONYMOUS"
    assert str(SslPrincipalMapper().principal({"subject": SUBJECT})) == "User:CN=client,OU=test,O=kafkacore,C=DE"


@pytest.mark.parametrize("props, needle", [
    ({"listeners": "SASL_SSL://127.0.0.1:1"}, "GSSAPI, Kafka's default, needs Kerberos"),
    ({"listeners": "X://127.0.0.1:1", "listener.security.protocol.map": "X:SASL_PLAINTEXT",
      "sasl.enabled.mechanisms": "PLAIN"}, "listener.name.x.plain.sasl.jaas.config: PLAIN needs the users' passwords"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "MD5"},
     "MD5 on listener SASL_PLAINTEXT is not supported"),
])
def test_a_sasl_listener_that_cannot_log_anyone_in_is_refused(props, needle):
    from kafkacore.broker.sasl_authenticator import server_sasl
    with pytest.raises(InvalidConfigurationError) as e:
        server_sasl(BrokerConfig(props))
    assert needle in e.value.message and "\n" not in e.value.message


def test_sasl_listener_settings_are_read_per_listener():
    from kafkacore.broker.sasl_authenticator import server_sasl
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_a="secret-a";'
    c = BrokerConfig({"listeners": "SASL_PLAINTEXT://127.0.0.1:1,INTERNAL://127.0.0.1:2",
                      "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT",
                      "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                      "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
                      "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
                      "connections.max.reauth.ms": "60000"})
    assert c.sasl_settings("SASL_PLAINTEXT") == (["PLAIN", "SCRAM-SHA-256"], {"PLAIN": jaas})
    listeners = server_sasl(c)
    assert list(listeners) == ["SASL_PLAINTEXT"] and listeners["SASL_PLAINTEXT"].reauth_ms == 60000
