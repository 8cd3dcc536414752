"""How this broker dials the other brokers of its cluster (Kafka's inter-broker listener with its
security): replica fetching, the controller's LeaderAndIsr/UpdateMetadata/StopReplica, a
controlled shutdown's request and the coordinators' transaction markers all go to the target
broker's endpoint for ``inter.broker.listener.name`` (the one named by
``security.inter.broker.protocol`` when that is set instead), with that listener's security:

- SSL and SASL_SSL: the listener's own ``ssl.*`` settings (``listener.name.<l>.ssl.*`` over
  ``ssl.*``), as Kafka's broker uses them as a client: its key store is the client certificate
  (mutual TLS when the other side sets ``ssl.client.auth``), its trust store checks the other
  broker's certificate, and ``ssl.endpoint.identification.algorithm`` (https by default, as
  since Kafka 2.0) checks the host name against it;
- SASL_PLAINTEXT and SASL_SSL: ``sasl.mechanism.inter.broker.protocol`` (Kafka's default,
  GSSAPI, is refused: kafkacore does not do Kerberos), which must be enabled on the listener,
  logging in with the ``username``/``password`` options of the listener's
  ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (for PLAIN the same text's
  ``user_<name>`` options serve the server side; OAUTHBEARER: its unsecured login options).

The other broker names this one as Kafka would: User:<the SASL user> on a SASL listener, the
mapped certificate name (``ssl.principal.mapping.rules``) on an SSL listener with client
certificates - the principal to list in ``super.users``.

The client side itself is kafkacore's clients' (client/security.py, ClientSecurity: the login
exchange), with the TLS context built from the broker's stores here (broker/tls.py)."""
from __future__ import annotations

from ..client.security import ClientSecurity
from ..errors import InvalidConfigurationError, KafkaConfigError
from .sasl_authenticator import SUPPORTED_MECHANISMS, jaas_config_key
from .tls import client_tls_context

MECHANISM_KEY = "sasl.mechanism.inter.broker.protocol"


def inter_broker_security(config, clustered=False) -> ClientSecurity | None:
    """The security of this broker's connections to the others; None when the inter-broker
    listener is PLAINTEXT (or there is none: a single node). ``clustered``: a broker of a
    cluster, which must have an inter-broker listener. InvalidConfigurationError in one line
    naming the setting at fault, never a password."""
    if clustered:
        config.check_inter_broker()
    name = config.inter_broker_listener_name
    if name is None:
        return None
    ep = next(ep for ep in config.advertised_listeners if ep.listener_name == name)
    protocol = ep.security_protocol
    if protocol == "PLAINTEXT":
        return None
    client = {"security.protocol": protocol.lower(), "sasl.mechanism": None, "sasl.jaas.config": None,
              "ssl.endpoint.identification.algorithm": ""}
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        settings = config.ssl_settings(name)
        context = client_tls_context(name, settings, frozenset(config.listener_overrides.get(name, ())))
        client["ssl.endpoint.identification.algorithm"] = (settings["ssl.endpoint.identification.algorithm"]
                                                           or "").strip().lower()
    if protocol.startswith("SASL_"):
        mechanism = str(config[MECHANISM_KEY]).strip().upper()
        if mechanism == "GSSAPI":
            raise InvalidConfigurationError(
                f"{MECHANISM_KEY}='GSSAPI' (Kafka's default): kafkacore does not do Kerberos; set it to one of "
                f"{', '.join(SUPPORTED_MECHANISMS)} enabled on listener {name}")
        if mechanism not in SUPPORTED_MECHANISMS:
            raise InvalidConfigurationError(f"{MECHANISM_KEY}={mechanism!r}: one of {', '.join(SUPPORTED_MECHANISMS)}")
        enabled, jaas = config.sasl_settings(name)
        if mechanism not in enabled:
            raise InvalidConfigurationError(
                f"{MECHANISM_KEY}={mechanism!r}: not enabled on the inter-broker listener {name} "
                f"(its sasl.enabled.mechanisms: {', '.join(enabled)})")
        key = jaas_config_key(name, mechanism)
        if jaas.get(mechanism) is None:
            raise InvalidConfigurationError(
                f"{key}: missing; the inter-broker login of listener {name} takes its username and password options")
        client.update({"sasl.mechanism": mechanism, "sasl.jaas.config": jaas[mechanism]})
    try:
        return ClientSecurity(client, ssl_context=context)
    except KafkaConfigError as e:  # the client's words name sasl.jaas.config: name the broker's key
        message = str(e).replace("sasl.jaas.config", jaas_config_key(name, client["sasl.mechanism"] or ""), 1)
        raise InvalidConfigurationError(f"inter-broker login: {message}") from None
