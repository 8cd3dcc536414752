"""OAUTHBEARER with signed tokens (issue 28): Kafka's OAuthBearerValidatorCallbackHandler as
kafkacore's broker validator. Tokens are signed here with real keys (RSA and EC, through
``cryptography``), the key set is a real file or served over real HTTP, and confluent-kafka logs
in to a real ``kafkacore serve`` with them (its ``oauth_cb``): good tokens in, forged, expired,
foreign and unsigned ones out, and a rotated key followed without a restart."""
from __future__ import annotations

import base64
import http.server
import json
import threading
import time

import pytest

from broker_client import BrokerProcess, free_port

cryptography = pytest.importorskip("cryptography")
from cryptography.hazmat.primitives import hashes  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa, utils  # noqa: E402

from kafkacore.errors import InvalidConfigurationError  # noqa: E402
from kafkacore.security.oauth_jwks import JwksSource, JwksValidator  # noqa: E402
from kafkacore.security.oauthbearer import TokenValidationError  # noqa: E402

pytestmark = pytest.mark.timeout(120)
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64(n: int, size=None) -> str:
    return _b64(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


class Signer:
    """A private key, its public JWK, and tokens signed with it."""

    def __init__(self, kind, kid):
        self.kid = kid
        if kind == "RSA":
            self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            pub = self.key.public_key().public_numbers()
            self.jwk = {"kty": "RSA", "kid": kid, "use": "sig", "n": _int_b64(pub.n), "e": _int_b64(pub.e)}
        else:
            self.key = ec.generate_private_key(ec.SECP256R1())
            pub = self.key.public_key().public_numbers()
            self.jwk = {"kty": "EC", "kid": kid, "crv": "P-256", "x": _int_b64(pub.x, 32), "y": _int_b64(pub.y, 32)}

    def token(self, claims=None, alg=None, kid=True, **extra):
        alg = alg or ("RS256" if self.jwk["kty"] == "RSA" else "ES256")
        now = int(time.time())
        body = {"sub": "alice", "iat": now, "exp": now + 600, "scope": "kafka", **(claims or {}), **extra}
        header = {"alg": alg, "typ": "JWT", **({"kid": self.kid} if kid else {})}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(body).encode())}".encode()
        digest = hashes.SHA256()
        if alg == "RS256":
            sig = self.key.sign(signing_input, padding.PKCS1v15(), digest)
        elif alg == "PS256":
            sig = self.key.sign(signing_input, padding.PSS(mgf=padding.MGF1(digest), salt_length=32), digest)
        else:
            r, s = utils.decode_dss_signature(self.key.sign(signing_input, ec.ECDSA(digest)))
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input.decode()}.{_b64(sig)}"


def _write_jwks(path, *signers):
    path.write_text(json.dumps({"keys": [s.jwk for s in signers]}))
    return f"file://{path}"


@pytest.fixture(scope="module")
def rsa_signer():
    return Signer("RSA", "rsa-1")


@pytest.fixture(scope="module")
def ec_signer():
    return Signer("EC", "ec-1")


def _validator(url, **kw):
    return JwksValidator(JwksSource(url, refresh_ms=3_600_000, backoff_ms=0, backoff_max_ms=0), **kw)


def test_signed_tokens_are_checked_against_the_key_set(tmp_path, rsa_signer, ec_signer):
    stranger = Signer("RSA", "rsa-1")  # same kid, another key: a forgery
    check = _validator(_write_jwks(tmp_path / "jwks.json", rsa_signer, ec_signer), audience=["kafka"],
                       issuer="https://idp.example")
    good = {"aud": "kafka", "iss": "https://idp.example"}
    for token in (rsa_signer.token(good), rsa_signer.token(good, alg="PS256"), ec_signer.token(good)):
        assert check(token).principal == "alice"
    assert check(rsa_signer.token(good)).scope == frozenset({"kafka"})
    refused = {
        "forged": stranger.token(good),
        "tampered": rsa_signer.token(good)[:-10] + "AAAAAAAAAA",
        "expired": rsa_signer.token(good, exp=int(time.time()) - 3600),
        "issued in the future": rsa_signer.token(good, iat=int(time.time()) + 3600),
        "another audience": rsa_signer.token({**good, "aud": "billing"}),
        "another issuer": rsa_signer.token({**good, "iss": "https://evil.example"}),
        "no subject": rsa_signer.token(good, sub=""),
        "unknown key": Signer("EC", "ec-2").token(good),
        "unsigned": rsa_signer.token(good).rsplit(".", 1)[0] + ".",
        "HMAC": rsa_signer.token(good).replace(rsa_signer.token(good).split(".")[0],
                                               _b64(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode())),
    }
    for why, token in refused.items():
        with pytest.raises(TokenValidationError):
            check(token)
            pytest.fail(f"a token {why} was accepted")


def test_a_rotated_key_is_fetched_again_over_http(tmp_path, rsa_signer):
    """The key set served by a real HTTP server: a token signed with a new key is refused while
    the broker does not know the key, and accepted once the background refresh fetched it."""
    served = {"body": json.dumps({"keys": [rsa_signer.jwk]}).encode()}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(served["body"])

        def log_message(self, *_args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check = _validator(f"http://127.0.0.1:{server.server_address[1]}/jwks")
        assert check(rsa_signer.token()).principal == "alice"
        rotated = Signer("RSA", "rsa-2")
        served["body"] = json.dumps({"keys": [rsa_signer.jwk, rotated.jwk]}).encode()
        deadline = time.monotonic() + 10
        while True:  # the first attempt starts the refresh in the background
            try:
                assert check(rotated.token()).principal == "alice"
                break
            except TokenValidationError:
                assert time.monotonic() < deadline, "the rotated key was never fetched"
                time.sleep(0.02)
    finally:
        server.shutdown()


def test_a_key_set_that_cannot_be_read_stops_the_broker_in_one_line(tmp_path):
    with pytest.raises(InvalidConfigurationError, match="sasl.oauthbearer.jwks.endpoint.url"):
        _validator(f"file://{tmp_path}/missing.json")
    (tmp_path / "bad.json").write_text('{"keys": "none"}')
    with pytest.raises(InvalidConfigurationError, match="not a JSON Web Key Set"):
        _validator(f"file://{tmp_path}/bad.json")


@pytest.fixture(scope="module")
def broker(tmp_path_factory, rsa_signer):
    d = tmp_path_factory.mktemp("oauth")
    url = _write_jwks(d / "jwks.json", rsa_signer)
    port, sasl_port = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                "sasl.enabled.mechanisms": "OAUTHBEARER",
                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
                "sasl.oauthbearer.jwks.endpoint.url": url, "sasl.oauthbearer.expected.audience": "kafka"}
    b = BrokerProcess(d / "data", settings, port=port)
    b.sasl_port = sasl_port
    b.start()
    yield b
    b.stop()


def _client_conf(broker, token):
    return {"bootstrap.servers": f"127.0.0.1:{broker.sasl_port}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _config: (token, time.time() + 600)}


def test_confluent_kafka_logs_in_with_a_signed_token(broker, rsa_signer):
    ck = pytest.importorskip("confluent_kafka")
    conf = _client_conf(broker, rsa_signer.token({"aud": "kafka"}))
    p = ck.Producer(conf)
    p.produce("oauth-topic", b"signed")
    assert p.flush(30) == 0
    c = ck.Consumer({**conf, "group.id": "oauth", "auto.offset.reset": "earliest"})
    c.subscribe(["oauth-topic"])
    m = c.poll(30)
    c.close()
    assert m is not None and m.error() is None and m.value() == b"signed"


def test_a_forged_token_is_refused_and_nothing_is_written(broker, rsa_signer):
    ck = pytest.importorskip("confluent_kafka")
    errors = []
    forged = Signer("RSA", rsa_signer.kid).token({"aud": "kafka"})
    p = ck.Producer({**_client_conf(broker, forged), "message.timeout.ms": 5000,
                     "error_cb": lambda e: errors.append(e)})
    p.produce("oauth-forged", b"x")
    p.flush(10)
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert "oauth-forged" not in admin.list_topics(timeout=10).topics
