"""The server side of a TLS (SSL) listener: an ``ssl.SSLContext`` built from Kafka's ``ssl.*``
settings (Kafka's DefaultSslEngineFactory, on Python's ssl module), and the principal mapper
that names its clients.

Key stores: PEM (a file with the private key and the certificate chain, or both given inline
with ``ssl.keystore.key``/``ssl.keystore.certificate.chain``, KIP-651) and PKCS12 (read with the
``cryptography`` package, imported only then: the optional extra ``kafkacore[security]``). Java
KeyStore (JKS) files are refused when the config is read. Python's ssl loads a key only from a
file: inline keys and PKCS12 keys are handed to it through a file readable by this user only
(``mkstemp`` makes it 0600), written with a key encrypted under a one-time password when
``cryptography`` is at hand, and removed at once. No password or key is ever logged.
"""
from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile

from ..errors import InvalidConfigurationError
from .config import LISTENER_PREFIX
from .security import SslPrincipalMapper

# ssl.enabled.protocols / ssl.protocol names -> Python's TLSVersion (Kafka's names)
_TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                 "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class ListenerTls:
    """One TLS listener's context and principal mapper."""

    __slots__ = ("context", "principal_mapper")

    def __init__(self, context, principal_mapper):
        self.context = context
        self.principal_mapper = principal_mapper


def server_tls(config) -> dict:
    """{listener name: ListenerTls} for every SSL and SASL_SSL listener. Raises InvalidConfigurationError in
    one line naming the key at fault (a missing file, a wrong password, a key that does not fit)."""
    out = {}
    for ep in config.listeners:
        if ep.security_protocol in ("SSL", "SASL_SSL"):
            out[ep.listener_name] = listener_tls(ep.listener_name, config.ssl_settings(ep.listener_name),
                                                 frozenset(config.listener_overrides.get(ep.listener_name, ())))
    return out


def _setting_namer(listener, overridden):
    def key(name):
        """How an error names a setting: as written, listener-prefixed or not."""
        return f"{LISTENER_PREFIX}{listener.lower()}.{name}" if name in overridden else name
    return key


def _set_protocols_and_ciphers(ctx, settings, key):
    """``ssl.enabled.protocols`` as the context's version range, ``ssl.cipher.suites`` as its
    ciphers (OpenSSL's names, as Kafka's docs give them for OpenSSL-based clients)."""
    enabled = settings["ssl.enabled.protocols"]
    if [p for p in enabled if p not in _TLS_VERSIONS] or not enabled:
        raise InvalidConfigurationError(f"{key('ssl.enabled.protocols')}={','.join(enabled)!r}: one or more of "
                                        f"{', '.join(_TLS_VERSIONS)}")
    try:
        ctx.minimum_version = min(_TLS_VERSIONS[p] for p in enabled)
        ctx.maximum_version = max(_TLS_VERSIONS[p] for p in enabled)
    except ValueError as e:
        raise InvalidConfigurationError(f"{key('ssl.enabled.protocols')}={','.join(enabled)!r}: {e}") from None
    if settings["ssl.cipher.suites"]:
        try:
            ctx.set_ciphers(":".join(settings["ssl.cipher.suites"]))
        except ssl.SSLError:
            raise InvalidConfigurationError(f"{key('ssl.cipher.suites')}={','.join(settings['ssl.cipher.suites'])!r}: "
                                            "no cipher suite this OpenSSL knows") from None


def listener_tls(listener, settings, overridden=frozenset()) -> ListenerTls:
    key = _setting_namer(listener, overridden)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols_and_ciphers(ctx, settings, key)
    if settings["ssl.protocol"] not in ("TLS", "TLSv1.2", "TLSv1.3", "TLSv1.1", "TLSv1"):
        raise InvalidConfigurationError(f"{key('ssl.protocol')}={settings['ssl.protocol']!r}: one of TLS, TLSv1.2, "
                                        "TLSv1.3")
    _load_keystore(ctx, settings, key)
    ctx.verify_mode = _CLIENT_AUTH[settings["ssl.client.auth"]]
    _load_truststore(ctx, settings, key)
    if ctx.verify_mode != ssl.CERT_NONE and not ctx.get_ca_certs():
        raise InvalidConfigurationError(f"{key('ssl.client.auth')}={settings['ssl.client.auth']!r}: client certificates "
                                        "need a truststore (ssl.truststore.location or ssl.truststore.certificates)")
    return ListenerTls(ctx, SslPrincipalMapper(settings["ssl.principal.mapping.rules"]))


def client_tls_context(listener, settings, overridden=frozenset()) -> ssl.SSLContext:
    """The context a broker dials another broker's TLS listener with (Kafka's broker as a client
    of the inter-broker listener): the same ``ssl.*`` stores as that listener's server side - its
    key store as the client certificate (mutual TLS when the other side asks), its trust store
    (the system's CAs when none is set) - and the server's name checked against its certificate
    when ``ssl.endpoint.identification.algorithm`` is https (Kafka's default since 2.0; empty
    turns the check off, the certificate is still verified)."""
    key = _setting_namer(listener, overridden)
    algorithm = (settings["ssl.endpoint.identification.algorithm"] or "").strip().lower()
    if algorithm not in ("", "https"):
        raise InvalidConfigurationError(f"{key('ssl.endpoint.identification.algorithm')}={algorithm!r}: https or "
                                        "empty (no host name check)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_protocols_and_ciphers(ctx, settings, key)
    ctx.check_hostname = algorithm == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_keystore(ctx, settings, key)
    if settings["ssl.truststore.location"] is None and settings["ssl.truststore.certificates"] is None:
        ctx.load_default_certs()
    else:
        _load_truststore(ctx, settings, key)
    return ctx


def _load_keystore(ctx, settings, key):
    location = settings["ssl.keystore.location"]
    chain, inline_key = settings["ssl.keystore.certificate.chain"], settings["ssl.keystore.key"]
    store_type = settings["ssl.keystore.type"]
    if (chain is None) != (inline_key is None):
        raise InvalidConfigurationError(f"{key('ssl.keystore.certificate.chain')} and {key('ssl.keystore.key')}: "
                                        "both or neither")
    if chain is not None and location is not None:
        raise InvalidConfigurationError(f"{key('ssl.keystore.location')}={location!r}: not with an inline "
                                        "ssl.keystore.key (one key store)")
    if chain is None and location is None:
        raise InvalidConfigurationError(f"{key('ssl.keystore.location')}: a TLS listener needs a key store "
                                        "(ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)")
    if store_type == "JKS":  # Kafka's default type: never a file Python can read
        raise InvalidConfigurationError(f"{key('ssl.keystore.type')}='JKS': Java KeyStore files are not supported; "
                                        "set ssl.keystore.type=PEM or PKCS12")
    if store_type == "PEM":
        if settings["ssl.keystore.password"] is not None:
            # Kafka's rule: a PEM key store has no store password, only ssl.key.password
            raise InvalidConfigurationError(f"{key('ssl.keystore.password')}=[hidden]: not used with PEM key stores; "
                                            "an encrypted key's password is ssl.key.password")
        password = settings["ssl.key.password"]
        if chain is not None:
            _load_chain_from_text(ctx, _pem_text(chain) + _pem_text(inline_key), password, key("ssl.keystore.key"))
        else:
            _load_chain_from_file(ctx, location, password, key("ssl.keystore.location"), key("ssl.key.password"))
        return
    # PKCS12
    if chain is not None:
        raise InvalidConfigurationError(f"{key('ssl.keystore.type')}='PKCS12': inline key stores are PEM; "
                                        "set ssl.keystore.type=PEM")
    pkcs12 = _pkcs12_module(key("ssl.keystore.type"))
    data = _read(location, key("ssl.keystore.location"))
    try:
        private_key, cert, extra = pkcs12.load_key_and_certificates(
            data, _password_bytes(settings["ssl.keystore.password"]))
    except ValueError:
        raise InvalidConfigurationError(f"{key('ssl.keystore.location')}={location!r}: cannot open the PKCS12 key store "
                                        "(wrong ssl.keystore.password, or not a PKCS12 file)") from None
    if private_key is None or cert is None:
        raise InvalidConfigurationError(f"{key('ssl.keystore.location')}={location!r}: the PKCS12 key store holds no "
                                        "private key with its certificate")
    from cryptography.hazmat.primitives import serialization

    one_time = secrets.token_urlsafe(24)
    pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.BestAvailableEncryption(one_time.encode()))
    for c in [cert, *(extra or ())]:
        pem += c.public_bytes(serialization.Encoding.PEM)
    _load_chain_from_text(ctx, pem.decode(), one_time, key("ssl.keystore.location"))


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _pem_text(value) -> str:
    """An inline PEM value. A properties file gives it on one line (Kafka allows that), so the
    base64 of each block is put back on lines of its own."""
    text = str(value).strip()
    if "\n" in text:
        return text + "\n"
    blocks = _PEM_BLOCK.findall(text)
    return "".join(f"-----BEGIN {label}-----\n" + "\n".join(body.split()) + f"\n-----END {label}-----\n"
                   for label, body in blocks)


def _load_chain_from_text(ctx, pem_text, password, what):
    """load_cert_chain from text: through a file only this user can read, removed at once."""
    fd, path = tempfile.mkstemp(prefix="kafkacore-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem_text)
        ctx.load_cert_chain(path, password=_password_bytes(password))
    except ssl.SSLError as e:
        raise InvalidConfigurationError(f"{what}=[hidden]: cannot load the certificate and key "
                                        f"({_ssl_reason(e)}; wrong ssl.key.password?)") from None
    finally:
        os.unlink(path)


def _load_chain_from_file(ctx, location, password, what, password_key):
    _read(location, what)  # a missing or unreadable file in the words of the setting
    try:
        ctx.load_cert_chain(location, password=_password_bytes(password))
    except ssl.SSLError as e:
        raise InvalidConfigurationError(f"{what}={location!r}: cannot load the certificate and key ({_ssl_reason(e)}; "
                                        f"a PEM file with the key and its chain, encrypted with {password_key}?)") from None


def _load_truststore(ctx, settings, key):
    location, inline = settings["ssl.truststore.location"], settings["ssl.truststore.certificates"]
    if location is None and inline is None:
        return
    if location is not None and inline is not None:
        raise InvalidConfigurationError(f"{key('ssl.truststore.location')}={location!r}: not with "
                                        "ssl.truststore.certificates (one trust store)")
    store_type = settings["ssl.truststore.type"]
    if store_type == "JKS":
        raise InvalidConfigurationError(f"{key('ssl.truststore.type')}='JKS': Java KeyStore files are not supported; "
                                        "set ssl.truststore.type=PEM or PKCS12")
    if store_type == "PEM":
        if settings["ssl.truststore.password"] is not None:
            raise InvalidConfigurationError(f"{key('ssl.truststore.password')}=[hidden]: not used with PEM trust stores")
        try:
            if inline is not None:
                ctx.load_verify_locations(cadata=_pem_text(inline))
            else:
                _read(location, key("ssl.truststore.location"))
                ctx.load_verify_locations(cafile=location)
        except ssl.SSLError as e:
            what = key("ssl.truststore.certificates") if inline is not None else f"{key('ssl.truststore.location')}={location!r}"
            raise InvalidConfigurationError(f"{what}: no PEM certificates ({_ssl_reason(e)})") from None
        return
    if inline is not None:
        raise InvalidConfigurationError(f"{key('ssl.truststore.type')}='PKCS12': inline trust stores are PEM")
    pkcs12 = _pkcs12_module(key("ssl.truststore.type"))
    from cryptography.hazmat.primitives import serialization

    data = _read(location, key("ssl.truststore.location"))
    try:
        store = pkcs12.load_pkcs12(data, _password_bytes(settings["ssl.truststore.password"]))
    except ValueError:
        raise InvalidConfigurationError(f"{key('ssl.truststore.location')}={location!r}: cannot open the PKCS12 trust "
                                        "store (wrong ssl.truststore.password, or not a PKCS12 file)") from None
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    if not certs:
        raise InvalidConfigurationError(f"{key('ssl.truststore.location')}={location!r}: no certificates in it")
    ctx.load_verify_locations(cadata="".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode()
                                             for c in certs))


def _pkcs12_module(what):
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise InvalidConfigurationError(f"{what}='PKCS12': reading PKCS12 stores needs the 'cryptography' package "
                                        "(pip install 'kafkacore[security]'), or use PEM") from None
    return pkcs12


def _read(location, what) -> bytes:
    try:
        with open(location, "rb") as f:
            return f.read()
    except OSError as e:
        raise InvalidConfigurationError(f"{what}={location!r}: {e.strerror}") from None


def _password_bytes(password):
    return None if password is None else str(password).encode()


def _ssl_reason(e) -> str:
    return getattr(e, "reason", None) or str(e).split("] ", 1)[-1].split(" (_ssl")[0]
