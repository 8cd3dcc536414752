"""SASL on a listener (Kafka's SaslServerAuthenticator), one ``SaslAuthenticator`` per
connection of a SASL_PLAINTEXT or SASL_SSL listener.

The exchange, as Kafka's brokers run it (KIP-43, KIP-152):
- before authentication a connection may send ApiVersions, SaslHandshake and SaslAuthenticate
  only; anything else closes it;
- SaslHandshake names a mechanism: an enabled one starts its exchange, another is answered
  UNSUPPORTED_SASL_MECHANISM with the enabled list (the client may try again);
- SaslAuthenticate requests carry the client's tokens (v0 of SaslHandshake: raw size-prefixed
  tokens instead, which the network layer passes to ``raw_token``); a refused login is answered
  SASL_AUTHENTICATION_FAILED with the reason, then the connection is closed;
- with ``connections.max.reauth.ms`` above 0 (KIP-368) SaslAuthenticate v1+ tells the client
  how long its session lasts (bounded by an OAUTHBEARER token's expiry); before then it
  re-authenticates with SaslHandshake + SaslAuthenticate on the same connection, as the same
  principal; a request after the session ended closes the connection.

The mechanisms' exchanges are kafkacore/security's; each listener's logins come from its
``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (PLAIN: the ``user_<name>``
passwords; OAUTHBEARER: the unsecured validator's options) and, for SCRAM, from the
credentials stored with AlterUserScramCredentials (the broker's CredentialCache)."""
from __future__ import annotations

import logging
import time
from time import monotonic

from ..errors import (IllegalSaslStateError, InvalidConfigurationError, KafkaError, SaslAuthenticationFailedError,
                      UnsupportedSaslMechanismError)
from ..protocol.api_table import ApiKey
from ..protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from ..protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from ..security import oauthbearer, plain, scram
from ..security.jaas import single_login_module
from .security import USER_TYPE, KafkaPrincipal

log = logging.getLogger("kafkacore.broker")

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
BEFORE_LOGIN_APIS = frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})


def jaas_config_key(listener_name: str, mechanism: str) -> str:
    """Kafka's per-listener, per-mechanism JAAS setting."""
    return f"listener.name.{listener_name.lower()}.{mechanism.lower()}.sasl.jaas.config"


class ListenerSasl:
    """What one SASL listener accepts: its enabled mechanisms and how each checks a login."""

    def __init__(self, listener_name: str, mechanisms, jaas_configs: dict, credential_cache=None, reauth_ms: int = 0,
                 max_receive_size: int = 524288):
        """``jaas_configs``: {mechanism: sasl.jaas.config text or None}. InvalidConfigurationError
        (one line, naming the setting, never a password) for what cannot work. The broker's
        CredentialCache may be given later (``credential_cache``): the settings are checked
        before the broker exists."""
        self.listener_name = listener_name
        self.mechanisms = [m.strip().upper() for m in mechanisms if m.strip()]
        self.reauth_ms = reauth_ms
        self.max_receive_size = max_receive_size  # the largest frame before the login completes
        self.credential_cache = credential_cache
        key = f"listener.name.{listener_name.lower()}.sasl.enabled.mechanisms"
        if not self.mechanisms:
            raise InvalidConfigurationError(f"{key}: no SASL mechanism enabled on listener {listener_name}")
        bad = [m for m in self.mechanisms if m not in SUPPORTED_MECHANISMS]
        if bad:
            raise InvalidConfigurationError(
                f"sasl.enabled.mechanisms: {', '.join(bad)} on listener {listener_name} is not supported "
                f"(kafkacore offers {', '.join(SUPPORTED_MECHANISMS)}; GSSAPI, Kafka's default, needs Kerberos)")
        self._plain_users = {}
        self._oauth_options = {}
        for mechanism in self.mechanisms:
            text = jaas_configs.get(mechanism)
            options = single_login_module(text, jaas_config_key(listener_name, mechanism)).options if text else {}
            if mechanism == "PLAIN":
                self._plain_users = plain.users_from_jaas_options(options)
                if not self._plain_users:
                    raise InvalidConfigurationError(
                        f"{jaas_config_key(listener_name, mechanism)}: PLAIN needs the users' passwords "
                        "(user_<name>=\"<password>\" options of PlainLoginModule)")
            elif mechanism == "OAUTHBEARER":
                self._oauth_options = options
                oauthbearer.UnsecuredJwsValidator(options)  # its options are checked now
        self._validator = oauthbearer.UnsecuredJwsValidator(self._oauth_options) if "OAUTHBEARER" in self.mechanisms \
            else None

    def server(self, mechanism: str):
        if mechanism == "PLAIN":
            return plain.PlainServer(self._plain_users)
        if mechanism == "OAUTHBEARER":
            return oauthbearer.OAuthBearerServer(self._validator)
        m = scram.MECHANISMS[mechanism]
        return scram.ScramServer(m, lambda user: self.credential_cache.get(m.name, user))


def server_sasl(config) -> dict:
    """{listener name: ListenerSasl} for every SASL_PLAINTEXT and SASL_SSL listener, checked
    (InvalidConfigurationError in one line) before any port or file is touched."""
    out = {}
    for ep in config.listeners:
        if ep.security_protocol.startswith("SASL_"):
            mechanisms, jaas = config.sasl_settings(ep.listener_name)
            out[ep.listener_name] = ListenerSasl(ep.listener_name, mechanisms, jaas,
                                                 reauth_ms=config["connections.max.reauth.ms"],
                                                 max_receive_size=config["sasl.server.max.receive.size"])
    return out


class SaslAuthenticator:
    """One connection's SASL state."""

    def __init__(self, listener: ListenerSasl, peer: str, clock=monotonic):
        self.listener = listener
        self.peer = peer
        self._clock = clock
        self._server = None  # the exchange under way
        self.principal: KafkaPrincipal | None = None  # User:<name> once authenticated
        self.raw_tokens = False  # after a v0 SaslHandshake the tokens come without Kafka framing
        self.failed = False  # answer, then close the connection
        self.session_expires_at: float | None = None
        self.session_lifetime_ms = 0  # what SaslAuthenticate v1+ tells the client (0: no limit)

    @property
    def authenticated(self) -> bool:
        return self.principal is not None

    def permits(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may go on now (else the connection is closed)."""
        if self.failed:
            return False
        if not self.authenticated or self._server is not None:
            return api_key in BEFORE_LOGIN_APIS
        if self.session_expires_at is not None and self._clock() >= self.session_expires_at:
            return api_key == ApiKey.SASL_HANDSHAKE  # only a re-authentication may follow
        return True

    def why_refused(self, api_key: int) -> str:
        if self.failed:
            return "a request after its SASL login failed"
        if self.authenticated and self._server is None:
            return "its SASL session expired (connections.max.reauth.ms) and it did not re-authenticate"
        return f"API key {api_key} before the SASL login completed"

    # -- SaslHandshake --------------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> SaslHandshakeResponse:
        enabled = list(self.listener.mechanisms)
        if self._server is not None:
            return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=enabled)
        if self.authenticated and not self.listener.reauth_ms:
            return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=enabled)
        if mechanism not in enabled:
            return SaslHandshakeResponse(error_code=UnsupportedSaslMechanismError.code, mechanisms=enabled)
        self._server = self.listener.server(mechanism)
        self.raw_tokens = version == 0
        return SaslHandshakeResponse(error_code=0, mechanisms=enabled)

    # -- the tokens -----------------------------------------------------------------------------
    def _evaluate(self, token: bytes) -> bytes:
        """The server's answer to one token; KafkaError ends the login (self.failed)."""
        if self._server is None:
            self.failed = True
            raise IllegalSaslStateError("SaslAuthenticate without a SaslHandshake first")
        try:
            answer = self._server.evaluate(token)
        except KafkaError:
            self.failed = True
            self._server = None
            raise
        if self._server.complete:
            self._complete()
        return answer

    def _complete(self):
        server, self._server = self._server, None
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id)
        if self.principal is not None and principal != self.principal:
            self.failed = True
            raise SaslAuthenticationFailedError(
                f"re-authentication as {principal} on a connection authenticated as {self.principal}: "
                "a connection keeps its principal")
        again = self.principal is not None
        self.principal = principal
        lifetime_ms = self.listener.reauth_ms or None
        token = getattr(server, "token", None)
        if token is not None:  # OAUTHBEARER: the session ends with the token, at the latest
            left = token.lifetime_ms - int(time.time() * 1000)
            lifetime_ms = left if lifetime_ms is None else min(lifetime_ms, left)
        self.session_expires_at = None if lifetime_ms is None else self._clock() + lifetime_ms / 1000
        self.session_lifetime_ms = lifetime_ms or 0
        log.debug("connection from %s %sauthenticated as %s with %s", self.peer, "re-" if again else "",
                  principal, server.mechanism)

    def authenticate(self, auth_bytes: bytes, version: int) -> SaslAuthenticateResponse:
        try:
            answer = self._evaluate(bytes(auth_bytes))
        except KafkaError as e:
            log.info("connection from %s: SASL login failed: %s", self.peer, e.message)
            return SaslAuthenticateResponse(error_code=e.code, error_message=e.message, auth_bytes=b"")
        lifetime = self.session_lifetime_ms if self.authenticated and self._server is None else 0
        return SaslAuthenticateResponse(error_code=0, auth_bytes=answer,
                                        session_lifetime_ms=lifetime if version >= 1 else 0)

    def raw_token(self, token: bytes) -> bytes:
        """A token after a v0 SaslHandshake; its answer goes back size-prefixed, without a header.
        KafkaError: the login failed (close the connection, as Kafka does for v0)."""
        answer = self._evaluate(token)
        if self.authenticated and self._server is None:
            self.raw_tokens = False
        return answer
