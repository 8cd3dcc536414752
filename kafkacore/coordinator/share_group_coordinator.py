"""KIP-932 share groups' membership: ShareGroupHeartbeat and ShareGroupDescribe (the share-group
part of Kafka's GroupMetadataManager). The records and their replay are
``share_group_records``, the assignment ``share_assignor``; what members fetch and acknowledge
is the share-partition leader's, not this module's.

A heartbeat (Kafka's rules, in this order):

1. Checks (INVALID_REQUEST with Kafka's message): a group id; no empty rack id; a member id
   (v1, KIP-1082: the client makes its own; v0 joining without one gets one made here);
   joining (epoch 0) needs a non-empty SubscribedTopicNames; no epoch below -1.
2. Epoch -1 leaves: the member's records are deleted and the group epoch bumped.
3. The group: created by a join; a group id of another type is GROUP_ID_NOT_FOUND (a group id
   has one type); an unknown group outside a join is UNKNOWN_MEMBER_ID (the client rejoins). A
   new member when the group has ``group.share.max.size`` members: GROUP_MAX_SIZE_REACHED.
4. The member: a new one joins at epoch 0 (a known member joining again keeps its id); an
   unknown member id is UNKNOWN_MEMBER_ID; an epoch above the member's, or below it other than
   its previous epoch (a lost response), is FENCED_MEMBER_EPOCH.
5. A new member, a changed subscription or a change in the subscribed topics (created, grown,
   deleted) bumps the group epoch; a group epoch above the assignment epoch computes a new
   target assignment with the ``simple`` assignor (``group.share.assignors``).
6. No revocation phase (a share partition may be read by many members): a member whose epoch
   or assignment is behind the target gets the target and the assignment epoch at once.
7. Every change is written to ``__consumer_offsets`` as Kafka's records before the answer (on a
   cluster: once replicated); the session (``group.share.session.timeout.ms``) starts over; the
   answer carries the member id and epoch, ``group.share.heartbeat.interval.ms`` and, when the
   member joined or its assignment changed, its assigned partitions (null: unchanged).

A member whose session expires is fenced like one that leaves. The other members learn of a new
target at their next heartbeat, which the bumped group epoch makes them pick up.
"""
from __future__ import annotations

import logging

from ..clock import wall_ms
from ..errors import (CoordinatorNotAvailableError, FencedMemberEpochError, GroupIdNotFoundError,
                      GroupMaxSizeReachedError, InvalidRequestError, KafkaError, UnknownMemberIdError)
from ..protocol.kafka_uuid import random_uuid_text
from . import group as g
from . import share_group_records as rec
from .consumer_group_coordinator import HeartbeatResult, write_records
from .share_assignor import assign
from .share_group import JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, ShareGroup, ShareGroupMember

log = logging.getLogger("kafkacore.coordinator")

NONE = 0
# KIP-1082, as for consumer groups: from v1 the client makes its member id
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1


class ShareHeartbeatRequest:
    """The fields of a ShareGroupHeartbeat, with the client's id and host."""

    __slots__ = ("group_id", "member_id", "member_epoch", "rack_id", "subscribed_topic_names", "client_id",
                 "client_host", "api_version")

    def __init__(self, group_id, member_id, member_epoch, rack_id=None, subscribed_topic_names=None, client_id="",
                 client_host="", api_version=1):
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.rack_id = rack_id
        self.subscribed_topic_names = subscribed_topic_names
        self.client_id = client_id
        self.client_host = client_host
        self.api_version = api_version


class ShareGroupCoordinator:
    def __init__(self, broker, manager):
        """``manager``: the GroupMetadataManager, whose ``groups`` (every type) and store this
        shares with the classic and consumer coordinators."""
        self.broker = broker
        self.manager = manager
        cfg = broker.config
        self.max_size = cfg["group.share.max.size"]
        self.assignors = list(cfg["group.share.assignors"])
        self.rebalances = 0  # new target assignments (Kafka's share-group-rebalance-count)
        self._closed = False

    # Kafka 4.1 reads these per group: the GROUP config resource's override, else the broker's
    # group.share.* value (group_config.py keeps the override within the broker's min/max)
    def session_timeout_ms(self, group_id):
        return self.broker.group_configs.get(group_id, "share.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id):
        return self.broker.group_configs.get(group_id, "share.heartbeat.interval.ms")

    @property
    def groups(self):
        return self.manager.groups

    @property
    def loop(self):
        return self.manager.loop

    def shutdown(self):
        self._closed = True
        for group in self.groups.values():
            if isinstance(group, ShareGroup):
                self.cancel_timers(group)

    # -- timers --------------------------------------------------------------------------------------
    @staticmethod
    def cancel_timers(group):
        for handle in group.session_timers.values():
            handle.cancel()
        group.session_timers.clear()

    def _schedule_session(self, group, member_id):
        old = group.session_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        group.session_timers[member_id] = self.loop.call_later(
            self.session_timeout_ms(group.group_id) / 1000, self._on_session_timeout, group, member_id)

    def _on_session_timeout(self, group, member_id):
        group.session_timers.pop(member_id, None)
        if self._closed or self.groups.get(group.group_id) is not group or member_id not in group.members:
            return
        log.info("member %s of share group %s has failed (session timeout %d ms), fencing it", member_id,
                 group.group_id, self.session_timeout_ms(group.group_id))
        self._fence(group, group.members[member_id], "session timeout")

    def on_loaded(self, group):
        """Members read back from the log: their sessions start now (Kafka's onLoaded)."""
        for member_id in group.members:
            self._schedule_session(group, member_id)

    # -- ShareGroupHeartbeat -------------------------------------------------------------------------
    def heartbeat(self, req: ShareHeartbeatRequest):
        """A HeartbeatResult, or a future of it while the group's records replicate."""
        not_coordinator = self.manager.not_coordinator(req.group_id)
        if not_coordinator is not None:
            return HeartbeatResult(not_coordinator)
        try:
            self._validate(req)
            if req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
                return self._leave(req)
            return self._heartbeat(req)
        except KafkaError as e:
            return HeartbeatResult(e.code, e.message or None)

    @staticmethod
    def _validate(req):
        """Kafka's throwIfShareGroupHeartbeatRequestIsInvalid."""
        def invalid(message):
            raise InvalidRequestError(message)
        if not req.group_id:
            invalid("GroupId can't be empty.")
        if req.rack_id == "":
            invalid("RackId can't be empty.")
        if not req.member_id and (req.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION
                                  or req.member_epoch != JOIN_GROUP_MEMBER_EPOCH):
            invalid("MemberId can't be empty.")
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if not req.subscribed_topic_names:
                invalid("SubscribedTopicNames must be set in first request.")
        elif req.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            invalid("MemberEpoch is invalid.")

    def _group(self, group_id, create):
        group = self.groups.get(group_id)
        if group is not None and group.state == g.DEAD:
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if isinstance(group, ShareGroup):
            return group
        if group is not None:
            raise GroupIdNotFoundError(f"Group {group_id} is not a share group.")
        if not create:
            raise UnknownMemberIdError(f"Share group {group_id} not found.")
        return ShareGroup(group_id, wall_ms())

    def _member(self, group, req):
        member = group.members.get(req.member_id) if req.member_id else None
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if member is not None:
                return member
            if len(group.members) >= self.max_size:
                raise GroupMaxSizeReachedError(f"The share group has reached its maximum capacity of "
                                               f"{self.max_size} members.")
            member_id = req.member_id or random_uuid_text()  # v0: the coordinator names it, as Kafka
            log.info("member %s joins share group %s", member_id, group.group_id)
            return ShareGroupMember(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {req.member_id} is not a member of group {group.group_id}.")
        if req.member_epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"The share group member has a greater member epoch ({req.member_epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if req.member_epoch < member.member_epoch and req.member_epoch != member.previous_member_epoch:
            raise FencedMemberEpochError(
                f"The share group member has a smaller member epoch ({req.member_epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        return member

    def _subscription_metadata(self, members):
        """{topic name: (topic id, partition count)} of the existing topics ``members`` subscribe to."""
        out = {}
        for m in members:
            for name in m.subscribed_topic_names:
                info = self.broker.topic(name)
                if info is not None and name not in out:
                    out[name] = (info.topic_id, info.partitions)
        return out

    def _heartbeat(self, req):
        group = self._group(req.group_id, req.member_epoch == JOIN_GROUP_MEMBER_EPOCH)
        gid = group.group_id
        member = self._member(group, req)
        new_member = member.member_id not in group.members
        updated = member.copy()
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        updated.client_id, updated.client_host = req.client_id, req.client_host
        records = []
        if new_member or not updated.same_metadata(member):
            records.append(rec.member_metadata_record(gid, updated))
        bump = new_member or updated.subscribed_topic_names != member.subscribed_topic_names
        members = [m for mid, m in group.members.items() if mid != updated.member_id] + [updated]
        metadata = self._subscription_metadata(members)
        if metadata != group.subscription_metadata:
            records.append(rec.subscription_metadata_record(gid, metadata))
            bump = True
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append(rec.group_epoch_record(gid, group_epoch))
        targets = group.target_assignment
        assignment_epoch = group.assignment_epoch
        if group_epoch > assignment_epoch:
            by_name = {name: tid for name, (tid, _n) in metadata.items()}
            subscriptions = {m.member_id: {by_name[t] for t in m.subscribed_topic_names if t in by_name}
                             for m in members}
            new_targets = assign(self.assignors[0], subscriptions, {tid: n for tid, n in metadata.values()},
                                 targets)
            for mid, target in new_targets.items():
                if target != targets.get(mid, {}) or mid == updated.member_id and new_member:
                    records.append(rec.target_assignment_record(gid, mid, target))
            targets = new_targets
            assignment_epoch = group_epoch
            records.append(rec.target_assignment_epoch_record(gid, assignment_epoch))
            log.info("share group %s: new target assignment at epoch %d by %s", gid, assignment_epoch,
                     self.assignors[0])
        # Kafka 4.1: the share partitions ever assigned are recorded (type 15) before a member
        # gets them, so that DeleteGroups knows whose state to delete
        initialized = self._initialized(group, metadata, targets)
        if initialized is not group.initialized:
            records.append(rec.state_partition_metadata_record(gid, initialized))
        # no revocation: the member moves to its target and the assignment epoch at once
        target = targets.get(updated.member_id, {})
        if updated.member_epoch != assignment_epoch or updated.assigned != target:
            updated.previous_member_epoch, updated.member_epoch = updated.member_epoch, assignment_epoch
            updated.assigned = {tid: set(parts) for tid, parts in target.items()}
        if new_member or not updated.same_assignment(member):
            records.append(rec.current_assignment_record(gid, updated))
        full = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        answer = HeartbeatResult(member_id=updated.member_id, member_epoch=updated.member_epoch,
                                 heartbeat_interval_ms=self.heartbeat_interval_ms(gid),
                                 assignment=updated.assigned if full or new_member
                                 or updated.assigned != member.assigned else None)
        rebalanced = assignment_epoch != group.assignment_epoch

        def apply():
            if self.groups.get(gid) is not group:
                self.groups[gid] = group
            group.group_epoch = group_epoch
            group.subscription_metadata = metadata
            group.assignment_epoch = assignment_epoch
            group.initialized = initialized
            group.target_assignment = {mid: t for mid, t in targets.items()
                                       if mid in group.members or mid == updated.member_id}
            group.members[updated.member_id] = updated
            group.current_state_timestamp = wall_ms()
            self._schedule_session(group, updated.member_id)
            if rebalanced:
                self.rebalances += 1
        return write_records(self.manager, gid, records, apply, answer)

    @staticmethod
    def _initialized(group, metadata, targets):
        """The group's recorded share partitions with those of ``targets`` added: a new dict
        when there are new ones, else ``group.initialized`` itself."""
        names = {tid: name for name, (tid, _n) in metadata.items()}
        out = None
        for target in targets.values():
            for tid, parts in target.items():
                known = (out or group.initialized).get(tid)
                if known is not None and parts <= known[1]:
                    continue
                if out is None:
                    out = {t: (n, set(p)) for t, (n, p) in group.initialized.items()}
                name, have = out.get(tid, (names.get(tid, ""), set()))
                out[tid] = (name, have | parts)
        return group.initialized if out is None else out

    # -- leaving and fencing --------------------------------------------------------------------------
    def _leave(self, req):
        group = self.groups.get(req.group_id)
        if not isinstance(group, ShareGroup) or group.state == g.DEAD:
            raise UnknownMemberIdError(f"Share group {req.group_id} not found.")
        member = group.members.get(req.member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {req.member_id} is not a member of group {req.group_id}.")
        log.info("member %s left share group %s", member.member_id, group.group_id)
        return self._fence(group, member, "left the group",
                           HeartbeatResult(member_id=member.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH))

    def _fence(self, group, member, reason, answer=None):
        """Removes the member (its records deleted) and bumps the group epoch; the others get
        the new target at their next heartbeat."""
        gid = group.group_id
        records = rec.member_tombstones(gid, member.member_id)
        rest = [m for mid, m in group.members.items() if mid != member.member_id]
        metadata = self._subscription_metadata(rest)
        if metadata != group.subscription_metadata:
            records.append(rec.subscription_metadata_record(gid, metadata))
        epoch = group.group_epoch + 1
        records.append(rec.group_epoch_record(gid, epoch))

        def apply():
            group.members.pop(member.member_id, None)
            group.target_assignment.pop(member.member_id, None)
            handle = group.session_timers.pop(member.member_id, None)
            if handle is not None:
                handle.cancel()
            group.subscription_metadata = metadata
            group.group_epoch = epoch
            group.current_state_timestamp = wall_ms()
            log.info("share group %s: member %s removed (%s), group epoch %d", gid, member.member_id, reason,
                     epoch)
        result = write_records(self.manager, gid, records, apply, answer or HeartbeatResult())
        if answer is None and isinstance(result, HeartbeatResult) and result.error != NONE:
            log.warning("share group %s: could not remove member %s: %s", gid, member.member_id, result.message)
        return result

    # -- ShareGroupDescribe ----------------------------------------------------------------------------
    def describe(self, group_id):
        """(error code, the ShareGroup or None): NOT_COORDINATOR, GROUP_ID_NOT_FOUND (unknown, or
        of another type)."""
        not_coordinator = self.manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator, None
        group = self.groups.get(group_id)
        if not isinstance(group, ShareGroup) or group.state == g.DEAD:
            return GroupIdNotFoundError.code, None
        return NONE, group

    def topic_name(self, topic_id):
        info = self.broker.topics_by_id.get(topic_id)
        return info.name if info is not None else ""
