"""A share consumer's group membership (KIP-932; Kafka's ShareMembershipManager and
ShareHeartbeatRequestManager).

A background thread finds the group coordinator (FindCoordinator key type 0: a share group's
coordinator is its group coordinator) and sends ShareGroupHeartbeat v1: a join with epoch 0,
the member id this client made (KIP-1082) and the subscribed topic names; then the member's
epoch every ``HeartbeatIntervalMs`` the coordinator returned; a leave with epoch -1. A share
group has no revocation: an assignment in an answer replaces the member's partitions at once.
UNKNOWN_MEMBER_ID and FENCED_MEMBER_EPOCH make the member rejoin with epoch 0 (same member id,
no partitions meanwhile); a lost coordinator is found again.
"""
from __future__ import annotations

import logging
import threading

from ..errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, FencedMemberEpochError,
                      KafkaError, KafkaTimeoutError, NotCoordinatorError, UnknownMemberIdError, error_for_code)
from ..protocol.api_table import ApiKey
from ..protocol.frames import request_class
from ..protocol.kafka_uuid import random_uuid_text
from .connection import ConnectionClosed

log = logging.getLogger("kafkacore.share_consumer")

_FindCoordinatorRequest = request_class(ApiKey.FIND_COORDINATOR)
_ShareGroupHeartbeatRequest = request_class(ApiKey.SHARE_GROUP_HEARTBEAT)

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
_COORDINATOR_ERRORS = {CoordinatorNotAvailableError.code, NotCoordinatorError.code,
                       CoordinatorLoadInProgressError.code}
_REJOIN_ERRORS = {UnknownMemberIdError.code, FencedMemberEpochError.code}


class ShareMembership:
    def __init__(self, config, cluster):
        self.cluster = cluster
        self.group_id = config["group.id"]
        self.rack = config["client.rack"] or None
        self.retry_backoff = config["retry.backoff.ms"] / 1000.0
        self.request_timeout = config["request.timeout.ms"] / 1000.0
        self.member_id = random_uuid_text()
        self.member_epoch = JOIN_EPOCH
        self.heartbeat_interval = self.retry_backoff
        self.subscription: list[str] = []
        self._sent_subscription = None  # what the coordinator last heard (None: say it again)
        self.assignment: set[tuple[str, int]] = set()
        self._pending_ids: dict[bytes, list[int]] | None = None  # assigned topic ids not yet named
        self.fatal: KafkaError | None = None  # an error the application must see (e.g. authorization)
        self._lock = threading.Lock()
        self.changed = threading.Condition(self._lock)
        self._conn = None
        self._wake = threading.Event()
        self._closed = False
        self._thread = None

    # -- the application's side -----------------------------------------------------------
    def subscribe(self, topics: list[str]):
        with self._lock:
            self.subscription = sorted(set(topics))
            self._sent_subscription = None
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="kafkacore-share-heartbeat", daemon=True)
            self._thread.start()
        self._wake.set()

    def leave(self):
        """Leaves the group (epoch -1) and stops heartbeating; the member may subscribe again
        later as a new join."""
        with self._lock:
            was_member = self.member_epoch > 0
            self.subscription = []
            self._set_assignment(set())
        thread, self._thread = self._thread, None
        if thread is not None:
            self._closed = True
            self._wake.set()
            thread.join(self.request_timeout)
            self._closed = False
        if was_member:
            try:
                self._heartbeat(LEAVE_EPOCH, None)
            except (KafkaError, ConnectionClosed, OSError) as e:
                log.warning("share group %s: leaving failed: %s", self.group_id, e)
        self.member_epoch = JOIN_EPOCH

    def close(self):
        self.leave()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- the heartbeat thread -------------------------------------------------------------
    def _run(self):
        while not self._closed:
            wait = self.heartbeat_interval
            try:
                self._beat()
            except (ConnectionClosed, OSError, KafkaTimeoutError) as e:
                log.debug("share group %s: heartbeat failed: %s", self.group_id, e)
                self._drop_connection()
                wait = self.retry_backoff
            except KafkaError as e:
                if e.code in _COORDINATOR_ERRORS:
                    self._drop_connection()
                elif e.code in _REJOIN_ERRORS:
                    log.info("share group %s: member %s rejoins (%s)", self.group_id, self.member_id, e.name)
                    with self._lock:
                        self.member_epoch = JOIN_EPOCH
                        self._sent_subscription = None
                        self._set_assignment(set())
                elif not e.retriable:
                    with self._lock:
                        self.fatal = e
                        self.changed.notify_all()
                wait = self.retry_backoff
            except BaseException:
                log.exception("share group %s: the heartbeat thread stopped", self.group_id)
                raise
            self._wake.wait(wait)
            self._wake.clear()

    def _beat(self):
        with self._lock:
            epoch = self.member_epoch
            topics = self.subscription if self._sent_subscription != self.subscription or epoch == JOIN_EPOCH else None
        resp = self._heartbeat(epoch, topics)
        with self._lock:
            if self._closed:
                return
            self.member_epoch = resp.member_epoch
            self.heartbeat_interval = max(resp.heartbeat_interval_ms, 1) / 1000.0
            if topics is not None:
                self._sent_subscription = topics
            if resp.assignment is not None:
                self._pending_ids = {tp.topic_id: list(tp.partitions) for tp in resp.assignment.topic_partitions}
        if self._pending_ids is not None:
            self._name_assignment()

    def _name_assignment(self):
        """Turns the assignment's topic ids into names (a metadata refresh for ids not known)."""
        ids = self._pending_ids
        if any(tid not in self.cluster.topic_names for tid in ids):
            self.cluster.refresh(self.subscription or None)
        names = self.cluster.topic_names
        if any(tid not in names for tid in ids):
            return  # a topic not in the metadata yet: named at the next heartbeat
        with self._lock:
            if self._pending_ids is ids:
                self._pending_ids = None
                self._set_assignment({(names[tid], p) for tid, parts in ids.items() for p in parts})

    def _set_assignment(self, tps: set):
        if tps != self.assignment:
            log.info("share group %s: member %s assigned %s", self.group_id, self.member_id, sorted(tps))
            self.assignment = tps
        self.changed.notify_all()

    def _heartbeat(self, epoch, topics):
        body = _ShareGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id, member_epoch=epoch,
                                           rack_id=self.rack, subscribed_topic_names=topics)
        if self._conn is None or self._conn.closed:
            self._conn = self._find_coordinator()
        resp = self._conn.call(ApiKey.SHARE_GROUP_HEARTBEAT, body, timeout=self.request_timeout)
        if resp.error_code:
            raise error_for_code(resp.error_code, resp.error_message or f"ShareGroupHeartbeat for {self.group_id!r}")
        return resp

    def _find_coordinator(self):
        resp = self.cluster.call_any(ApiKey.FIND_COORDINATOR, _FindCoordinatorRequest(key=self.group_id, key_type=0))
        if resp.error_code:
            raise error_for_code(resp.error_code, resp.error_message or f"FindCoordinator for {self.group_id!r}")
        return self.cluster.connect_to(resp.host, resp.port, resp.node_id)

    def _drop_connection(self):
        if self._conn is not None:
            self._conn.close()
            self._conn = None
