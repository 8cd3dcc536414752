"""The consumer's side of the classic group protocol (Kafka's ConsumerCoordinator), and
``GroupClient``: what it shares with the consumer protocol's member
(client/consumer_membership.py) - the coordinator's connections and the group's offsets.

FindCoordinator, then JoinGroup with one protocol per configured assignor; the leader runs
the chosen assignor and sends everyone's assignment in its SyncGroup. A background thread
heartbeats every heartbeat.interval.ms, notices rebalances (REBALANCE_IN_PROGRESS) and a
member that stopped polling for max.poll.interval.ms (it leaves the group, as Kafka's does).
Joining and the rebalance callbacks run on the application's thread, inside poll().

Eager assignors (range, roundrobin) revoke everything before rejoining; cooperative-sticky
keeps what it owns, revokes only what moves, and rejoins once more after revoking.
Static membership (group.instance.id): the member id survives restarts and close() does not
leave the group, so a restarted member gets its partitions back without a rebalance.
"""
from __future__ import annotations

import logging
import threading
import time

from ..errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, FencedInstanceIdError,
                      IllegalGenerationError, KafkaError, KafkaTimeoutError, MemberIdRequiredError,
                      NotCoordinatorError, RebalanceInProgressError, UnknownMemberIdError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from . import assignors as _assignors
from .connection import ConnectionClosed

log = logging.getLogger("kafkacore.consumer")


def _msg(module, *names):
    m = __import__(f"kafkacore.protocol.messages.{module}", fromlist=["x"])
    return [getattr(m, n) for n in names]


_FindCoordinatorRequest = request_class(ApiKey.FIND_COORDINATOR)
_JoinGroupRequest, _JoinProtocol = _msg("join_group_request", "JoinGroupRequest", "JoinGroupRequestProtocol")
_SyncGroupRequest, _SyncAssignment = _msg("sync_group_request", "SyncGroupRequest", "SyncGroupRequestAssignment")
_HeartbeatRequest = request_class(ApiKey.HEARTBEAT)
_LeaveGroupRequest, _MemberIdentity = _msg("leave_group_request", "LeaveGroupRequest", "MemberIdentity")
_OffsetCommitRequest, _OCTopic, _OCPartition = _msg(
    "offset_commit_request", "OffsetCommitRequest", "OffsetCommitRequestTopic", "OffsetCommitRequestPartition")
_OffsetFetchRequest, _OFTopic = _msg("offset_fetch_request", "OffsetFetchRequest", "OffsetFetchRequestTopic")

_COORDINATOR_ERRORS = {CoordinatorNotAvailableError.code, NotCoordinatorError.code}
_REJOIN_ERRORS = {UnknownMemberIdError.code, IllegalGenerationError.code, RebalanceInProgressError.code}


class GroupClient:
    """What both group protocols share: the coordinator's connections (found with
    FindCoordinator, found again when it moves) and the group's offsets (OffsetCommit,
    OffsetFetch, commits queued for the background thread). Subclasses say who the member is
    (``_commit_identity``) and what a commit error means for the membership."""

    def __init__(self, config, cluster, consumer):
        self.cluster = cluster
        self.consumer = consumer  # the Consumer: assignment changes and callbacks go through it
        self.group_id = config["group.id"]
        self.instance_id = config["group.instance.id"]
        self.retry_backoff = config["retry.backoff.ms"] / 1000.0
        self.request_timeout = config["request.timeout.ms"] / 1000.0
        self.subscription: set[str] = set()
        self.owned: set[tuple] = set()
        # BrokerConnections (or EmbeddedConnections): "join" for the classic join round,
        # "heartbeat" for the consumer protocol's heartbeats, "main" for the rest
        self._conns: dict = {"main": None, "join": None, "heartbeat": None}
        self._slot_locks = {slot: threading.RLock() for slot in self._conns}
        self.closed = False
        self.async_commits: list = []  # (offsets, callback) queued for the heartbeat thread
        self._hb_wake = threading.Event()

    # -- coordinator connection -----------------------------------------------------------
    def _find_coordinator(self):
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                resp = self.cluster.call_any(ApiKey.FIND_COORDINATOR,
                                             _FindCoordinatorRequest(key=self.group_id, key_type=0))
                if resp.error_code == 0:
                    return self.cluster.connect_to(resp.host, resp.port, resp.node_id)
                err = error_for_code(resp.error_code, resp.error_message or "FindCoordinator")
                if not err.retriable and resp.error_code not in _COORDINATOR_ERRORS:
                    raise err
            except (ConnectionClosed, OSError) as e:
                log.debug("FindCoordinator failed: %s", e)
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"no coordinator for group {self.group_id!r} within "
                                        f"{self.request_timeout:.0f} s")
            time.sleep(self.retry_backoff)

    def call(self, api_key, body, timeout=None, slot="main"):
        """A request to the coordinator (finding it first); retried on a lost coordinator.
        The join round has its own connection ("join" slot), so commits and offset fetches on
        the application's thread never queue behind a JoinGroup that waits for other members."""
        with self._slot_locks[slot]:
            resp = None
            for attempt in range(3):
                conn = self._conns.get(slot)
                if conn is None or conn.closed:
                    if self.closed and slot == "join":
                        raise ConnectionClosed("the consumer is closed")
                    conn = self._conns[slot] = self._find_coordinator()
                try:
                    resp = conn.call(api_key, body, timeout=timeout or self.request_timeout)
                except (ConnectionClosed, KafkaTimeoutError):
                    conn.close()
                    self._conns[slot] = None
                    if attempt == 2 or self.closed:
                        raise
                    continue
                code = getattr(resp, "error_code", 0)
                if code in _COORDINATOR_ERRORS or code == CoordinatorLoadInProgressError.code:
                    conn.close()
                    self._conns[slot] = None
                    time.sleep(self.retry_backoff)
                    continue
                return resp
            return resp

    def _close_connections(self, *extra):
        for c in (*self._conns.values(), *extra):
            if c is not None:
                c.close()

    def _run_async_commits(self):
        while self.async_commits:
            offsets, callback = self.async_commits.pop(0)
            try:
                self.commit(offsets)
                err = None
            except KafkaError as e:
                err = e
            if callback is not None:
                try:
                    callback(err, offsets)
                except Exception:
                    log.exception("commit callback raised")

    def commit_async(self, offsets, callback=None):
        self.async_commits.append((offsets, callback))
        self._hb_wake.set()

    # -- offsets --------------------------------------------------------------------------
    def commit(self, offsets: dict):
        """OffsetCommit of {(topic, partition): offset}; raises the first partition error. An
        error the membership can outlive (``_retry_commit``) is retried, with the member's
        latest identity, until request.timeout.ms."""
        if not offsets:
            return
        topics: dict[str, list] = {}
        for (t, p), off in offsets.items():
            topics.setdefault(t, []).append(_OCPartition(partition_index=p, committed_offset=off,
                                                         committed_leader_epoch=-1, commit_timestamp=-1,
                                                         committed_metadata=""))
        deadline = time.monotonic() + self.request_timeout
        while True:
            epoch, member_id, instance_id = self._commit_identity()
            body = _OffsetCommitRequest(group_id=self.group_id, generation_id_or_member_epoch=epoch,
                                        member_id=member_id, group_instance_id=instance_id, retention_time_ms=-1,
                                        topics=[_OCTopic(name=t, partitions=ps) for t, ps in topics.items()])
            resp = self.call(ApiKey.OFFSET_COMMIT, body)
            failed = [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions
                      if p.error_code]
            if not failed:
                return
            name, partition, code = failed[0]
            if not (self._retry_commit(code, offsets) and time.monotonic() < deadline):
                raise error_for_code(code, f"commit {name}-{partition}")

    def _commit_identity(self) -> tuple:
        """(generation id or member epoch, member id, group instance id) a commit carries."""
        raise NotImplementedError

    def _retry_commit(self, code, offsets: dict) -> bool:
        """Whether a commit of ``offsets`` that failed with ``code`` is tried again (after what
        it takes); may raise an error of its own instead."""
        raise NotImplementedError

    def committed(self, partitions) -> dict:
        """{(topic, partition): committed offset or None}."""
        topics: dict[str, list] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        body = _OffsetFetchRequest(group_id=self.group_id,
                                   topics=[_OFTopic(name=t, partition_indexes=ps) for t, ps in topics.items()],
                                   require_stable=False)
        resp = self.call(ApiKey.OFFSET_FETCH, body)
        if getattr(resp, "error_code", 0):
            raise error_for_code(resp.error_code, f"OffsetFetch {self.group_id!r}")
        out = {tp: None for tp in partitions}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for_code(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[(t.name, p.partition_index)] = p.committed_offset
        return out


class ConsumerCoordinator(GroupClient):
    def __init__(self, config, cluster, consumer):
        super().__init__(config, cluster, consumer)
        self.session_timeout_ms = config["session.timeout.ms"]
        self.rebalance_timeout_ms = config["max.poll.interval.ms"]
        self.heartbeat_interval = config["heartbeat.interval.ms"] / 1000.0
        self.max_poll_interval = config["max.poll.interval.ms"] / 1000.0
        self.assignors = _assignors.make_assignors(config["partition.assignment.strategy"])
        self.member_id = ""
        self.generation = -1
        self.protocol = None  # the assignor the group chose
        self.need_rejoin = True
        self._pending: dict | None = None  # the join round running on a worker thread
        self._pending_done = threading.Event()
        self.hb_conn = None
        self.last_poll = time.monotonic()
        self.left_for_poll_timeout = False
        self._hb = threading.Thread(target=self._heartbeat_loop, name="kafkacore-consumer-heartbeat", daemon=True)
        self._hb.start()

    # -- membership -----------------------------------------------------------------------
    def set_subscription(self, topics: set[str]):
        if topics != self.subscription:
            self.subscription = set(topics)
            self.need_rejoin = True

    def poll(self, timeout: float = 0.0):
        """Called by Consumer.poll: (re)joins when needed, running the rebalance callbacks on
        this thread. JoinGroup waits for every member, so the round trips run on a worker
        thread and poll() waits for them at most ``timeout`` seconds, as Java's poll(timeout)
        does: members polled one after another from one thread can still form a group."""
        self.last_poll = time.monotonic()
        if self.left_for_poll_timeout:
            self.left_for_poll_timeout = False
            self.need_rejoin = True
        deadline = time.monotonic() + max(timeout, 0.0)
        while self.need_rejoin and not self.closed:
            if self._pending is None:
                self._start_join()
            if not self._pending_done.wait(max(0.0, deadline - time.monotonic())):
                return
            result, self._pending = self._pending, None
            self._finish_join(result)

    def _start_join(self):
        """Application thread: eager revocation, then the join round on a worker thread."""
        eager = self._protocol_kind() == "EAGER"
        if eager and self.owned:
            self.consumer._revoke(set(self.owned), lost=False)
            self.owned = set()
        topics = sorted(self.subscription)
        owned = sorted(self.owned)
        result: dict = {}
        self._pending = result
        self._pending_done.clear()

        def run():
            try:
                result.update(self._join_round(topics, owned))
            except BaseException as e:  # handed to the application thread
                result["error"] = e
            finally:
                self._pending_done.set()
        threading.Thread(target=run, name="kafkacore-consumer-join", daemon=True).start()

    def _join_round(self, topics, owned) -> dict:
        """Worker thread: JoinGroup (again with the broker's member id if it asks, KIP-394),
        the leader's assignment, SyncGroup. Returns what the application thread applies."""
        if topics:
            try:
                self.cluster.refresh(topics, allow_auto_create=False)
            except (ConnectionClosed, KafkaError, OSError) as e:
                log.warning("metadata refresh before join failed: %s", e)
        while True:
            protocols = [_JoinProtocol(name=a.name, metadata=_assignors.encode_subscription(_assignors.Subscription(
                topics=topics, user_data=a.subscription_user_data(topics, owned, self.generation),
                owned_partitions=owned, generation_id=self.generation))) for a in self.assignors]
            body = _JoinGroupRequest(group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                                     rebalance_timeout_ms=self.rebalance_timeout_ms, member_id=self.member_id,
                                     group_instance_id=self.instance_id, protocol_type="consumer",
                                     protocols=protocols, reason=None)
            resp = self.call(ApiKey.JOIN_GROUP, body, timeout=self.rebalance_timeout_ms / 1000.0 + 5, slot="join")
            if resp.error_code != MemberIdRequiredError.code or self.closed:
                break
            self.member_id = resp.member_id
        code = resp.error_code
        if code in (UnknownMemberIdError.code, IllegalGenerationError.code):
            return {"reset": True}
        if code == RebalanceInProgressError.code:
            time.sleep(self.retry_backoff)
            return {}
        if code == FencedInstanceIdError.code:
            raise FencedInstanceIdError(f"group.instance.id {self.instance_id!r} is used by another member")
        if code:
            err = error_for_code(code, f"JoinGroup {self.group_id!r}")
            if err.retriable:
                time.sleep(self.retry_backoff)
                return {}
            raise err
        self.member_id = resp.member_id
        assignments = []
        if resp.leader == resp.member_id and not getattr(resp, "skip_assignment", False):
            assignments = self._assign(resp.protocol_name, resp.members)
        sync = _SyncGroupRequest(group_id=self.group_id, generation_id=resp.generation_id, member_id=self.member_id,
                                 group_instance_id=self.instance_id, protocol_type="consumer",
                                 protocol_name=resp.protocol_name, assignments=assignments)
        sresp = self.call(ApiKey.SYNC_GROUP, sync, timeout=self.rebalance_timeout_ms / 1000.0 + 5, slot="join")
        if sresp.error_code:
            if sresp.error_code in (UnknownMemberIdError.code, IllegalGenerationError.code):
                return {"reset": True}
            if sresp.error_code != RebalanceInProgressError.code:
                err = error_for_code(sresp.error_code, f"SyncGroup {self.group_id!r}")
                if not err.retriable:
                    raise err
            time.sleep(self.retry_backoff)
            return {}
        return {"generation": resp.generation_id, "protocol": resp.protocol_name,
                "assignment": _assignors.decode_assignment(bytes(sresp.assignment or b""))}

    def _finish_join(self, result: dict):
        """Application thread: applies a finished join round (callbacks run here)."""
        if "error" in result:
            raise result["error"]
        if result.get("reset"):
            self._reset_member()
            return
        if "generation" not in result:
            return  # retry: the loop in poll() starts another round
        self.generation = result["generation"]
        self.protocol = result["protocol"]
        new = {(t, p) for t, p in result["assignment"].partitions}
        self.need_rejoin = False
        if self._protocol_kind() == "COOPERATIVE":
            revoked = self.owned - new
            added = new - self.owned
            if revoked:
                self.consumer._revoke(revoked, lost=False)
                self.need_rejoin = True  # the revoked partitions can now go to their new owners
            self.owned = set(new)
            self.consumer._assign_group(self.owned, added)
        else:
            self.owned = set(new)
            self.consumer._assign_group(self.owned, set(new))
        self._hb_wake.set()

    def _protocol_kind(self):
        for a in self.assignors:
            if a.name == self.protocol:
                return a.rebalance_protocol
        return self.assignors[0].rebalance_protocol if self.protocol is None and len(self.assignors) == 1 else (
            "COOPERATIVE" if all(a.rebalance_protocol == "COOPERATIVE" for a in self.assignors) else "EAGER")

    def _assign(self, protocol_name, members):
        assignor = next(a for a in self.assignors if a.name == protocol_name)
        subs = {}
        topics = set()
        for m in members:
            sub = _assignors.decode_subscription(bytes(m.metadata))
            sub.member_id = m.member_id
            sub.group_instance_id = m.group_instance_id
            subs[m.member_id] = sub
            topics.update(sub.topics)
        try:
            self.cluster.refresh(sorted(topics), allow_auto_create=False)
        except (ConnectionClosed, KafkaError, OSError) as e:
            log.warning("metadata refresh for assignment failed: %s", e)
        counts = {t: self.cluster.partition_counts[t] for t in topics if self.cluster.partition_counts.get(t)}
        result = assignor.assign(counts, subs)
        return [_SyncAssignment(member_id=mid, assignment=_assignors.encode_assignment(a))
                for mid, a in result.items()]

    def _commit_identity(self):
        if self.generation < 0:
            return -1, "", None  # not in the group (yet): the coordinator takes it from an empty group only
        return self.generation, self.member_id, self.instance_id

    def _retry_commit(self, code, offsets):
        if code in _REJOIN_ERRORS:
            self.need_rejoin = True
        return False

    def _reset_member(self):
        if self.instance_id is None:
            self.member_id = ""
        self.generation = -1
        self.need_rejoin = True
        if self.owned:
            self.consumer._revoke(set(self.owned), lost=True)
            self.owned = set()

    # -- heartbeats -----------------------------------------------------------------------
    def _heartbeat_loop(self):
        while not self.closed:
            self._hb_wake.wait(self.heartbeat_interval)
            self._hb_wake.clear()
            if self.closed:
                break
            self._run_async_commits()
            if self.generation < 0 or self.need_rejoin:
                continue
            if time.monotonic() - self.last_poll > self.max_poll_interval:
                log.warning("consumer of group %r did not poll for max.poll.interval.ms=%d: leaving the group",
                            self.group_id, self.rebalance_timeout_ms)
                self.leave("consumer poll timeout has expired")
                self.left_for_poll_timeout = True
                continue
            try:
                resp = self._heartbeat_call(_HeartbeatRequest(
                    group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                    group_instance_id=self.instance_id))
            except (ConnectionClosed, KafkaError, OSError) as e:
                log.debug("heartbeat failed: %s", e)
                continue
            if resp.error_code in _REJOIN_ERRORS:
                self.need_rejoin = True
                if resp.error_code != RebalanceInProgressError.code:
                    self.generation = -1
                    if self.instance_id is None:
                        self.member_id = ""
            elif resp.error_code in _COORDINATOR_ERRORS and self.hb_conn is not None:
                self.hb_conn.close()

    def _heartbeat_call(self, body):
        if self.hb_conn is None or self.hb_conn.closed:
            self.hb_conn = self._find_coordinator()
        return self.hb_conn.call(ApiKey.HEARTBEAT, body, timeout=self.request_timeout)

    # -- leaving --------------------------------------------------------------------------
    def leave(self, reason="the consumer is being closed"):
        """LeaveGroup (dynamic members only: a static member keeps its place until
        session.timeout.ms, so that a restart does not rebalance)."""
        if self.instance_id is None and self.member_id:  # also a member whose join is still pending
            try:
                self.call(ApiKey.LEAVE_GROUP, _LeaveGroupRequest(group_id=self.group_id, member_id=self.member_id,
                                                          members=[_MemberIdentity(member_id=self.member_id,
                                                                                   group_instance_id=None,
                                                                                   reason=reason)]))
            except (ConnectionClosed, KafkaError, OSError) as e:
                log.debug("LeaveGroup failed: %s", e)
        self.generation = -1
        if self.instance_id is None:
            self.member_id = ""

    def close(self):
        self.closed = True
        self._hb_wake.set()
        self._hb.join(5)
        self._run_async_commits()
        # closing the join connection ends a join round still waiting on the broker
        self._close_connections(self.hb_conn)
        if self._pending is not None:
            self._pending_done.wait(5)
