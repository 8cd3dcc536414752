"""A secured local cluster for development and tests (``kafkacore cluster up --security ssl|sasl_ssl``):
throw-away TLS material made on the spot with the ``openssl`` command (a CA, one certificate for
127.0.0.1/localhost that every broker serves and dials with, a client certificate), the brokers'
listener settings, and for SASL_SSL a SCRAM-SHA-512 user written into ZooKeeper before any
broker starts (what Kafka's docs do with ``kafka-configs --zookeeper ... --add-config
'SCRAM-SHA-512=[password=...]'``).

Each broker has two listeners: CLIENT on its port (PLAINTEXT, or the cluster's protocol for
``cluster up``) and BROKER on a port of its own, ``inter.broker.listener.name=BROKER``:
- ``ssl``: mutual TLS between brokers (``ssl.client.auth=required`` on BROKER); a broker's
  principal is its certificate's CN (``ssl.principal.mapping.rules``), User:localhost;
- ``sasl_ssl``: TLS, then SCRAM-SHA-512 as the user ``admin`` (principal User:admin), its
  password in the brokers' properties files (0600), never on a command line.
The material and settings live under ``<root>/security``; nothing here is meant for production."""
from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess

PROTOCOLS = ("ssl", "sasl_ssl")
USER = "admin"
MECHANISM = "SCRAM-SHA-512"
BROKER_SUBJECT = "/O=kafkacore/CN=localhost"
CLIENT_SUBJECT = "/O=kafkacore/CN=client"
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{u}" password="{p}";'


class LocalSecurityError(Exception):
    """The TLS material could not be made (no openssl command, or it failed)."""


def _openssl(*args, cwd):
    exe = shutil.which("openssl")
    if exe is None:
        raise LocalSecurityError("making the cluster's test CA needs the openssl command (Debian: apt-get install "
                                 "openssl)")
    done = subprocess.run([exe, *args], cwd=cwd, capture_output=True, timeout=60)
    if done.returncode:
        raise LocalSecurityError(f"openssl {args[0]} failed: {done.stderr.decode(errors='replace').strip()[-300:]}")


def _key_and_cert(name, subject, ca, cwd, extensions=None):
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "30"]
    if extensions:
        with open(os.path.join(cwd, f"{name}.ext"), "w") as f:
            f.write(extensions)
        args += ["-extfile", f"{name}.ext"]
    _openssl(*args, cwd=cwd)
    os.chmod(os.path.join(cwd, f"{name}.key"), 0o600)


def make_tls_material(directory, hosts=()) -> dict:
    """A CA and the brokers' and a client's keys and certificates (EC P-256, 30 days) in
    ``directory``: {what: path}; the brokers' certificate names 127.0.0.1, localhost and
    ``hosts`` (addresses or names). Made once: an existing set is reused."""
    d = os.path.abspath(directory)
    out = {"ca": os.path.join(d, "ca.pem"), "broker_keystore": os.path.join(d, "broker-keystore.pem"),
           "client_cert": os.path.join(d, "client.pem"), "client_key": os.path.join(d, "client.key")}
    if all(os.path.exists(p) for p in out.values()):
        return out
    os.makedirs(d, mode=0o700, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "ca.key",
             "-out", "ca.pem", "-days", "30", "-subj", "/CN=kafkacore-local-ca", cwd=d)
    os.chmod(os.path.join(d, "ca.key"), 0o600)
    names = ["IP:127.0.0.1", "DNS:localhost"] + [f"{_san_kind(h)}:{h}" for h in hosts]
    _key_and_cert("broker", BROKER_SUBJECT, "ca", d, f"subjectAltName={','.join(dict.fromkeys(names))}\n")
    _key_and_cert("client", CLIENT_SUBJECT, "ca", d)
    fd = os.open(out["broker_keystore"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:  # a PEM key store: the key, then its chain
        for part in ("broker.key", "broker.pem", "ca.pem"):
            with open(os.path.join(d, part)) as src:
                f.write(src.read())
    return out


def _san_kind(host):
    try:
        ipaddress.ip_address(host)
        return "IP"
    except ValueError:
        return "DNS"


class LocalSecurity:
    """The security of one local cluster. ``client_protocol``: the CLIENT listener's protocol
    (default: the same as between brokers); ``hosts``: addresses other than 127.0.0.1 the
    brokers listen on (their certificate must name them)."""

    user = USER
    mechanism = MECHANISM

    def __init__(self, root, protocol, client_protocol=None, password=None, hosts=()):
        protocol = protocol.lower()
        if protocol not in PROTOCOLS:
            raise LocalSecurityError(f"--security {protocol}: one of {', '.join(PROTOCOLS)}")
        self.dir = os.path.join(os.path.abspath(root), "security")
        self.protocol = protocol
        self.client_protocol = (client_protocol or protocol).lower()
        self.password = password or secrets.token_urlsafe(18)
        self.hosts = tuple(hosts)
        self.files = None

    @property
    def sasl(self):
        return self.protocol.startswith("sasl_")

    def prepare(self):
        self.files = make_tls_material(self.dir, self.hosts)
        return self

    def bootstrap_zookeeper(self, zk_connect):
        """The SCRAM user the brokers log in to each other as, written into ZooKeeper before any
        broker starts (as kafka-configs --zookeeper does): /config/users/<user>."""
        if not self.sasl:
            return
        from ..security import scram
        from ..security.credential_cache import sanitize
        from .zk_client import KafkaZkClient
        from .zk_data import ConfigType

        zk = KafkaZkClient(zk_connect, session_timeout_ms=10000, connection_timeout_ms=10000)
        zk.start()
        try:
            zk.create_top_level_paths()
            credential = scram.make_credential(scram.MECHANISMS[MECHANISM], self.password)
            zk.set_or_create_entity_configs(ConfigType.USER, sanitize(USER), {MECHANISM: credential.to_config_value()})
        finally:
            zk.close()

    def broker_settings(self, client_port, broker_port, host="127.0.0.1") -> dict:
        """Every security setting of one broker (the password among them: goes in a 0600 file)."""
        broker_protocol = self.protocol.upper()
        s = {"listeners": f"CLIENT://{host}:{client_port},BROKER://{host}:{broker_port}",
             "listener.security.protocol.map": f"CLIENT:{self.client_protocol.upper()},BROKER:{broker_protocol}",
             "inter.broker.listener.name": "BROKER",
             "ssl.keystore.type": "PEM", "ssl.keystore.location": self.files["broker_keystore"],
             "ssl.truststore.type": "PEM", "ssl.truststore.location": self.files["ca"],
             # the brokers' certificate CN as their principal: User:localhost
             "ssl.principal.mapping.rules": "RULE:^CN=([^,]+),.*$/$1/,DEFAULT"}
        if self.sasl or self.client_protocol.startswith("sasl_"):
            s["sasl.enabled.mechanisms"] = MECHANISM
        if self.sasl:
            s["sasl.mechanism.inter.broker.protocol"] = MECHANISM
            s[f"listener.name.broker.{MECHANISM.lower()}.sasl.jaas.config"] = SCRAM_JAAS.format(u=USER, p=self.password)
        else:
            s["listener.name.broker.ssl.client.auth"] = "required"
        return s

    def client_config(self) -> dict:
        """The Java client's settings for the CLIENT listener ({} for PLAINTEXT)."""
        c = {}
        if self.client_protocol == "plaintext":
            return c
        c["security.protocol"] = self.client_protocol.upper()
        if "ssl" in self.client_protocol:
            c.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.files["ca"]})
        if self.client_protocol.startswith("sasl_"):
            c.update({"sasl.mechanism": MECHANISM, "sasl.jaas.config": SCRAM_JAAS.format(u=USER, p=self.password)})
        return c

    def write_client_properties(self) -> str:
        """client.properties (0600) in the security directory; its path."""
        path = os.path.join(self.dir, "client.properties")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write("".join(f"{k}={v}\n" for k, v in self.client_config().items()))
        return path


def write_properties(path, settings):
    """A broker's properties file, readable by this user only (it may hold a password)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path
