"""KIP-932's share session cache (Kafka's ``ShareSessionCache``): the share-partitions each
member of a share group fetches from this broker, so that a ShareFetch need name only what
changed.

- A session is keyed by (group id, member id). ShareSessionEpoch 0 opens one (a session of the
  same key is replaced), -1 closes it, any other epoch must be the session's next epoch:
  SHARE_SESSION_NOT_FOUND when there is none, INVALID_SHARE_SESSION_EPOCH when the epoch is not
  the expected one. Epochs run 1, 2, ... and wrap from 2^31-1 to 1.
- At most ``group.share.max.share.sessions`` sessions: a new one past that is refused
  (SHARE_SESSION_LIMIT_REACHED), as in Kafka 4.1, which does not evict share sessions.
- A session belongs to the connection that opened it (Kafka 4.1's connection disconnect
  listener): when that connection closes the session goes, and its member's acquired records
  are released (the manager does that).
- ``has_group``: whether any member of a group still has a session here. When a group's last one
  goes (closed with epoch -1 or with its connection; not when epoch 0 replaces it) the manager
  drops the group's share partitions, as Kafka 4.1's ShareGroupListener.onGroupEmpty does.
"""
from __future__ import annotations

from ..protocol.fetch_metadata import next_epoch


class ShareSession:
    __slots__ = ("group_id", "member_id", "epoch", "partitions", "connection_id")

    def __init__(self, group_id, member_id, partitions, connection_id):
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = next_epoch(0)  # the epoch the member's next request carries
        # (topic id, partition) -> None: the session's share-partitions, in the order added
        self.partitions: dict[tuple[bytes, int], None] = dict.fromkeys(partitions)
        self.connection_id = connection_id

    @property
    def key(self):
        return self.group_id, self.member_id

    def update(self, added, forgotten):
        for tp in added:
            self.partitions.setdefault(tp, None)
        for tp in forgotten:
            self.partitions.pop(tp, None)

    def advance(self):
        self.epoch = next_epoch(self.epoch)


class ShareSessionCache:
    def __init__(self, max_sessions):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}
        self._by_connection: dict[object, set] = {}
        self._by_group: dict[str, int] = {}  # group id -> its sessions here

    def has_group(self, group_id) -> bool:
        return group_id in self._by_group

    def _uncount(self, group_id):
        n = self._by_group[group_id] - 1
        if n:
            self._by_group[group_id] = n
        else:
            del self._by_group[group_id]

    def __len__(self):
        return len(self.sessions)

    def get(self, group_id, member_id) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def maybe_create(self, group_id, member_id, partitions, connection_id) -> ShareSession | None:
        """A new session, or None when the cache is full. The caller removed the key's old one."""
        if len(self.sessions) >= self.max_sessions:
            return None
        session = ShareSession(group_id, member_id, partitions, connection_id)
        self.sessions[session.key] = session
        self._by_group[group_id] = self._by_group.get(group_id, 0) + 1
        if connection_id is not None:
            self._by_connection.setdefault(connection_id, set()).add(session.key)
        return session

    def remove(self, group_id, member_id) -> ShareSession | None:
        session = self.sessions.pop((group_id, member_id), None)
        if session is not None:
            self._uncount(group_id)
        if session is not None and session.connection_id is not None:
            keys = self._by_connection.get(session.connection_id)
            if keys is not None:
                keys.discard(session.key)
                if not keys:
                    del self._by_connection[session.connection_id]
        return session

    def connection_closed(self, connection_id) -> list[ShareSession]:
        """The sessions the closed connection opened, removed from the cache."""
        keys = self._by_connection.pop(connection_id, ())
        closed = [s for s in (self.sessions.pop(k, None) for k in keys) if s is not None]
        for session in closed:
            self._uncount(session.group_id)
        return closed
