"""What every SASL mechanism's server side is: an exchange fed the client's tokens in order
(the auth_bytes of each SaslAuthenticate request, or the raw tokens after a v0 SaslHandshake)
that answers each with the server's token, until ``complete``; then ``authorization_id`` is
the authenticated user. A token that fails authentication raises SaslAuthenticationFailedError
with a message safe to send to the client and to log: it never holds a password, a proof or a
token."""
from __future__ import annotations

from ..errors import IllegalSaslStateError


class SaslServer:
    mechanism = ""

    def __init__(self):
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise IllegalSaslStateError(f"{self.mechanism}: the authentication exchange is already complete")
        return self._step(bytes(token))

    def _step(self, token: bytes) -> bytes:  # each mechanism's
        raise NotImplementedError

    def _done(self, authorization_id: str) -> None:
        self.authorization_id = authorization_id
        self.complete = True
