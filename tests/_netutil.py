"""Helpers for the connection-limit and hostile-input tests: raw connections from a chosen
loopback address (127.0.0.2, 127.0.0.3, ... are all loopback on Linux, so one machine has
several client IPs), whether a connection is served, and the broker's open-connection count
read from its /metrics."""
from __future__ import annotations

import re
import socket
import urllib.request

from _kcutil import wait_for
from broker_client import KafkaConnection, request
from kafkacore.protocol.api_table import ApiKey

_METRICS_LINE = re.compile(r"kafkacore metrics on (http://\S+/metrics)")


def connect(port, source="127.0.0.1", timeout=10.0) -> KafkaConnection:
    """A KafkaConnection to 127.0.0.1:port from ``source``."""
    conn = KafkaConnection.__new__(KafkaConnection)
    conn.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
    conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.client_id = "conn-limit-tests"
    conn.correlation_id = 0
    conn.inflight = {}
    return conn


def api_versions(conn):
    return conn.call(ApiKey.API_VERSIONS, 3, request(ApiKey.API_VERSIONS, client_software_name="t",
                                                      client_software_version="1"))


def served(conn, timeout=10.0) -> bool:
    """Whether ``conn`` gets an ApiVersions answer within ``timeout`` (False: it was closed, or
    is still waiting - the caller knows which it expects)."""
    conn.sock.settimeout(timeout)
    try:
        return api_versions(conn).error_code == 0
    except (ConnectionError, socket.timeout, OSError):
        return False


def metrics_url(broker) -> str:
    m = _METRICS_LINE.search(broker.output())
    assert m, "the broker was not started with metrics.port"
    return m.group(1)


def connection_counts(broker) -> dict:
    """{listener: open connections} from kafka_server_socket_server_metrics_connection_count."""
    with urllib.request.urlopen(metrics_url(broker), timeout=10) as r:
        text = r.read().decode()
    return {m.group(1): int(float(m.group(2))) for m in re.finditer(
        r'^kafka_server_socket_server_metrics_connection_count\{listener="([^"]+)"\} (\S+)$', text, re.M)}


def wait_for_counts(broker, expected: dict, timeout=15.0):
    """Waits until every listener in ``expected`` has that many open connections."""
    return wait_for(lambda: all(connection_counts(broker).get(k) == v for k, v in expected.items()),
                    lambda: f"connection counts {connection_counts(broker)}, expected {expected}", timeout)
