"""SaslHandshake (API key 17), versions 0-1: the client names its SASL mechanism
(broker/sasl_authenticator.py runs the exchange). v0 means the tokens then come raw, without
Kafka's framing (Kafka's pre-1.0 clients); v1 means they come in SaslAuthenticate requests.
On a listener without SASL, as Kafka answers: ILLEGAL_SASL_STATE and no mechanisms."""
from ...errors import IllegalSaslStateError
from ...protocol.api_table import ApiKey
from ...protocol.messages.sasl_handshake_response import SaslHandshakeResponse

API_KEY = ApiKey.SASL_HANDSHAKE
VERSIONS = (0, 1)


def handle(ctx, req):
    if ctx.sasl is None:
        return SaslHandshakeResponse(error_code=IllegalSaslStateError.code, mechanisms=[])
    return ctx.sasl.handshake(req.mechanism, ctx.api_version)


def error_response(req, version, code):
    return SaslHandshakeResponse(error_code=code, mechanisms=[])
