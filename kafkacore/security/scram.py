"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), server and client, and the
credentials the server keeps, in Kafka's format.

The server never holds a password: per user and mechanism it keeps a salt, the iteration count,
StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey = HMAC(SaltedPassword, "Server
Key"), written as Kafka writes them under the user's config entity:
``salt=<base64>,stored_key=<base64>,server_key=<base64>,iterations=<n>``.

The exchange: client-first ``n,[a=authzid],n=user,r=cnonce``; server-first
``r=cnonce+snonce,s=salt,i=iterations``; client-final ``c=base64(gs2 header),r=nonce,p=proof``;
server-final ``v=ServerSignature``. An unknown user gets a server-first made from a salt derived
from the user name and a server secret, and fails at the proof like a wrong password does, so
the answers do not tell which users exist. Channel binding is not offered (no -PLUS mechanism),
delegation tokens (the ``tokenauth`` extension) are not supported."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Callable
from typing import NamedTuple

from ..errors import SaslAuthenticationFailedError
from .sasl_server import SaslServer


class ScramMechanism(NamedTuple):
    name: str
    hash_name: str
    min_iterations: int
    type_id: int  # its number in Describe/AlterUserScramCredentials


# Kafka's ScramMechanism: both need at least 4096 iterations
SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 4096, 1)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 4096, 2)
MECHANISMS = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MECHANISMS_BY_TYPE = {m.type_id: m for m in MECHANISMS.values()}
MAX_ITERATIONS = 16384  # the most AlterUserScramCredentials accepts (Kafka's limit)
DEFAULT_ITERATIONS = 4096
SALT_BYTES = 32

_NONCE = re.compile(r"[\x21-\x2b\x2d-\x7e]+")  # printable ASCII but ','


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_config_value(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (f"salt={b64(self.salt)},stored_key={b64(self.stored_key)},server_key={b64(self.server_key)},"
                f"iterations={self.iterations}")

    @classmethod
    def from_config_value(cls, text: str) -> "ScramCredential":
        """Parses Kafka's stored form; ValueError naming the field that is wrong (never the value)."""
        fields = {}
        for part in str(text).split(","):
            name, eq, value = part.partition("=")
            if not eq:
                raise ValueError(f"SCRAM credential: {name!r} is not name=value")
            fields[name] = value
        try:
            salt = base64.b64decode(fields["salt"], validate=True)
            stored = base64.b64decode(fields["stored_key"], validate=True)
            server = base64.b64decode(fields["server_key"], validate=True)
            iterations = int(fields["iterations"])
        except KeyError as e:
            raise ValueError(f"SCRAM credential: no {e.args[0]} field") from None
        except ValueError:
            raise ValueError("SCRAM credential: a field is not valid base64 or a number") from None
        return cls(salt, stored, server, iterations)


def _hmac(hash_name, key, msg):
    return hmac.new(key, msg, hash_name).digest()


def _h(hash_name, data):
    return hashlib.new(hash_name, data).digest()


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC. (SASLprep
    is not applied, as Kafka does not apply it: ASCII passwords are unaffected.)"""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def make_credential(mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    check_iterations(mechanism, iterations)
    return credential_from_salted_password(mechanism, salted_password(mechanism, password, salt, iterations),
                                           salt, iterations)


def check_iterations(mechanism: ScramMechanism, iterations: int) -> None:
    if not mechanism.min_iterations <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"{mechanism.name}: iterations must be {mechanism.min_iterations}-{MAX_ITERATIONS}, "
                         f"not {iterations}")


def credential_from_salted_password(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    """What AlterUserScramCredentials stores: the client sends the salted password, never the
    password."""
    client_key = _hmac(mechanism.hash_name, salted, b"Client Key")
    return ScramCredential(salt, _h(mechanism.hash_name, client_key),
                           _hmac(mechanism.hash_name, salted, b"Server Key"), iterations)


def _decode_saslname(name: str) -> str:
    """RFC 5802's saslname: ',' and '=' travel as '=2C' and '=3D'; any other '=' is an error."""
    if re.search(r"=(?!2C|3D)", name):
        raise SaslAuthenticationFailedError("invalid SCRAM message: a user name with a bare '='")
    return name.replace("=2C", ",").replace("=3D", "=")


def _encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _fail(what):
    raise SaslAuthenticationFailedError(f"invalid SCRAM message: {what}")


class ScramServer(SaslServer):
    """The server side of one exchange. ``credentials(user)`` gives the user's ScramCredential
    for this mechanism, or None for an unknown user."""

    def __init__(self, mechanism: ScramMechanism, credentials: Callable[[str], ScramCredential | None],
                 secret: bytes | None = None):
        super().__init__()
        self.mechanism = mechanism.name
        self._m = mechanism
        self._credentials = credentials
        self._secret = secret if secret is not None else os.urandom(32)
        self._state = "first"

    def _step(self, token: bytes) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            _fail("not UTF-8")
        if self._state == "first":
            return self._client_first(text)
        return self._client_final(text)

    def _client_first(self, text):
        gs2_flag, sep, rest = text.partition(",")
        authz, sep2, bare = rest.partition(",")
        if not (sep and sep2):
            _fail("the client-first message has no GS2 header")
        if gs2_flag not in ("n", "y"):
            _fail("channel binding is not supported")  # 'p=...': this server offers no -PLUS mechanism
        if authz and not authz.startswith("a="):
            _fail("the GS2 header's second field must be empty or a=authzid")
        fields = bare.split(",")
        if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
            _fail("the client-first message must start n=user,r=nonce")
        user = _decode_saslname(fields[0][2:])
        nonce = fields[1][2:]
        if not user or not _NONCE.fullmatch(nonce):
            _fail("an empty user name or a nonce with characters RFC 5802 does not allow")
        for ext in fields[2:]:
            if ext.startswith("tokenauth="):
                raise SaslAuthenticationFailedError("delegation tokens are not supported")
        if authz and _decode_saslname(authz[2:]) != user:
            raise SaslAuthenticationFailedError("authentication failed: the authorization id differs from the username")
        credential = self._credentials(user)
        if credential is None:
            # an unknown user: a stable made-up salt, and a credential no proof matches
            salt = _hmac("sha256", self._secret, b"salt:" + user.encode())
            credential = ScramCredential(salt, os.urandom(len(_h(self._m.hash_name, b""))), b"", DEFAULT_ITERATIONS)
            self._known = False
        else:
            self._known = True
        self._user = user
        self._credential = credential
        self._gs2_header = f"{gs2_flag},{authz},"
        self._client_nonce = nonce
        self._nonce = nonce + secrets.token_urlsafe(24)
        self._client_first_bare = bare
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text):
        without_proof, sep, proof_field = text.rpartition(",")
        if not sep or not proof_field.startswith("p="):
            _fail("the client-final message must end with p=proof")
        fields = without_proof.split(",")
        if len(fields) < 2 or not fields[0].startswith("c=") or not fields[1].startswith("r="):
            _fail("the client-final message must start c=binding,r=nonce")
        try:
            binding = base64.b64decode(fields[0][2:], validate=True)
            proof = base64.b64decode(proof_field[2:], validate=True)
        except ValueError:
            _fail("channel binding or proof is not base64")
        if binding != self._gs2_header.encode():
            _fail("the channel binding does not repeat the GS2 header")
        # RFC 5802 wants the server's nonce echoed; librdkafka before 2.x (Debian 13's kcat 1.7.1
        # has 2.0.2) sends the client's nonce in front of it again, which Kafka's ScramSaslServer
        # long accepted (it checked endsWith). That one repetition is accepted, nothing else: the
        # proof covers the message as sent, so it changes nothing for freshness or the proof
        echoed = fields[1][2:]
        if echoed != self._nonce and echoed != self._client_nonce + self._nonce:
            _fail("the nonce is not the server's")
        hash_name = self._m.hash_name
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        cred = self._credential
        client_signature = _hmac(hash_name, cred.stored_key, auth_message)
        ok = False
        if len(proof) == len(client_signature):
            client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
            ok = hmac.compare_digest(_h(hash_name, client_key), cred.stored_key)
        if not (ok and self._known):
            raise SaslAuthenticationFailedError(
                f"authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}")
        self._done(self._user)
        return b"v=" + base64.b64encode(_hmac(hash_name, cred.server_key, auth_message))


class ScramClient:
    """The client side: ``first()``, then ``final(server_first)``, then ``verify(server_final)``."""

    def __init__(self, mechanism: ScramMechanism, user: str, password: str, nonce: str | None = None):
        self._m = mechanism
        self._user = user
        self._password = password
        self._nonce = nonce or secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_encode_saslname(user)},r={self._nonce}"

    def first(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode("utf-8")
        fields = dict(f.split("=", 1) for f in text.split(",") if "=" in f)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s"), int(fields.get("i", "0"))
        if not nonce.startswith(self._nonce) or salt is None:
            raise SaslAuthenticationFailedError("invalid SCRAM server-first message")
        if iterations < self._m.min_iterations:
            raise SaslAuthenticationFailedError(f"the server asks {iterations} iterations, below {self._m.name}'s "
                                                f"minimum {self._m.min_iterations}")
        hash_name = self._m.hash_name
        salted = salted_password(self._m, self._password, base64.b64decode(salt), iterations)
        client_key = _hmac(hash_name, salted, b"Client Key")
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
        signature = _hmac(hash_name, _h(hash_name, client_key), auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        self._expected = _hmac(hash_name, _hmac(hash_name, salted, b"Server Key"), auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        text = server_final.decode("utf-8", "replace")
        try:
            signature = base64.b64decode(text[2:], validate=True) if text.startswith("v=") else b""
        except ValueError:
            signature = b""
        if not hmac.compare_digest(signature, self._expected):
            raise SaslAuthenticationFailedError("the server's signature does not match: not the server that "
                                                "holds this user's credentials")
