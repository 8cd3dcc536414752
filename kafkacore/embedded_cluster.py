"""A replicated cluster inside this process, for tests: N brokers and their controller on one
metadata store in memory or in a directory (kafkacore/cluster/local_znodes.py), no ZooKeeper
and no subprocess.

    with EmbeddedKafkaCluster(tmp_path, brokers=3) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        ...
        cluster.kill(2)      # as kill -9: no controlled shutdown, its session ends at once
        cluster.restart(2)

Each broker is what ``kafkacore serve`` runs for a ZooKeeper cluster member (broker/main.py's
``run``, the same KafkaServer, ClusterNode, controller and replica fetchers), on its own event
loop thread and its own 127.0.0.1 port, each with its own data directory under ``root``. They
talk over loopback sockets as separate processes would; only the metadata store is shared, in
memory, where ZooKeeper would be a server. It starts in about a tenth of the time of a
ZooKeeper and three broker processes, so replication, failover and controller logic can be
tested quickly; the real-process cluster (kafkacore.cluster.local_cluster, `cluster up`) stays
for what needs processes: signals, crashes, a ZooKeeper's own faults.

A killed broker's session ends at once (a real ZooKeeper would wait out the session timeout):
the controller moves its leaderships immediately.
"""
from __future__ import annotations

import asyncio
import os
import socket
import threading
import time

from .broker.main import build_config, run
from .cluster.local_cluster import rack_settings
from .cluster.local_znodes import ZnodeTree

# Kafka's defaults, shortened where a test would wait for them
DEFAULT_SETTINGS = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "4",
    "auto.leader.rebalance.enable": "false",
}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class EmbeddedClusterBroker:
    """One broker of an EmbeddedKafkaCluster, on its own thread and event loop."""

    def __init__(self, broker_id, data_dir, znodes, settings):
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.znodes = znodes
        self.settings = settings
        self.port = _free_port()
        self.server = None  # the running KafkaServer
        self._thread = None
        self._loop = None
        self._stop = None
        self._crash = threading.Event()
        self._ready = threading.Event()
        self._error = None

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout=60.0):
        if self.running:
            raise RuntimeError(f"broker {self.broker_id} is running")
        sets = [f"{k}={v}" for k, v in {**self.settings, "broker.id": self.broker_id}.items()]
        config = build_config(sets=sets, host="127.0.0.1", port=self.port, data_dir=self.data_dir)
        self._ready.clear()
        self._crash.clear()
        self._error = None
        self.server = None

        def ready(server, host, port):
            self.server = server
            self._ready.set()

        async def main():
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await run(config, ready, znodes=self.znodes, stop=self._stop, crash=self._crash)

        def thread():
            try:
                asyncio.run(main())
            except BaseException as e:  # noqa: BLE001 - reported by start(), or on the next stop()
                self._error = e
            finally:
                self._ready.set()

        self._thread = threading.Thread(target=thread, name=f"kafkacore-embedded-broker-{self.broker_id}", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError(f"broker {self.broker_id} did not start within {timeout:.0f} s")
        if self._error is not None or self.server is None:
            raise RuntimeError(f"broker {self.broker_id} could not start: {self._error!r}")
        return self

    def stop(self, timeout=60.0, crash=False):
        """Stops the broker: a controlled shutdown first unless ``crash``."""
        if not self.running:
            return
        if crash:
            self._crash.set()
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"broker {self.broker_id} did not stop within {timeout:.0f} s")
        self.server = None
        if self._error is not None and not isinstance(self._error, (SystemExit, KeyboardInterrupt)):
            raise RuntimeError(f"broker {self.broker_id} failed: {self._error!r}")

    def kill(self):
        """Stops the broker as kill -9 would stop its process, as far as its peers can tell."""
        self.stop(crash=True)

    def pause(self, seconds):
        """Holds the broker's event loop for ``seconds`` (returns at once), as SIGSTOP and
        SIGCONT would hold its process: it neither fetches nor answers meanwhile, so its
        leaders drop it from their ISRs after replica.lag.time.max.ms."""
        self._loop.call_soon_threadsafe(time.sleep, seconds)


class EmbeddedKafkaCluster:
    """``brokers`` brokers (ids 1..N) with data directories under ``root``; ``racks`` are dealt
    to them round-robin as broker.rack. The metadata store lives in ``root``/metadata, so a
    stopped cluster starts again with its topics."""

    def __init__(self, root, brokers=3, settings=None, racks=None):
        self.root = os.path.abspath(str(root))
        self.settings = {**DEFAULT_SETTINGS, **{k: str(v) for k, v in (settings or {}).items()}}
        self.znodes = ZnodeTree(os.path.join(self.root, "metadata"))
        self.brokers = {i: EmbeddedClusterBroker(i, os.path.join(self.root, f"broker-{i}"), self.znodes,
                                                 rack_settings(i, racks, self.settings))
                        for i in range(1, brokers + 1)}

    @property
    def bootstrap_servers(self):
        return ",".join(b.address for b in self.brokers.values())

    def start(self):
        try:
            for b in self.brokers.values():
                b.start()
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, broker_id):
        self.brokers[broker_id].kill()

    def restart(self, broker_id):
        b = self.brokers[broker_id]
        b.stop()
        return b.start()

    def stop(self):
        errors = []
        for b in reversed(list(self.brokers.values())):
            try:
                b.stop()
            except RuntimeError as e:
                errors.append(str(e))
        self.znodes.close()
        if errors:
            raise RuntimeError("; ".join(errors))

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
