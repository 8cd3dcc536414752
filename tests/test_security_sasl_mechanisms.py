"""The SASL mechanisms' exchanges (kafkacore/security): SCRAM against RFC 7677's test vector and
its own client, PLAIN, OAUTHBEARER with unsecured tokens, the JAAS syntax they are configured
with, and fuzzed tokens that must fail cleanly. The network side (SaslHandshake and
SaslAuthenticate through real clients) is tested with the listeners."""
import base64
import json

import pytest
from hypothesis import given, settings, strategies as st

from kafkacore.errors import IllegalSaslStateError, InvalidConfigurationError, KafkaError, SaslAuthenticationFailedError
from kafkacore.security import oauthbearer, plain, scram
from kafkacore.security.jaas import parse_jaas_config, single_login_module

# RFC 7677 section 3: SCRAM-SHA-256, user "user", password "pencil"
RFC7677 = {
    "client_nonce": "rOprNGfwEbeRWgbNEkqO",
    "client_first": b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_first": b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def test_the_scram_client_speaks_rfc7677s_exchange_byte_for_byte():
    client = scram.ScramClient(scram.SCRAM_SHA_256, "user", "pencil", nonce=RFC7677["client_nonce"])
    assert client.first() == RFC7677["client_first"]
    assert client.final(RFC7677["server_first"]) == RFC7677["client_final"]
    client.verify(RFC7677["server_final"])
    with pytest.raises(SaslAuthenticationFailedError, match="signature does not match"):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def _exchange(mechanism, credentials, user, password, **server_kw):
    server = scram.ScramServer(mechanism, credentials.get, **server_kw)
    client = scram.ScramClient(mechanism, user, password)
    server_first = server.evaluate(client.first())
    server_final = server.evaluate(client.final(server_first))
    client.verify(server_final)
    return server


@pytest.mark.parametrize("mechanism", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512], ids=lambda m: m.name)
def test_scram_server_authenticates_its_users_and_proves_it_holds_their_keys(mechanism):
    creds = {"alice": scram.make_credential(mechanism, "alice-secret"),
             "a,b=c": scram.make_credential(mechanism, "odd", iterations=8192)}
    server = _exchange(mechanism, creds, "alice", "alice-secret")
    assert server.complete and server.authorization_id == "alice"
    assert _exchange(mechanism, creds, "a,b=c", "odd").authorization_id == "a,b=c"  # saslname escaping
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(b"n,,n=alice,r=again")


def test_the_server_accepts_the_rfc_credential_and_answers_the_rfc_signature_for_the_rfc_nonce():
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    cred = scram.make_credential(scram.SCRAM_SHA_256, "pencil", salt=salt)
    client = scram.ScramClient(scram.SCRAM_SHA_256, "user", "pencil", nonce=RFC7677["client_nonce"])
    server = scram.ScramServer(scram.SCRAM_SHA_256, {"user": cred}.get)
    server_first = server.evaluate(client.first())
    assert server_first.startswith(b"r=rOprNGfwEbeRWgbNEkqO") and server_first.endswith(b",s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    client.verify(server.evaluate(client.final(server_first)))


def test_wrong_passwords_and_unknown_users_fail_alike_and_no_secret_is_in_the_message():
    m = scram.SCRAM_SHA_512
    creds = {"bob": scram.make_credential(m, "right-password")}
    messages = []
    for user, password in (("bob", "wrong-password"), ("nobody", "wrong-password")):
        with pytest.raises(SaslAuthenticationFailedError) as e:
            _exchange(m, creds, user, password)
        assert e.value.code == 58 and password not in str(e.value) and "right-password" not in str(e.value)
        messages.append(str(e.value))
    assert messages[0] == messages[1]  # nothing tells a missing user from a wrong password
    # and an unknown user's salt is stable, as a real user's is
    s1 = scram.ScramServer(m, creds.get, secret=b"k").evaluate(b"n,,n=nobody,r=abc")
    s2 = scram.ScramServer(m, creds.get, secret=b"k").evaluate(b"n,,n=nobody,r=abc")
    assert s1.split(b",")[1:] == s2.split(b",")[1:]


def test_scram_refuses_a_replayed_final_message_an_authzid_of_another_user_and_delegation_tokens():
    m = scram.SCRAM_SHA_256
    creds = {"carol": scram.make_credential(m, "pw")}
    client = scram.ScramClient(m, "carol", "pw")
    first = client.first()
    server = scram.ScramServer(m, creds.get)
    final = client.final(server.evaluate(first))
    server.evaluate(final)
    other = scram.ScramServer(m, creds.get)
    other.evaluate(first)
    with pytest.raises(SaslAuthenticationFailedError, match="nonce"):
        other.evaluate(final)  # another exchange's server nonce
    with pytest.raises(SaslAuthenticationFailedError, match="authorization id"):
        scram.ScramServer(m, creds.get).evaluate(b"n,a=admin,n=carol,r=abc")
    with pytest.raises(SaslAuthenticationFailedError, match="delegation tokens"):
        scram.ScramServer(m, creds.get).evaluate(b"n,,n=carol,r=abc,tokenauth=true")
    with pytest.raises(SaslAuthenticationFailedError, match="channel binding"):
        scram.ScramServer(m, creds.get).evaluate(b"p=tls-unique,,n=carol,r=abc")


def _final_with_nonce(password, client_first_bare, server_first, nonce):
    """An RFC 5802 client-final message echoing ``nonce``, its proof computed over it
    (SCRAM-SHA-256)."""
    import base64
    import hashlib
    import hmac
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    without_proof = f"c=biws,r={nonce}"
    auth = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def test_scram_accepts_the_client_nonce_repeated_as_old_librdkafka_sends_it_and_nothing_else():
    """librdkafka 2.0.2 (Debian's kcat) echoes client nonce + server nonce: accepted as Kafka
    accepted it; any other prefix, or the nonce cut short, is refused."""
    m = scram.SCRAM_SHA_256
    creds = {"carol": scram.make_credential(m, "pw")}

    def exchange(echo):
        server = scram.ScramServer(m, creds.get)
        server_first = server.evaluate(b"n,,n=carol,r=clientnonce").decode()
        full = dict(a.split("=", 1) for a in server_first.split(","))["r"]
        return server.evaluate(_final_with_nonce("pw", "n=carol,r=clientnonce", server_first, echo(full)))

    assert exchange(lambda full: full).startswith(b"v=")
    assert exchange(lambda full: "clientnonce" + full).startswith(b"v=")
    for bad in (lambda full: "x" + full, lambda full: "clientnonceclientnonce" + full, lambda full: full[:-1]):
        with pytest.raises(SaslAuthenticationFailedError, match="nonce"):
            exchange(bad)


def test_scram_credentials_in_kafkas_stored_form():
    cred = scram.make_credential(scram.SCRAM_SHA_256, "pw", iterations=4096, salt=b"\x01" * 16)
    text = cred.to_config_value()
    assert text.startswith("salt=AQEBAQEBAQEBAQEBAQEBAQ==,stored_key=") and text.endswith(",iterations=4096")
    assert scram.ScramCredential.from_config_value(text) == cred
    for bad, why in (("salt=AA==", "no stored_key"), ("salt=!!,stored_key=AA==,server_key=AA==,iterations=1",
                                                      "not valid base64"), ("garbage", "not name=value")):
        with pytest.raises(ValueError, match=why):
            scram.ScramCredential.from_config_value(bad)
    with pytest.raises(ValueError, match="4096-16384"):
        scram.make_credential(scram.SCRAM_SHA_512, "pw", iterations=1000)


def test_plain_checks_the_listeners_users():
    users = plain.users_from_jaas_options({"username": "admin", "password": "admin-secret",
                                           "user_admin": "admin-secret", "user_alice": "alice-secret"})
    assert users == {"admin": "admin-secret", "alice": "alice-secret"}
    server = plain.PlainServer(users)
    assert server.evaluate(plain.plain_client_token("alice", "alice-secret")) == b""
    assert server.complete and server.authorization_id == "alice"
    with pytest.raises(IllegalSaslStateError):
        server.evaluate(plain.plain_client_token("alice", "alice-secret"))
    for token, why in ((plain.plain_client_token("alice", "nope"), "invalid username or password"),
                       (plain.plain_client_token("mallory", "alice-secret"), "invalid username or password"),
                       (plain.plain_client_token("alice", "alice-secret", authzid="admin"), "authorization id"),
                       (b"alice\0alice-secret", "got 2 fields"), (plain.plain_client_token("", "x"), "no username"),
                       (plain.plain_client_token("alice", ""), "no password"), (b"\0\xff\0x", "not UTF-8")):
        with pytest.raises(SaslAuthenticationFailedError, match=why) as e:
            plain.PlainServer(users).evaluate(token)
        assert "secret" not in str(e.value) and "nope" not in str(e.value)


def test_jaas_config_as_kafka_writes_it():
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" /* the broker itself */ password="admin-secret"\n'
            '  user_admin="admin-secret" // comment\n'
            '  user_alice="a \\"quoted\\" secret" flag=true;')
    module = single_login_module(text)
    assert module.name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.control_flag == "required"
    assert module.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                              "user_alice": 'a "quoted" secret', "flag": "true"}
    two = text + " org.apache.kafka.common.security.scram.ScramLoginModule optional;"
    assert [m.control_flag for m in parse_jaas_config(two)] == ["required", "optional"]
    for bad, why in (('X required password="hunter2"', "';' closing"), ('X mandatory;', "control flag"),
                     ('X required password;', "no '=value'"), ('X required password="hunter2', "unterminated"),
                     ('', "no login module")):
        with pytest.raises(InvalidConfigurationError, match=why) as e:
            single_login_module(bad, key="listener.name.sasl_ssl.plain.sasl.jaas.config")
        assert "hunter2" not in str(e.value) and "listener.name.sasl_ssl.plain.sasl.jaas.config" in str(e.value)
    with pytest.raises(InvalidConfigurationError, match="exactly one"):
        single_login_module(two)


NOW_S = 1_800_000_000


def _validator(**options):
    return oauthbearer.UnsecuredJwsValidator(options, clock_ms=lambda: NOW_S * 1000)


def test_oauthbearer_takes_a_valid_unsecured_token_and_its_principal():
    token = oauthbearer.unsecured_token("svc-orders", scope=("kafka", "write"), now_s=NOW_S)
    server = oauthbearer.OAuthBearerServer(_validator(unsecuredValidatorRequiredScope="kafka"))
    assert server.evaluate(oauthbearer.client_token(token, extensions={"traceId": "42"})) == b""
    assert server.complete and server.authorization_id == "svc-orders"
    assert server.token.scope == {"kafka", "write"} and server.extensions == {"traceId": "42"}
    other = oauthbearer.unsecured_token("u", principal_claim="client_id", now_s=NOW_S)
    server = oauthbearer.OAuthBearerServer(_validator(unsecuredValidatorPrincipalClaimName="client_id"))
    server.evaluate(oauthbearer.client_token(other, authzid="u"))
    assert server.authorization_id == "u"


def _raw_token(claims_json):
    """An unsecured JWS whose claims are ``claims_json`` exactly as written."""
    def part(text):
        return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()
    return part('{"alg":"none"}') + "." + part(claims_json) + "."


@pytest.mark.parametrize("token,why", [
    (oauthbearer.unsecured_token("u", lifetime_s=-1, now_s=NOW_S), "expired"),
    (oauthbearer.unsecured_token("u", now_s=NOW_S + 600), "issued in the future"),
    (oauthbearer.unsecured_token("u", scope=("read",), now_s=NOW_S), "scope lacks kafka"),
    (oauthbearer.unsecured_token("u", now_s=NOW_S) + "c2lnbmVk", "only unsecured"),
    ("a.b", "three dot-separated"),
    ("bm90anNvbg.e30.", "not base64url-encoded JSON"),
    # numbers JSON allows that are no time (found by ci/fuzz_sasl.py: iat 1e999 raised OverflowError)
    (_raw_token('{"sub": "u", "exp": 1e999}'), "exp claim is not a time"),
    (_raw_token('{"sub": "u", "exp": NaN}'), "exp claim is not a time"),
    (_raw_token('{"sub": "u", "exp": %d, "iat": 1795925e569}' % (NOW_S + 60)), "iat claim is not a time"),
])
def test_oauthbearer_refuses_a_bad_token_with_the_error_challenge_then_fails(token, why):
    server = oauthbearer.OAuthBearerServer(_validator(unsecuredValidatorRequiredScope="kafka")
                                           if "scope" in why else _validator())
    challenge = server.evaluate(oauthbearer.client_token(token))
    assert json.loads(challenge) == {"status": "invalid_token"} and not server.complete
    with pytest.raises(SaslAuthenticationFailedError, match=why) as e:
        server.evaluate(b"\x01")  # the client's acknowledgement
    assert token not in str(e.value)


def test_oauthbearer_refuses_malformed_messages_and_a_foreign_authzid():
    token = oauthbearer.unsecured_token("u", now_s=NOW_S)
    for message, why in ((b"y,,\x01auth=Bearer x\x01\x01", "GS2 header"), (b"n,,auth=Bearer x", "enclosed"),
                         (b"n,,\x01token=x\x01\x01", "no auth=Bearer"), (b"n,,\x01a-b=1\x01\x01", "alphabetic key"),
                         (oauthbearer.client_token(token, authzid="admin"), "authorization id")):
        with pytest.raises(SaslAuthenticationFailedError, match=why):
            oauthbearer.OAuthBearerServer(_validator()).evaluate(message)
    with pytest.raises(InvalidConfigurationError, match="ClockSkewMs"):
        oauthbearer.UnsecuredJwsValidator({"unsecuredValidatorAllowableClockSkewMs": "-5"})


def _servers():
    creds = {"u": scram.make_credential(scram.SCRAM_SHA_256, "pw")}
    return [plain.PlainServer({"u": "pw"}), scram.ScramServer(scram.SCRAM_SHA_256, creds.get),
            oauthbearer.OAuthBearerServer(_validator())]


@settings(max_examples=300, deadline=None)
@given(first=st.one_of(st.binary(max_size=200), st.sampled_from([b"n,,n=u,r=abc", b"n,,\x01auth=Bearer a.b.\x01\x01"])),
       second=st.binary(max_size=200))
def test_fuzzed_tokens_fail_with_a_kafka_error_and_never_anything_else(first, second):
    for server in _servers():
        try:
            server.evaluate(first)
            server.evaluate(second)
        except KafkaError:
            pass


# -- one connection's SASL state (broker/sasl_authenticator.py), without a network --------------
from kafkacore.broker.sasl_authenticator import ListenerSasl, SaslAuthenticator  # noqa: E402
from kafkacore.protocol.api_table import ApiKey  # noqa: E402
from kafkacore.security.credential_cache import CredentialCache  # noqa: E402

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'user_alice="alice-secret" user_bob="bob-secret";')


def _listener(mechanisms=("PLAIN", "SCRAM-SHA-256"), reauth_ms=0, cache=None):
    return ListenerSasl("SASL_PLAINTEXT", mechanisms, {"PLAIN": PLAIN_JAAS}, cache or CredentialCache(), reauth_ms)


class _Clock:
    now = 100.0

    def __call__(self):
        return self.now


def test_a_connection_logs_in_once_then_serves_everything():
    auth = SaslAuthenticator(_listener(), "127.0.0.1:1")
    assert auth.permits(ApiKey.API_VERSIONS) and not auth.permits(ApiKey.PRODUCE)
    assert "before the SASL login" in auth.why_refused(ApiKey.PRODUCE)
    refused = auth.handshake("GSSAPI", 1)
    assert refused.error_code == 33 and refused.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    assert auth.handshake("PLAIN", 1).error_code == 0
    resp = auth.authenticate(plain.plain_client_token("alice", "alice-secret"), 2)
    assert resp.error_code == 0 and resp.session_lifetime_ms == 0
    assert str(auth.principal) == "User:alice" and auth.permits(ApiKey.PRODUCE)
    assert auth.handshake("PLAIN", 1).error_code == 34  # no re-authentication unless enabled


def test_a_failed_login_is_answered_with_the_reason_then_the_connection_closes():
    auth = SaslAuthenticator(_listener(), "127.0.0.1:1")
    auth.handshake("PLAIN", 1)
    resp = auth.authenticate(plain.plain_client_token("alice", "wrong"), 1)
    assert resp.error_code == 58 and "invalid username or password" in resp.error_message
    assert auth.failed and not auth.authenticated
    fresh = SaslAuthenticator(_listener(), "127.0.0.1:2")
    assert fresh.authenticate(b"\0alice\0alice-secret", 1).error_code == 34 and fresh.failed  # no handshake first


def test_scram_logs_in_with_the_credential_cache_of_the_broker():
    cache = CredentialCache()
    cache.update_user("carol", {"SCRAM-SHA-256": scram.make_credential(scram.SCRAM_SHA_256, "pw").to_config_value()})
    auth = SaslAuthenticator(_listener(cache=cache), "127.0.0.1:1")
    client = scram.ScramClient(scram.SCRAM_SHA_256, "carol", "pw")
    auth.handshake("SCRAM-SHA-256", 1)
    first = auth.authenticate(client.first(), 1)
    final = auth.authenticate(client.final(bytes(first.auth_bytes)), 1)
    client.verify(bytes(final.auth_bytes))
    assert str(auth.principal) == "User:carol"


def test_sessions_end_after_connections_max_reauth_ms_unless_renewed_as_the_same_principal():
    clock = _Clock()
    auth = SaslAuthenticator(_listener(reauth_ms=60000), "127.0.0.1:1", clock=clock)
    auth.handshake("PLAIN", 1)
    assert auth.authenticate(plain.plain_client_token("alice", "alice-secret"), 1).session_lifetime_ms == 60000
    clock.now += 61
    assert not auth.permits(ApiKey.FETCH) and auth.permits(ApiKey.SASL_HANDSHAKE)
    assert "session expired" in auth.why_refused(ApiKey.FETCH)
    assert auth.handshake("PLAIN", 1).error_code == 0
    auth.authenticate(plain.plain_client_token("alice", "alice-secret"), 1)
    assert auth.permits(ApiKey.FETCH)
    clock.now += 61
    auth.handshake("PLAIN", 1)
    resp = auth.authenticate(plain.plain_client_token("bob", "bob-secret"), 1)
    assert resp.error_code == 58 and "keeps its principal" in resp.error_message and auth.failed


def test_v0_handshakes_take_raw_tokens():
    auth = SaslAuthenticator(_listener(), "127.0.0.1:1")
    auth.handshake("PLAIN", 0)
    assert auth.raw_tokens
    assert auth.raw_token(plain.plain_client_token("bob", "bob-secret")) == b""
    assert str(auth.principal) == "User:bob" and not auth.raw_tokens


@pytest.mark.parametrize("mechanisms,jaas,why", [
    (["GSSAPI"], {}, "GSSAPI, Kafka's default, needs Kerberos"),
    ([], {}, "no SASL mechanism"),
    (["PLAIN"], {}, "PLAIN needs the users' passwords"),
    (["PLAIN"], {"PLAIN": "x.PlainLoginModule required user_a=\"hunter2\""}, "';' closing"),
    (["OAUTHBEARER"], {"OAUTHBEARER": "x.OAuthBearerLoginModule required "
                                      "unsecuredValidatorAllowableClockSkewMs=\"soon\";"}, "ClockSkewMs"),
])
def test_listener_sasl_settings_that_cannot_work_are_refused_at_start_up(mechanisms, jaas, why):
    with pytest.raises(InvalidConfigurationError, match=why) as e:
        ListenerSasl("SASL_SSL", mechanisms, jaas, CredentialCache())
    assert "hunter2" not in str(e.value)
