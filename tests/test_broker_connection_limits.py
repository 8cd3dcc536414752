"""Connection limits (issue 28), on a real ``kafkacore serve``: max.connections.per.ip with its
overrides (127.0.0.2 is another loopback address on Linux), a listener's max.connections, the
counts returning to zero after many connections come and go, and the delayed close after a
failed SASL login (connection.failed.authentication.delay.ms); everyone else is served."""
from __future__ import annotations

import socket
import struct
import time

import pytest

from broker_client import BrokerProcess, KafkaConnection, free_port, request
from kafkacore.errors import InvalidConfigurationError
from kafkacore.protocol.api_table import ApiKey

pytestmark = pytest.mark.timeout(120)


def _open(port, source="127.0.0.1"):
    """A connection the broker admitted (it answers ApiVersions), or None if it closed it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))
    conn = KafkaConnection.__new__(KafkaConnection)  # its helpers over this socket, from this source
    conn.sock, conn.client_id, conn.correlation_id, conn.inflight = sock, "limits", 0, {}
    try:
        conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS, client_software_name="t",
                                                  client_software_version="1"))
        return conn
    except (OSError, EOFError, ConnectionError, struct.error):
        sock.close()
        return None


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    port, sasl_port = free_port(), free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
                "sasl.enabled.mechanisms": "PLAIN",
                "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                    'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-pw";',
                "max.connections.per.ip": "3", "max.connections.per.ip.overrides": "127.0.0.2:5",
                "listener.name.sasl_plaintext.max.connections": "2",
                "connection.failed.authentication.delay.ms": "700"}
    b = BrokerProcess(tmp_path_factory.mktemp("limits") / "data", settings, port=port)
    b.sasl_port = sasl_port
    b.start()
    yield b
    b.stop()


def test_per_ip_limits_and_their_overrides(broker):
    held = [_open(broker.port) for _ in range(3)]
    assert all(held)
    assert _open(broker.port) is None  # the fourth from 127.0.0.1
    other = [_open(broker.port, "127.0.0.2") for _ in range(5)]  # the override: 5 for 127.0.0.2
    assert all(other) and _open(broker.port, "127.0.0.2") is None
    # the admitted ones are still served
    assert held[0].call(ApiKey.METADATA, 12, request(ApiKey.METADATA, topics=[])).brokers
    held.pop().close()
    deadline = time.monotonic() + 10
    again = None
    while again is None and time.monotonic() < deadline:  # the broker sees the close, the slot frees
        again = _open(broker.port)
    assert again is not None
    for c in held + other + [again]:
        c.close()
    assert "connection from 127.0.0.1 refused: too many connections from 127.0.0.1 (3, max.connections.per.ip)" \
        in broker.output()


def test_a_listeners_own_limit_and_no_leaked_count(broker):
    # many connections come and go (closed by us, or refused): the counts come back to zero
    for _ in range(40):
        c = _open(broker.sasl_port)
        if c is not None:
            c.close()
    deadline = time.monotonic() + 10
    while True:
        a, b = _open(broker.sasl_port), _open(broker.sasl_port)
        if a and b or time.monotonic() > deadline:
            break
        for c in (a, b):
            if c:
                c.close()
        time.sleep(0.05)
    assert a and b, "the listener's 2 slots did not come back"
    assert _open(broker.sasl_port) is None  # listener.name.sasl_plaintext.max.connections=2
    assert _open(broker.port) is not None  # the other listener is not full
    a.close()
    b.close()


def test_a_failed_login_is_closed_after_the_delay(broker):
    from kafkacore.security.plain import plain_client_token
    c = _open(broker.sasl_port)
    deadline = time.monotonic() + 10
    while c is None and time.monotonic() < deadline:  # the previous test's connections are going
        time.sleep(0.05)
        c = _open(broker.sasl_port)
    c.call(ApiKey.SASL_HANDSHAKE, 1, request(ApiKey.SASL_HANDSHAKE, mechanism="PLAIN"))
    resp = c.call(ApiKey.SASL_AUTHENTICATE, 2, request(ApiKey.SASL_AUTHENTICATE,
                                                       auth_bytes=plain_client_token("alice", "wrong")))
    answered = time.monotonic()
    assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
    assert c.is_closed_by_peer(timeout=10)
    assert time.monotonic() - answered >= 0.6  # 700 ms, less the answer's own way
    assert "alice-pw" not in broker.output() and "wrong" not in broker.output()


def test_the_delay_must_be_below_the_idle_timeout():
    from kafkacore.broker.config import BrokerConfig
    with pytest.raises(InvalidConfigurationError, match="must be less than connections.max.idle.ms"):
        BrokerConfig({"connection.failed.authentication.delay.ms": "5000", "connections.max.idle.ms": "5000"})
    with pytest.raises(InvalidConfigurationError, match="host:count"):
        BrokerConfig({"max.connections.per.ip.overrides": "127.0.0.1"})
