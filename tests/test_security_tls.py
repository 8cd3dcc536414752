"""TLS listeners with real clients over real TLS (issue 28, step 1): one ``kafkacore serve``
with a PLAINTEXT listener, an SSL listener (client certificates requested) and an mTLS listener
(MTLS, mapped to SSL, client certificates required, a principal mapping rule), its key an
encrypted PEM; confluent-kafka talks to it (every other client over mutual TLS:
tests/compat/test_security_matrix.py). Key stores in the other
forms (inline PEM, PKCS12) and bad settings get brokers of their own."""
from __future__ import annotations

import os
import random
import socket
import ssl
import subprocess
import sys
import time

import pytest

from _kcutil import wait_for
from _tls import KEY_PASSWORD, make_tls_material
from broker_client import ROOT, BrokerProcess, free_port

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402
pytestmark = pytest.mark.timeout(180)

MAPPED_PRINCIPAL = "User:client@test"  # CN=client,OU=test,O=kafkacore through the MTLS listener's rule


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_tls_material(tmp_path_factory.mktemp("tls"))


def tls_settings(tls, **extra):
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": tls["server_keystore"],
            "ssl.key.password": KEY_PASSWORD, "ssl.truststore.type": "PEM", "ssl.truststore.location": tls["ca"],
            **extra}


@pytest.fixture(scope="module")
def broker(tmp_path_factory, tls):
    port, ssl_port, mtls_port = free_port(), free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port},MTLS://127.0.0.1:{mtls_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT",
        "request.timeout.ms": "3000",  # also bounds a TLS handshake
        **tls_settings(tls)}
    b = BrokerProcess(tmp_path_factory.mktemp("data") / "d", settings, port=port, extra_args=["--log-level", "debug"])
    b.ssl_port, b.mtls_port = ssl_port, mtls_port
    b.start()
    yield b
    b.stop()


def ssl_conf(broker, tls, port=None, cert=False):
    conf = {"bootstrap.servers": f"127.0.0.1:{port or broker.ssl_port}", "security.protocol": "SSL",
            "ssl.ca.location": tls["ca"]}
    if cert:
        conf.update({"ssl.certificate.location": tls["client_cert"], "ssl.key.location": tls["client_key"]})
    return conf


def produce(conf, topic, values, key=b"k"):
    p = confluent_kafka.Producer({**conf, "linger.ms": 5, "message.timeout.ms": 20000})
    errors = []
    for v in values:
        p.produce(topic, v, key, on_delivery=lambda err, _m: err and errors.append(err))
        p.poll(0)
    assert p.flush(30) == 0 and not errors, errors


def consume(conf, topic, n, timeout=30):
    c = confluent_kafka.Consumer({**conf, "group.id": f"g-{topic}-{random.random()}", "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
    c.subscribe([topic])
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None:
            assert m.error() is None, m.error()
            out.append((m.key(), m.value()))
    c.close()
    return out


def test_confluent_kafka_produces_and_consumes_over_ssl(broker, tls):
    values = [b"tls-%d" % i for i in range(20)]
    produce(ssl_conf(broker, tls), "over-ssl", values)
    assert [v for _k, v in consume(ssl_conf(broker, tls), "over-ssl", 20)] == values
    # the same records through the plaintext listener: one log, several doors
    assert [v for _k, v in consume({"bootstrap.servers": broker.bootstrap}, "over-ssl", 20)] == values


def test_metadata_gives_the_addresses_of_the_listener_asked(broker, tls):
    def ports(conf):
        admin = AdminClient(conf)
        return sorted(b.port for b in admin.list_topics(timeout=20).brokers.values())

    assert ports({"bootstrap.servers": broker.bootstrap}) == [broker.port]
    assert ports(ssl_conf(broker, tls)) == [broker.ssl_port]
    assert ports(ssl_conf(broker, tls, broker.mtls_port, cert=True)) == [broker.mtls_port]


def test_mtls_client_is_named_by_the_mapping_rule(broker, tls):
    conf = ssl_conf(broker, tls, broker.mtls_port, cert=True)
    produce(conf, "over-mtls", [b"a", b"b"])
    assert [v for _k, v in consume(conf, "over-mtls", 2)] == [b"a", b"b"]
    out = broker.output()
    assert f"on listener MTLS: TLS TLSv1.3, principal {MAPPED_PRINCIPAL}" in out
    # requested, not required, on SSL: a certificate there names the client by its full DN
    produce(ssl_conf(broker, tls, cert=True), "over-ssl-with-cert", [b"x"])
    produce(ssl_conf(broker, tls), "over-ssl-without-cert", [b"y"])  # this test's own: xdist splits the module
    wait_for(lambda: "on listener SSL: TLS TLSv1.3, principal User:CN=client,OU=test,O=kafkacore" in broker.output()
             and "on listener SSL: TLS TLSv1.3, principal User:ANONYMOUS" in broker.output(),
             "both SSL principals in the broker's log", 10)


def _tls_client(tls, cert=None, key=None, ca=None):
    ctx = ssl.create_default_context(cafile=ca or tls["ca"])
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def _api_versions_over(ctx, port):
    """An ApiVersions round trip over TLS; raises when the broker refuses the client."""
    from kafkacore.protocol.frames import RequestHeader, encode_request, request_class

    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(encode_request(RequestHeader(18, 3, 1, "t"), request_class(18)(
                client_software_name="t", client_software_version="1")))
            head = s.recv(4)
            if len(head) < 4:
                raise ConnectionError("closed by the broker")
            return head


def test_required_client_auth_refuses_no_certificate_and_a_foreign_one(broker, tls):
    assert _api_versions_over(_tls_client(tls, tls["client_cert"], tls["client_key"]), broker.mtls_port)
    for ctx in (_tls_client(tls), _tls_client(tls, tls["stranger_cert"], tls["stranger_key"])):
        with pytest.raises((ssl.SSLError, ConnectionError)):
            _api_versions_over(ctx, broker.mtls_port)
    # a real client without a certificate: nothing written
    p = confluent_kafka.Producer({**ssl_conf(broker, tls, broker.mtls_port), "message.timeout.ms": 3000})
    failed = []
    p.produce("refused-topic", b"never", on_delivery=lambda err, _m: failed.append(err))
    p.flush(10)
    assert failed and failed[0] is not None
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert "refused-topic" not in admin.list_topics(timeout=20).topics
    assert "TLS handshake failed" in broker.output() or "certificate" in broker.output()


def test_a_large_fetch_over_tls_returns_the_same_bytes(broker, tls):
    rnd = random.Random(28)
    values = [rnd.randbytes(200_000) for _ in range(40)]  # 8 MB across segment reads far above 64 KiB
    produce({"bootstrap.servers": broker.bootstrap, "compression.type": "none"}, "large-tls", values)
    got = consume({**ssl_conf(broker, tls), "fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608},
                  "large-tls", len(values), timeout=60)
    assert [v for _k, v in got] == values


def test_a_stalled_or_garbage_handshake_costs_the_others_nothing(broker, tls):
    since = len(broker.output())
    stalled = socket.create_connection(("127.0.0.1", broker.ssl_port))  # says nothing
    garbage = socket.create_connection(("127.0.0.1", broker.ssl_port))
    garbage.sendall(b"\x00\x00\x00\x10 this is no ClientHello")
    try:
        garbage.settimeout(5)
        try:
            garbage.recv(100)  # a TLS alert, or the close
        except ConnectionResetError:
            pass
        produce(ssl_conf(broker, tls), "while-stalled", [b"fine"])  # the others are served meanwhile
        stalled.settimeout(10)
        t0 = time.monotonic()
        try:
            assert stalled.recv(1) == b""  # closed at request.timeout.ms (3 s)
        except ConnectionResetError:
            pass
        assert time.monotonic() - t0 < 9
    finally:
        stalled.close()
        garbage.close()
    def failures():
        return [ln for ln in broker.output()[since:].splitlines() if "TLS handshake failed" in ln]
    # asyncio closes a timed-out handshake's transport before the broker's handler logs it: the
    # client may see the close first, so the log line is waited for
    lines = wait_for(lambda: len(failures()) >= 2 and failures(), lambda: broker.output()[since:], 10)
    assert any("taking longer" in ln or "timed out" in ln.lower() for ln in lines), lines


def test_the_log_shows_no_password(broker, tls):
    out = broker.output()
    assert "listening on" in out and KEY_PASSWORD not in out
    assert "PRIVATE KEY" not in out


# -- other key stores --------------------------------------------------------------------------
def _single_line(path):
    return " ".join(open(path).read().split("\n"))


@pytest.mark.parametrize("store", ["inline-pem", "pkcs12"])
def test_other_key_stores(tmp_path, tls, store):
    port, ssl_port = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"}
    if store == "inline-pem":
        settings.update({"ssl.keystore.type": "PEM",
                         "ssl.keystore.certificate.chain": _single_line(tls["server_cert"]) + " " + _single_line(tls["ca"]),
                         "ssl.keystore.key": _single_line(tls["server_key"]),
                         "ssl.truststore.type": "PEM", "ssl.truststore.certificates": _single_line(tls["ca"])})
    else:
        pytest.importorskip("cryptography")
        settings.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": tls["server_p12"],
                         "ssl.keystore.password": KEY_PASSWORD})
    with BrokerProcess(tmp_path / "d", settings, port=port) as b:
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{ssl_port}",
                                                   "security.protocol": "SSL", "ssl.ca.location": tls["ca"]})
        assert [x.port for x in admin.list_topics(timeout=20).brokers.values()] == [ssl_port]
        assert KEY_PASSWORD not in b.output()
    assert not [f for f in os.listdir("/tmp") if f.startswith("kafkacore-key-")]


# -- bad settings: one line, non-zero, the data directory untouched ------------------------------------------
def _serve_fails(tmp_path, sets, port=None):
    data = tmp_path / "never-created"
    args = [sys.executable, "-m", "kafkacore", "serve", "--data-dir", str(data)]
    for k, v in sets.items():
        args += ["--set", f"{k}={v}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=30, cwd=str(ROOT))
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert not data.exists()
    return lines[0]


def test_bad_tls_and_listener_settings_stop_start_up(tmp_path, tls):
    base = {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{free_port()}"}
    cases = [
        ({**tls_settings(tls), "ssl.keystore.location": str(tmp_path / "missing.pem")},
         "ssl.keystore.location=", "No such file or directory"),
        ({**tls_settings(tls), "ssl.key.password": "wrong"}, "ssl.keystore.location=", "cannot load the certificate"),
        ({**tls_settings(tls), "ssl.keystore.type": "JKS"}, "ssl.keystore.type='JKS'", "not supported"),
        ({"ssl.keystore.location": tls["server_keystore"]}, "ssl.keystore.type='JKS'", "not supported"),
        ({"listeners": f"SASL_SSL://127.0.0.1:{free_port()}", **tls_settings(tls)}, "sasl.enabled.mechanisms",
         "GSSAPI, Kafka's default, needs Kerberos"),
        ({"listeners": f"SSL://127.0.0.1:{free_port()},SSL://127.0.0.1:{free_port()}"}, "listeners=",
         "different name"),
        ({**tls_settings(tls), "ssl.client.auth": "required", "ssl.truststore.location": None}, "ssl.client.auth",
         "truststore"),
    ]
    for extra, key, why in cases:
        sets = {k: v for k, v in {**base, **extra}.items() if v is not None}
        line = _serve_fails(tmp_path, sets)
        assert key in line and why in line and "bad configuration" in line, line
        assert "wrong" not in line.replace("wrong ssl.key.password", "")


def test_a_port_in_use_on_any_listener_fails_before_the_data_directory(tmp_path, tls):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        line = _serve_fails(tmp_path, {"listeners": f"PLAINTEXT://127.0.0.1:{free_port()},SSL://127.0.0.1:{port}",
                                       **tls_settings(tls)})
    assert line == f"kafkacore: cannot listen on 127.0.0.1:{port} (listener SSL): Address already in use"


def test_serve_with_a_config_file_and_no_port(tmp_path, tls):
    port, ssl_port = free_port(), free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"listeners=PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}\n"
                     f"log.dirs={tmp_path / 'data'}\n" + "".join(f"{k}={v}\n" for k, v in tls_settings(tls).items()))
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--config", str(props)], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert f"listening on 127.0.0.1:{port} (PLAINTEXT), 127.0.0.1:{ssl_port} (SSL)" in line, line
        assert _api_versions_over(_tls_client(tls), ssl_port)
    finally:
        proc.terminate()
        proc.wait(30)
