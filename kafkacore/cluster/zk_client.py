"""Kafka's ZooKeeper operations (kafka.zk.KafkaZkClient, 3.6) over kazoo.

Threads: every method blocks on ZooKeeper round trips, so a broker's asyncio code runs them in
an executor (``loop.run_in_executor``); the client is thread-safe (kazoo is, and the little
state kept here is locked). Callbacks never run on the caller's event loop: state listeners run
on this client's event thread, watch callbacks on a kazoo thread (their first call, at
registration, on the registering thread). A callback that touches asyncio state hands itself
over with ``loop.call_soon_threadsafe``. State listeners may call this client (they are not on
kazoo's connection thread); watch callbacks should not block for long, they delay other watches.

Waiting: an operation issued while disconnected waits for the connection up to
``connection_timeout_ms`` (Kafka's zookeeper.connection.timeout.ms, which defaults to the session
timeout), then raises ZkConnectionError; the outcome of a write cut off that way is unknown, as
in Kafka.

Sessions: ephemeral znodes (/brokers/ids/N, /controller) live as long as the session. A
disconnect ("suspended") keeps the session if ZooKeeper hears from the client again within the
session timeout - a ZooKeeper restart included, since sessions are part of its persisted state.
When the session expires ("lost"), kazoo opens a new one ("connected" again) and this client
re-creates the broker registration before telling listeners (Kafka does it in the controller's
RegisterBrokerAndReelect event); the caller re-runs the controller election, whose old
/controller znode is gone with the old session, and reads the new ``broker_epoch``.
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence

# kazoo.client, its threading handler and its recipes are imported where a client is made or
# used: a single-node broker imports this module for the error types below (through the replica
# manager) and would otherwise load them for nothing (1.4 MiB of its RSS, 8 ms of its start).
from kazoo.exceptions import (
    BadVersionError, ConnectionClosedError, ConnectionLoss, KazooException, NodeExistsError,
    NoNodeError, NotEmptyError, OperationTimeoutError, RolledBackError, SessionExpiredError,
)
from kazoo.protocol.states import KazooState

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from .local_znodes import ZnodeTree

from ..errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError
from ..protocol.kafka_uuid import random_uuid_text, uuid_to_text
from .zk_data import (
    BrokerIdsZNode, BrokerIdZNode, BrokerInfo, BrokerSequenceIdZNode, ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode, ConfigEntityChangeNotificationZNode,
    ConfigEntityZNode, ConfigType, ControllerEpochZNode, ControllerRegistration, ControllerZNode,
    DeleteTopicsTopicZNode, DeleteTopicsZNode, EndPoint, FeatureZNode, FeatureZNodeData,
    IsrChangeNotificationSequenceZNode, IsrChangeNotificationZNode, LeaderIsrAndControllerEpoch,
    ProducerIdBlockZNode, ProducerIdsBlock, ReassignPartitionsZNode, ReplicaAssignment,
    TopicAssignment, TopicPartitionStateZNode, TopicPartitionsZNode, TopicPartitionZNode,
    TopicsZNode, TopicZNode, ZkData, ZkVersion, validate_topic_name,
)

__all__ = [
    "KafkaZkClient", "ControllerElection", "Watch", "parse_connect_string", "ZkError",
    "ZkConnectionError", "ZkNoNodeError", "ZkNodeExistsError", "ZkVersionMismatchError",
    "ControllerMovedError", "BrokerIdInUseError", "TopicExistsError", "UnknownTopicError",
    "TopicAlreadyMarkedForDeletionError", "InvalidReplicaAssignmentError",
]

log = logging.getLogger("kafkacore.cluster.zk")


class ZkError(Exception):
    """A ZooKeeper operation failed."""


class ZkConnectionError(ZkError):
    """ZooKeeper could not be reached within the connection timeout."""


class ZkNoNodeError(ZkError):
    pass


class ZkNodeExistsError(ZkError):
    pass


class ZkVersionMismatchError(ZkError):
    """A conditional write found another zk version: someone else changed the znode first."""


class ControllerMovedError(ZkError):
    """The /controller_epoch zk version is not the caller's: a newer controller was elected."""


class BrokerIdInUseError(ZkNodeExistsError):
    pass


class TopicExistsError(ZkError, TopicAlreadyExistsError):
    pass


class UnknownTopicError(ZkError, UnknownTopicOrPartitionError):
    pass


class TopicAlreadyMarkedForDeletionError(ZkError):
    pass


class InvalidReplicaAssignmentError(ZkError, ValueError):
    pass


def parse_connect_string(connect: str) -> tuple[str, str | None]:
    """zookeeper.connect ``host:port[,host:port...][/chroot]`` -> (hosts, chroot or None)."""
    if not isinstance(connect, str) or not connect.strip():
        raise ValueError("zookeeper.connect is empty (expected host:port[,host:port][/chroot])")
    connect = connect.strip()
    i = connect.find("/")
    hosts, chroot = (connect, None) if i < 0 else (connect[:i], connect[i:])
    if not hosts:
        raise ValueError(f"zookeeper.connect {connect!r} names no host (expected host:port[,host:port][/chroot])")
    for hp in hosts.split(","):
        host, sep, port = hp.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"zookeeper.connect {connect!r}: {hp!r} is not host:port")
    if chroot == "/":
        chroot = None  # ZooKeeper's ConnectStringParser: a bare "/" is no chroot
    elif chroot is not None and (chroot.endswith("/") or "//" in chroot):
        raise ValueError(f"zookeeper.connect {connect!r}: invalid chroot path {chroot!r}")
    return hosts, chroot


@dataclass(frozen=True)
class ControllerElection:
    """Result of try_elect_controller. Unpacks as ``(elected, controller_id)``; when elected,
    ``epoch`` and ``epoch_zk_version`` are this controller's, read atomically with the win (the
    zk version fences its writes: pass it as expected_controller_epoch_zk_version)."""

    elected: bool
    controller_id: int | None
    epoch: int | None = None
    epoch_zk_version: int | None = None

    def __iter__(self):
        return iter((self.elected, self.controller_id))


class Watch:
    """Handle of a watch_children/watch_data registration."""

    def __init__(self, path: str):
        self.path = path
        self.cancelled = False

    def cancel(self) -> None:
        """Stop calling back (kazoo drops the watch at its next event)."""
        self.cancelled = True


_STATES = {KazooState.CONNECTED: "connected", KazooState.SUSPENDED: "suspended", KazooState.LOST: "lost"}
_RETRIABLE = (ConnectionLoss, OperationTimeoutError, SessionExpiredError)


class KafkaZkClient:
    """Kafka's ZooKeeper layout and operations. ``connect`` is zookeeper.connect; a chroot in it
    is created if missing, as Kafka's KafkaZkClient.createZkClient does.

    Writes a controller makes take ``expected_controller_epoch_zk_version``: when given, the
    write is a multi-op with a version check of /controller_epoch, so a deposed controller's
    write fails with ControllerMovedError (Kafka's wrapRequestWithControllerEpochCheck)."""

    def __init__(self, connect: str | None, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 *, znodes: ZnodeTree | None = None, close_znodes: bool = False):
        """``znodes``: the cluster's metadata in this process (cluster/local_znodes.py) instead of
        a ZooKeeper at ``connect``: the same operations, errors and watches; ``close_znodes``:
        close() closes that store too (a single node's own)."""
        self.connect = connect if znodes is None else f"local:{znodes.directory or 'memory'}"
        self.hosts, self.chroot = (parse_connect_string(connect) if znodes is None else (self.connect, None))
        self.session_timeout_ms = int(session_timeout_ms)
        self.connection_timeout_ms = int(connection_timeout_ms if connection_timeout_ms is not None
                                          else session_timeout_ms)
        if self.session_timeout_ms <= 0 or self.connection_timeout_ms <= 0:
            raise ValueError("zookeeper session and connection timeouts must be positive")
        self._local = znodes is not None
        self._znodes = znodes if close_znodes else None
        self._zk = znodes.session() if self._local else self._kazoo(connect)
        self._connected = threading.Event()
        self._lock = threading.RLock()
        self._listeners: list[Callable[[str], None]] = []
        self._events: queue.Queue = queue.Queue()
        self._dispatcher: threading.Thread | None = None
        self._started_seen = threading.Event()
        self._closing = False
        self._started = False
        self._session_id: int | None = None
        self._registration: BrokerInfo | None = None
        self._ephemeral_owner: dict[str, int] = {}  # path -> session id that created it (KAFKA-7165)
        self.broker_epoch: int | None = None  # czxid of this broker's registration

    def _kazoo(self, hosts: str) -> KazooClient:
        # reconnect forever, at most 1 s apart: after a ZooKeeper restart the broker is back within
        # a second (kazoo's default backoff grows to a minute)
        retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0}
        from kazoo.client import KazooClient
        return KazooClient(hosts=hosts, timeout=self.session_timeout_ms / 1000.0,
                           connection_retry=dict(retry), command_retry=dict(retry))

    # ---- lifecycle ----

    def start(self) -> None:
        """Connect (waiting up to connection_timeout_ms). Raises ZkConnectionError."""
        with self._lock:
            if self._started:
                raise ZkError("KafkaZkClient already started")
            self._started = True
        if self._local:
            self._dispatcher = threading.Thread(target=self._dispatch, name="kafkacore-zk-events", daemon=True)
            self._dispatcher.start()
            self._zk.add_listener(self._on_state)
            self._zk.start()
            # as start() on ZooKeeper returns connected: listeners added later hear later states
            self._events.put(("started", None))
            self._started_seen.wait(5)
            return
        from kazoo.handlers.threading import KazooTimeoutError
        if self.chroot:
            self._ensure_chroot()
        self._dispatcher = threading.Thread(target=self._dispatch, name="kafkacore-zk-events", daemon=True)
        self._dispatcher.start()
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=self.connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            self.close()
            raise ZkConnectionError(f"could not connect to ZooKeeper at {self.hosts} within "
                                    f"{self.connection_timeout_ms} ms (zookeeper.connect={self.connect})") from None

    def close(self) -> None:
        """End the session: ZooKeeper deletes its ephemeral znodes at once."""
        with self._lock:
            if self._closing:
                return
            self._closing = True
        try:
            self._zk.stop()
            self._zk.close()
        finally:
            self._events.put(None)
            if self._dispatcher is not None and self._dispatcher is not threading.current_thread():
                self._dispatcher.join(5)
            if self._znodes is not None:
                self._znodes.close()

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def _ensure_chroot(self) -> None:
        # Kafka creates the chroot with a client on the bare hosts before the chrooted one
        from kazoo.handlers.threading import KazooTimeoutError
        boot = self._kazoo(self.hosts)
        try:
            try:
                boot.start(timeout=self.connection_timeout_ms / 1000.0)
            except KazooTimeoutError:
                raise ZkConnectionError(f"could not connect to ZooKeeper at {self.hosts} within "
                                        f"{self.connection_timeout_ms} ms to create chroot {self.chroot}") from None
            if boot.exists(self.chroot) is None:
                parts = self.chroot.strip("/").split("/")
                for i in range(1, len(parts) + 1):
                    try:
                        boot.create("/" + "/".join(parts[:i]), None)  # null data, as Kafka's createRecursive
                    except NodeExistsError:
                        pass
                log.info("created ZooKeeper chroot %s", self.chroot)
        finally:
            boot.stop()
            boot.close()

    @property
    def session_id(self) -> int | None:
        cid = self._zk.client_id
        return cid[0] if cid else None

    @property
    def local(self) -> bool:
        """Whether the store is in this process (a single node's own, an in-process cluster's)."""
        return self._local

    @property
    def routine_level(self) -> int:
        """The log level of routine membership news (registered, elected, controlled shutdown):
        INFO on a ZooKeeper cluster, where operators follow them; DEBUG for a store in this
        process, where they only repeat what "listening on" says."""
        return logging.DEBUG if self._local else logging.INFO

    @property
    def connected(self) -> bool:
        return self._zk.connected

    @property
    def raw(self) -> KazooClient:
        """The kazoo client, for what this API lacks (tests read raw znodes with it)."""
        return self._zk

    # ---- session state ----

    def add_state_listener(self, fn: Callable[[str], None]) -> None:
        """``fn(state)`` with "connected", "suspended" (disconnected, session may survive), "lost"
        (session expired: ephemerals gone; a new session follows with "connected"), or
        "registration_failed" (the broker could not re-register on a new session; logged).
        Called on this client's event thread, in order."""
        with self._lock:
            self._listeners.append(fn)

    def remove_state_listener(self, fn: Callable[[str], None]) -> None:
        with self._lock:
            self._listeners.remove(fn)

    def _on_state(self, state) -> None:
        # kazoo's connection thread: must not block, so only record and hand over
        name = _STATES[state]
        sid = None
        if name == "connected":
            self._connected.set()
            sid = self.session_id
        else:
            self._connected.clear()
        self._events.put((name, sid))

    def _dispatch(self) -> None:
        while True:
            ev = self._events.get()
            if ev is None:
                return
            name, sid = ev
            if name == "started":
                self._started_seen.set()
                continue
            if self._closing:
                continue
            if name == "connected":
                with self._lock:
                    new_session = self._session_id is not None and sid is not None and sid != self._session_id
                    if sid is not None:
                        self._session_id = sid
                    reg = self._registration
                if new_session:
                    log.warning("ZooKeeper session 0x%x established after the previous one expired", sid)
                if new_session and reg is not None:
                    try:
                        self._register(reg)
                        log.info("re-registered broker %d in ZooKeeper on the new session (broker epoch %d)",
                                 reg.broker_id, self.broker_epoch)
                    except Exception as e:  # noqa: BLE001 - reported to listeners, never swallowed
                        log.error("could not re-register broker %d on the new ZooKeeper session: %s",
                                  reg.broker_id, e)
                        self._notify("registration_failed")
            elif name == "lost":
                log.warning("ZooKeeper session expired: ephemeral znodes of this broker are gone")
            self._notify(name)

    def _notify(self, name: str) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            try:
                fn(name)
            except Exception:  # noqa: BLE001
                log.exception("ZooKeeper state listener %r failed on %r", fn, name)

    # ---- plumbing: every request waits for the connection, bounded by connection_timeout_ms ----

    def _call(self, what: str, make_async):
        return self._call_r(what, make_async)[0]

    def _call_r(self, what: str, make_async):
        """Run ``make_async()`` (a kazoo *_async call), retrying through connection loss. Returns
        (result, retried): a retried write may have been applied by the attempt that was cut off."""
        deadline = time.monotonic() + self.connection_timeout_ms / 1000.0
        retried = False
        if not self._started:
            raise ZkError(f"KafkaZkClient.start() was not called ({what})")
        if self._local:  # answered at once: no connection to wait for, nothing to retry
            if self._closing or not self._zk.connected:
                raise ZkError(f"ZooKeeper client is closed ({what})")
            try:
                return make_async().get(), False
            except ConnectionClosedError:
                raise ZkError(f"ZooKeeper client is closed ({what})") from None
            except KazooException as e:
                e.retried = False
                raise
        from kazoo.handlers.threading import KazooTimeoutError
        while True:
            if self._closing:
                raise ZkError(f"ZooKeeper client is closed ({what})")
            remaining = deadline - time.monotonic()
            unreachable = (f"ZooKeeper at {self.hosts} unreachable: no answer within "
                           f"{self.connection_timeout_ms} ms ({what})")
            if remaining <= 0 or not self._connected.wait(remaining):
                raise ZkConnectionError(unreachable)
            try:
                return make_async().get(timeout=max(deadline - time.monotonic(), 0.001)), retried
            except KazooTimeoutError:
                raise ZkConnectionError(unreachable) from None
            except _RETRIABLE:
                retried = True
                time.sleep(0.05)  # the state change that follows a loss clears _connected
            except ConnectionClosedError:
                raise ZkError(f"ZooKeeper client is closed ({what})") from None
            except KazooException as e:
                e.retried = retried  # a BadVersion/NodeExists after a retry may be our own write
                raise

    def _get(self, path: str):
        """(data, stat) or None."""
        try:
            return self._call(f"get {path}", lambda: self._zk.get_async(path))
        except NoNodeError:
            return None

    def _create(self, path: str, data: bytes | None = None, *, ephemeral=False, sequence=False):
        # None is ZooKeeper's null data, what Kafka writes to its no-data znodes (zkCli shows "null")
        return self._call(f"create {path}", lambda: self._zk.create_async(
            path, data, ephemeral=ephemeral, sequence=sequence))

    def _create_recursive(self, path: str, data: bytes | None = None, *, throw_if_exists: bool = True) -> None:
        """Kafka's createRecursive: parents are created empty; NodeExists of the path itself
        raises only when asked."""
        try:
            self._create(path, data)
            return
        except NoNodeError:
            pass
        except NodeExistsError:
            if throw_if_exists:
                raise
            return
        parent = path[:path.rindex("/")]
        if parent:
            self._create_recursive(parent, None, throw_if_exists=False)
        try:
            self._create(path, data)
        except NodeExistsError:
            if throw_if_exists:
                raise

    def _multi(self, what: str, ops: Sequence[tuple]):
        """ops: ("check", path, version) | ("create", path, data, ephemeral) |
        ("set", path, data, version) | ("delete", path, version). Returns (results, retried);
        a failed op's result is its kazoo exception, the others' RolledBackError."""
        def commit():
            t = self._zk.transaction()
            for op in ops:
                kind = op[0]
                if kind == "check":
                    t.check(op[1], op[2])
                elif kind == "create":
                    # kazoo's transactions cannot send null data: empty bytes (read the same by Kafka)
                    t.create(op[1], op[2] if op[2] is not None else b"", ephemeral=op[3])
                elif kind == "set":
                    t.set_data(op[1], op[2], op[3])
                elif kind == "delete":
                    t.delete(op[1], op[2])
                else:
                    raise ValueError(f"unknown multi op {kind!r}")
            return t.commit_async()
        return self._call_r(what, commit)

    def _fenced(self, op: tuple, controller_zk_version: int | None, what: str):
        return self._fenced_r(op, controller_zk_version, what)[0]

    def _fenced_r(self, op: tuple, controller_zk_version: int | None, what: str):
        """One write, checked against /controller_epoch's zk version when one is given. Returns
        (result, retried); raises the op's kazoo exception, or ControllerMovedError when the
        check fails."""
        if controller_zk_version is None:
            kind, path = op[0], op[1]
            if kind == "create":
                return self._call_r(what, lambda: self._zk.create_async(path, op[2], ephemeral=op[3]))
            if kind == "set":
                return self._call_r(what, lambda: self._zk.set_async(path, op[2], op[3]))
            if kind == "delete":
                return self._call_r(what, lambda: self._zk.delete_async(path, op[2]))
            raise ValueError(f"unknown op {kind!r}")
        (check, result), retried = self._multi(
            what, [("check", ControllerEpochZNode.path, controller_zk_version), op])
        if isinstance(check, (BadVersionError, NoNodeError)):
            raise ControllerMovedError(f"controller epoch zk version check failed: /controller_epoch is not at "
                                       f"version {controller_zk_version} ({what}); a newer controller was elected")
        if isinstance(result, Exception):
            result.retried = retried
            raise result
        return result, retried

    def _delete_recursive(self, path: str, controller_zk_version: int | None = None) -> bool:
        """Kafka's deleteRecursive: children first; False if the path did not exist."""
        try:
            children = self._call(f"get_children {path}", lambda: self._zk.get_children_async(path))
        except NoNodeError:
            return False
        for child in children:
            self._delete_recursive(f"{path}/{child}", controller_zk_version)
        try:
            self._fenced(("delete", path, -1), controller_zk_version, f"delete {path}")
        except NoNodeError:
            pass
        except NotEmptyError:
            # a child appeared meanwhile (e.g. a late partition state): go again
            return self._delete_recursive(path, controller_zk_version)
        return True

    # ---- generic ----

    def path_exists(self, path: str) -> bool:
        return self._call(f"exists {path}", lambda: self._zk.exists_async(path)) is not None

    def get_data(self, path: str):
        """(data bytes or None, kazoo ZnodeStat) or None when the znode does not exist."""
        got = self._get(path)
        if got is None:
            return None
        data, stat = got
        return (data if data else None), stat

    def get_children(self, path: str) -> list[str]:
        """Children names (sorted); empty when the znode does not exist, as Kafka's getChildren."""
        try:
            return sorted(self._call(f"get_children {path}", lambda: self._zk.get_children_async(path)))
        except NoNodeError:
            return []

    def make_sure_persistent_path_exists(self, path: str) -> None:
        self._create_recursive(path, None, throw_if_exists=False)

    def delete_recursive(self, path: str) -> bool:
        return self._delete_recursive(path)

    def create_top_level_paths(self) -> None:
        """Kafka's createTopLevelPaths: ZkData.PersistentZkPaths, every broker at startup."""
        for path in ZkData.PERSISTENT_ZK_PATHS:
            self.make_sure_persistent_path_exists(path)

    # ---- cluster id, broker sequence ids ----

    def get_cluster_id(self) -> str | None:
        got = self._get(ClusterIdZNode.path)
        return ClusterIdZNode.decode(got[0]) if got else None

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """Kafka's createOrGetClusterId: the first broker's proposal wins."""
        proposed = proposed or random_uuid_text()
        try:
            self._create_recursive(ClusterIdZNode.path, ClusterIdZNode.encode(proposed))
            return proposed
        except NodeExistsError:
            cid = self.get_cluster_id()
            if cid is None:
                raise ZkError("Failed to get cluster id from Zookeeper. This can happen if /cluster/id is "
                              "deleted from Zookeeper.") from None
            return cid

    def generate_broker_sequence_id(self) -> int:
        """Kafka's generateBrokerSequenceId: the zk version of /brokers/seqid after a blind write
        (Kafka adds reserved.broker.max.id to it)."""
        while True:
            try:
                stat = self._call(f"set {BrokerSequenceIdZNode.path}",
                                  lambda: self._zk.set_async(BrokerSequenceIdZNode.path, b"", -1))
                return stat.version
            except NoNodeError:
                self._create_recursive(BrokerSequenceIdZNode.path, b"", throw_if_exists=False)

    # ---- brokers ----

    def register_broker(self, broker_id: int, host: str | None, port: int, rack: str | None = None, *,
                        listeners: Iterable[EndPoint | str] | None = None, jmx_port: int = -1,
                        features: Mapping[str, tuple] | None = None) -> int:
        """Create the ephemeral /brokers/ids/<id> (version 5 JSON) and return the broker epoch
        (its czxid). ``listeners`` (EndPoints or "NAME://host:port" with protocol names) replace
        the single PLAINTEXT://host:port. Kafka's checkedEphemeralCreate: a znode left by this
        same session is ours; one of another live session raises BrokerIdInUseError. The
        registration is re-created on every new session until close()."""
        endpoints = tuple(listeners) if listeners is not None else (EndPoint("PLAINTEXT", host, int(port)),)
        info = BrokerInfo(int(broker_id), endpoints, rack, int(jmx_port), 5, None, dict(features or {}))
        return self._register(info)

    def _register(self, info: BrokerInfo) -> int:
        path = BrokerIdZNode.path(info.broker_id)
        with self._lock:  # one registration at a time (caller vs. re-registration on a new session)
            stat = self._checked_ephemeral_create(
                path, lambda: BrokerIdZNode.encode(info),
                lambda owner: BrokerIdInUseError(
                    f"broker id {info.broker_id} is already registered at {path} by another live ZooKeeper "
                    f"session (0x{owner:x}): is another broker running with broker.id={info.broker_id}?"))
            self._registration = info
            self.broker_epoch = stat.czxid
            return stat.czxid

    def update_broker_registration(self, endpoints: Iterable[EndPoint | str]) -> None:
        """Kafka's updateBrokerInfo: this broker's registration rewritten with new endpoints, the
        same znode (so the same broker epoch). The embedded broker's serve()."""
        with self._lock:
            reg = self._registration
            if reg is None:
                raise ZkError("this broker is not registered")
            info = dataclasses.replace(reg, endpoints=tuple(endpoints))
            path = BrokerIdZNode.path(info.broker_id)
            self._call(f"set {path}", lambda: self._zk.set_async(path, BrokerIdZNode.encode(info), -1))
            self._registration = info

    def _checked_ephemeral_create(self, path: str, data_fn, conflict):
        for _ in range(10):
            sid = self.session_id
            try:
                _, stat = self._call(f"create {path}", lambda: self._zk.create_async(
                    path, data_fn(), ephemeral=True, include_data=True))
                self._ephemeral_owner[path] = stat.ephemeralOwner
                return stat
            except NodeExistsError:
                pass
            got = self._get(path)
            if got is None:
                continue  # went away while we looked: create again
            stat = got[1]
            owner, current = stat.ephemeralOwner, self.session_id or sid
            if owner == current:
                self._ephemeral_owner[path] = owner
                return stat  # ours: our create went through before a connection loss
            if owner == self._ephemeral_owner.get(path):
                # left by our own expired session and not yet removed (KAFKA-7165 / ZOOKEEPER-2985)
                log.info("deleting %s left by this client's expired session 0x%x", path, owner)
                try:
                    self._call(f"delete {path}", lambda: self._zk.delete_async(path, stat.version))
                except (NoNodeError, BadVersionError):
                    pass
                continue
            raise conflict(owner)
        raise ZkError(f"could not create ephemeral {path}: it kept changing under us")

    def get_all_broker_ids(self) -> list[int]:
        return sorted(int(c) for c in self.get_children(BrokerIdsZNode.path))

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        """The registration, with ``epoch`` (czxid) set; None if the broker is not registered."""
        got = self._get(BrokerIdZNode.path(broker_id))
        return dataclasses.replace(BrokerIdZNode.decode(broker_id, got[0]), epoch=got[1].czxid) if got else None

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        out = {}
        for b in self.get_all_broker_ids():
            info = self.get_broker(b)
            if info is not None:  # a broker may leave while we read
                out[b] = info
        return out

    def get_all_broker_and_epochs(self) -> dict[int, tuple[BrokerInfo, int]]:
        """Kafka's getAllBrokerAndEpochsInCluster: {id: (BrokerInfo, broker epoch)}."""
        return {b: (info, info.epoch) for b, info in self.get_all_brokers().items()}

    # ---- controller ----

    def get_controller(self) -> ControllerRegistration | None:
        got = self._get(ControllerZNode.path)
        return ControllerZNode.decode(got[0]) if got else None

    def get_controller_id(self) -> int | None:
        reg = self.get_controller()
        return reg.broker_id if reg else None

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zk version of /controller_epoch) or None before the first election."""
        got = self._get(ControllerEpochZNode.path)
        return (ControllerEpochZNode.decode(got[0]), got[1].version) if got else None

    def _get_or_create_controller_epoch(self) -> tuple[int, int]:
        cur = self.get_controller_epoch()
        if cur is not None:
            return cur
        try:
            self._create(ControllerEpochZNode.path,
                         ControllerEpochZNode.encode(ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH))
            return ControllerEpochZNode.INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            cur = self.get_controller_epoch()
            if cur is None:
                raise ZkError(f"{ControllerEpochZNode.path} existed before but went away while reading it") from None
            return cur

    def try_elect_controller(self, broker_id: int, timestamp_ms: int | None = None) -> ControllerElection:
        """Kafka's KafkaController.elect + registerControllerAndIncrementControllerEpoch: if no
        controller is registered, create the ephemeral /controller and bump /controller_epoch in
        one multi-op conditioned on the epoch's zk version. Returns who is controller."""
        for _ in range(10):
            current = self.get_controller_id()
            if current is not None:
                if current == broker_id and self._own_controller():
                    # already ours (this session): nobody else can have bumped the epoch since
                    cur = self.get_controller_epoch()
                    return ControllerElection(True, current, *(cur or (None, None)))
                return ControllerElection(False, current)
            epoch, zk_version = self._get_or_create_controller_epoch()
            new_epoch = epoch + 1
            results, _ = self._multi("elect controller", [
                ("create", ControllerZNode.path, ControllerZNode.encode(broker_id, timestamp_ms), True),
                ("set", ControllerEpochZNode.path, ControllerEpochZNode.encode(new_epoch), zk_version)])
            if not any(isinstance(r, Exception) for r in results):
                log.log(self.routine_level, "broker %d elected controller with epoch %d", broker_id, new_epoch)
                return ControllerElection(True, broker_id, new_epoch, results[1].version)
            err = next(r for r in results if isinstance(r, Exception) and not isinstance(r, RolledBackError))
            if not isinstance(err, (NodeExistsError, BadVersionError)):
                raise ZkError(f"controller election failed: {type(err).__name__}")
            # Kafka's checkControllerAndEpoch: after a retried multi the win may be ours
            reg = self.get_controller()
            if reg is not None and reg.broker_id == broker_id and self._own_controller():
                cur = self.get_controller_epoch()
                if cur is not None and cur[0] == new_epoch:
                    return ControllerElection(True, broker_id, cur[0], cur[1])
            if reg is not None:
                return ControllerElection(False, reg.broker_id)
            # the winner's /controller is already gone: try again
        return ControllerElection(False, self.get_controller_id())

    def _own_controller(self) -> bool:
        got = self._get(ControllerZNode.path)
        return got is not None and got[1].ephemeralOwner == self.session_id

    def increment_controller_epoch(self, expected_version: int | None = None) -> tuple[int, int]:
        """Set /controller_epoch to epoch+1 if its zk version is ``expected_version`` (None: the
        version just read); returns (new epoch, new zk version). Raises ControllerMovedError on
        a version mismatch. try_elect_controller already increments it with the win."""
        cur = self.get_controller_epoch()
        if cur is None:
            raise ZkNoNodeError(f"{ControllerEpochZNode.path} does not exist: no controller was ever elected")
        epoch, version = cur
        if expected_version is None:
            expected_version = version
        if version != expected_version:
            raise ControllerMovedError(f"{ControllerEpochZNode.path} is at zk version {version}, not {expected_version}: "
                                       f"a newer controller was elected")
        try:
            stat = self._call(f"set {ControllerEpochZNode.path}", lambda: self._zk.set_async(
                ControllerEpochZNode.path, ControllerEpochZNode.encode(epoch + 1), expected_version))
        except BadVersionError:
            raise ControllerMovedError(f"{ControllerEpochZNode.path} changed from zk version {expected_version}: "
                                       f"a newer controller was elected") from None
        return epoch + 1, stat.version

    def delete_controller(self, *, expected_controller_epoch_zk_version: int | None = None) -> None:
        """Resign (Kafka's deleteController); no error if there is no controller."""
        try:
            self._fenced(("delete", ControllerZNode.path, -1), expected_controller_epoch_zk_version,
                         f"delete {ControllerZNode.path}")
        except NoNodeError:
            pass

    # ---- topics ----

    @staticmethod
    def _validate_assignment(topic: str, assignment: Mapping[int, Sequence[int] | ReplicaAssignment]) -> None:
        # AdminZkClient.validateTopicCreate's checks, with Kafka's messages
        reps = {int(p): (a.replicas if isinstance(a, ReplicaAssignment) else tuple(a)) for p, a in assignment.items()}
        if not reps:
            raise InvalidReplicaAssignmentError(f"topic '{topic}': no partitions in the assignment")
        if len({len(r) for r in reps.values()}) != 1:
            raise InvalidReplicaAssignmentError("All partitions should have the same number of replicas")
        for r in reps.values():
            if not r:
                raise InvalidReplicaAssignmentError(f"topic '{topic}': a partition has no replicas")
            if len(r) != len(set(r)):
                raise InvalidReplicaAssignmentError(f"Duplicate replica assignment found: {reps}")
        if sorted(reps) != list(range(len(reps))):
            raise InvalidReplicaAssignmentError("partitions should be a consecutive 0-based integer sequence")

    def topic_exists(self, topic: str) -> bool:
        return self.path_exists(TopicZNode.path(topic))

    def create_topic(self, topic: str, assignment: Mapping[int, Sequence[int]], configs: Mapping[str, object] | None = None,
                     topic_id: str | bytes | None = None) -> str:
        """AdminZkClient.createTopicWithAssignment: /config/topics/<topic> then the topic znode
        (with a topic id: ``topic_id`` or a new one, returned as Kafka's text). The controller
        sees the new child of /brokers/topics and creates the partition states."""
        validate_topic_name(topic)
        self._validate_assignment(topic, assignment)
        if self.path_exists(DeleteTopicsTopicZNode.path(topic)):
            raise TopicExistsError(f"Topic '{topic}' is marked for deletion.")
        if self.topic_exists(topic):
            raise TopicExistsError(f"Topic '{topic}' already exists.")
        tid = topic_id if topic_id is not None else random_uuid_text()
        if isinstance(tid, (bytes, bytearray)):
            tid = uuid_to_text(bytes(tid))
        data = TopicZNode.encode(assignment, tid)  # validates the id before anything is written
        # Kafka writes the config first, not transactionally with the assignment
        self.set_or_create_entity_configs(ConfigType.TOPIC, topic, configs or {})
        try:
            self._create_recursive(TopicZNode.path(topic), data)
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None
        return tid

    def get_all_topics(self) -> list[str]:
        return self.get_children(TopicsZNode.path)

    def get_topic_assignment(self, topic: str) -> TopicAssignment | None:
        """The topic znode; unpacks as (assignment {partition: [replicas]}, topic_id), and
        carries ``partitions`` (with adding/removing replicas) and ``zk_version``."""
        got = self._get(TopicZNode.path(topic))
        if got is None:
            return None
        ta = TopicZNode.decode(topic, got[0])
        return TopicAssignment(ta.partitions, ta.topic_id, got[1].version)

    def set_topic_assignment(self, topic: str, assignment: Mapping[int, Sequence[int] | ReplicaAssignment],
                             topic_id: str | bytes | None, expected_version: int = -1, *,
                             expected_controller_epoch_zk_version: int | None = None) -> int:
        """Rewrite the topic znode (added partitions, reassignment); returns its new zk version.
        ZkVersionMismatchError if it is not at ``expected_version`` (-1: any)."""
        path = TopicZNode.path(topic)
        data = TopicZNode.encode(assignment, topic_id)
        try:
            stat = self._fenced(("set", path, data, expected_version), expected_controller_epoch_zk_version, f"set {path}")
        except NoNodeError:
            raise UnknownTopicError(f"Topic '{topic}' does not exist ({path})") from None
        except BadVersionError:
            raise ZkVersionMismatchError(f"{path} is no longer at zk version {expected_version}: "
                                         f"it was changed by someone else") from None
        return stat.version

    # ---- ACLs (Kafka's ZkAclStore layout: zk_data.AclZNodes; kafkacore/cluster/acl_store.py) ----

    def get_versioned_data(self, path: str) -> tuple[bytes | None, int]:
        """(data, zk version); (None, -1) when the znode does not exist (Kafka's
        getVersionedAclsForResource: UnknownVersion)."""
        got = self._get(path)
        if got is None:
            return None, ZkVersion.MATCH_ANY_VERSION
        data, stat = got
        return (data if data else None), stat.version

    def conditional_set_or_create(self, path: str, data: bytes, expected_version: int) -> bool:
        """Writes the znode if it is still at expected_version, or creates it (parents too) when
        expected_version is -1 (Kafka's conditionalSetAclsForResource and
        createAclsForResourceIfNotExists); False when another writer got there first."""
        if expected_version == ZkVersion.MATCH_ANY_VERSION:
            try:
                self._create_recursive(path, data)
                return True
            except NodeExistsError:
                return False
        try:
            self._call(f"set {path}", lambda: self._zk.set_async(path, data, expected_version))
            return True
        except (BadVersionError, NoNodeError):
            return False

    def conditional_delete(self, path: str, expected_version: int) -> bool:
        """Kafka's conditionalDelete: False when the znode moved on meanwhile; a znode already
        gone is deleted."""
        try:
            self._call(f"delete {path}", lambda: self._zk.delete_async(path, expected_version))
            return True
        except NoNodeError:
            return True
        except BadVersionError:
            return False

    def create_sequential(self, prefix_path: str, data: bytes) -> str:
        """A persistent sequential znode (a change notification) under an existing parent, made if
        missing; returns its path."""
        self.make_sure_persistent_path_exists(prefix_path[:prefix_path.rindex("/")])
        return self._create(prefix_path, data, sequence=True)

    # ---- configs ----

    def get_entity_configs(self, entity_type: str, entity_name: str) -> dict[str, str]:
        path = ConfigEntityZNode.path(entity_type, entity_name)
        got = self._get(path)
        return ConfigEntityZNode.decode(got[0], path) if got else {}

    def set_or_create_entity_configs(self, entity_type: str, entity_name: str, configs: Mapping[str, object]) -> None:
        """Kafka's setOrCreateEntityConfigs (last writer wins)."""
        path = ConfigEntityZNode.path(entity_type, entity_name)
        data = ConfigEntityZNode.encode(configs)
        try:
            self._call(f"set {path}", lambda: self._zk.set_async(path, data, -1))
            return
        except NoNodeError:
            pass
        try:
            self._create_recursive(path, data)
        except NodeExistsError:
            self._call(f"set {path}", lambda: self._zk.set_async(path, data, -1))

    def create_config_change_notification(self, sanitized_entity_path: str) -> str:
        """A /config/changes/config_change_N for "<type>/<name>"; returns its path."""
        self.make_sure_persistent_path_exists(ConfigEntityChangeNotificationZNode.path)
        return self._create(ConfigEntityChangeNotificationSequenceZNode.create_path,
                            ConfigEntityChangeNotificationSequenceZNode.encode(sanitized_entity_path), sequence=True)

    def get_topic_configs(self, topic: str) -> dict[str, str]:
        """The topic's overrides (empty when it has none)."""
        return self.get_entity_configs(ConfigType.TOPIC, topic)

    def set_topic_configs(self, topic: str, configs: Mapping[str, object]) -> None:
        """AdminZkClient.changeTopicConfig: replaces the overrides and notifies the brokers."""
        validate_topic_name(topic)
        if not self.topic_exists(topic):
            raise UnknownTopicError(f"Topic '{topic}' does not exist.")
        self.set_or_create_entity_configs(ConfigType.TOPIC, topic, configs)
        self.create_config_change_notification(f"{ConfigType.TOPIC}/{topic}")

    # ---- partition states ----

    def create_partition_state(self, topic: str, partition: int, leader: int, leader_epoch: int, isr: Sequence[int],
                               controller_epoch: int, *, leader_recovery_state: int = 0,
                               expected_controller_epoch_zk_version: int | None = None) -> int:
        """Create /brokers/topics/<t>/partitions/<n>/state (and its empty parents); returns its
        zk version (0). ZkNodeExistsError if it exists, UnknownTopicError without the topic."""
        state = LeaderIsrAndControllerEpoch(leader, leader_epoch, tuple(isr), controller_epoch, leader_recovery_state)
        if not self.topic_exists(topic):
            raise UnknownTopicError(f"Topic '{topic}' does not exist: cannot create the state of partition {partition}")
        fence = expected_controller_epoch_zk_version
        for parent in (TopicPartitionsZNode.path(topic), TopicPartitionZNode.path(topic, partition)):
            try:
                self._fenced(("create", parent, None, False), fence, f"create {parent}")
            except NodeExistsError:
                pass
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{topic}' was deleted while creating partition {partition}") from None
        path = TopicPartitionStateZNode.path(topic, partition)
        try:
            self._fenced(("create", path, TopicPartitionStateZNode.encode(state), False), fence, f"create {path}")
        except NodeExistsError:
            raise ZkNodeExistsError(f"{path} already exists") from None
        except NoNodeError:
            raise UnknownTopicError(f"Topic '{topic}' was deleted while creating partition {partition}") from None
        return 0

    def get_partition_state(self, topic: str, partition: int) -> tuple[LeaderIsrAndControllerEpoch, int] | None:
        """(state, zk version) or None. The zk version is the partition epoch to pass back."""
        got = self.get_partition_state_and_zxid(topic, partition)
        return got[:2] if got else None

    def get_partition_state_and_zxid(self, topic: str, partition: int) -> tuple[LeaderIsrAndControllerEpoch, int, int] | None:
        """(state, zk version, mzxid) or None. The mzxid (the zxid of the state's last write)
        orders the write against broker epochs, which are zxids too: a leader registered after
        it has restarted since the state was written (KIP-380)."""
        path = TopicPartitionStateZNode.path(topic, partition)
        got = self._get(path)
        return (TopicPartitionStateZNode.decode(got[0], path), got[1].version, got[1].mzxid) if got else None

    def update_partition_state(self, topic: str, partition: int, state: LeaderIsrAndControllerEpoch, expected_version: int, *,
                               expected_controller_epoch_zk_version: int | None = None) -> int:
        """Conditional write of the partition state; returns the new zk version. Raises
        ZkVersionMismatchError if the state changed since ``expected_version`` was read: this is
        what fences a deposed leader's or controller's ISR update."""
        path = TopicPartitionStateZNode.path(topic, partition)
        data = TopicPartitionStateZNode.encode(state)
        try:
            return self._fenced(("set", path, data, expected_version), expected_controller_epoch_zk_version,
                                f"set {path}").version
        except NoNodeError:
            raise ZkNoNodeError(f"{path} does not exist") from None
        except BadVersionError as e:
            # after a connection loss the write may have landed with its answer lost (Kafka's
            # conditionalUpdatePath checker): the same bytes one version on are ours
            got = self._get(path) if getattr(e, "retried", False) else None
            if got is not None and got[0] == data and got[1].version == expected_version + 1:
                return got[1].version
            raise ZkVersionMismatchError(f"{path} is no longer at zk version {expected_version}: "
                                         f"the partition state was changed by someone else") from None

    def update_leader_and_isr(self, topic: str, partition: int, leader: int, leader_epoch: int, isr: Sequence[int],
                              controller_epoch: int, expected_version: int, *, leader_recovery_state: int = 0,
                              expected_controller_epoch_zk_version: int | None = None) -> int:
        """Kafka's updateLeaderAndIsr for one partition: update_partition_state with the fields."""
        return self.update_partition_state(
            topic, partition, LeaderIsrAndControllerEpoch(leader, leader_epoch, tuple(isr), controller_epoch, leader_recovery_state),
            expected_version, expected_controller_epoch_zk_version=expected_controller_epoch_zk_version)

    # ---- deletion ----

    def is_topic_marked_for_deletion(self, topic: str) -> bool:
        return self.path_exists(DeleteTopicsTopicZNode.path(topic))

    def delete_topic_request(self, topic: str) -> None:
        """AdminZkClient.deleteTopic: create /admin/delete_topics/<topic> for the controller."""
        if not self.topic_exists(topic):
            raise UnknownTopicError(f"Topic `{topic}` to delete does not exist")
        try:
            self._create_recursive(DeleteTopicsTopicZNode.path(topic))
        except NodeExistsError:
            raise TopicAlreadyMarkedForDeletionError(f"topic {topic} is already marked for deletion") from None

    def get_topic_deletions(self) -> list[str]:
        return self.get_children(DeleteTopicsZNode.path)

    def delete_topic_znodes(self, topic: str, *, expected_controller_epoch_zk_version: int | None = None) -> None:
        """TopicDeletionManager.completeDeleteTopic's znodes: the topic (partition states
        included), its config, then the deletion request (last, so a crash leaves it to retry)."""
        fence = expected_controller_epoch_zk_version
        self._delete_recursive(TopicZNode.path(topic), fence)
        for path in (ConfigEntityZNode.path(ConfigType.TOPIC, topic), DeleteTopicsTopicZNode.path(topic)):
            try:
                self._fenced(("delete", path, -1), fence, f"delete {path}")
            except NoNodeError:
                pass

    # ---- reassignment (/admin/reassign_partitions) ----

    def get_partition_reassignment(self) -> dict[tuple[str, int], list[int]]:
        """{(topic, partition): target replicas}; empty when none is requested."""
        got = self._get(ReassignPartitionsZNode.path)
        return ReassignPartitionsZNode.decode(got[0]) if got else {}

    def create_partition_reassignment(self, reassignment: Mapping[tuple[str, int], Sequence[int]]) -> None:
        """What the ZooKeeper-era kafka-reassign-partitions did; fails if one is running."""
        try:
            self._create_recursive(ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(reassignment))
        except NodeExistsError:
            raise ZkNodeExistsError("There is an existing assignment running.") from None

    def set_partition_reassignment(self, reassignment: Mapping[tuple[str, int], Sequence[int]], *,
                                   expected_controller_epoch_zk_version: int | None = None) -> None:
        """Kafka's setOrCreatePartitionReassignment (the controller rewrites what remains)."""
        path, data = ReassignPartitionsZNode.path, ReassignPartitionsZNode.encode(reassignment)
        fence = expected_controller_epoch_zk_version
        try:
            self._fenced(("set", path, data, -1), fence, f"set {path}")
        except NoNodeError:
            self._fenced(("create", path, data, False), fence, f"create {path}")

    def delete_partition_reassignment(self, *, expected_controller_epoch_zk_version: int | None = None) -> None:
        try:
            self._fenced(("delete", ReassignPartitionsZNode.path, -1), expected_controller_epoch_zk_version,
                         f"delete {ReassignPartitionsZNode.path}")
        except NoNodeError:
            pass

    # ---- producer ids ----

    def allocate_producer_id_block(self, broker_id: int, block_size: int = ProducerIdBlockZNode.PRODUCER_ID_BLOCK_SIZE
                                   ) -> tuple[int, int]:
        """ZkProducerIdManager.getNewProducerIdBlock: read /latest_producer_id_block, write the
        next block conditioned on its zk version, retry on conflict. Returns (first, last),
        inclusive; blocks never overlap across brokers."""
        if block_size <= 0:
            raise ValueError(f"producer id block size must be positive, got {block_size}")
        path = ProducerIdBlockZNode.path
        while True:
            got = self._get(path)
            if got is None:
                # Kafka's path exists from createTopLevelPaths; create it empty and read again
                self._create_recursive(path, None, throw_if_exists=False)
                continue
            data, stat = got
            if not data:
                block = ProducerIdsBlock(broker_id, 0, block_size)
            else:
                cur = ProducerIdBlockZNode.decode(data)
                if cur.last_producer_id > ProducerIdBlockZNode.MAX_PRODUCER_ID - block_size:
                    raise ZkError(f"Have exhausted all producerIds (last block ends at {cur.last_producer_id})")
                block = ProducerIdsBlock(broker_id, cur.next_block_first_id, block_size)
            data = ProducerIdBlockZNode.encode(block)
            try:
                self._call(f"set {path}", lambda: self._zk.set_async(path, data, stat.version))
            except BadVersionError:
                # another broker took a block first (or our own write landed and its answer was
                # lost: then a block is skipped, never handed out twice)
                continue
            log.info("broker %d acquired producer id block %d..%d", broker_id, block.first_producer_id,
                     block.last_producer_id)
            return block.first_producer_id, block.last_producer_id

    # ---- ISR change notifications ----

    def propagate_isr_change(self, partitions: Iterable[tuple[str, int]]) -> str:
        """Kafka's propagateIsrChanges; returns the sequential znode's path."""
        return self._create(IsrChangeNotificationSequenceZNode.path(),
                            IsrChangeNotificationSequenceZNode.encode(partitions), sequence=True)

    def get_all_isr_change_notifications(self) -> list[str]:
        """Sequence numbers of the pending notifications, oldest first."""
        return [IsrChangeNotificationSequenceZNode.sequence_number(c)
                for c in self.get_children(IsrChangeNotificationZNode.path)]

    def get_partitions_from_isr_change_notifications(self, sequence_numbers: Iterable[str]) -> set[tuple[str, int]]:
        out = set()
        for seq in sequence_numbers:
            got = self._get(IsrChangeNotificationSequenceZNode.path(seq))
            if got is not None:
                out |= IsrChangeNotificationSequenceZNode.decode(got[0])
        return out

    def delete_isr_change_notifications(self, sequence_numbers: Iterable[str], *,
                                        expected_controller_epoch_zk_version: int | None = None) -> None:
        for seq in sequence_numbers:
            path = IsrChangeNotificationSequenceZNode.path(seq)
            try:
                self._fenced(("delete", path, -1), expected_controller_epoch_zk_version, f"delete {path}")
            except NoNodeError:
                pass

    def take_isr_change_notifications(self, *, expected_controller_epoch_zk_version: int | None = None
                                      ) -> list[tuple[str, int]]:
        """The controller's processIsrChangeNotification: read every pending notification, delete
        them, return their partitions (sorted)."""
        seqs = self.get_all_isr_change_notifications()
        partitions = self.get_partitions_from_isr_change_notifications(seqs)
        self.delete_isr_change_notifications(
            seqs, expected_controller_epoch_zk_version=expected_controller_epoch_zk_version)
        return sorted(partitions)

    # ---- features ----

    def get_feature_znode(self) -> tuple[FeatureZNodeData, int] | None:
        got = self._get(FeatureZNode.path)
        return (FeatureZNode.decode(got[0]), got[1].version) if got else None

    def create_feature_znode(self, node: FeatureZNodeData) -> int:
        try:
            self._create(FeatureZNode.path, FeatureZNode.encode(node))
        except NodeExistsError:
            raise ZkNodeExistsError(f"{FeatureZNode.path} already exists") from None
        return 0

    def update_feature_znode(self, node: FeatureZNodeData) -> int:
        try:
            return self._call(f"set {FeatureZNode.path}",
                              lambda: self._zk.set_async(FeatureZNode.path, FeatureZNode.encode(node), -1)).version
        except NoNodeError:
            raise ZkNoNodeError(f"{FeatureZNode.path} does not exist") from None

    # ---- watches ----

    def watch_children(self, path: str, fn: Callable[[list[str]], None]) -> Watch:
        """``fn(sorted children)`` now and on every change, across reconnects and new sessions
        (kazoo's ChildrenWatch). The znode must exist (ZkNoNodeError); if it is deleted later the
        watch ends (logged). fn runs on a kazoo thread; its exceptions are logged."""
        if not self.path_exists(path):
            raise ZkNoNodeError(f"cannot watch the children of {path}: no such znode")
        w = Watch(path)

        def on_children(children):
            if w.cancelled or self._closing:
                return False
            try:
                fn(sorted(children))
            except Exception:  # noqa: BLE001
                log.exception("children watch callback on %s failed", path)
            return None

        def on_exists(data, stat, event=None):
            # kazoo's ChildrenWatch stops silently when its znode goes: say so
            if stat is None and not (w.cancelled or self._closing):
                log.warning("%s was deleted: its children watch has ended", path)
                return False
            return None

        if self._local:
            self._zk.watch_children(path, on_children)
            self._zk.watch_data(path, on_exists)
            return w
        from kazoo.recipe.watchers import ChildrenWatch, DataWatch
        ChildrenWatch(self._zk, path, on_children)
        DataWatch(self._zk, path, on_exists)
        return w

    def watch_data(self, path: str, fn: Callable[[bytes | None, object], None]) -> Watch:
        """``fn(data, stat)`` now and whenever the znode is created, changed or deleted
        (data and stat None while it does not exist), across reconnects and new sessions
        (kazoo's DataWatch). stat is kazoo's ZnodeStat (version, czxid, ephemeralOwner...).
        fn runs on a kazoo thread; its exceptions are logged."""
        w = Watch(path)

        def on_data(data, stat, event=None):
            if w.cancelled or self._closing:
                return False
            try:
                fn((data if data else None) if stat is not None else None, stat)
            except Exception:  # noqa: BLE001
                log.exception("data watch callback on %s failed", path)
            return None

        if self._local:
            self._zk.watch_data(path, on_data)
            return w
        from kazoo.recipe.watchers import DataWatch
        DataWatch(self._zk, path, on_data)
        return w
