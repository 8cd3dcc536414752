"""Hostile SASL input (issue 28): random and mutated tokens, in random orders, against the
broker's SASL state machine for every mechanism (broker/sasl_authenticator.py over the PLAIN,
SCRAM and OAUTHBEARER servers). Each step answers an error code or succeeds; nothing raises,
nothing logs a password, and a failed exchange never ends authenticated."""
from __future__ import annotations

import logging

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkacore.broker.sasl_authenticator import ListenerSasl, SaslAuthenticator
from kafkacore.security import scram
from kafkacore.security.credential_cache import CredentialCache
from kafkacore.security.oauthbearer import client_token, unsecured_token
from kafkacore.security.plain import plain_client_token

PASSWORD = "fuzz-secret-pw"
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
LISTENER_JAAS = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="{PASSWORD}";'


def _listener():
    cache = CredentialCache()
    salt = b"0123456789abcdef"
    for name in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        m = scram.MECHANISMS[name]
        cred = scram.credential_from_salted_password(m, scram.salted_password(m, PASSWORD, salt, 4096), salt, 4096)
        cache.update_user("alice", {name: cred.to_config_value()})
    jaas = {"PLAIN": LISTENER_JAAS}
    return ListenerSasl("SASL_PLAINTEXT", MECHANISMS, jaas, credential_cache=cache)


LISTENER = _listener()
GOOD_FIRST = {"PLAIN": plain_client_token("alice", PASSWORD), "SCRAM-SHA-256": b"n,,n=alice,r=abcdefgh",
              "SCRAM-SHA-512": b"n,,n=alice,r=abcdefgh", "OAUTHBEARER": client_token(unsecured_token("alice"))}


def _mutate(data: bytes, flips) -> bytes:
    out = bytearray(data)
    for pos, byte in flips:
        if out:
            out[pos % len(out)] = byte
    return bytes(out)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mechanism=st.sampled_from(MECHANISMS + ["GSSAPI", "", "plain", "X" * 300]),
       version=st.sampled_from([0, 1]), auth_version=st.sampled_from([0, 1, 2]),
       tokens=st.lists(st.one_of(st.binary(max_size=600),
                                 st.builds(_mutate, st.sampled_from(list(GOOD_FIRST.values())),
                                           st.lists(st.tuples(st.integers(0, 1000), st.integers(0, 255)),
                                                    max_size=4))), max_size=5),
       handshake_again=st.booleans())
def test_random_exchanges_answer_errors_and_never_raise(mechanism, version, auth_version, tokens, handshake_again):
    auth = SaslAuthenticator(LISTENER, "127.0.0.1:1")
    resp = auth.handshake(mechanism, version)
    assert isinstance(resp.error_code, int)
    for i, token in enumerate(tokens):
        if handshake_again and i == 1:
            auth.handshake(mechanism, version)
        before = auth.authenticated
        r = auth.authenticate(token, auth_version)
        assert isinstance(r.error_code, int)
        if r.error_code:
            # an exchange that failed does not log anyone in (a token after a completed login is
            # refused too, and the login it follows stands)
            assert auth.authenticated == before
            break


def test_no_password_reaches_the_log(caplog):
    caplog.set_level(logging.DEBUG)
    for mechanism in MECHANISMS:
        auth = SaslAuthenticator(LISTENER, "127.0.0.1:1")
        auth.handshake(mechanism, 1)
        auth.authenticate(plain_client_token("alice", PASSWORD + "x"), 2)
    assert PASSWORD not in caplog.text


def test_random_first_bytes_on_sasl_and_tls_listeners(tmp_path):
    """A few hundred connections sending random bytes (as a first frame, as a ClientHello) to a
    SASL and a TLS listener: each is answered or closed, the broker logs no traceback and keeps
    serving a normal client."""
    import random
    import socket

    from _tls import KEY_PASSWORD, make_tls_material
    from broker_client import BrokerProcess, KafkaConnection, free_port, request
    from kafkacore.protocol.api_table import ApiKey

    tls = make_tls_material(tmp_path / "tls")
    port, sasl_port, ssl_port = free_port(), free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                             f"SSL://127.0.0.1:{ssl_port}",
                "sasl.enabled.mechanisms": "PLAIN", "connection.failed.authentication.delay.ms": "0",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config": LISTENER_JAAS,
                "ssl.keystore.type": "PEM", "ssl.keystore.location": tls["server_keystore"],
                "ssl.key.password": KEY_PASSWORD}
    rnd = random.Random(28)
    with BrokerProcess(tmp_path / "data", settings, port=port) as b:
        for i in range(300):
            target = sasl_port if i % 2 else ssl_port
            with socket.create_connection(("127.0.0.1", target), timeout=5) as s:
                body = rnd.randbytes(rnd.randrange(0, 300))
                framed = i % 3 == 0  # a plausible Kafka frame length first, or raw bytes
                s.sendall((len(body).to_bytes(4, "big") if framed else b"") + body)
                s.shutdown(socket.SHUT_WR)
                try:
                    while s.recv(4096):
                        pass
                except OSError:
                    pass
        with KafkaConnection("127.0.0.1", port) as conn:
            assert conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS, client_software_name="t",
                                                             client_software_version="1")).error_code == 0
        assert "Traceback" not in b.output() and PASSWORD not in b.output()
