"""How kafkacore's clients secure their connections, with the Java client's settings:
``security.protocol`` (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl.*`` for TLS and
``sasl.mechanism`` + ``sasl.jaas.config`` for SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
OAUTHBEARER with Kafka's unsecured tokens; GSSAPI is not supported).

A connection first speaks TLS (when the protocol says so), then ApiVersions, then SaslHandshake
v1 and SaslAuthenticate as Kafka's clients do (KIP-152), before any other request. A refused
login fails the connection with the broker's SASL_AUTHENTICATION_FAILED message, which never
holds the password."""
from __future__ import annotations

import os
import ssl
import tempfile

from ..errors import (IllegalSaslStateError, InvalidConfigurationError, KafkaConfigError, KafkaError,
                      SaslAuthenticationFailedError, UnsupportedSaslMechanismError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..security import oauthbearer, plain, scram
from ..security.jaas import single_login_module

PROTOCOLS = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def _choice(*options):
    def parse(key, value):
        text = str(value).strip().lower()
        if text not in options:
            raise KafkaConfigError(f"{key}={value!r}: must be one of {', '.join(options)}")
        return text
    return parse


def _optional_text(key, value):
    if value is None:
        return None
    if not isinstance(value, str):
        raise KafkaConfigError(f"{key}: expected a string")  # (the value may be a secret: not shown)
    return value


def _protocols(key, value):
    items = value.split(",") if isinstance(value, str) else list(value)
    out = [str(i).strip() for i in items if str(i).strip()]
    known = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
    bad = [p for p in out if p not in known]
    if bad or not out:
        raise KafkaConfigError(f"{key}={value!r}: TLS versions are TLSv1.2 and TLSv1.3")
    return [known[p] for p in out]


# the Java client's names and defaults (Kafka 4.x), merged into every client's table
SECURITY_CONFIGS = {
    "security.protocol": (_choice(*PROTOCOLS), "plaintext"),
    "sasl.mechanism": (lambda k, v: str(v).strip().upper(), "GSSAPI"),
    "sasl.jaas.config": (_optional_text, None),
    "ssl.protocol": (_choice("tls", "tlsv1.2", "tlsv1.3"), "tlsv1.3"),
    "ssl.enabled.protocols": (_protocols, [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3]),
    "ssl.endpoint.identification.algorithm": (lambda k, v: str(v or "").strip().lower(), "https"),
    "ssl.truststore.type": (_choice("pem"), "pem"),
    "ssl.truststore.location": (_optional_text, None),
    "ssl.truststore.certificates": (_optional_text, None),
    "ssl.truststore.password": (_optional_text, None),
    "ssl.keystore.type": (_choice("pem"), "pem"),
    "ssl.keystore.location": (_optional_text, None),
    "ssl.keystore.certificate.chain": (_optional_text, None),
    "ssl.keystore.key": (_optional_text, None),
    "ssl.keystore.password": (_optional_text, None),
    "ssl.key.password": (_optional_text, None),
    "ssl.cipher.suites": (_optional_text, None),
}


def _load_inline_chain(ctx, chain, key, password):
    """Python's ssl loads a certificate chain from files only: the inline PEM goes to a file in a
    private directory (0700) that is removed at once."""
    with tempfile.TemporaryDirectory(prefix="kafkacore-ssl-") as d:
        path = os.path.join(d, "keystore.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)


def client_security(config: dict):
    """The ClientSecurity of a checked client config; None for PLAINTEXT (nothing to do)."""
    return None if config["security.protocol"] == "plaintext" else ClientSecurity(config)


class ClientSecurity:
    """The checked security settings of one client; ``connect`` steps run on each connection."""

    def __init__(self, config: dict, ssl_context=None):
        """``ssl_context``: a client context made elsewhere (a broker's, from its own ssl.*
        stores: broker/inter_broker.py) instead of one from ``config``'s ssl.* settings."""
        self.protocol = config["security.protocol"]
        self.tls = self.protocol in ("ssl", "sasl_ssl")
        self.sasl = self.protocol.startswith("sasl_")
        self.ssl_context = (ssl_context or self._ssl_context(config)) if self.tls else None
        self.check_hostname = config["ssl.endpoint.identification.algorithm"] == "https"
        self.mechanism = config["sasl.mechanism"]
        self._login = {}
        if self.sasl:
            self._check_sasl(config)

    @staticmethod
    def _ssl_context(c):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        versions = c["ssl.enabled.protocols"]
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
        ctx.check_hostname = c["ssl.endpoint.identification.algorithm"] == "https"
        try:
            if c["ssl.truststore.location"]:
                ctx.load_verify_locations(cafile=c["ssl.truststore.location"])
            elif c["ssl.truststore.certificates"]:
                ctx.load_verify_locations(cadata=c["ssl.truststore.certificates"])
            else:
                ctx.load_default_certs()
        except (OSError, ssl.SSLError) as e:
            raise KafkaConfigError(f"ssl.truststore: cannot load the trusted certificates: {e}") from None
        password = c["ssl.key.password"] or c["ssl.keystore.password"]
        try:
            if c["ssl.keystore.location"]:
                ctx.load_cert_chain(c["ssl.keystore.location"], password=password)
            elif c["ssl.keystore.certificate.chain"] or c["ssl.keystore.key"]:
                if not (c["ssl.keystore.certificate.chain"] and c["ssl.keystore.key"]):
                    raise KafkaConfigError("ssl.keystore.certificate.chain and ssl.keystore.key go together")
                _load_inline_chain(ctx, c["ssl.keystore.certificate.chain"], c["ssl.keystore.key"], password)
        except (OSError, ssl.SSLError) as e:
            raise KafkaConfigError(f"ssl.keystore: cannot load the client certificate and key "
                                   f"({getattr(e, 'reason', None) or e.__class__.__name__})") from None
        if c["ssl.cipher.suites"]:
            try:
                ctx.set_ciphers(":".join(s.strip() for s in c["ssl.cipher.suites"].split(",")))
            except ssl.SSLError:
                raise KafkaConfigError(f"ssl.cipher.suites={c['ssl.cipher.suites']!r}: no cipher suite OpenSSL "
                                       "knows") from None
        return ctx

    def _check_sasl(self, c):
        if self.mechanism not in MECHANISMS:
            raise KafkaConfigError(f"sasl.mechanism={self.mechanism!r}: kafkacore's clients support "
                                   f"{', '.join(MECHANISMS)} (GSSAPI/Kerberos is not supported)")
        if c["sasl.jaas.config"] is None:
            raise KafkaConfigError(f"sasl.jaas.config is required with security.protocol={self.protocol.upper()} "
                                   f"(e.g. ...{'ScramLoginModule' if 'SCRAM' in self.mechanism else 'PlainLoginModule'}"
                                   " required username=\"...\" password=\"...\";)")
        try:
            module = single_login_module(c["sasl.jaas.config"], "sasl.jaas.config")
            if self.mechanism == "OAUTHBEARER":
                oauthbearer.unsecured_login_token(module.options)  # checked now, made per connection
        except InvalidConfigurationError as e:
            raise KafkaConfigError(e.message) from None
        self._login = module.options
        if self.mechanism != "OAUTHBEARER" and not ("username" in module.options and "password" in module.options):
            raise KafkaConfigError(f"sasl.jaas.config: {self.mechanism} needs username and password options")

    # -- on each connection -----------------------------------------------------------------
    def wrap(self, sock, host: str):
        """The TCP socket as a TLS one (handshake done); ssl.SSLError if the broker is not trusted."""
        return self.ssl_context.wrap_socket(sock, server_hostname=host if self.check_hostname else None)

    @property
    def username(self):
        """The login's user (PLAIN, SCRAM) or token subject (OAUTHBEARER), for messages."""
        return self._login.get("username") or self._login.get("unsecuredLoginStringClaim_sub")

    def authenticate(self, conn) -> None:
        """SaslHandshake v1 and SaslAuthenticate on a fresh connection (``conn.call``)."""
        steps = self.login_requests(f"{conn.host}:{conn.port}", min(conn.version(ApiKey.SASL_AUTHENTICATE), 2))
        response = None
        while True:
            try:
                api_key, version, body = steps.send(response)
            except StopIteration:
                return
            response = conn.call(api_key, body, version=version)

    def login_requests(self, where: str, authenticate_version: int):
        """The login as a generator of (api key, version, request body); each response is sent
        back into it. Ends when the broker accepted the login; raises what the broker refused
        (UnsupportedSaslMechanismError, SaslAuthenticationFailedError...). One exchange for the
        clients' blocking connections (``authenticate``) and the brokers' asyncio ones
        (replication/broker_channel.py)."""
        handshake = yield (ApiKey.SASL_HANDSHAKE, 1, request_class(ApiKey.SASL_HANDSHAKE)(mechanism=self.mechanism))
        if handshake.error_code:
            raise UnsupportedSaslMechanismError(
                f"{where} does not enable {self.mechanism} (it offers {', '.join(handshake.mechanisms) or 'none'})")
        for token, check in self._exchange():
            resp = yield (ApiKey.SASL_AUTHENTICATE, authenticate_version,
                          request_class(ApiKey.SASL_AUTHENTICATE)(auth_bytes=token))
            if resp.error_code:
                err = error_for_code(resp.error_code, resp.error_message or "")
                raise err if isinstance(err, KafkaError) else SaslAuthenticationFailedError(str(resp.error_message))
            check(bytes(resp.auth_bytes or b""))

    def _exchange(self):
        """(token, check of the broker's answer) pairs, in order."""
        opts = self._login
        if self.mechanism == "PLAIN":
            yield plain.plain_client_token(opts["username"], opts["password"]), lambda _answer: None
        elif self.mechanism.startswith("SCRAM-"):
            client = scram.ScramClient(scram.MECHANISMS[self.mechanism], opts["username"], opts["password"])
            answers = []
            yield client.first(), answers.append
            yield client.final(answers[0]), client.verify
        else:
            yield oauthbearer.client_token(oauthbearer.unsecured_login_token(opts)), _oauth_answer
        return


def _oauth_answer(answer):
    if answer:  # RFC 7628's error challenge: the broker refused the token
        raise IllegalSaslStateError(f"the broker refused the OAUTHBEARER token: {answer.decode('utf-8', 'replace')}")
