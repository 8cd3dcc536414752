"""SASL/PLAIN (RFC 4616): one client token ``[authzid] NUL authcid NUL password``, checked
against the ``user_<name>="<password>"`` options of the listener's PlainLoginModule, as Kafka's
default PLAIN callback handler does. PLAIN sends the password itself: use it over TLS only."""
from __future__ import annotations

import hmac
from collections.abc import Mapping

from ..errors import SaslAuthenticationFailedError
from .sasl_server import SaslServer

MECHANISM = "PLAIN"
USER_OPTION_PREFIX = "user_"  # Kafka's PlainLoginModule option naming a user's password


def users_from_jaas_options(options: Mapping[str, str]) -> dict[str, str]:
    """{user: password} from a PlainLoginModule's options."""
    return {k[len(USER_OPTION_PREFIX):]: v for k, v in options.items() if k.startswith(USER_OPTION_PREFIX)}


class PlainServer(SaslServer):
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]):
        super().__init__()
        self._users = users

    def _step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailedError(
                f"invalid SASL/PLAIN message: expected authzid NUL username NUL password, got {len(parts)} fields")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("invalid SASL/PLAIN message: not UTF-8") from None
        if not user:
            raise SaslAuthenticationFailedError("authentication failed: no username given")
        if not password:
            raise SaslAuthenticationFailedError("authentication failed: no password given")
        expected = self._users.get(user)
        # compared in constant time whether or not the user exists, so timing tells nothing
        ok = hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode())
        if expected is None or not ok:
            raise SaslAuthenticationFailedError("authentication failed: invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailedError("authentication failed: the authorization id differs from the username")
        self._done(user)
        return b""


def plain_client_token(user: str, password: str, authzid: str = "") -> bytes:
    """The one token a PLAIN client sends."""
    return b"\0".join((authzid.encode(), user.encode(), password.encode()))
