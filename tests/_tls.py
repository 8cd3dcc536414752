"""Throw-away TLS material for the tests, made with the openssl command line: a CA, a server
certificate for 127.0.0.1 and localhost, a client certificate, and a second CA with a client
of its own (one the broker must refuse). Keys are EC P-256 (quick to make)."""
from __future__ import annotations

import subprocess
from pathlib import Path

KEY_PASSWORD = "s3cret-key-pass"  # the servers' encrypted key and PKCS12 store
CLIENT_SUBJECT = "/O=kafkacore/OU=test/CN=client"  # RFC 2253: CN=client,OU=test,O=kafkacore


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _key_and_csr(name, subject, cwd):
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject, cwd=cwd)


def _ca(name, cwd):
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={name}", cwd=cwd)


def _sign(name, ca, cwd, extensions=None):
    args = ["x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2"]
    if extensions:
        Path(cwd, f"{name}.ext").write_text(extensions)
        args += ["-extfile", f"{name}.ext"]
    _openssl(*args, cwd=cwd)


def make_tls_material(directory) -> dict:
    """Writes the files into ``directory``; returns {what: path}."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    _ca("ca", d)
    _key_and_csr("server", "/O=kafkacore/CN=localhost", d)
    _sign("server", "ca", d, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _key_and_csr("client", CLIENT_SUBJECT, d)
    _sign("client", "ca", d)
    _ca("other-ca", d)
    _key_and_csr("stranger", "/O=elsewhere/CN=stranger", d)
    _sign("stranger", "other-ca", d)
    # the server's key encrypted (PKCS#8), and a PEM key store: key then certificate chain
    _openssl("pkey", "-in", "server.key", "-aes256", "-passout", f"pass:{KEY_PASSWORD}", "-out",
             "server-encrypted.key", cwd=d)
    (d / "server-keystore.pem").write_text((d / "server-encrypted.key").read_text() + (d / "server.pem").read_text()
                                          + (d / "ca.pem").read_text())
    _openssl("pkcs12", "-export", "-inkey", "server.key", "-in", "server.pem", "-certfile", "ca.pem",
             "-passout", f"pass:{KEY_PASSWORD}", "-out", "server.p12", cwd=d)
    for f in d.glob("*.key"):
        f.chmod(0o600)
    return {name: str(d / file) for name, file in [
        ("ca", "ca.pem"), ("server_cert", "server.pem"), ("server_key", "server.key"),
        ("server_keystore", "server-keystore.pem"), ("server_p12", "server.p12"),
        ("client_cert", "client.pem"), ("client_key", "client.key"),
        ("stranger_cert", "stranger.pem"), ("stranger_key", "stranger.key"), ("other_ca", "other-ca.pem")]}


def keystore_with_password(material: dict, password: str, path) -> str:
    """A PEM key store of ``material``'s server (key, certificate, CA) whose key is encrypted
    with ``password`` instead of KEY_PASSWORD; returns its path."""
    path = Path(path)
    _openssl("pkey", "-in", material["server_key"], "-aes256", "-passout", f"pass:{password}", "-out",
             str(path) + ".key", cwd=path.parent)
    path.write_text(Path(str(path) + ".key").read_text() + Path(material["server_cert"]).read_text()
                    + Path(material["ca"]).read_text())
    return str(path)
