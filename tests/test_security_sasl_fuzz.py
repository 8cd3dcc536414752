"""Fuzzed SASL exchanges against the broker's SASL code in-process (issue 28): sequences of
SaslHandshake and SaslAuthenticate requests - well-formed ones with random mechanisms and
tokens, tokens that start like the real mechanisms' messages or are real first messages with
bytes changed, mangled frames and raw v0 tokens - go through the same steps as on a
connection (tests/_sasl_drive.py). Each step must answer (an error code, or a close) and never
raise; a step that fails the exchange never logs anyone in; a correct login must still work
after any prefix that did not close the connection; no password reaches the log. (Random bytes
thrown at a real broker's SASL and TLS listeners: tests/test_hostile_input.py.)"""
from __future__ import annotations

import base64
import logging

from hypothesis import HealthCheck, given, settings, strategies as st

from _sasl_drive import CLOSE, MECHANISMS, PASSWORD, drive, listener
from kafkacore.broker.sasl_authenticator import SaslAuthenticator
from kafkacore.protocol.api_table import ApiKey
from kafkacore.protocol.frames import RequestHeader, encode_request, request_class
from kafkacore.security import oauthbearer, plain, scram

LISTENER = listener()
REAUTH_LISTENER = listener(reauth_ms=60000)


def frame(api_key, version, body) -> bytes:
    """A request frame without its size prefix."""
    return encode_request(RequestHeader(api_key, version, 7, "fuzz"), body)[4:]


def _scram_like():
    return st.builds(lambda user, nonce, tail: f"n,,n={user},r={nonce}".encode() + tail,
                     st.sampled_from(["alice", "bob", "", "a=2Cb", "=3D"]), st.text(max_size=12), st.binary(max_size=20))


# a real first message of each mechanism, to be mutated
GOOD_FIRST = [plain.plain_client_token("alice", PASSWORD), b"n,,n=alice,r=abcdefgh",
              oauthbearer.client_token(oauthbearer.unsecured_token("alice"))]


def _mutate(data: bytes, flips) -> bytes:
    out = bytearray(data)
    for pos, byte in flips:
        out[pos % len(out)] = byte
    return bytes(out)


tokens = st.one_of(
    st.binary(max_size=200),
    st.builds(_mutate, st.sampled_from(GOOD_FIRST),
              st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 255)), max_size=4)),
    st.builds(lambda u, p: plain.plain_client_token(u, p), st.sampled_from(["alice", "", "x\x00y"]),
              st.sampled_from([PASSWORD, "wrong", ""])),
    _scram_like(),
    st.builds(lambda t: b"c=biws,r=" + t.encode() + b",p=" + base64.b64encode(t.encode()), st.text(max_size=30)),
    st.builds(lambda tok, ext: oauthbearer.client_token(tok, extensions=ext),
              st.one_of(st.just(oauthbearer.unsecured_token("svc")), st.text(max_size=40)),
              st.dictionaries(st.sampled_from(["a", "auth", "x1"]), st.text(max_size=5), max_size=2)),
    st.just(b"\x01"),
)

steps = st.one_of(
    st.builds(lambda m, v: frame(ApiKey.SASL_HANDSHAKE, v, request_class(ApiKey.SASL_HANDSHAKE)(mechanism=m)),
              st.one_of(st.sampled_from([*MECHANISMS, "GSSAPI", "plain", "", "X" * 300]), st.text(max_size=20)),
              st.integers(0, 1)),
    st.builds(lambda t, v: frame(ApiKey.SASL_AUTHENTICATE, v, request_class(ApiKey.SASL_AUTHENTICATE)(auth_bytes=t)),
              tokens, st.integers(0, 2)),
    tokens,  # as a raw v0 token, or as a frame that is no request
    st.builds(lambda f, cut: f[:cut], st.builds(
        lambda t: frame(ApiKey.SASL_AUTHENTICATE, 2, request_class(ApiKey.SASL_AUTHENTICATE)(auth_bytes=t)), tokens),
        st.integers(0, 40)),  # a request cut short
    # a header (api key, version, correlation id, null client id) and a random body
    st.builds(lambda k, v, body: k.to_bytes(2, "big", signed=True) + v.to_bytes(2, "big", signed=True)
              + b"\x00\x00\x00\x07\xff\xff" + body,
              st.sampled_from([17, 36, 18, 3, 0, -1, 9999]), st.integers(-2, 10), st.binary(max_size=60)),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequence=st.lists(steps, min_size=1, max_size=8), reauth=st.booleans())
def test_any_sequence_of_sasl_requests_is_answered_or_closed_never_raised(sequence, reauth):
    auth = SaslAuthenticator(REAUTH_LISTENER if reauth else LISTENER, "127.0.0.1:1")
    for f in sequence:
        before = auth.authenticated
        if drive(auth, f) is CLOSE:
            if auth.failed:  # a failed exchange logs no one in (and a completed login stands)
                assert auth.authenticated == before
            return
    # not closed: a correct login still works from here, unless one is under way or done
    if auth.authenticated or auth._server is not None:
        return
    assert drive(auth, frame(ApiKey.SASL_HANDSHAKE, 1, request_class(ApiKey.SASL_HANDSHAKE)(mechanism="PLAIN"))) is None
    assert drive(auth, frame(ApiKey.SASL_AUTHENTICATE, 2, request_class(ApiKey.SASL_AUTHENTICATE)(
        auth_bytes=plain.plain_client_token("alice", PASSWORD)))) is None
    assert str(auth.principal) == "User:alice"


@settings(max_examples=200, deadline=None)
@given(mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]), flips=st.lists(
    st.tuples(st.integers(0, 500), st.integers(0, 255)), min_size=1, max_size=4), cut=st.integers(0, 600))
def test_a_mangled_scram_final_message_fails_the_login_and_nothing_else(mechanism, flips, cut):
    auth = SaslAuthenticator(LISTENER, "127.0.0.1:1")
    assert drive(auth, frame(ApiKey.SASL_HANDSHAKE, 1, request_class(ApiKey.SASL_HANDSHAKE)(mechanism=mechanism))) \
        is None
    client = scram.ScramClient(scram.MECHANISMS[mechanism], "alice", PASSWORD)
    first = auth.authenticate(client.first(), 2)
    assert first.error_code == 0
    final = bytearray(client.final(first.auth_bytes))
    for pos, value in flips:
        if pos < len(final):
            final[pos] = value
    final = bytes(final[:cut])
    result = drive(auth, frame(ApiKey.SASL_AUTHENTICATE, 2, request_class(ApiKey.SASL_AUTHENTICATE)(auth_bytes=final)))
    assert result is CLOSE or auth.authenticated  # a flip that changed nothing logs in


def test_no_password_reaches_the_log(caplog):
    """Each mechanism given a PLAIN token holding a password (a wrong one): no login, and neither
    the password tried nor the one configured is logged, at any level."""
    caplog.set_level(logging.DEBUG)
    wrong = PASSWORD + "-but-wrong"
    for mechanism in MECHANISMS:
        auth = SaslAuthenticator(LISTENER, "127.0.0.1:1")
        assert drive(auth, frame(ApiKey.SASL_HANDSHAKE, 1, request_class(ApiKey.SASL_HANDSHAKE)(mechanism=mechanism))) \
            is None
        # OAUTHBEARER answers a bad token with an error challenge first (RFC 7628), the others close
        drive(auth, frame(ApiKey.SASL_AUTHENTICATE, 2, request_class(ApiKey.SASL_AUTHENTICATE)(
            auth_bytes=plain.plain_client_token("alice", wrong))))
        assert not auth.authenticated
    assert PASSWORD not in caplog.text
