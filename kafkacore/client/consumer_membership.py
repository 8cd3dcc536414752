"""The consumer's side of the consumer group protocol (KIP-848, ``group.protocol=consumer``;
Java's ConsumerMembershipManager).

One request, ConsumerGroupHeartbeat v1: the member makes its own member id (KIP-1082), joins
with epoch 0 and its subscription (topic names, or SubscribedTopicRegex for a broker-side
regex), then heartbeats with its epoch at the interval the coordinator returns; the session
and the assignment are the coordinator's. A heartbeat carries only what changed since the last
one (subscription, owned partitions), everything again after an error. ``max.poll.interval.ms``
is the rebalance timeout, and a member that does not poll for that long leaves the group (-1,
a static member -2) and rejoins at its next poll, as Java's does.

Reconciliation runs on the application's thread, inside poll(): partitions the assignment no
longer has are revoked first (their positions committed when auto-commit is on, on_revoke
called), then the new ones are taken (on_assign); the next heartbeat says what the member owns
now, which is what lets the coordinator hand the revoked partitions to their new owners.
FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID: the member gives up its partitions (on_lost) and
joins again with epoch 0. close() leaves with -1, a static member (group.instance.id) with -2
so that it keeps its partitions until its session expires or it comes back.
"""
from __future__ import annotations

import base64
import logging
import threading
import time
import uuid

from ..errors import (CommitFailedError, FencedMemberEpochError, KafkaError, StaleMemberEpochError,
                      UnknownMemberIdError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from .connection import ConnectionClosed
from .group import GroupClient

log = logging.getLogger("kafkacore.consumer")

_HeartbeatRequest = request_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_TopicPartitions = __import__("kafkacore.protocol.messages.consumer_group_heartbeat_request",
                              fromlist=["x"]).TopicPartitions

# Kafka's member epochs with a meaning of their own (ConsumerGroupHeartbeatRequest)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

# the member's states (the part of Java's MemberState this client needs)
UNSUBSCRIBED = "UNSUBSCRIBED"  # not in the group: no subscription, or left
JOINING = "JOINING"            # heartbeating with epoch 0 until the coordinator answers
STABLE = "STABLE"              # in the group (reconciling whenever an assignment comes)
FENCED = "FENCED"              # fenced by the coordinator: gives up its partitions in poll(), then rejoins
STALE = "STALE"                # left for not polling within max.poll.interval.ms: rejoins in poll()
FATAL = "FATAL"                # an error no retry mends: raised by poll()

_FENCING = {FencedMemberEpochError.code, UnknownMemberIdError.code}


def new_member_id() -> str:
    """A member id as Kafka's clients make them (KIP-1082): a random UUID in Kafka's text form
    (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class ConsumerMembershipManager(GroupClient):
    def __init__(self, config, cluster, consumer):
        super().__init__(config, cluster, consumer)
        self.member_id = new_member_id()
        self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH  # not in the group
        self.state = UNSUBSCRIBED
        self.regex: str | None = None  # SubscribedTopicRegex (the coordinator resolves it)
        self.rebalance_timeout_ms = config["max.poll.interval.ms"]
        self.max_poll_interval = config["max.poll.interval.ms"] / 1000.0
        self.remote_assignor = config["group.remote.assignor"]
        self.rack = config["client.rack"] or None
        self.heartbeat_interval = 0.0  # the coordinator's, from its first answer on
        self.last_poll = time.monotonic()
        self._lock = threading.Lock()
        self._target: set | None = None  # {(topic id, partition)} from the coordinator, not reconciled yet
        self._sent: dict | None = None  # what the coordinator has been told; None: tell it everything
        self._fatal: KafkaError | None = None
        self._answered = threading.Condition(self._lock)  # notified at every heartbeat answer
        self._last_refresh = 0.0
        self._commit_epoch = LEAVE_GROUP_MEMBER_EPOCH  # the epoch the last commit carried
        self._reconciled = False  # since joining: the first assignment is announced even if empty
        self._hb = threading.Thread(target=self._heartbeat_loop, name="kafkacore-consumer-heartbeat", daemon=True)
        self._hb.start()

    @property
    def generation(self) -> int:
        """The member epoch: what OffsetCommit v9 and TxnOffsetCommit carry as the generation."""
        return self.member_epoch

    # -- subscription ---------------------------------------------------------------------
    def set_subscription(self, topics: set[str], regex: str | None = None):
        with self._lock:
            changed = set(topics) != self.subscription or regex != self.regex
            self.subscription, self.regex = set(topics), regex
            if self.state == UNSUBSCRIBED:
                self._join_locked()
            elif not changed:
                return
        self._hb_wake.set()

    def _join_locked(self):
        self.state = JOINING
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._sent = None
        self._target = None
        self._reconciled = False

    # -- the application's thread -------------------------------------------------------
    def poll(self, timeout: float = 0.0):
        """Called by Consumer.poll: raises a fatal membership error, gives up the partitions of
        a fenced or stale member (and rejoins), and reconciles a new assignment. Never waits:
        the heartbeat thread wakes the consumer's poll when an assignment arrives."""
        self.last_poll = time.monotonic()
        if self._fatal is not None:
            raise self._fatal
        if self.state in (FENCED, STALE):
            if self.owned:
                self.consumer._revoke(set(self.owned), lost=True)
            with self._lock:
                self.owned = set()
                if self.state in (FENCED, STALE):
                    self._join_locked()
            self._hb_wake.set()
            return
        self._reconcile()

    def _reconcile(self):
        with self._lock:
            target = self._target
            if target is None or self.state != STABLE:
                return
        names = self.cluster.topic_names
        if any(tid not in names for tid, _p in target) and time.monotonic() - self._last_refresh > self.retry_backoff:
            self._last_refresh = time.monotonic()
            try:  # topics named by id only: their names come with metadata
                self.cluster.refresh(None if self.regex is not None else sorted(self.subscription))
            except (ConnectionClosed, KafkaError, OSError) as e:
                log.warning("metadata refresh for the assignment failed: %s", e)
        assigned = {(names[tid], p) for tid, p in target if tid in names}
        unresolved = len(assigned) < len(target)
        revoked = self.owned - assigned
        added = assigned - self.owned
        if revoked:
            self.consumer._revoke(revoked, lost=False)  # commits first when auto-commit is on
        with self._lock:
            self.owned = (self.owned - revoked) | added
            if self._target is target and not unresolved:
                self._target = None
        if added or revoked or not self._reconciled:
            self._reconciled = True
            self.consumer._assign_group(set(self.owned), added)
        self._hb_wake.set()  # the coordinator learns what this member owns now

    # -- heartbeats -----------------------------------------------------------------------
    def _heartbeat_loop(self):
        wait = 0.0
        while not self.closed:
            self._hb_wake.wait(wait)
            self._hb_wake.clear()
            if self.closed:
                break
            self._run_async_commits()
            wait = self.retry_backoff
            with self._lock:
                state = self.state
            if state not in (JOINING, STABLE):
                continue
            if state == STABLE and time.monotonic() - self.last_poll > self.max_poll_interval:
                log.warning("consumer of group %r did not poll for max.poll.interval.ms=%d: leaving the group",
                            self.group_id, self.rebalance_timeout_ms)
                self._leave(STALE, "consumer poll timeout has expired")
                continue
            if self._heartbeat():
                wait = self.heartbeat_interval or self.retry_backoff

    def _heartbeat(self) -> bool:
        """One heartbeat; False when it failed (the next one, after a backoff, says everything)."""
        with self._slot_locks["heartbeat"]:
            with self._lock:
                if self.state not in (JOINING, STABLE):
                    return True
                epoch = self.member_epoch
                body, sent = self._request_locked()
            try:
                resp = self.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, body, slot="heartbeat")
            except (ConnectionClosed, KafkaError, OSError) as e:
                with self._lock:
                    self._sent = None
                    if isinstance(e, KafkaError) and not e.retriable:  # e.g. a broker without KIP-848
                        log.error("member of group %r: %s", self.group_id, e)
                        self.state, self._fatal = FATAL, e
                        self._wake_consumer()
                        return True
                log.debug("heartbeat of group %r failed: %s", self.group_id, e)
                return False
            with self._lock:
                if self.member_epoch != epoch or self.state not in (JOINING, STABLE):
                    return True  # it left or was fenced meanwhile: this answer is stale
                code = resp.error_code
                if code == 0:
                    self._answer_locked(resp, sent)
                    return True
                self._sent = None
                err = error_for_code(code, resp.error_message or f"ConsumerGroupHeartbeat {self.group_id!r}")
                if code in _FENCING:
                    log.info("member %s of group %r is fenced (%s): it gives up its partitions and rejoins",
                             self.member_id, self.group_id, err.name)
                    self.state = FENCED
                    self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH
                    self._target = None
                    self._wake_consumer()
                    return True
                if err.retriable:
                    log.debug("heartbeat of group %r: %s", self.group_id, err)
                    return False
                log.error("member of group %r: %s", self.group_id, err)
                self.state, self._fatal = FATAL, err
                self._wake_consumer()
                return True

    def _request_locked(self):
        full = self._sent is None
        sent = dict(self._sent or {})
        joining = self.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        names = sorted(self.subscription)
        regex = self.regex or ""  # "": no regex (null would mean "unchanged")
        ids = self.cluster.topic_ids
        owned: dict = {}
        for t, p in self.owned:
            if t in ids:  # a topic deleted meanwhile is owned no more
                owned.setdefault(ids[t], []).append(p)
        owned_list = [] if joining else sorted((tid, sorted(ps)) for tid, ps in owned.items())
        body = _HeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            instance_id=self.instance_id, rack_id=self.rack if full else None,
            rebalance_timeout_ms=self.rebalance_timeout_ms if full else -1,
            subscribed_topic_names=names if full or names != sent.get("names") else None,
            subscribed_topic_regex=regex if full or regex != sent.get("regex") else None,
            server_assignor=self.remote_assignor if full else None,
            topic_partitions=[_TopicPartitions(topic_id=tid, partitions=ps) for tid, ps in owned_list]
            if full or owned_list != sent.get("owned") else None)
        sent.update(names=names, regex=regex, owned=owned_list)
        return body, sent

    def _answer_locked(self, resp, sent):
        self._sent = sent
        if resp.member_id:
            self.member_id = resp.member_id
        if resp.member_epoch != self.member_epoch:
            log.debug("member %s of group %r: epoch %d", self.member_id, self.group_id, resp.member_epoch)
        self.member_epoch = resp.member_epoch
        self.heartbeat_interval = resp.heartbeat_interval_ms / 1000.0
        self.state = STABLE
        if resp.assignment is not None:
            self._target = {(tp.topic_id, p) for tp in resp.assignment.topic_partitions for p in tp.partitions}
            self._wake_consumer()
        self._answered.notify_all()

    def _wake_consumer(self):
        """A poll() waiting for records returns to reconcile (or to raise) at once."""
        self.consumer._wakeup()

    # -- offsets --------------------------------------------------------------------------
    def _commit_identity(self):
        with self._lock:
            epoch = self.member_epoch
            self._commit_epoch = epoch
        if epoch <= 0:
            return -1, "", None  # not in the group: the coordinator takes it from a group without members only
        return epoch, self.member_id, self.instance_id

    def _retry_commit(self, code, offsets):
        """STALE_MEMBER_EPOCH: the commit went with an epoch the coordinator has moved past (a
        heartbeat moved it whose answer this member had not read yet). When the member still
        owns every partition of the commit, it is sent again with the member's latest epoch,
        after the next heartbeat answer if this member has not heard of a newer epoch yet, as
        Java's consumer retries its commits before a revocation. Otherwise CommitFailedError, as
        Java's commitSync raises CommitFailedException: a partition this member gave up may
        be another's by now, and its offsets are not written under a newer epoch."""
        if code != StaleMemberEpochError.code or threading.current_thread() is self._hb:
            return False  # the heartbeat thread (asynchronous commits) cannot wait for itself
        with self._lock:
            self._check_owned_locked(offsets)
            if self.member_epoch == self._commit_epoch:
                self._hb_wake.set()
                self._answered.wait(self.request_timeout)
                self._check_owned_locked(offsets)  # fenced meanwhile: it owns nothing
        return True

    def _check_owned_locked(self, offsets):
        given_up = sorted(set(offsets) - (self.owned if self.member_epoch > 0 else set()))
        if given_up:
            raise CommitFailedError(
                f"OffsetCommit of group {self.group_id!r} failed with a stale member epoch, and the member "
                f"no longer owns {', '.join(f'{t}-{p}' for t, p in given_up)}") from StaleMemberEpochError()

    # -- leaving --------------------------------------------------------------------------
    def leave(self, reason="the consumer is being closed"):
        self._leave(UNSUBSCRIBED, reason)

    def _leave(self, then, reason):
        """ConsumerGroupHeartbeat with -1 (a static member: -2, it keeps its partitions until
        its session expires); the member is in state ``then`` after it."""
        with self._slot_locks["heartbeat"]:
            with self._lock:
                in_group = self.state in (JOINING, STABLE)
                epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.instance_id is not None else LEAVE_GROUP_MEMBER_EPOCH
                self.state = then
                self.member_epoch = LEAVE_GROUP_MEMBER_EPOCH
                self._sent = self._target = None
            if not in_group:
                return
            log.info("member %s leaves group %r (%s)", self.member_id, self.group_id, reason)
            try:
                resp = self.call(ApiKey.CONSUMER_GROUP_HEARTBEAT, _HeartbeatRequest(
                    group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                    instance_id=self.instance_id), slot="heartbeat")
                if resp.error_code:
                    log.debug("leaving group %r: %s", self.group_id, error_for_code(resp.error_code))
            except (ConnectionClosed, KafkaError, OSError) as e:
                log.debug("leaving group %r failed: %s", self.group_id, e)
        if then == STALE:
            self._wake_consumer()

    def close(self):
        self.closed = True
        self._hb_wake.set()
        self._hb.join(5)
        self._run_async_commits()
        self._close_connections()
