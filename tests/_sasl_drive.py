"""A SASL listener's connection without a socket, for fuzzing: ``drive`` takes a request frame
(no size prefix) as server.Connection._on_frame does before and during the login - a raw
token after a v0 SaslHandshake, else the header, SaslAuthenticator.permits, the decode, the
handler, and the encoding of its response - and says whether the broker would close the
connection. Anything it raises is a bug: the broker's rule is that nothing a client sends
raises out of the network layer. Shared by tests/test_security_sasl_fuzz.py (hypothesis) and
ci/fuzz_sasl.py (atheris)."""
from __future__ import annotations

from kafkacore.broker.handlers import HANDLERS
from kafkacore.broker.request import RequestContext
from kafkacore.broker.sasl_authenticator import ListenerSasl, SaslAuthenticator
from kafkacore.broker.security import ANONYMOUS
from kafkacore.errors import KafkaError
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.frames import decode_request, encode_response, peek_header
from kafkacore.protocol.wire import ProtocolDecodeError
from kafkacore.security import scram
from kafkacore.security.credential_cache import CredentialCache

PASSWORD = "fuzz-secret"
PLAIN_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
CLOSE = "close"
SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


def listener(reauth_ms=0) -> ListenerSasl:
    cache = CredentialCache()
    cache.update_user("alice", {m.name: scram.make_credential(m, PASSWORD, 4096).to_config_value()
                                for m in (scram.SCRAM_SHA_256, scram.SCRAM_SHA_512)})
    return ListenerSasl("SASL_PLAINTEXT", MECHANISMS, {"PLAIN": PLAIN_JAAS}, cache, reauth_ms)


def drive(auth: SaslAuthenticator, frame: bytes):
    """CLOSE when the broker would close the connection after ``frame``, else None."""
    if auth.raw_tokens:
        try:
            answer = auth.raw_token(bytes(frame))
        except KafkaError:
            return CLOSE
        assert isinstance(answer, bytes)
        return None
    try:
        api_key, version, correlation_id = peek_header(frame)
    except ProtocolDecodeError:
        return CLOSE
    if not auth.permits(api_key):
        assert auth.why_refused(api_key)
        return CLOSE
    entry = HANDLERS.get(api_key)
    if entry is None or not entry.min_version <= version <= entry.max_version:
        return CLOSE  # (ApiVersions is answered v0 instead; nothing SASL about it)
    if api_key not in SASL_APIS:
        return None  # ApiVersions, or anything once logged in: not SASL's code
    try:
        header, req = decode_request(bytearray(frame))
    except (ProtocolDecodeError, KeyError):
        return CLOSE
    ctx = RequestContext(None, header, "127.0.0.1", 1, "SASL_PLAINTEXT", "SASL_PLAINTEXT", ANONYMOUS, auth)
    response = entry.handle(ctx, req)
    assert isinstance(response.error_code, int)
    encode_response(api_key, version, correlation_id, response)
    return CLOSE if auth.failed else None
