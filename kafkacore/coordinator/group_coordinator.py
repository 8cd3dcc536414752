"""The classic group coordinator: consumer group membership and rebalances (Kafka's
GroupCoordinator). What is kept in __consumer_offsets (group metadata, committed offsets) and
loaded back from it is its GroupMetadataManager's (``group_metadata_manager``): requests about
offsets are checked here and stored there.

This node coordinates the groups whose __consumer_offsets partition it leads. Everything runs
on the broker's event loop (handlers call in from there; timers are ``loop.call_later``), so
there are no locks. The rules follow Kafka's GroupCoordinator (the pre-KIP-848 "classic"
protocol):

- States Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and Dead when a group is
  deleted or expires). A rebalance ends when every member has rejoined (and no
  MEMBER_ID_REQUIRED member is still expected) or when the rebalance timeout (the largest of
  the members') passes; dynamic members that did not rejoin are then removed, static ones kept.
  The first rebalance of an empty group waits ``group.initial.rebalance.delay.ms`` and, while
  new members keep arriving (generation 0), again, up to the rebalance timeout.
- Completing a rebalance bumps the generation, picks the protocol by the members' votes among
  those all of them support, answers every JoinGroup (the leader gets the members' metadata)
  and waits for SyncGroup: the leader's assignment is written to __consumer_offsets, then
  handed to every member. Members that do not send SyncGroup within the rebalance timeout
  cause a new rebalance.
- Sessions: every member must heartbeat (or join/sync/commit) within its session timeout or
  it is removed and the group rebalances. Members waiting in JoinGroup/SyncGroup are alive.
  New members waiting in their first JoinGroup expire after 5 minutes (Kafka's
  NewMemberJoinTimeoutMs).
- Static members (group.instance.id) keep their place across restarts: a rejoin with an unknown
  member id replaces the member id, without a rebalance while Stable when the selected protocol
  would not change; the old member id is then FENCED_INSTANCE_ID.
- Offsets: commits are checked here against the generation and member (free consumers commit
  with generation -1 and no member id to groups without members); the manager writes them to
  the log before the answer and expires them after ``offsets.retention.minutes`` (from the
  time the group became Empty, or from the commit for simple groups and for topics a stable
  consumer group no longer subscribes to), checked every
  ``offsets.retention.check.interval.ms``.
- The manager reads back each partition of __consumer_offsets this broker comes to lead (last
  record per key wins, tombstones delete): groups come back with their generation, protocol,
  leader and members (Stable; the members expire by session timeout unless they carry on
  heartbeating, as in Kafka), and every committed offset.

The classic requests to a consumer group with members (its classic members during an online
migration) are the consumer group's to serve (``consumer_group_classic``); this coordinator
hands them over, and releases or starts classic groups when a group changes type.
"""
from __future__ import annotations

import asyncio
import logging
import uuid

from ..clock import wall_ms
from ..errors import (CoordinatorNotAvailableError, NotCoordinatorError, FencedInstanceIdError, GroupIdNotFoundError,
                      GroupMaxSizeReachedError, GroupSubscribedToTopicError, IllegalGenerationError,
                      InconsistentGroupProtocolError, InvalidGroupIdError, KafkaError, InvalidSessionTimeoutError,
                      MemberIdRequiredError, NonEmptyGroupError, OffsetMetadataTooLargeError,
                      RebalanceInProgressError, UnknownMemberIdError, UnknownTopicOrPartitionError)
from . import group as g
from .consumer_group import ConsumerGroup
from .consumer_group_coordinator import ConsumerGroupCoordinator
from .consumer_group_records import group_tombstones
from .group import Group, Member
from .group_metadata_manager import GroupMetadataManager
from .offset_store import TOPIC, OffsetStore, StoreError
from .share_group import ShareGroup
from .share_group_coordinator import ShareGroupCoordinator

log = logging.getLogger("kafkacore.coordinator")

# the groups whose membership is not the classic protocol's (KIP-848, KIP-932)
MODERN_GROUPS = (ConsumerGroup, ShareGroup)

NONE = 0
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class JoinResult:
    __slots__ = ("error", "member_id", "generation", "protocol_type", "protocol_name", "leader",
                 "skip_assignment", "members")

    def __init__(self, error, member_id="", generation=-1, protocol_type=None, protocol_name=None, leader="",
                 skip_assignment=False, members=()):
        self.error = error
        self.member_id = member_id
        self.generation = generation
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.leader = leader
        self.skip_assignment = skip_assignment
        self.members = list(members)  # [(member id, instance id, metadata)]

    def __repr__(self):
        return (f"JoinResult(error={self.error}, member_id={self.member_id!r}, generation={self.generation}, "
                f"protocol={self.protocol_name!r}, leader={self.leader!r}, members={len(self.members)})")


class SyncResult:
    __slots__ = ("error", "protocol_type", "protocol_name", "assignment")

    def __init__(self, error, protocol_type=None, protocol_name=None, assignment=b""):
        self.error = error
        self.protocol_type = protocol_type
        self.protocol_name = protocol_name
        self.assignment = assignment

    def __repr__(self):
        return f"SyncResult(error={self.error}, protocol={self.protocol_name!r}, assignment={len(self.assignment)}B)"


class GroupSummary:
    """What DescribeGroups reports of a group."""

    __slots__ = ("group_id", "state", "protocol_type", "protocol", "members")

    def __init__(self, group_id, state, protocol_type="", protocol="", members=()):
        self.group_id = group_id
        self.state = state
        self.protocol_type = protocol_type
        self.protocol = protocol
        self.members = list(members)  # [(member id, instance id, client id, client host, metadata, assignment)]


class GroupCoordinator:
    def __init__(self, broker):
        self.broker = broker
        cfg = broker.config
        self.min_session_timeout_ms = cfg["group.min.session.timeout.ms"]
        self.max_session_timeout_ms = cfg["group.max.session.timeout.ms"]
        self.initial_rebalance_delay_ms = cfg["group.initial.rebalance.delay.ms"]
        self.max_group_size = cfg["group.max.size"]
        self.group_manager = GroupMetadataManager(
            OffsetStore(broker), cfg["offsets.retention.minutes"] * 60 * 1000,
            cfg["offsets.retention.check.interval.ms"], cfg["offset.metadata.max.bytes"],
            on_members_loaded=self._on_members_loaded, on_group_unloaded=self._on_group_unloaded,
            on_group_removed=self._cancel_group_timers)
        # KIP-848 groups share the groups, the store and the loading with the classic ones
        self.consumer = ConsumerGroupCoordinator(broker, self.group_manager)
        self.share = ShareGroupCoordinator(broker, self.group_manager)
        self.consumer.release_classic_group = self._release_classic_group
        self.consumer.start_classic_group = self._start_classic_group
        self.loop = None
        self._started = False
        self._closed = False

    @property
    def groups(self) -> dict[str, Group]:
        """The groups this broker coordinates: the manager's, changed here in place."""
        return self.group_manager.groups

    @property
    def store(self):
        """__consumer_offsets (its topic name and a group's partition, for the handlers)."""
        return self.group_manager.store

    # -- life cycle ---------------------------------------------------------------------------
    def start(self, loop):
        """The manager loads the groups of the __consumer_offsets partitions this broker leads,
        and follows the leaderships from here on (on the event loop thread)."""
        if self._started:
            return
        self.loop = loop
        self._started = True
        self.group_manager.start(loop, self.broker.replica_manager)

    def _ensure_started(self):
        if not self._started:
            self.start(asyncio.get_running_loop())

    def shutdown(self):
        """Everything is already in the log; only the timers are stopped."""
        self._closed = True
        self.group_manager.shutdown()
        self.consumer.shutdown()
        self.share.shutdown()
        for group in self.groups.values():
            self._cancel_group_timers(group)
        log.info("group coordinator stopped (%d groups)", len(self.groups))

    def _cancel_group_timers(self, group):
        if isinstance(group, ConsumerGroup):
            self.consumer.cancel_timers(group)
            return
        if isinstance(group, ShareGroup):
            self.share.cancel_timers(group)
            return
        for handle in (group.join_timer, group.sync_timer, *group.pending_members.values(),
                       *(m.timer for m in group.members.values())):
            if handle is not None:
                handle.cancel()
        group.join_timer = group.sync_timer = None
        for m in group.members.values():
            m.timer = None

    def _later(self, delay_ms, fn, *args):
        return self.loop.call_later(max(delay_ms, 0) / 1000, fn, *args)

    def _now(self):
        return self.loop.time()

    # -- the manager's hooks ------------------------------------------------------------------------
    def _on_members_loaded(self, group):
        """Members read back from the log: their sessions start now."""
        if isinstance(group, ConsumerGroup):
            self.consumer.on_loaded(group)
            return
        if isinstance(group, ShareGroup):
            self.share.on_loaded(group)
            return
        for member in group.members.values():
            self._schedule_heartbeat(group, member)

    def _on_group_unloaded(self, group):
        """Another broker coordinates the group now: this copy is Dead (Kafka's onGroupUnloaded),
        so a callback still holding it (a commit's replication, a delayed join) finds it gone,
        and members waiting here are told to find the new coordinator."""
        group.transition(g.DEAD, wall_ms())
        self._cancel_group_timers(group)
        if isinstance(group, MODERN_GROUPS):
            return
        for member in group.members.values():
            self._complete_join(member, JoinResult(NotCoordinatorError.code, member.member_id))
            self._complete_sync(member, SyncResult(NotCoordinatorError.code))

    # -- KIP-848 migration (consumer_group_classic) ---------------------------------------------------
    def _release_classic_group(self, group):
        """The classic group gave way to a consumer group: its waiters rejoin, its timers stop."""
        for member in group.members.values():
            self._complete_join(member, JoinResult(RebalanceInProgressError.code, member.member_id))
            self._complete_sync(member, SyncResult(RebalanceInProgressError.code))
        self._cancel_group_timers(group)
        group.transition(g.DEAD, wall_ms())

    def _start_classic_group(self, group, rebalance_reason=None):
        """A classic group took over from a consumer group (a downgrade, or an upgrade whose
        write failed): its sessions start, and a rebalance when a reason is given."""
        for member in group.members.values():
            self._schedule_heartbeat(group, member)
        if rebalance_reason is not None:
            self._prepare_rebalance(group, rebalance_reason)

    def _join_consumer_group(self, group, member_id, instance_id, client_id, client_host, session_timeout_ms,
                             rebalance_timeout_ms, protocol_type, protocols, require_known_member_id, fut):
        def answer(r):
            error, mid, generation, protocol_name = r
            if not fut.done():  # no leader: the coordinator assigns
                fut.set_result(JoinResult(error, mid, generation, g.CONSUMER_PROTOCOL_TYPE if error == NONE else None,
                                          protocol_name, ""))
        result = self.consumer.classic_join(group, member_id, instance_id, client_id, client_host,
                                            session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols,
                                            require_known_member_id)
        if isinstance(result, tuple):
            answer(result)
        else:
            result.add_done_callback(lambda f: answer(f.result()))
        return fut

    # -- timers: sessions -------------------------------------------------------------------------
    def _schedule_heartbeat(self, group, member, timeout_ms=None):
        """Kafka's completeAndScheduleNextHeartbeatExpiration: the member's session starts over."""
        timeout = member.session_timeout_ms if timeout_ms is None else timeout_ms
        member.deadline = self._now() + timeout / 1000
        if member.timer is not None and member.timer.when() > member.deadline:
            member.timer.cancel()
            member.timer = None
        if member.timer is None:
            member.timer = self.loop.call_at(member.deadline, self._on_heartbeat_timer, group, member)

    def _on_heartbeat_timer(self, group, member):
        member.timer = None
        if self._closed or group.members.get(member.member_id) is not member:
            return
        if self._now() < member.deadline:
            member.timer = self.loop.call_at(member.deadline, self._on_heartbeat_timer, group, member)
            return
        if not member.is_new and (member.awaiting_join or member.awaiting_sync):
            return  # waiting for the rebalance counts as alive; the session restarts when it ends
        log.info("member %s of group %s has failed (session timeout %d ms), removing it", member.member_id,
                 group.group_id, member.session_timeout_ms)
        self._remove_member_and_update(group, member, "session timeout")

    def _add_pending_member(self, group, member_id, session_timeout_ms):
        group.pending_members[member_id] = self._later(session_timeout_ms, self._expire_pending_member, group,
                                                       member_id)

    def _expire_pending_member(self, group, member_id):
        if group.pending_members.pop(member_id, None) is not None:
            log.info("pending member %s of group %s did not rejoin in time", member_id, group.group_id)
            self._try_complete_join(group)

    def _remove_pending_member(self, group, member_id):
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()

    # -- members and rebalances ---------------------------------------------------------------------
    @staticmethod
    def _complete_join(member, result):
        fut, member.join_future = member.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    @staticmethod
    def _complete_sync(member, result):
        fut, member.sync_future = member.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def _remove_member(self, group, member):
        group.remove(member.member_id)
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None

    def _remove_member_and_update(self, group, member, reason):
        self._complete_join(member, JoinResult(UnknownMemberIdError.code))
        self._complete_sync(member, SyncResult(UnknownMemberIdError.code))
        self._remove_member(group, member)
        if group.state in (g.STABLE, g.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.state == g.PREPARING_REBALANCE:
            self._try_complete_join(group)

    def _maybe_prepare_rebalance(self, group, reason):
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group, reason):
        if group.state == g.COMPLETING_REBALANCE:
            self._reset_and_propagate_assignment_error(group, RebalanceInProgressError.code)
        self._cancel_sync_timer(group)
        group.pending_sync.clear()
        if group.join_timer is not None:
            group.join_timer.cancel()
        if group.state == g.EMPTY:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.initial_delay = True
            group.join_timer = self._later(delay, self._on_join_timer, group, True, remaining)
        else:
            group.initial_delay = False
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._on_join_timer, group, False, 0)
        old_state = group.state
        group.transition(g.PREPARING_REBALANCE, wall_ms())
        log.info("preparing to rebalance group %s in state %s with old generation %d (reason: %s)",
                 group.group_id, old_state, group.generation, reason)
        self._try_complete_join(group)

    def _on_join_timer(self, group, initial, remaining_ms):
        group.join_timer = None
        if self._closed or group.state != g.PREPARING_REBALANCE:
            return
        if initial and group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = self._later(delay, self._on_join_timer, group, True, max(remaining_ms - delay, 0))
            return
        group.initial_delay = False
        self._on_complete_join(group)

    def _try_complete_join(self, group):
        if group.state == g.PREPARING_REBALANCE and not group.initial_delay and group.all_joined():
            if group.join_timer is not None:
                group.join_timer.cancel()
                group.join_timer = None
            self._on_complete_join(group)

    def _on_complete_join(self, group):
        for member in group.not_yet_rejoined():
            if member.instance_id is None:
                log.info("member %s of group %s did not rejoin in time, removing it", member.member_id,
                         group.group_id)
                self._remove_member(group, member)
        if group.state == g.DEAD:
            return
        if group.members and not group.elect_joined_leader():
            # nobody rejoined (only static members remain): wait for them or their session timeouts
            log.warning("group %s could not complete its rebalance: no member rejoined", group.group_id)
            group.join_timer = self._later(group.rebalance_timeout_ms(), self._on_join_timer, group, False, 0)
            return
        group.generation += 1
        now = wall_ms()
        if group.members:
            group.protocol_name = group.select_protocol()
            group.subscribed_topics = group.compute_subscribed_topics()
            group.transition(g.COMPLETING_REBALANCE, now)
        else:
            group.protocol_name = None
            group.subscribed_topics = None
            group.transition(g.EMPTY, now)
        group.new_member_added = False
        group.pending_sync.clear()
        if group.state == g.EMPTY:
            log.info("group %s with generation %d is now empty", group.group_id, group.generation)
            error = self.group_manager.store_group(group, {})
            if error != NONE:
                log.warning("failed to write the empty metadata of group %s: error %d", group.group_id, error)
            return
        log.info("stabilized group %s generation %d (protocol %s) with %d members", group.group_id,
                 group.generation, group.protocol_name, len(group.members))
        all_metadata = group.current_member_metadata()
        for member in group.members.values():
            leader = group.is_leader(member.member_id)
            rejoined = member.join_future is not None
            self._complete_join(member, JoinResult(
                NONE, member.member_id, group.generation, group.protocol_type, group.protocol_name,
                group.leader_id, False, all_metadata if leader else ()))
            if rejoined:
                # (a static member that did not rejoin keeps its session deadline: it must not be
                # kept alive by rebalances it takes no part in)
                self._schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = self._later(group.rebalance_timeout_ms(), self._on_sync_timer, group, group.generation)

    def _cancel_sync_timer(self, group):
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_sync_timer(self, group, generation):
        group.sync_timer = None
        if self._closed or generation != group.generation or not group.pending_sync:
            return
        if group.state in (g.COMPLETING_REBALANCE, g.STABLE):
            log.info("group %s: members %s did not send SyncGroup in time", group.group_id, sorted(group.pending_sync))
            self._prepare_rebalance(group, "pending SyncGroup expired")

    def _reset_and_propagate_assignment_error(self, group, error):
        for member in group.members.values():
            member.assignment = b""
            self._complete_sync(member, SyncResult(error))

    def _set_and_propagate_assignment(self, group, assignments):
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        for member in group.members.values():
            if member.sync_future is not None:
                self._complete_sync(member, SyncResult(NONE, group.protocol_type, group.protocol_name,
                                                       member.assignment))
                self._schedule_heartbeat(group, member)

    def _validate_member(self, group, member_id, instance_id):
        """Kafka's validateCurrentMember: error code or NONE."""
        if instance_id is not None:
            current = group.static_members.get(instance_id)
            if current is None:
                return UnknownMemberIdError.code
            if current != member_id:
                return FencedInstanceIdError.code
            return NONE
        if member_id not in group.members:
            return UnknownMemberIdError.code
        return NONE

    # -- JoinGroup -----------------------------------------------------------------------------------
    def join_group(self, group_id, member_id, instance_id, client_id, client_host, session_timeout_ms,
                   rebalance_timeout_ms, protocol_type, protocols, require_known_member_id=True,
                   supports_skip_assignment=False, reason=None):
        """Returns a future of a JoinResult (done at once for errors and immediate answers)."""
        self._ensure_started()
        fut = self.loop.create_future()
        protocols = [(name, bytes(md)) for name, md in protocols]
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            fut.set_result(JoinResult(not_coordinator, member_id))
            return fut
        if not group_id:
            fut.set_result(JoinResult(InvalidGroupIdError.code, member_id))
            return fut
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            fut.set_result(JoinResult(InvalidSessionTimeoutError.code, member_id))
            return fut
        unknown = member_id == ""
        group = self._classic_group(group_id)
        if isinstance(group, ConsumerGroup) and group.state == g.DEAD:
            fut.set_result(JoinResult(CoordinatorNotAvailableError.code, member_id))
            return fut
        if isinstance(group, ShareGroup):  # a group id has one type (Kafka's classicGroupJoin)
            fut.set_result(JoinResult(InconsistentGroupProtocolError.code, ""))
            return fut
        if isinstance(group, ConsumerGroup):  # with members: it serves classic members too
            return self._join_consumer_group(group, member_id, instance_id, client_id, client_host,
                                             session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols,
                                             require_known_member_id, fut)
        if group is None:
            if not unknown:
                fut.set_result(JoinResult(UnknownMemberIdError.code, member_id))
                return fut
            group = self.groups[group_id] = Group(group_id, wall_ms())
        args = (client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols)
        if not self._accept_joining_member(group, member_id, instance_id):
            existing = group.members.get(member_id)
            if existing is not None:
                self._remove_member(group, existing)
            fut.set_result(JoinResult(GroupMaxSizeReachedError.code, ""))
        elif unknown:
            self._join_new_member(group, instance_id, require_known_member_id, supports_skip_assignment, args, fut,
                                  reason)
        else:
            self._join_current_member(group, member_id, instance_id, args, fut, reason)
        if group.state == g.PREPARING_REBALANCE:
            self._try_complete_join(group)
        return fut

    def _classic_group(self, group_id):
        """The group; an Empty consumer group gives way to a classic one (its records deleted,
        its committed offsets kept), as Kafka's JoinGroup does; None when there is none."""
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.members or group.state == g.DEAD:
            return group
        try:
            self.group_manager.store.append(group_id, group_tombstones(group_id), for_offsets=False)
        except StoreError as e:
            log.warning("could not delete the empty consumer group %s: error %d", group_id, e.code)
            return group
        self.consumer.cancel_timers(group)
        classic = self.groups[group_id] = Group(group_id, wall_ms())
        classic.offsets, classic.offset_batches = group.offsets, group.offset_batches
        classic.pending_txn_offsets = group.pending_txn_offsets
        log.info("empty consumer group %s becomes a classic group", group_id)
        return classic

    def _accept_joining_member(self, group, member_id, instance_id):
        """group.max.size: new members are refused once the group is full. A known static
        member restarting (unknown member id, known instance id) takes its own place."""
        if group.state in (g.EMPTY, g.DEAD):
            return True
        if not member_id and instance_id is not None and instance_id in group.static_members:
            member_id = group.static_members[instance_id]
        member = group.members.get(member_id)
        if group.state == g.PREPARING_REBALANCE:
            return (member is not None and member.awaiting_join) or group.num_awaiting_join() < self.max_group_size
        return member is not None or len(group.members) < self.max_group_size

    def _join_new_member(self, group, instance_id, require_known_member_id, supports_skip, args, fut, reason):
        client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols = args
        if group.state == g.DEAD:
            fut.set_result(JoinResult(CoordinatorNotAvailableError.code))
            return
        if not group.supports_protocols(protocol_type, [p[0] for p in protocols]):
            fut.set_result(JoinResult(InconsistentGroupProtocolError.code))
            return
        new_member_id = f"{instance_id if instance_id is not None else client_id}-{uuid.uuid4()}"
        if instance_id is not None and instance_id in group.static_members:
            self._update_static_member(group, group.static_members[instance_id], new_member_id, instance_id, args,
                                       fut, supports_skip)
        elif require_known_member_id and instance_id is None:
            self._add_pending_member(group, new_member_id, session_timeout_ms)
            fut.set_result(JoinResult(MemberIdRequiredError.code, new_member_id))
        else:
            self._add_member_and_rebalance(group, new_member_id, instance_id, args, fut, reason)

    def _join_current_member(self, group, member_id, instance_id, args, fut, reason):
        client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols = args
        if group.state == g.DEAD:
            fut.set_result(JoinResult(CoordinatorNotAvailableError.code, member_id))
            return
        if not group.supports_protocols(protocol_type, [p[0] for p in protocols]):
            fut.set_result(JoinResult(InconsistentGroupProtocolError.code, member_id))
            return
        if member_id in group.pending_members:
            self._remove_pending_member(group, member_id)
            self._add_member_and_rebalance(group, member_id, instance_id, args, fut, reason)
            return
        error = self._validate_member(group, member_id, instance_id)
        if error != NONE:
            fut.set_result(JoinResult(error, member_id))
            return
        member = group.members[member_id]
        if group.state == g.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, args, fut, reason)
        elif group.state == g.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # it missed the JoinGroup response: answer again for the current generation
                fut.set_result(self._current_join_result(group, member_id, group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(group, member, args, fut, reason)
        elif group.state == g.STABLE:
            if group.is_leader(member_id) or not member.matches(protocols):
                # the leader rejoining asks for a rebalance (e.g. topic metadata changed)
                self._update_member_and_rebalance(group, member, args, fut, reason)
            else:
                fut.set_result(self._current_join_result(group, member_id, False))
        else:
            fut.set_result(JoinResult(UnknownMemberIdError.code, member_id))

    @staticmethod
    def _current_join_result(group, member_id, with_members):
        return JoinResult(NONE, member_id, group.generation, group.protocol_type, group.protocol_name,
                          group.leader_id, False, group.current_member_metadata() if with_members else ())

    def _add_member_and_rebalance(self, group, member_id, instance_id, args, fut, reason):
        client_id, client_host, session_timeout_ms, rebalance_timeout_ms, protocol_type, protocols = args
        member = Member(member_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                        protocol_type, protocols)
        member.is_new = True
        if group.state == g.PREPARING_REBALANCE and group.generation == 0:
            group.new_member_added = True
        group.add(member, fut)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                             f"{instance_id}; client reason: {reason}")

    def _update_member(self, member, args, fut):
        _client_id, _client_host, session_timeout_ms, rebalance_timeout_ms, _ptype, protocols = args
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        if member.join_future is not None and member.join_future is not fut:
            # a second JoinGroup from the same member: the first one will not be answered by the
            # rebalance; release its connection
            self._complete_join(member, JoinResult(RebalanceInProgressError.code, member.member_id))
        member.join_future = fut

    def _update_member_and_rebalance(self, group, member, args, fut, reason):
        self._update_member(member, args, fut)
        self._maybe_prepare_rebalance(group, f"updating metadata for member {member.member_id}; "
                                             f"client reason: {reason}")

    def _update_static_member(self, group, old_member_id, new_member_id, instance_id, args, fut, supports_skip):
        """A static member rejoins with an unknown member id: it takes the new id; the old one
        is fenced."""
        current_leader = group.leader_id
        member = group.members[old_member_id]
        self._complete_join(member, JoinResult(FencedInstanceIdError.code, old_member_id))
        self._complete_sync(member, SyncResult(FencedInstanceIdError.code))
        saved = (member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms)
        group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member)
        self._update_member(member, args, None)
        log.info("static member %s of group %s rejoined: member id %s replaces %s", instance_id, group.group_id,
                 new_member_id, old_member_id)
        if group.state == g.STABLE:
            if group.select_protocol() == group.protocol_name:
                error = self.group_manager.store_group(group, {m.member_id: m.assignment
                                                               for m in group.members.values()})
                if error != NONE:
                    group.replace_static_member(instance_id, new_member_id, old_member_id)
                    member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms = saved
                    fut.set_result(JoinResult(error, "", group.generation, group.protocol_type, group.protocol_name,
                                              current_leader))
                    return
                leader = group.is_leader(new_member_id)
                fut.set_result(JoinResult(
                    NONE, new_member_id, group.generation, group.protocol_type, group.protocol_name,
                    # before v9 the old leader id is returned, so that a rejoining leader does not
                    # compute an assignment a Stable group would never hand out
                    group.leader_id if supports_skip else current_leader,
                    leader and supports_skip,
                    group.current_member_metadata() if leader and supports_skip else ()))
            else:
                member.join_future = fut
                self._maybe_prepare_rebalance(group, f"static member {instance_id} rejoined with a protocol change")
        elif group.state == g.COMPLETING_REBALANCE:
            # the leader may be assigning for the old member id: start over
            member.join_future = fut
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:  # PreparingRebalance: answered when the rebalance completes
            member.join_future = fut

    # -- SyncGroup ------------------------------------------------------------------------------------
    def sync_group(self, group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments):
        """Returns a future of a SyncResult. ``assignments``: {member id: bytes} (the leader's)."""
        self._ensure_started()
        fut = self.loop.create_future()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            fut.set_result(SyncResult(not_coordinator))
            return fut
        result = self._sync(group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments,
                            fut)
        if result is not None:
            fut.set_result(result)
        return fut

    def _sync(self, group_id, generation, member_id, instance_id, protocol_type, protocol_name, assignments, fut):
        if not group_id:
            return SyncResult(InvalidGroupIdError.code)
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.state != g.DEAD:
            return SyncResult(*self.consumer.classic_sync(group, generation, member_id, instance_id, protocol_type,
                                                          protocol_name))
        if group is None or isinstance(group, MODERN_GROUPS):
            return SyncResult(UnknownMemberIdError.code)
        if group.state == g.DEAD:
            return SyncResult(CoordinatorNotAvailableError.code)
        error = self._validate_member(group, member_id, instance_id)
        if error != NONE:
            return SyncResult(error)
        if generation != group.generation:
            return SyncResult(IllegalGenerationError.code)
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return SyncResult(InconsistentGroupProtocolError.code)
        member = group.members[member_id]
        if group.state == g.EMPTY:
            return SyncResult(UnknownMemberIdError.code)
        if group.state == g.PREPARING_REBALANCE:
            return SyncResult(RebalanceInProgressError.code)
        if group.state == g.STABLE:
            self._pending_sync_done(group, member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance
        if member.sync_future is not None and member.sync_future is not fut:
            self._complete_sync(member, SyncResult(RebalanceInProgressError.code))
        member.sync_future = fut
        self._pending_sync_done(group, member_id)
        if group.is_leader(member_id):
            full = {mid: bytes(assignments.get(mid, b"") or b"") for mid in group.members}
            missing = [mid for mid in group.members if mid not in assignments]
            if missing:
                log.warning("group %s generation %d: no assignment for members %s, giving them an empty one",
                            group.group_id, group.generation, missing)
            error = self.group_manager.store_group(group, full)
            if group.state == g.COMPLETING_REBALANCE and generation == group.generation:
                if error != NONE:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group, f"error {error} storing the assignment of member {member_id}")
                else:
                    self._set_and_propagate_assignment(group, full)
                    group.transition(g.STABLE, wall_ms())
                    log.info("group %s generation %d is stable", group.group_id, group.generation)
        return None

    def _pending_sync_done(self, group, member_id):
        group.pending_sync.discard(member_id)
        if not group.pending_sync:
            self._cancel_sync_timer(group)

    # -- Heartbeat / LeaveGroup ------------------------------------------------------------------------
    def heartbeat(self, group_id, member_id, instance_id, generation):
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator
        if not group_id:
            return InvalidGroupIdError.code
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.state != g.DEAD:
            return self.consumer.classic_heartbeat(group, member_id, instance_id, generation)
        if group is None or isinstance(group, MODERN_GROUPS):
            return UnknownMemberIdError.code
        if group.state == g.DEAD:
            return CoordinatorNotAvailableError.code
        error = self._validate_member(group, member_id, instance_id)
        if error != NONE:
            return error
        if generation != group.generation:
            return IllegalGenerationError.code
        if group.state == g.EMPTY:
            return UnknownMemberIdError.code
        self._schedule_heartbeat(group, group.members[member_id])
        if group.state == g.PREPARING_REBALANCE:
            return RebalanceInProgressError.code
        return NONE  # Stable, or CompletingRebalance (the member gets its assignment from SyncGroup)

    def leave_group(self, group_id, leaving):
        """``leaving``: [(member id, instance id)]. Returns (top-level error, [error per member])."""
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator, []
        if not group_id:
            return InvalidGroupIdError.code, []
        group = self.groups.get(group_id)
        if isinstance(group, ConsumerGroup) and group.state != g.DEAD:
            return NONE, self.consumer.classic_leave(group, leaving)
        if group is None or isinstance(group, ShareGroup):
            return NONE, [UnknownMemberIdError.code] * len(leaving)
        if group.state == g.DEAD:
            return CoordinatorNotAvailableError.code, []
        errors = []
        for member_id, instance_id in leaving:
            if member_id == "":
                # administrative removal of a static member by its instance id
                current = group.static_members.get(instance_id) if instance_id is not None else None
                if current is None:
                    errors.append(UnknownMemberIdError.code)
                else:
                    self._remove_member_and_update(group, group.members[current], f"{current} removed by LeaveGroup")
                    errors.append(NONE)
            elif member_id in group.pending_members:
                self._remove_pending_member(group, member_id)
                self._try_complete_join(group)
                errors.append(NONE)
            else:
                error = self._validate_member(group, member_id, instance_id)
                if error == NONE:
                    log.info("member %s has left group %s", member_id, group.group_id)
                    self._remove_member_and_update(group, group.members[member_id], f"{member_id} left the group")
                errors.append(error)
        return NONE, errors

    # -- offsets ------------------------------------------------------------------------------------------
    def _partition_exists(self, topic, partition):
        info = self.broker.topic(topic)
        return info is not None and 0 <= partition < info.partitions

    def commit_offsets(self, group_id, member_id, instance_id, generation, offsets, api_version=8):
        """``offsets``: {(topic, partition): OffsetAndMetadata}. Returns {(topic, partition): error}."""
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return dict.fromkeys(offsets, not_coordinator)
        results = {}
        valid = {}
        for tp, om in offsets.items():
            if not self._partition_exists(*tp):
                results[tp] = UnknownTopicOrPartitionError.code
            else:
                valid[tp] = om
        error = self._check_commit(group_id, member_id, instance_id, generation, api_version)
        if error is not None:
            results.update(dict.fromkeys(valid, error))
            return results
        return self.group_manager.store_offsets(self.groups[group_id], valid, results)

    def commit_txn_offsets(self, group_id, producer_id, producer_epoch, member_id, instance_id, generation, offsets):
        """TxnOffsetCommit (Kafka's handleTxnCommitOffsets): ``offsets`` {(topic, partition):
        OffsetAndMetadata} are written as a transactional batch of the producer and held pending
        until its transaction ends. A group that does not exist is created (Kafka does); a
        member id or generation, when given (v3+), must match. Returns {(topic, partition):
        error} or a future of it (a cluster)."""
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return dict.fromkeys(offsets, not_coordinator)
        results, valid = {}, {}
        for tp, om in offsets.items():
            if not self._partition_exists(*tp):
                results[tp] = UnknownTopicOrPartitionError.code
            elif self.group_manager.metadata_too_large(om):
                results[tp] = OffsetMetadataTooLargeError.code
            else:
                valid[tp] = om
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, wall_ms())
        error = None
        if group.state == g.DEAD:
            error = CoordinatorNotAvailableError.code
        elif isinstance(group, ShareGroup):
            error = GroupIdNotFoundError.code  # Kafka's ShareGroup.validateOffsetCommit
        elif isinstance(group, ConsumerGroup):
            error = self.consumer.check_commit(group, member_id, generation, 9, transactional=True)
        elif group.is_static_fenced(member_id, instance_id):
            error = FencedInstanceIdError.code
        elif member_id and member_id not in group.members:
            error = UnknownMemberIdError.code
        elif generation >= 0 and generation != group.generation:
            error = IllegalGenerationError.code
        if error is not None:
            results.update(dict.fromkeys(valid, error))
            return results
        if not valid:
            return results
        return self.group_manager.store_txn_offsets(group, producer_id, producer_epoch, valid, results)

    def on_transaction_completed(self, partition, producer_id, committed):
        """A transaction marker landed in __consumer_offsets-``partition`` (txn_markers)."""
        self.group_manager.on_transaction_completed(partition, producer_id, committed)

    def has_pending_txn_offsets(self, group_id, partitions=None) -> bool:
        """OffsetFetch's require_stable (KIP-447)."""
        return self.group_manager.has_pending_txn_offsets(group_id, partitions)

    def _check_commit(self, group_id, member_id, instance_id, generation, api_version):
        """None when the commit may be stored, else the error for every partition."""
        group = self.groups.get(group_id)
        if group is None:
            if generation >= 0 or member_id or instance_id is not None:
                return GroupIdNotFoundError.code if api_version >= 9 else IllegalGenerationError.code
            group = self.groups[group_id] = Group(group_id, wall_ms())  # a group only storing offsets
        if group.state == g.DEAD:
            return CoordinatorNotAvailableError.code
        if isinstance(group, ShareGroup):
            return GroupIdNotFoundError.code  # a share group commits no offsets (ShareGroup.validateOffsetCommit)
        if isinstance(group, ConsumerGroup):
            return self.consumer.check_commit(group, member_id, generation, api_version)
        if generation >= 0 or member_id or instance_id is not None:
            if group.is_static_fenced(member_id, instance_id):
                return FencedInstanceIdError.code
            if member_id and member_id not in group.members:
                return UnknownMemberIdError.code
            if generation != group.generation:
                return IllegalGenerationError.code
        elif group.state != g.EMPTY:
            return UnknownMemberIdError.code  # only members commit to a group that has members
        if group.state == g.COMPLETING_REBALANCE:
            return RebalanceInProgressError.code
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)
        return None

    def fetch_offsets(self, group_id, partitions=None, member_id=None, member_epoch=-1):
        """``partitions``: [(topic, partition)] or None for all; ``member_id`` and
        ``member_epoch`` (OffsetFetch v9) are checked against a consumer group. Returns (error,
        [(topic, partition, OffsetAndMetadata or None)])."""
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator, []
        group = self.groups.get(group_id)
        if isinstance(group, ShareGroup) and group.state != g.DEAD:
            return GroupIdNotFoundError.code, []  # Kafka's ShareGroup.validateOffsetFetch
        if isinstance(group, ConsumerGroup) and group.state != g.DEAD:
            error = self.consumer.check_fetch(group, member_id, member_epoch)
            if error is not None:
                return error, []
        return NONE, self.group_manager.get_offsets(group_id, partitions)

    def delete_offsets(self, group_id, partitions):
        """OffsetDelete. Returns (group error, {(topic, partition): error})."""
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator, {}
        if not group_id:
            return InvalidGroupIdError.code, {}
        group = self.groups.get(group_id)
        if group is None or group.state == g.DEAD or isinstance(group, ShareGroup):
            return GroupIdNotFoundError.code, {}  # a share group: Kafka's ShareGroup.validateOffsetDelete
        results = {}
        eligible = []
        for tp in partitions:
            if not self._partition_exists(*tp):
                results[tp] = UnknownTopicOrPartitionError.code
            elif group.state == g.EMPTY:
                eligible.append(tp)
            elif group.protocol_type == g.CONSUMER_PROTOCOL_TYPE:
                if group.is_subscribed_to(tp[0]):
                    results[tp] = GroupSubscribedToTopicError.code
                else:
                    eligible.append(tp)
            else:
                return NonEmptyGroupError.code, {}
        try:
            self.group_manager.remove_offsets(group, [tp for tp in eligible if tp in group.offsets])
        except StoreError as e:
            return e.code, {}
        results.update(dict.fromkeys(eligible, NONE))
        return NONE, results

    # -- groups -----------------------------------------------------------------------------------------
    def list_groups(self, states=None, types=None):
        """[(group id, protocol type, state, type)] of the groups whose state (and type) is in
        the filters (case-insensitive; empty or None: any)."""
        self._ensure_started()
        states = {s.lower() for s in states} if states else None
        types = {t.lower() for t in types} if types else None
        out = []
        for group_id in sorted(self.groups):
            group = self.groups[group_id]
            if group.state == g.DEAD:
                continue
            if states is not None and group.state.lower() not in states:
                continue
            if types is not None and group.group_type not in types:
                continue
            out.append((group_id, group.protocol_type or "", group.state, group.group_type))
        return out

    def describe_group(self, group_id) -> GroupSummary:
        self._ensure_started()
        group = self.groups.get(group_id)
        if group is None or isinstance(group, MODERN_GROUPS):  # Kafka: only classic groups are described here
            return GroupSummary(group_id, g.DEAD)
        if group.state == g.STABLE:
            members = [(m.member_id, m.instance_id, m.client_id, m.client_host, m.metadata(group.protocol_name),
                        m.assignment) for m in group.members.values()]
            return GroupSummary(group_id, group.state, group.protocol_type or "", group.protocol_name or "", members)
        members = [(m.member_id, m.instance_id, m.client_id, m.client_host, b"", b"") for m in group.members.values()]
        return GroupSummary(group_id, group.state, group.protocol_type or "", "", members)

    def delete_groups(self, group_ids):
        """{group id: error, or for a share group with share partitions a coroutine of it}"""
        self._ensure_started()
        results = {}
        for group_id in group_ids:
            group = self.groups.get(group_id)
            not_coordinator = self.group_manager.not_coordinator(group_id)
            if not_coordinator is not None:
                results[group_id] = not_coordinator
            elif group is None or group.state == g.DEAD:
                results[group_id] = GroupIdNotFoundError.code
            elif group.state != g.EMPTY:
                results[group_id] = NonEmptyGroupError.code
            elif isinstance(group, ShareGroup) and group.initialized:
                results[group_id] = self._delete_share_group(group)
            else:
                results[group_id] = self._delete_group(group)
        return results

    def _delete_group(self, group):
        try:
            n = len(group.offsets)
            self.group_manager.remove_offsets(group, list(group.offsets), remove_group=True)
            log.info("deleted group %s and its %d committed offsets", group.group_id, n)
            return NONE
        except StoreError as e:
            return e.code

    async def _delete_share_group(self, group):
        """Kafka 4.1's rule: the share state of every recorded share partition is deleted
        (DeleteShareGroupState) before the group's records; a failure keeps the group."""
        gid = group.group_id
        keys = [(tid, p) for tid, (_name, parts) in sorted(group.initialized.items()) for p in sorted(parts)]
        # the leader here forgets what it holds of them, lest the next group of this id reuse it
        self.broker.share_partition_manager.drop_group(gid)
        try:
            await asyncio.gather(*(self.broker.share_persister.delete_state(gid, tid, p) for tid, p in keys))
        except KafkaError as e:
            log.warning("share group %s kept: could not delete its share state: %s", gid, e)
            return e.code
        if self.groups.get(gid) is not group or group.state != g.EMPTY:  # a member joined meanwhile
            return NonEmptyGroupError.code if self.groups.get(gid) is group else GroupIdNotFoundError.code
        log.info("deleted the share state of %d share partitions of share group %s", len(keys), gid)
        return self._delete_group(group)

    def check_share_group_empty(self, group_id) -> int:
        """What the share-group offsets APIs (AlterShareGroupOffsets, DeleteShareGroupOffsets)
        ask before they change a share group's state: NONE for a share group without members
        (an unknown group counts as one: its state may exist before any member joined),
        NON_EMPTY_GROUP while members consume, GROUP_ID_NOT_FOUND for a group of another type,
        NOT_COORDINATOR from a broker that does not coordinate it."""
        self._ensure_started()
        not_coordinator = self.group_manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator
        group = self.groups.get(group_id)
        if group is None or group.state == g.DEAD:
            return NONE
        if not isinstance(group, ShareGroup):
            return GroupIdNotFoundError.code
        return NONE if group.state == g.EMPTY else NonEmptyGroupError.code

    def on_topic_deleted(self, topic, partitions):
        """A topic went (from any thread): its committed offsets go too."""
        self.group_manager.on_topic_deleted(topic, partitions)

    # -- FindCoordinator ------------------------------------------------------------------------------------
    def coordinator_for_group(self, group_id):
        """Creates __consumer_offsets on first use; the coordinator is the leader of the
        group's partition (COORDINATOR_NOT_AVAILABLE while it has none)."""
        self._ensure_started()
        self.store.ensure_topic()
        leader = self.broker.metadata_cache.leader(TOPIC, self.store.partition_for(group_id))
        if leader < 0:
            raise CoordinatorNotAvailableError(f"the partition of group {group_id} in {TOPIC} has no leader yet")
        return leader

