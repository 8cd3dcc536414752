"""ZooKeeper's data model inside this process: the metadata store of a cluster whose brokers all
run here (a single node, the embedded broker, the in-process test cluster).

``ZnodeTree`` is the tree: znodes with data, versions and zxids, ephemeral znodes owned by
sessions, sequential znodes, atomic multi-ops, and watches, with ZooKeeper's rules and errors
(kazoo's exception classes, so KafkaZkClient handles both stores alike). ``tree.session()`` is
one client session on it, with the subset of kazoo's KazooClient that KafkaZkClient uses; every
call is answered at once, so "async" results are already done.

Durability: given a directory, the tree keeps its persistent znodes there as ZooKeeper does, a
snapshot (``znodes.snapshot.json``) and a transaction log (``znodes.log``, one JSON line per
committed write, flushed and fsynced before the write returns). Loading replays the log over
the snapshot; a torn last line (a crash while writing it: the write was never acknowledged) is
dropped, any other damage is a one-line KafkaStorageError. The log is folded into a new
snapshot (written to a temporary file, fsynced, renamed) once it holds ``SNAPSHOT_EVERY``
transactions, and at load. Znode data and paths are those of Kafka's ZooKeeper layout
(cluster/zk_data.py), so ``kafkacore cluster migrate`` copies the tree into a real ZooKeeper
as it is. Ephemeral znodes live only as long as their session, as in ZooKeeper, and are never
written.

Watches: ``watch_data`` and ``watch_children`` behave as kazoo's DataWatch and ChildrenWatch
recipes do: the callback runs once at registration (on the caller's thread), then on every
change, on the tree's event thread, in commit order; returning False ends the watch.
"""
from __future__ import annotations

import base64
import json
import logging
import os
import queue
import random
import threading
from dataclasses import dataclass, field

from kazoo.exceptions import (
    BadArgumentsError, BadVersionError, ConnectionClosedError, NoChildrenForEphemeralsError, NodeExistsError,
    NoNodeError, NotEmptyError, RolledBackError, RuntimeInconsistency,
)
from kazoo.protocol.states import KazooState, ZnodeStat

from ..clock import wall_ms
from ..errors import KafkaStorageError

log = logging.getLogger("kafkacore.cluster")

SNAPSHOT_FILE = "znodes.snapshot.json"
LOG_FILE = "znodes.log"
SNAPSHOT_EVERY = 1000  # transactions in the log before it is folded into a new snapshot
FORMAT_VERSION = 1


@dataclass
class _Znode:
    data: bytes | None
    czxid: int
    ctime: int
    mzxid: int = 0
    mtime: int = 0
    version: int = 0
    cversion: int = 0
    pzxid: int = 0
    ephemeral_owner: int = 0
    children: set = field(default_factory=set)

    def stat(self) -> ZnodeStat:
        return ZnodeStat(self.czxid, self.mzxid, self.ctime, self.mtime, self.version, self.cversion, 0,
                         self.ephemeral_owner, len(self.data or b""), len(self.children), self.pzxid)

    def to_json(self) -> dict:
        d = self.data
        data = None if d is None else _text_or_base64(d)
        return {"data": data, "czxid": self.czxid, "ctime": self.ctime, "mzxid": self.mzxid, "mtime": self.mtime,
                "version": self.version, "cversion": self.cversion, "pzxid": self.pzxid}

    @classmethod
    def from_json(cls, js: dict) -> "_Znode":
        data = js["data"]
        if isinstance(data, dict):
            data = base64.b64decode(data["base64"])
        elif data is not None:
            data = data.encode("utf-8")
        return cls(data, int(js["czxid"]), int(js["ctime"]), int(js["mzxid"]), int(js["mtime"]),
                   int(js["version"]), int(js["cversion"]), int(js["pzxid"]))


def _text_or_base64(data: bytes):
    # Kafka's znodes hold UTF-8 JSON: kept as text, readable in the file; anything else as base64
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _parent(path: str) -> str:
    return path[:path.rindex("/")] or "/"


def _check_path(path: str) -> None:
    if (not isinstance(path, str) or not path.startswith("/") or (path != "/" and path.endswith("/"))
            or "//" in path or "\x00" in path):
        raise BadArgumentsError(f"invalid znode path {path!r}")


class _Done:
    """An answered call, with the ``get(timeout)`` of kazoo's async results."""

    __slots__ = ("_value", "_error")

    def __init__(self, value=None, error=None):
        self._value, self._error = value, error

    def get(self, timeout=None):
        if self._error is not None:
            raise self._error
        return self._value


def _answer(fn, *args, **kw) -> _Done:
    try:
        return _Done(fn(*args, **kw))
    except Exception as e:  # noqa: BLE001 - handed to the caller by get(), as kazoo does
        return _Done(error=e)


class ZnodeTree:
    """The znodes of one cluster; ``directory`` None keeps them in memory only."""

    def __init__(self, directory: str | None = None):
        self.directory = directory
        self._lock = threading.RLock()
        self._nodes: dict[str, _Znode] = {"/": _Znode(None, 0, 0)}
        self._zxid = 0
        self._sessions: dict[int, "ZnodeSession"] = {}
        self._data_watches: dict[str, list] = {}
        self._child_watches: dict[str, list] = {}
        self._events: queue.Queue = queue.Queue()
        self._log = None
        self._logged = 0
        self._closed = False
        if directory is not None:
            os.makedirs(directory, exist_ok=True)
            self._load()
        self._dispatcher = threading.Thread(target=self._dispatch, name="kafkacore-znode-events", daemon=True)
        self._dispatcher.start()

    # ---- sessions ----

    def session(self) -> "ZnodeSession":
        """A new client session (not started)."""
        return ZnodeSession(self)

    def _open(self, session: "ZnodeSession") -> int:
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the znode tree is closed")
            sid = random.getrandbits(63) or 1
            while sid in self._sessions:
                sid = random.getrandbits(63) or 1
            self._sessions[sid] = session
            return sid

    def _end(self, sid: int) -> None:
        """A session ends (closed or expired): its ephemeral znodes go, as in ZooKeeper."""
        with self._lock:
            if self._sessions.pop(sid, None) is None:
                return
            owned = sorted((p for p, n in self._nodes.items() if n.ephemeral_owner == sid), reverse=True)
            for path in owned:
                self._commit([("delete", path, -1)], sid)

    def close(self) -> None:
        """Ends every session and stops the event thread; the files stay, the log folded into
        the snapshot."""
        with self._lock:
            if self._closed:
                return
            for sid in list(self._sessions):
                self._sessions[sid]._lost()
            self._closed = True
            if self._log is not None:
                try:
                    self._snapshot()
                except OSError as e:  # the log still holds every write: the next load replays it
                    log.warning("could not fold the metadata store's log into a snapshot: %s", e)
                self._log.close()
                self._log = None
        self._events.put(None)
        if self._dispatcher is not threading.current_thread():
            self._dispatcher.join(5)

    # ---- reads ----

    def get(self, path):
        _check_path(path)
        with self._lock:
            n = self._nodes.get(path)
            if n is None:
                raise NoNodeError(path)
            return n.data, n.stat()

    def exists(self, path):
        _check_path(path)
        with self._lock:
            n = self._nodes.get(path)
            return None if n is None else n.stat()

    def get_children(self, path):
        _check_path(path)
        with self._lock:
            n = self._nodes.get(path)
            if n is None:
                raise NoNodeError(path)
            return sorted(n.children)

    # ---- writes: every one is a transaction of ops, applied all or none ----

    def _commit(self, ops, sid):
        """Applies ``ops`` atomically. Returns the results (a created path, a stat, True); raises
        the failing op's error when there is one op, else returns the results of a failed multi
        as ZooKeeper does: that op's error, RolledBackError before it, RuntimeInconsistency after."""
        with self._lock:
            if self._closed:
                raise ConnectionClosedError("the znode tree is closed")
            nodes = _Overlay(self._nodes)
            results, events = [], []
            zxid = self._zxid + 1
            now = wall_ms()
            for i, op in enumerate(ops):
                try:
                    results.append(self._apply(nodes, op, sid, zxid, now, events))
                except Exception as e:  # noqa: BLE001 - ZooKeeper's errors, returned per op
                    if len(ops) == 1:
                        raise
                    return [RolledBackError() for _ in range(i)] + [e] + [RuntimeInconsistency()
                                                                          for _ in range(len(ops) - i - 1)]
            if not events:  # only checks: nothing changes, no zxid is used
                return results
            self._zxid = zxid
            # what the log keeps: persistent znodes made, changed or deleted (None)
            durable = {path: None if n is None else n.to_json() for path, n in nodes.changed.items()
                       if not (n.ephemeral_owner if n is not None else self._nodes[path].ephemeral_owner)}
            self._persist(zxid, durable)  # before the change is seen: a write that failed left none
            nodes.apply()
            for kind, path in events:  # each with the value it had at this commit
                self._events.put((kind, path, self._watch_value(kind, path)))
            return results

    def _apply(self, nodes, op, sid, zxid, now, events):
        kind, path = op[0], op[1]
        _check_path(path)
        if kind == "check":
            n = nodes.get(path)
            if n is None:
                raise NoNodeError(path)
            if op[2] != -1 and op[2] != n.version:
                raise BadVersionError(path)
            return True
        if kind == "create":
            _, _, data, ephemeral, sequence = op
            if path == "/":
                raise NodeExistsError(path)
            parent_path = _parent(path)
            parent = nodes.get(parent_path)
            if parent is None:
                raise NoNodeError(parent_path)
            if parent.ephemeral_owner:
                raise NoChildrenForEphemeralsError(parent_path)
            if sequence:
                path = f"{path}{parent.cversion:010d}"
            if nodes.get(path) is not None:
                raise NodeExistsError(path)
            parent = nodes.edit(parent_path)
            parent.children.add(path[len(parent_path.rstrip("/")) + 1:])
            parent.cversion += 1
            parent.pzxid = zxid
            nodes.put(path, _Znode(data, zxid, now, zxid, now, pzxid=zxid, ephemeral_owner=sid if ephemeral else 0))
            events += [("data", path), ("children", parent_path)]
            return path
        if kind == "set":
            _, _, data, version = op
            n = nodes.get(path)
            if n is None:
                raise NoNodeError(path)
            if version != -1 and version != n.version:
                raise BadVersionError(path)
            n = nodes.edit(path)
            n.data, n.version, n.mzxid, n.mtime = data, n.version + 1, zxid, now
            events.append(("data", path))
            return n.stat()
        if kind == "delete":
            _, _, version = op
            if path == "/":
                raise BadArgumentsError("the root znode cannot be deleted")
            n = nodes.get(path)
            if n is None:
                raise NoNodeError(path)
            if version != -1 and version != n.version:
                raise BadVersionError(path)
            if n.children:
                raise NotEmptyError(path)
            parent_path = _parent(path)
            parent = nodes.edit(parent_path)
            parent.children.discard(path[len(parent_path.rstrip("/")) + 1:])
            parent.cversion += 1
            parent.pzxid = zxid
            nodes.delete(path)
            events += [("data", path), ("children", path), ("children", parent_path)]
            return True
        raise BadArgumentsError(f"unknown znode operation {kind!r}")

    # ---- watches ----

    def _watch(self, kind, path, fn, session):
        """fn runs now and on every change until it returns False or the session ends."""
        table = self._data_watches if kind == "data" else self._child_watches
        entry = [fn, session]
        with self._lock:
            table.setdefault(path, []).append(entry)
            first = self._watch_value(kind, path)
        if kind == "children" and first is None:
            self._unwatch(table, path, entry)
            return
        if self._deliver(fn, kind, first) is False:
            self._unwatch(table, path, entry)

    def _watch_value(self, kind, path):
        n = self._nodes.get(path)
        if kind == "data":
            return (None, None) if n is None else (n.data, n.stat())
        return None if n is None else sorted(n.children)

    @staticmethod
    def _deliver(fn, kind, value):
        try:
            return fn(*value) if kind == "data" else fn(value)
        except Exception:  # noqa: BLE001
            log.exception("znode watch callback %r failed", fn)
            return None

    def _unwatch(self, table, path, entry):
        with self._lock:
            entries = table.get(path)
            if entries and entry in entries:
                entries.remove(entry)
                if not entries:
                    del table[path]

    def _dispatch(self):
        # one thread delivers every change, in commit order, with the value the commit left
        while True:
            ev = self._events.get()
            if ev is None:
                return
            kind, path, value = ev
            table = self._data_watches if kind == "data" else self._child_watches
            with self._lock:
                entries = list(table.get(path, ()))
            for entry in entries:
                fn, session = entry
                if session.closed:
                    self._unwatch(table, path, entry)
                    continue
                if kind == "children" and value is None:  # the znode went: ChildrenWatch ends
                    self._unwatch(table, path, entry)
                    continue
                if self._deliver(fn, kind, value) is False:
                    self._unwatch(table, path, entry)

    # ---- durability ----

    def _persist(self, zxid, record):
        """Logs the persistent znodes a transaction changed (None: deleted), before it returns."""
        if self._log is None or not record:
            return
        line = json.dumps({"zxid": zxid, "znodes": record}, separators=(",", ":")) + "\n"
        end = self._log.tell()
        try:
            self._log.write(line.encode("utf-8"))
            self._log.flush()
            os.fsync(self._log.fileno())
        except OSError as e:
            self._zxid = zxid - 1
            try:  # no half line may stay for the next write to follow
                self._log.seek(end)
                self._log.truncate()
            except OSError:
                pass
            raise KafkaStorageError(f"cannot write the metadata store in {self.directory}: {e}") from None
        self._logged += 1
        if self._logged >= SNAPSHOT_EVERY:
            self._snapshot()

    def _load(self):
        snap = os.path.join(self.directory, SNAPSHOT_FILE)
        txlog = os.path.join(self.directory, LOG_FILE)
        try:
            if os.path.exists(snap):
                with open(snap, "rb") as f:
                    js = json.loads(f.read().decode("utf-8"))
                if js.get("version") != FORMAT_VERSION:
                    raise ValueError(f"format version {js.get('version')!r}, expected {FORMAT_VERSION}")
                self._zxid = int(js["zxid"])
                for path, node in js["znodes"].items():
                    self._nodes[path] = _Znode.from_json(node)
            replayed = 0
            if os.path.exists(txlog):
                with open(txlog, "rb") as f:
                    lines = f.read().split(b"\n")
                for i, raw in enumerate(lines):
                    if not raw:
                        continue
                    try:
                        tx = json.loads(raw.decode("utf-8"))
                    except ValueError:
                        if i == len(lines) - 1:  # torn last line: never acknowledged
                            log.warning("dropping the torn last line of %s", txlog)
                            break
                        raise
                    for path, node in tx["znodes"].items():
                        if node is None:
                            self._nodes.pop(path, None)
                        else:
                            self._nodes[path] = _Znode.from_json(node)
                    self._zxid = max(self._zxid, int(tx["zxid"]))
                    replayed += 1
            for path in self._nodes:  # children are derived, not stored
                if path != "/":
                    self._nodes[_parent(path)].children.add(path[path.rindex("/") + 1:])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise KafkaStorageError(f"cannot load the metadata store in {self.directory}: {e}") from None
        self._snapshot()
        if replayed or self._zxid:
            log.info("loaded %d znodes from %s (zxid %d)", len(self._nodes) - 1, self.directory, self._zxid)

    def _snapshot(self):
        snap = os.path.join(self.directory, SNAPSHOT_FILE)
        tmp = snap + ".tmp"
        body = {"version": FORMAT_VERSION, "zxid": self._zxid,
                "znodes": {p: n.to_json() for p, n in sorted(self._nodes.items())
                           if p != "/" and not n.ephemeral_owner}}
        with open(tmp, "wb") as f:
            f.write(json.dumps(body, indent=1).encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, snap)
        if self._log is not None:
            self._log.close()
        self._log = open(os.path.join(self.directory, LOG_FILE), "wb")  # the snapshot holds it all
        self._fsync_dir()
        self._logged = 0

    def _fsync_dir(self):
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _Overlay:
    """A transaction's view of the tree: edits are copies until ``apply``."""

    def __init__(self, base):
        self.base = base
        self.changed: dict[str, _Znode | None] = {}

    def get(self, path):
        if path in self.changed:
            return self.changed[path]
        return self.base.get(path)

    def edit(self, path):
        n = self.get(path)
        if path not in self.changed:
            n = _Znode(n.data, n.czxid, n.ctime, n.mzxid, n.mtime, n.version, n.cversion, n.pzxid,
                       n.ephemeral_owner, set(n.children))
            self.changed[path] = n
        return n

    def put(self, path, node):
        self.changed[path] = node

    def delete(self, path):
        self.changed[path] = None

    def apply(self):
        for path, n in self.changed.items():
            if n is None:
                self.base.pop(path, None)
            else:
                self.base[path] = n
        return self.changed


class _Transaction:
    """kazoo's TransactionRequest over a tree."""

    def __init__(self, session):
        self.session = session
        self.ops = []

    def check(self, path, version):
        self.ops.append(("check", path, version))

    def create(self, path, value=b"", ephemeral=False, sequence=False):
        self.ops.append(("create", path, value, ephemeral, sequence))

    def set_data(self, path, value, version=-1):
        self.ops.append(("set", path, value, version))

    def delete(self, path, version=-1):
        self.ops.append(("delete", path, version))

    def commit_async(self):
        def commit():
            if len(self.ops) == 1:  # a multi of one still answers with a list of results
                try:
                    return self.session.tree._commit(self.ops, self.session._sid())
                except (NoNodeError, NodeExistsError, BadVersionError, NotEmptyError,
                        NoChildrenForEphemeralsError) as e:
                    return [e]
            return self.session.tree._commit(self.ops, self.session._sid())
        return _answer(commit)

    def commit(self):
        return self.commit_async().get()


class ZnodeSession:
    """One client session on a ZnodeTree, with the part of kazoo's KazooClient KafkaZkClient
    uses. ``expire()`` ends the session as ZooKeeper's expiry would (ephemerals deleted,
    listeners told LOST) and opens a new one (CONNECTED), for tests of session loss."""

    local = True  # KafkaZkClient: watches through watch_data/watch_children, no kazoo recipes

    def __init__(self, tree: ZnodeTree):
        self.tree = tree
        self.session_id = None
        self.closed = False
        self._listeners = []
        self._lock = threading.Lock()

    # ---- lifecycle (kazoo's names) ----

    def add_listener(self, fn):
        self._listeners.append(fn)

    def start(self, timeout=None):
        with self._lock:
            if self.closed:
                raise ConnectionClosedError("this session was closed")
            if self.session_id is None:
                self.session_id = self.tree._open(self)
        self._tell(KazooState.CONNECTED)

    def stop(self):
        with self._lock:
            sid, self.session_id = self.session_id, None
            self.closed = True
        if sid is not None:
            self.tree._end(sid)
            self._tell(KazooState.LOST)

    close = stop

    def expire(self):
        """ZooKeeper expired this session: its ephemeral znodes go; a new session follows."""
        with self._lock:
            sid = self.session_id
        if sid is None:
            return
        self.tree._end(sid)
        self._tell(KazooState.LOST)
        with self._lock:
            if self.closed:
                return
            self.session_id = self.tree._open(self)
        self._tell(KazooState.CONNECTED)

    def _lost(self):
        # the tree is closing: this session ends with it
        with self._lock:
            self.session_id = None
            self.closed = True
        self._tell(KazooState.LOST)

    def _tell(self, state):
        for fn in list(self._listeners):
            try:
                fn(state)
            except Exception:  # noqa: BLE001
                log.exception("znode session listener %r failed", fn)

    @property
    def client_id(self):
        sid = self.session_id
        return None if sid is None else (sid, b"")

    @property
    def connected(self):
        return self.session_id is not None

    def _sid(self):
        sid = self.session_id
        if sid is None:
            raise ConnectionClosedError("the znode session is closed")
        return sid

    # ---- operations (kazoo's names; answered at once) ----

    def get(self, path):
        return self.tree.get(path)

    def exists(self, path):
        return self.tree.exists(path)

    def get_children(self, path):
        return self.tree.get_children(path)

    def create(self, path, value=b"", ephemeral=False, sequence=False):
        return self.create_async(path, value, ephemeral, sequence).get()

    def set(self, path, value, version=-1):
        return self.set_async(path, value, version).get()

    def delete(self, path, version=-1):
        return self.delete_async(path, version).get()

    def get_async(self, path):
        return _answer(self.tree.get, path)

    def exists_async(self, path):
        return _answer(self.tree.exists, path)

    def get_children_async(self, path):
        return _answer(self.tree.get_children, path)

    def create_async(self, path, value=b"", ephemeral=False, sequence=False, include_data=False):
        def create():
            created = self.tree._commit([("create", path, value, ephemeral, sequence)], self._sid())[0]
            return (created, self.tree.exists(created)) if include_data else created
        return _answer(create)

    def set_async(self, path, value, version=-1):
        return _answer(lambda: self.tree._commit([("set", path, value, version)], self._sid())[0])

    def delete_async(self, path, version=-1):
        return _answer(lambda: self.tree._commit([("delete", path, version)], self._sid())[0])

    def transaction(self):
        return _Transaction(self)

    # ---- watches (kazoo's DataWatch / ChildrenWatch) ----

    def watch_data(self, path, fn):
        self.tree._watch("data", path, fn, self)

    def watch_children(self, path, fn):
        self.tree._watch("children", path, fn, self)

