"""SaslAuthenticate (API key 36), versions 0-2 (KIP-152): one token of the SASL exchange the
SaslHandshake began (broker/sasl_authenticator.py). A refused login is answered
SASL_AUTHENTICATION_FAILED with its reason and the connection is closed after the answer; v1+
carries the session's lifetime when connections.max.reauth.ms is set (KIP-368). On a listener
without SASL: ILLEGAL_SASL_STATE, as Kafka answers."""
from ...errors import IllegalSaslStateError
from ...protocol.api_table import ApiKey
from ...protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse

API_KEY = ApiKey.SASL_AUTHENTICATE
VERSIONS = (0, 2)


def handle(ctx, req):
    if ctx.sasl is None:
        return SaslAuthenticateResponse(error_code=IllegalSaslStateError.code, auth_bytes=b"",
                                        error_message="this listener does not authenticate with SASL")
    return ctx.sasl.authenticate(req.auth_bytes or b"", ctx.api_version)


def error_response(req, version, code):
    return SaslAuthenticateResponse(error_code=code, auth_bytes=b"")
