"""Connection limits (issue 28) against a real ``kafkacore serve`` with four plaintext
listeners: PLAINTEXT (the inter-broker one), OPEN, LIMITED (listener.name.limited.max.connections=3)
and RATED (listener.name.rated.max.connection.creation.rate=5 over a two-second window), with
max.connections=8 for the broker and max.connections.per.ip.overrides=127.0.0.3:2. Clients
connect from 127.0.0.1, .2 and .3 (all loopback), so the per-address limit is seen to touch one
address only. Each test leaves no connection open (the /metrics gauge says so)."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from _kcutil import wait_for
from _netutil import api_versions, connect, connection_counts, served, wait_for_counts
from broker_client import ROOT, BrokerProcess, KafkaConnection, free_port, request
from kafkacore.broker.config import BrokerConfig
from kafkacore.errors import InvalidConfigurationError
from kafkacore.protocol.api_table import ApiKey

pytestmark = pytest.mark.timeout(180)

LISTENERS = ("PLAINTEXT", "OPEN", "LIMITED", "RATED")
ALL_CLOSED = {name: 0 for name in LISTENERS}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    ports = {name: free_port() for name in LISTENERS}
    settings = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "listener.security.protocol.map": ",".join(f"{name}:PLAINTEXT" for name in LISTENERS),
        "inter.broker.listener.name": "PLAINTEXT",
        "max.connections": "8",
        "listener.name.limited.max.connections": "3",
        "max.connections.per.ip.overrides": "127.0.0.3:2",
        "listener.name.rated.max.connection.creation.rate": "5",
        "quota.window.num": "3", "quota.window.size.seconds": "1",  # the rate's window: (3 - 1) x 1 s
        "metrics.port": "0",
    }
    b = BrokerProcess(tmp_path_factory.mktemp("data") / "d", settings, port=ports["PLAINTEXT"])
    b.ports = ports
    b.start()
    yield b
    b.stop()
    assert "Traceback" not in b.output()


@pytest.fixture
def clean(broker):
    """Every test starts and ends with no connection open on any listener."""
    wait_for_counts(broker, ALL_CLOSED)
    opened = []
    yield opened
    for c in opened:
        c.close()
    wait_for_counts(broker, ALL_CLOSED)


def refused_at_once(conn, timeout=5.0) -> bool:
    """True when the broker closes ``conn`` without answering (an ApiVersions sent first)."""
    conn.sock.settimeout(timeout)
    try:
        api_versions(conn)
    except (ConnectionError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def waiting(conn, timeout=1.5) -> bool:
    """True when ``conn`` is neither answered nor closed within ``timeout`` (it sits in the
    listen backlog of a listener that stopped accepting); its request stays in flight."""
    cid = conn.send(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS, client_software_name="t",
                                                    client_software_version="1"))
    conn.sock.settimeout(timeout)
    try:
        conn.sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        conn.waiting_cid = cid
        return True
    return False


def answered_later(conn, timeout=10.0) -> bool:
    conn.sock.settimeout(timeout)
    return conn.receive(conn.waiting_cid).error_code == 0


def test_an_address_at_max_connections_per_ip_is_refused_at_once_and_only_that_address(broker, clean):
    port = broker.ports["OPEN"]
    since = len(broker.output())
    kept = []
    for _ in range(5):  # a client opening connections until it is refused
        c = connect(port, "127.0.0.3")
        clean.append(c)
        if not served(c, 10):
            break
        kept.append(c)
    assert len(kept) == 2  # max.connections.per.ip.overrides=127.0.0.3:2
    for _ in range(4):
        c = connect(port, "127.0.0.3")
        clean.append(c)
        assert refused_at_once(c)
    others = [connect(port, source) for source in ("127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.2")]
    clean.extend(others)
    assert all(served(c) for c in others)  # everyone else is served meanwhile
    assert connection_counts(broker)["OPEN"] == 6
    refusals = [ln for ln in broker.output()[since:].splitlines() if "refused a connection from 127.0.0.3" in ln]
    assert len(refusals) == 1, refusals  # one line for the burst
    assert "max.connections.per.ip.overrides" in refusals[0] and "INFO" in refusals[0]
    kept[0].close()

    def again():
        c = connect(port, "127.0.0.3")
        clean.append(c)
        return served(c, 5)
    wait_for(again, "a connection from 127.0.0.3 after one of its two closed", 15)
    summary = [ln for ln in broker.output()[since:].splitlines() if "more connections from 127.0.0.3 refused" in ln]
    assert len(summary) == 1 and int(summary[0].split(" more connections")[0].split()[-1]) >= 4, summary


def test_a_full_listener_stops_accepting_until_one_of_its_connections_closes(broker, clean):
    port = broker.ports["LIMITED"]
    since = len(broker.output())
    first = [connect(port) for _ in range(3)]
    clean.extend(first)
    assert all(served(c) for c in first)
    fourth = connect(port)  # TCP says connected: it waits in the listen backlog, as with Kafka's blocked acceptor
    clean.append(fourth)
    assert waiting(fourth)
    others = [connect(broker.ports["OPEN"]), connect(broker.ports["PLAINTEXT"])]
    clean.extend(others)
    assert all(served(c) for c in others)  # the other listeners are served
    assert connection_counts(broker)["LIMITED"] == 3
    wait_for(lambda: "listener LIMITED: listener.name.limited.max.connections=3 reached (3 connections); not "
             "accepting connections until one closes" in broker.output()[since:], "the blocked listener's line", 10)
    first[0].close()
    assert answered_later(fourth)
    wait_for(lambda: "listener LIMITED: accepting connections again" in broker.output()[since:], "the resumed line", 10)


def test_max_connections_holds_every_listener_but_the_inter_broker_one(broker, clean):
    port = broker.ports["OPEN"]
    since = len(broker.output())
    conns = []
    for _ in range(8):  # max.connections=8, in the order they were last active
        c = connect(port)
        clean.append(c)
        assert served(c)
        conns.append(c)
    ninth = connect(port)
    clean.append(ninth)
    assert waiting(ninth)
    limited = connect(broker.ports["LIMITED"])  # below its own limit, but the broker is full
    clean.append(limited)
    assert waiting(limited)
    wait_for(lambda: "max.connections=8 reached (8 connections on the broker)" in broker.output()[since:],
             "the broker-wide limit's line", 10)
    inter_broker = connect(broker.ports["PLAINTEXT"])  # exempt: served, and the least recently used makes room
    clean.append(inter_broker)
    assert served(inter_broker)
    assert conns[0].is_closed_by_peer(10)
    assert not conns[1].is_closed_by_peer(0.2)
    wait_for(lambda: "making room for an inter-broker connection on listener PLAINTEXT" in broker.output()[since:],
             "the KIP-402 close", 10)
    wait_for_counts(broker, {"OPEN": 7, "PLAINTEXT": 1, "LIMITED": 0})
    assert not conns[1].is_closed_by_peer(0.5) and waiting_still(ninth)
    inter_broker.close()  # a slot frees: one of the waiting connections gets it
    conns[1].close()  # and a second one for the other
    assert answered_later(ninth) and answered_later(limited)


def waiting_still(conn) -> bool:
    conn.sock.settimeout(0.3)
    try:
        conn.sock.recv(1, socket.MSG_PEEK)
    except socket.timeout:
        return True
    return False


def test_a_listener_above_its_connection_creation_rate_accepts_later(broker, clean):
    port = broker.ports["RATED"]
    since = len(broker.output())
    t0 = time.monotonic()
    for _ in range(10):  # 5/s over a two-second window: ten at once
        c = connect(port)
        assert served(c)
        c.close()
    assert time.monotonic() - t0 < 1.5, "the machine is too slow for this test's timing"
    eleventh = connect(port)
    clean.append(eleventh)
    assert waiting(eleventh, 0.2)
    other = connect(broker.ports["OPEN"])
    clean.append(other)
    t1 = time.monotonic()
    assert served(other) and time.monotonic() - t1 < 1.0  # other listeners are not throttled
    assert answered_later(eleventh)
    assert time.monotonic() - t0 >= 1.9  # it waited for the first to leave the window
    assert "listener RATED: above its connection creation rate" in broker.output()[since:]


def test_the_connection_count_is_exported_per_listener(broker, clean):
    c = connect(broker.ports["OPEN"], "127.0.0.2")
    clean.append(c)
    assert served(c)
    counts = connection_counts(broker)
    assert counts == {**ALL_CLOSED, "OPEN": 1}, counts


def _alter_cluster_default(broker, ops):
    """IncrementalAlterConfigs of the cluster-wide default (BROKER resource ""), as
    kafka-configs --entity-default sends it: [(name, value or None to delete)]."""
    from kafkacore.protocol.messages.incremental_alter_configs_request import AlterableConfig, AlterConfigsResource
    resource = AlterConfigsResource(resource_type=4, resource_name="", configs=[
        AlterableConfig(name=k, config_operation=0 if v is not None else 1, value=v) for k, v in ops])
    with KafkaConnection("127.0.0.1", broker.ports["PLAINTEXT"]) as conn:
        resp = conn.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, resources=[resource], validate_only=False))
    return resp.responses[0]


def test_the_limits_change_at_run_time(broker, clean):
    """Kafka's DynamicConnectionQuota: a listener's limit and an address's override raised for
    the whole cluster take effect for the next connections and a waiting one is accepted;
    lowered again, the open connections stay and new ones wait."""
    limited, open_port = broker.ports["LIMITED"], broker.ports["OPEN"]
    first = [connect(limited) for _ in range(3)]
    clean.extend(first)
    assert all(served(c) for c in first)
    fourth = connect(limited)
    clean.append(fourth)
    assert waiting(fourth)
    r = _alter_cluster_default(broker, [("listener.name.limited.max.connections", "4"),
                                        ("max.connections.per.ip.overrides", "127.0.0.3:3")])
    assert r.error_code == 0, r.error_message
    assert answered_later(fourth)  # the waiting accept loop looked again
    from_3 = [connect(open_port, "127.0.0.3") for _ in range(3)]
    clean.extend(from_3)
    assert all(served(c) for c in from_3)
    r = _alter_cluster_default(broker, [("listener.name.limited.max.connections", None),
                                        ("max.connections.per.ip.overrides", None)])
    assert r.error_code == 0, r.error_message
    assert served(first[0]) and served(from_3[2])  # over the lowered limits, still open and served
    first[0].close()
    wait_for_counts(broker, {"LIMITED": 3})
    fifth = connect(limited)
    clean.append(fifth)
    assert waiting(fifth)  # 3 open: the listener's own limit of 3 again
    r = _alter_cluster_default(broker, [("listener.name.nosuch.max.connections", "3")])
    assert r.error_code == 40 and "there is no listener NOSUCH" in r.error_message  # INVALID_CONFIG


# -- settings -------------------------------------------------------------------------------------
@pytest.mark.parametrize("props,message", [
    ({"connection.failed.authentication.delay.ms": "600000"},
     "connection.failed.authentication.delay.ms=600000: must be less than connections.max.idle.ms=600000"),
    ({"connection.failed.authentication.delay.ms": "5000", "connections.max.idle.ms": "1000"},
     "connection.failed.authentication.delay.ms=5000: must be less than connections.max.idle.ms=1000"),
    ({"max.connections.per.ip": "0"}, "max.connections.per.ip=0: allowed only with max.connections.per.ip.overrides"),
    ({"max.connections.per.ip.overrides": "127.0.0.1"}, "expected host:count pairs, got '127.0.0.1'"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:many"}, "max.connections.per.ip.overrides (127.0.0.1)='many': "
                                                             "expected an integer"),
    ({"max.connections.per.ip.overrides": "no-such-host.invalid:3"}, "cannot resolve host 'no-such-host.invalid'"),
    ({"max.connections": "-1"}, "max.connections='-1': must be between 0 and 2147483647"),
    ({"listener.name.nosuch.max.connections": "3"}, "listener.name.nosuch.max.connections: there is no listener NOSUCH"),
    ({"listener.name.plaintext.max.connection.creation.rate": "x"},
     "listener.name.plaintext.max.connection.creation.rate='x': expected an integer"),
])
def test_bad_connection_limit_settings_are_one_line(props, message):
    with pytest.raises(InvalidConfigurationError) as e:
        BrokerConfig(props)
    assert message in e.value.message and "\n" not in e.value.message


def test_the_settings_as_kafka_reads_them():
    c = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,EXTERNAL://127.0.0.1:9093",
                      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
                      "max.connections": "100", "listener.name.external.max.connections": "10",
                      "max.connections.per.ip.overrides": "localhost:5, 10.0.0.1:0,[::1]:7",
                      "connections.max.idle.ms": "-1", "connection.failed.authentication.delay.ms": "0"})
    assert c.listener_quota("EXTERNAL", "max.connections") == 10
    assert c.listener_quota("PLAINTEXT", "max.connections") == 100  # the broker-wide value, as Kafka's prefix override
    assert c["max.connections.per.ip"] == 2147483647 and c["max.connection.creation.rate"] == 2147483647
    overrides = c["max.connections.per.ip.overrides"]
    assert overrides["10.0.0.1"] == 0 and overrides["::1"] == 7 and 5 in overrides.values()
    assert BrokerConfig({})["connection.failed.authentication.delay.ms"] == 100


def test_serve_refuses_a_bad_limit_in_one_line(tmp_path):
    data = tmp_path / "never-created"
    proc = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--data-dir", str(data), "--port",
                           str(free_port()), "--set", "connection.failed.authentication.delay.ms=700000"],
                          capture_output=True, text=True, timeout=60, cwd=str(ROOT))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "connection.failed.authentication.delay.ms=700000: must be less than connections.max.idle.ms" in lines[0]
    assert not data.exists()
