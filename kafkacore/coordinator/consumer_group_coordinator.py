"""KIP-848 consumer groups: ConsumerGroupHeartbeat, ConsumerGroupDescribe and the member-epoch
checks of offset commits (the consumer-group part of Kafka's GroupMetadataManager).

A heartbeat (Kafka's rules, in this order):

1. Checks (INVALID_REQUEST with Kafka's message): a group id; no empty instance or rack id; a
   member id (v1+, KIP-1082: the client makes its own; v0 without one joining gets one made
   here); joining (epoch 0) needs the rebalance timeout, the subscription and an empty owned
   list; epoch -2 needs an instance id; no epoch below -2. An assignor not in
   ``group.consumer.assignors`` is UNSUPPORTED_ASSIGNOR; a ``SubscribedTopicRegex`` RE2/J would
   refuse is INVALID_REGULAR_EXPRESSION (``topic_regex``; librdkafka's empty one means none).
2. Epoch -1 leaves (a static member too, for good); -2 is a static member's temporary leave:
   it keeps its partitions until its session expires or it rejoins under a new member id.
3. The group: created by a join (an Empty classic group is replaced, its offsets kept, as
   Kafka's maybeDeleteEmptyClassicGroup); a classic group with members is upgraded to a
   consumer group (``consumer_group_classic``) or, when it cannot be, GROUP_ID_NOT_FOUND; an
   unknown group outside a join is UNKNOWN_MEMBER_ID (the client rejoins). A new member above
   ``group.consumer.max.size``: GROUP_MAX_SIZE_REACHED.
4. The member: a new one joins at epoch 0; a static member rejoining replaces its previous
   instance if that one left with -2 (else UNRELEASED_INSTANCE_ID), keeping its assignment;
   an instance id held by another member id is FENCED_INSTANCE_ID, an unknown member
   UNKNOWN_MEMBER_ID. An epoch above the member's, or below it other than its previous epoch
   with owned partitions within its assignment (a lost response), is FENCED_MEMBER_EPOCH. A
   known member joining again at epoch 0 starts over with nothing owned.
5. A changed subscription (names or regex), or a change in the subscribed topics (created,
   grown, deleted, or a topic newly matching a member's regex, resolved at every heartbeat), bumps the
   group epoch; a group epoch above the assignment epoch computes a new target assignment with
   the preferred assignor (the one most members name, else the first configured).
6. The member is reconciled towards its target (``reconciliation``): partitions are revoked
   before they are given to anyone else. A member that keeps partitions pending revocation
   longer than its rebalance timeout is fenced.
7. Every change is written to ``__consumer_offsets`` as Kafka's records
   (``consumer_group_records``) before the answer (on a cluster: once replicated); the
   session (``group.consumer.session.timeout.ms``) starts over; the answer carries the member
   epoch, ``group.consumer.heartbeat.interval.ms`` and, for a full request or a changed
   assignment, the member's assigned partitions.

A member whose session expires is fenced: its records are deleted (tombstones) and the group
epoch bumped, so the others take over its partitions on their next heartbeats.

State changes are applied in memory when their records are appended; a write that fails to
replicate answers its error and takes the group back to its state before its writes still
replicating (Kafka reverts to its last committed snapshot the same way).
"""
from __future__ import annotations

import logging
import uuid

from ..clock import wall_ms
from ..errors import (CoordinatorNotAvailableError, FencedInstanceIdError, FencedMemberEpochError,
                      GroupIdNotFoundError, GroupMaxSizeReachedError, IllegalGenerationError, InvalidRequestError,
                      KafkaError, StaleMemberEpochError, UnknownMemberIdError, UnreleasedInstanceIdError,
                      UnsupportedAssignorError, UnsupportedVersionError)
from ..security.acl import AclOperation, ResourceType
from . import consumer_group_records as rec
from . import group as g
from .assignors import MemberSpec, assign
from .consumer_group import (JOIN_GROUP_MEMBER_EPOCH, LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                             MEMBER_STABLE, UNREVOKED_PARTITIONS, ConsumerGroup, ConsumerGroupMember,
                             preferred_assignor)
from .consumer_group_classic import ClassicMembers
from .offset_store import StoreError, group_key
from .reconciliation import reconcile
from .topic_regex import compile_regex, matching_topics

log = logging.getLogger("kafkacore.coordinator")

NONE = 0
# KIP-1082: from v1 the client makes its member id
CONSUMER_GENERATED_MEMBER_ID_VERSION = 1


class HeartbeatResult:
    __slots__ = ("error", "message", "member_id", "member_epoch", "heartbeat_interval_ms", "assignment")

    def __init__(self, error=NONE, message=None, member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                 assignment=None):
        self.error = error
        self.message = message
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.assignment = assignment  # {topic id: set of partitions} or None (not sent)

    def __repr__(self):
        return (f"HeartbeatResult(error={self.error}, member={self.member_id!r}, epoch={self.member_epoch}, "
                f"assignment={self.assignment})")


class HeartbeatRequest:
    """The fields of a ConsumerGroupHeartbeat, with the client's id and host."""

    __slots__ = ("group_id", "member_id", "member_epoch", "instance_id", "rack_id", "rebalance_timeout_ms",
                 "subscribed_topic_names", "subscribed_topic_regex", "server_assignor", "owned", "client_id",
                 "client_host", "api_version", "acl_identity")

    def __init__(self, group_id, member_id, member_epoch, instance_id=None, rack_id=None, rebalance_timeout_ms=-1,
                 subscribed_topic_names=None, subscribed_topic_regex=None, server_assignor=None, owned=None,
                 client_id="", client_host="", api_version=1, acl_identity=None):
        self.group_id = group_id
        self.member_id = member_id
        self.member_epoch = member_epoch
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.subscribed_topic_names = subscribed_topic_names
        self.subscribed_topic_regex = subscribed_topic_regex
        self.server_assignor = server_assignor
        self.owned = owned  # [(topic id, [partitions])] or None
        self.client_id = client_id
        self.client_host = client_host
        self.api_version = api_version
        self.acl_identity = acl_identity  # (principal, host) the authorizer judges the member by, or None


class ConsumerGroupCoordinator(ClassicMembers):
    request_type = HeartbeatRequest

    def __init__(self, broker, manager):
        """``manager``: the GroupMetadataManager, whose ``groups`` (every type) and store this
        shares with the classic coordinator."""
        self.broker = broker
        self.manager = manager
        cfg = broker.config
        self.max_size = cfg["group.consumer.max.size"]
        self.assignors = list(cfg["group.consumer.assignors"])
        self.migration_policy = cfg["group.consumer.migration.policy"]
        self.rebalances = 0  # new target assignments (Kafka's consumer-group-rebalance-count)
        self._uncommitted: dict[str, _Uncommitted] = {}  # group id -> its state before writes still replicating
        self._closed = False

    # Kafka 4.1 reads these per group (KIP-848's group configs): the GROUP config resource's
    # override, else the broker's group.consumer.* value (kept within its min/max by group_config.py)
    def session_timeout_ms(self, group_id):
        return self.broker.group_configs.get(group_id, "consumer.session.timeout.ms")

    def heartbeat_interval_ms(self, group_id):
        return self.broker.group_configs.get(group_id, "consumer.heartbeat.interval.ms")

    @property
    def groups(self):
        return self.manager.groups

    @property
    def loop(self):
        return self.manager.loop

    def shutdown(self):
        self._closed = True
        for group in self.groups.values():
            if isinstance(group, ConsumerGroup):
                self.cancel_timers(group)

    # -- timers ------------------------------------------------------------------------------------
    def cancel_timers(self, group):
        for timers in (group.session_timers, group.rebalance_timers, group.join_timers, group.sync_timers):
            for handle in timers.values():
                handle.cancel()
            timers.clear()

    def _cancel_member_timers(self, group, member_id):
        for timers in (group.session_timers, group.rebalance_timers, group.join_timers, group.sync_timers):
            handle = timers.pop(member_id, None)
            if handle is not None:
                handle.cancel()

    def _schedule_session(self, group, member_id):
        old = group.session_timers.pop(member_id, None)
        if old is not None:
            old.cancel()
        member = group.members.get(member_id)
        # a classic member's session is its own session.timeout.ms
        timeout = member.classic.session_timeout_ms if member is not None and member.classic else \
            self.session_timeout_ms(group.group_id)
        group.session_timers[member_id] = self.loop.call_later(
            timeout / 1000, self._on_session_timeout, group, member_id)

    def _on_session_timeout(self, group, member_id):
        group.session_timers.pop(member_id, None)
        if self._closed or self.groups.get(group.group_id) is not group or member_id not in group.members:
            return
        log.info("member %s of consumer group %s has failed (its session timed out), fencing it", member_id,
                 group.group_id)
        result = self._fence(group, group.members[member_id], "session timeout")
        if isinstance(result, HeartbeatResult) and result.error != NONE:
            self._schedule_session(group, member_id)  # not written: it is tried again

    def _schedule_rebalance_timeout(self, group, member):
        old = group.rebalance_timers.pop(member.member_id, None)
        if old is not None:
            old.cancel()
        timeout = member.rebalance_timeout_ms if member.rebalance_timeout_ms > 0 else \
            self.session_timeout_ms(group.group_id)
        group.rebalance_timers[member.member_id] = self.loop.call_later(
            timeout / 1000, self._on_rebalance_timeout, group, member.member_id, member.member_epoch)

    def _on_rebalance_timeout(self, group, member_id, epoch):
        group.rebalance_timers.pop(member_id, None)
        member = group.members.get(member_id)
        if self._closed or self.groups.get(group.group_id) is not group or member is None:
            return
        if member.member_epoch == epoch and member.state == UNREVOKED_PARTITIONS:
            log.info("member %s of consumer group %s did not revoke its partitions within %d ms, fencing it",
                     member_id, group.group_id, member.rebalance_timeout_ms)
            self._fence(group, member, "rebalance timeout")

    def on_loaded(self, group):
        """Members read back from the log: their sessions start now (Kafka's onLoaded)."""
        for member_id in group.members:
            self._schedule_session(group, member_id)

    # -- writes --------------------------------------------------------------------------------------
    def _write(self, group_id, records, apply, answer):
        """Appends ``records``, then ``apply()`` changes the memory; returns ``answer`` (a
        HeartbeatResult), or a future of it while the write replicates. A failed append
        changes nothing and answers its error; a write that then fails to replicate takes the
        group back to its state before the first of its writes still replicating (Kafka
        reverts to its last committed snapshot) and answers its error."""
        if not records:
            apply()
            return answer
        try:
            written = self.manager.store.append(group_id, records, for_offsets=False)
        except StoreError as e:
            return HeartbeatResult(e.code, f"writing the group's records failed: {e.cause}")
        if written.replicated is None:
            apply()
            return answer
        uncommitted = self._uncommitted.get(group_id)
        if uncommitted is None:
            uncommitted = self._uncommitted[group_id] = _Uncommitted(self.groups.get(group_id))
        uncommitted.pending += 1
        apply()
        out = self.loop.create_future()

        def done(f):
            e = f.exception()
            if self._uncommitted.get(group_id) is uncommitted:
                uncommitted.pending -= 1
                if e is not None or not uncommitted.pending:
                    del self._uncommitted[group_id]
                if e is not None:
                    self._revert(group_id, uncommitted, e)
            if not out.done():
                out.set_result(answer if e is None else HeartbeatResult(e.code, f"writing the group's records "
                                                                                 f"failed: {e.cause}"))
        written.replicated.add_done_callback(done)
        return out

    def _revert(self, group_id, uncommitted, error):
        """The group as it was before its uncommitted writes (one of them failed to replicate)."""
        if self._closed or self.manager.not_coordinator(group_id) is not None:
            return  # unloaded: the next coordinator replays the log
        log.warning("consumer group %s: a write failed to replicate (%s); back to its last written state",
                    group_id, error.cause)
        before, current = uncommitted.group, self.groups.get(group_id)
        if current is not before:  # a migration, or a new group, is undone
            if isinstance(current, ConsumerGroup):
                self.cancel_timers(current)
                current.transition(g.DEAD, wall_ms())
            elif current is not None:
                self.release_classic_group(current)
            if before is None:
                self.groups.pop(group_id, None)
            else:
                self.groups[group_id] = before
        if isinstance(before, ConsumerGroup):
            self.cancel_timers(before)
            before.restore(uncommitted.state)
            for member in before.members.values():
                self._schedule_session(before, member.member_id)
                if member.state == UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(before, member)
        elif before is not None and current is not before:  # a classic group whose upgrade failed
            before.transition(uncommitted.state, wall_ms())
            self.start_classic_group(before, None if uncommitted.state in (g.STABLE, g.EMPTY) else
                                     f"the upgrade of group {group_id} failed")

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------------------
    def heartbeat(self, req: HeartbeatRequest):
        not_coordinator = self.manager.not_coordinator(req.group_id)
        if not_coordinator is not None:
            return HeartbeatResult(not_coordinator)
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req)
        except KafkaError as e:
            return HeartbeatResult(e.code, e.message or None)

    def _validate(self, req):
        def invalid(message):
            raise InvalidRequestError(message)
        if not req.group_id:
            invalid("GroupId can't be empty.")
        if req.instance_id == "":
            invalid("InstanceId can't be empty.")
        if req.rack_id == "":
            invalid("RackId can't be empty.")
        if req.subscribed_topic_regex:
            compile_regex(req.subscribed_topic_regex)  # INVALID_REGULAR_EXPRESSION
        if req.api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION or req.member_epoch > 0 \
                or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if not req.member_id:
                invalid("MemberId can't be empty.")
        if req.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            if req.rebalance_timeout_ms == -1:
                invalid("RebalanceTimeoutMs must be provided in first request.")
            if req.owned is None or req.owned:
                invalid("TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                invalid("SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                invalid("InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            invalid("MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.assignors:
            raise UnsupportedAssignorError(f"ServerAssignor {req.server_assignor} is not supported. Supported "
                                           f"assignors: {', '.join(self.assignors)}.")

    def _group(self, group_id, create, records):
        group = self.groups.get(group_id)
        if group is not None and group.state == g.DEAD:
            raise CoordinatorNotAvailableError(f"group {group_id} is being removed")
        if isinstance(group, ConsumerGroup):
            return group
        if group is None:
            if not create:
                raise UnknownMemberIdError(f"Consumer group {group_id} not found.")
            return ConsumerGroup(group_id, wall_ms())
        if create and group.state == g.EMPTY and not group.pending_members:
            # an Empty classic group gives way; its committed offsets stay (keyed by group id)
            records.append((group_key(group_id), None))
            new = ConsumerGroup(group_id, wall_ms())
            new.offsets, new.offset_batches = group.offsets, group.offset_batches
            new.pending_txn_offsets = group.pending_txn_offsets
            return new
        if create and group.members and self.can_upgrade(group):
            return self.upgraded(group, records)  # KIP-848's online upgrade
        raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")

    @staticmethod
    def _check_epoch(member, epoch, owned):
        """Kafka's throwIfConsumerGroupMemberEpochIsInvalid."""
        if epoch > member.member_epoch:
            raise FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if epoch < member.member_epoch:
            if epoch != member.previous_member_epoch or owned is None or not all(
                    set(parts) <= member.assigned.get(tid, set()) for tid, parts in owned):
                raise FencedMemberEpochError(
                    f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                    f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
                    f"rejoin.")

    def _member(self, group, req, records, classic=None):
        """(the member as known before this heartbeat, or a new one; the member id replaced, or
        None). ``classic``: the joining member speaks the classic protocol."""
        joining = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH
        member_id = req.member_id or str(uuid.uuid4())  # v0: the coordinator names a joining member
        if req.instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                if not joining:
                    raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
                self._check_size(group)
                log.info("member %s joins consumer group %s", member_id, group.group_id)
                return ConsumerGroupMember(member_id), None
            if joining:
                return self._restart(member), None
            self._check_epoch(member, req.member_epoch, req.owned)
            return member, None
        existing = group.static_member(req.instance_id)
        if joining:
            if existing is None:
                self._check_size(group)
                log.info("static member %s (instance %s) joins consumer group %s", member_id, req.instance_id,
                         group.group_id)
                return ConsumerGroupMember(member_id), None
            if existing.member_id == member_id:
                return self._restart(existing), None
            # (where either speaks the classic protocol, the new instance replaces the old one at
            # once, as a classic group's static member does: Kafka's rule)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH and classic is None \
                    and existing.classic is None:
                raise UnreleasedInstanceIdError(
                    f"Static member {existing.member_id} with instance id {req.instance_id} is not released yet.")
            new = existing.copy(member_id)
            new.member_epoch = new.previous_member_epoch = 0
            log.info("static member with instance id %s rejoins consumer group %s as %s (was %s)", req.instance_id,
                     group.group_id, member_id, existing.member_id)
            return new, existing.member_id
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {req.instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(f"Static member {member_id} with instance id {req.instance_id} was fenced "
                                        f"by member {existing.member_id}.")
        self._check_epoch(existing, req.member_epoch, req.owned)
        return existing, None

    @staticmethod
    def _restart(member):
        """A known member joins again at epoch 0: it has given up what it owned."""
        out = member.copy()
        out.member_epoch = out.previous_member_epoch = 0
        out.assigned, out.pending_revocation = {}, {}
        out.state = MEMBER_STABLE
        return out

    def _check_size(self, group):
        if len(group.members) >= self.max_size:
            raise GroupMaxSizeReachedError(f"The consumer group has reached its maximum capacity of {self.max_size} "
                                           "members.")

    def _resolve(self, members):
        """{(regex, ACL identity): the topic names it matches now} for the members' regex
        subscriptions; with an authorizer, only the topics the identity may DESCRIBE (Kafka 4
        leaves out the others)."""
        topics = self.broker.topics
        authorizer = self.broker.authorizer
        out = {}
        for key in {(m.subscribed_topic_regex, m.acl_identity) for m in members if m.subscribed_topic_regex}:
            regex, identity = key
            names = matching_topics(regex, topics)
            if authorizer is not None and identity is not None:
                principal, host = identity
                names = {n for n in names
                         if authorizer.authorize(principal, host, AclOperation.DESCRIBE, ResourceType.TOPIC, n)}
            out[key] = frozenset(names)
        return out

    def _subscription_metadata(self, group, members, resolved):
        """{topic name: (topic id, partition count)} of the existing topics ``members`` subscribe to."""
        out = {}
        for m in members:
            for name in group.member_topics(m, resolved):
                info = self.broker.topic(name)
                if info is not None and name not in out:
                    out[name] = (info.topic_id, info.partitions)
        return out

    def _heartbeat(self, req, classic=None):
        """``classic``: the ClassicMember of a JoinGroup (consumer_group_classic), else None."""
        records = []
        group = self._group(req.group_id, req.member_epoch == JOIN_GROUP_MEMBER_EPOCH, records)
        gid = group.group_id
        member, replaced_id = self._member(group, req, records, classic)
        updated = member.copy()
        if req.instance_id is not None:
            updated.instance_id = req.instance_id
        if req.rack_id is not None:
            updated.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            updated.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.server_assignor is not None:
            updated.server_assignor = req.server_assignor
        if req.subscribed_topic_names is not None:
            updated.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            updated.subscribed_topic_regex = req.subscribed_topic_regex or None  # librdkafka's "": none
        updated.client_id, updated.client_host = req.client_id, req.client_host
        updated.classic = classic
        updated.acl_identity = req.acl_identity
        new_member = replaced_id is None and member.member_id not in group.members
        if replaced_id is not None:
            records.extend(rec.member_tombstones(gid, replaced_id))
            records.append(rec.member_metadata_record(gid, updated))
            records.append(rec.target_assignment_record(gid, updated.member_id,
                                                        group.target_assignment.get(replaced_id, {})))
            records.append(rec.current_assignment_record(gid, updated))
        elif new_member or not updated.same_metadata(member):
            records.append(rec.member_metadata_record(gid, updated))
        bump = new_member or updated.subscribed_topic_names != member.subscribed_topic_names \
            or updated.subscribed_topic_regex != member.subscribed_topic_regex
        members = [m for mid, m in group.members.items() if mid not in (member.member_id, replaced_id)] + [updated]
        resolved = self._resolve(members)
        metadata = self._subscription_metadata(group, members, resolved)
        if metadata != group.subscription_metadata:
            records.append(rec.subscription_metadata_record(gid, metadata))
            bump = True
        group_epoch = group.group_epoch + 1 if bump else group.group_epoch
        if bump:
            records.append(rec.group_epoch_record(gid, group_epoch))
        # the target assignment
        targets = dict(group.target_assignment)
        if replaced_id is not None:
            targets[updated.member_id] = targets.pop(replaced_id, {})
        assignment_epoch = group.assignment_epoch
        if group_epoch > group.assignment_epoch:
            topics = {tid: n for tid, n in metadata.values()}
            by_id = {name: tid for name, (tid, _n) in metadata.items()}
            assignor = preferred_assignor(members, self.assignors[0])
            specs = {m.member_id: MemberSpec({by_id[t] for t in group.member_topics(m, resolved) if t in by_id},
                                             targets.get(m.member_id, {})) for m in members}
            new_targets = assign(assignor, specs, topics)
            for mid, target in new_targets.items():
                if target != targets.get(mid, {}):
                    records.append(rec.target_assignment_record(gid, mid, target))
            targets = new_targets
            assignment_epoch = group_epoch
            records.append(rec.target_assignment_epoch_record(gid, assignment_epoch))
            log.info("consumer group %s: new target assignment at epoch %d by %s", gid, assignment_epoch, assignor)
        # reconcile the member towards its target
        owned_by_other = _owned_by_other(group, updated.member_id, replaced_id)
        reconciled = reconcile(updated, assignment_epoch, targets.get(updated.member_id, {}), req.owned,
                               owned_by_other)
        # the replacing static member's record was written above: again only if it moved on
        if not reconciled.same_assignment(updated if replaced_id is not None else member) or new_member:
            records.append(rec.current_assignment_record(gid, reconciled))
        full = req.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            req.rebalance_timeout_ms != -1 and req.subscribed_topic_names is not None and req.owned is not None)
        answer = HeartbeatResult(member_id=reconciled.member_id, member_epoch=reconciled.member_epoch,
                                 heartbeat_interval_ms=self.heartbeat_interval_ms(gid),
                                 assignment=reconciled.assigned if full or reconciled.assigned != member.assigned
                                 or new_member else None)
        rebalanced = assignment_epoch != group.assignment_epoch

        def apply():
            replaced = self.groups.get(gid)
            if replaced is not group:
                self.groups[gid] = group
                if replaced is not None and replaced.members:
                    self.release_classic_group(replaced)  # the classic group's waiters and timers
                    for mid in group.members:
                        self._schedule_session(group, mid)
            if replaced_id is not None:
                group.remove_member(replaced_id)
                self._cancel_member_timers(group, replaced_id)
            group.group_epoch = group_epoch
            group.subscription_metadata = metadata
            group.resolved_regexes = resolved
            group.assignment_epoch = assignment_epoch
            group.target_assignment = {mid: t for mid, t in targets.items() if mid in group.members
                                       or mid == reconciled.member_id}
            group.put_member(reconciled)
            group.update_state(wall_ms())
            if rebalanced:
                self.rebalances += 1
            if reconciled.state == UNREVOKED_PARTITIONS:
                if member.state != UNREVOKED_PARTITIONS or reconciled.member_epoch != member.member_epoch:
                    self._schedule_rebalance_timeout(group, reconciled)
            else:
                handle = group.rebalance_timers.pop(reconciled.member_id, None)
                if handle is not None:
                    handle.cancel()
            self._schedule_session(group, reconciled.member_id)
        return self._write(gid, records, apply, answer)

    # -- leaving and fencing -----------------------------------------------------------------------------
    def _leave(self, req):
        group = self.groups.get(req.group_id)
        if not isinstance(group, ConsumerGroup) or group.state == g.DEAD:
            raise UnknownMemberIdError(f"Consumer group {req.group_id} not found.")
        if req.instance_id is None:
            member = group.members.get(req.member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {req.member_id} is not a member of group {req.group_id}.")
        else:
            member = group.static_member(req.instance_id)
            if member is None:
                raise UnknownMemberIdError(f"Instance id {req.instance_id} is unknown.")
            if member.member_id != req.member_id:
                raise FencedInstanceIdError(f"Static member {req.member_id} with instance id {req.instance_id} was "
                                            f"fenced by member {member.member_id}.")
            if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("static member %s (instance %s) of consumer group %s leaves for now", member.member_id,
                         req.instance_id, group.group_id)
                away = member.copy()
                away.member_epoch = LEAVE_GROUP_STATIC_MEMBER_EPOCH
                away.pending_revocation = {}

                def apply():
                    group.put_member(away)
                    group.update_state(wall_ms())
                return self._write(group.group_id, [rec.current_assignment_record(group.group_id, away)], apply,
                                   HeartbeatResult(member_id=member.member_id,
                                                   member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH))
        log.info("member %s left consumer group %s", member.member_id, group.group_id)
        return self._fence(group, member, "left the group",
                           HeartbeatResult(member_id=member.member_id, member_epoch=req.member_epoch))

    def _fence(self, group, member, reason, answer=None):
        """Removes the member (its records deleted) and bumps the group epoch; when only
        classic members would remain, the group may become a classic one instead."""
        gid = group.group_id
        if self.should_downgrade(group, member.member_id):
            result = self.downgrade(group, member.member_id, answer or HeartbeatResult())
            if result is not None:
                return result
        records = rec.member_tombstones(gid, member.member_id)
        rest = [m for mid, m in group.members.items() if mid != member.member_id]
        resolved = self._resolve(rest)
        metadata = self._subscription_metadata(group, rest, resolved)
        if metadata != group.subscription_metadata:
            records.append(rec.subscription_metadata_record(gid, metadata))
        epoch = group.group_epoch + 1
        records.append(rec.group_epoch_record(gid, epoch))

        def apply():
            group.remove_member(member.member_id)
            self._cancel_member_timers(group, member.member_id)
            group.subscription_metadata = metadata
            group.resolved_regexes = resolved
            group.group_epoch = epoch
            group.update_state(wall_ms())
            log.info("consumer group %s: member %s removed (%s), group epoch %d", gid, member.member_id, reason,
                     epoch)
        result = self._write(gid, records, apply, answer or HeartbeatResult())
        if answer is None and isinstance(result, HeartbeatResult) and result.error != NONE:
            log.warning("consumer group %s: could not remove member %s: %s", gid, member.member_id, result.message)
        return result

    # -- offsets (Kafka's ConsumerGroup.validateOffsetCommit / validateOffsetFetch) ------------------------
    @staticmethod
    def check_commit(group, member_id, epoch, api_version, transactional=False):
        """None when a commit to this consumer group may be stored, else the error code. A
        commit without a member epoch (admin clients, consumers outside the group) is only
        taken by a group without members."""
        if epoch < 0 and not group.members:
            return None
        member = group.members.get(member_id)
        if member is None:
            return UnknownMemberIdError.code
        if not transactional and member.classic is None and api_version < 9:
            return UnsupportedVersionError.code  # members of a consumer group commit with v9+
        if epoch != member.member_epoch:
            # a classic member's generation is its member epoch (Kafka's validateMemberEpoch)
            return IllegalGenerationError.code if member.classic is not None else StaleMemberEpochError.code
        return None

    @staticmethod
    def check_fetch(group, member_id, epoch):
        """OffsetFetch v9's member id and epoch (none given: an admin's fetch, accepted)."""
        if member_id is None and epoch < 0:
            return None
        member = group.members.get(member_id or "")
        if member is None:
            return UnknownMemberIdError.code
        if epoch != member.member_epoch:
            return StaleMemberEpochError.code
        return None

    # -- describe ------------------------------------------------------------------------------------------
    def describe(self, group_id):
        """(error code, the ConsumerGroup or None): NOT_COORDINATOR, GROUP_ID_NOT_FOUND (unknown,
        or of another type)."""
        not_coordinator = self.manager.not_coordinator(group_id)
        if not_coordinator is not None:
            return not_coordinator, None
        group = self.groups.get(group_id)
        if not isinstance(group, ConsumerGroup) or group.state == g.DEAD:
            return GroupIdNotFoundError.code, None
        return NONE, group

    def topic_name(self, topic_id):
        info = self.broker.topics_by_id.get(topic_id)
        return info.name if info is not None else ""


class _Uncommitted:
    """A group (the object registered under its id, or None) and its state before the first of
    its writes still replicating; ``pending``: how many are."""

    __slots__ = ("group", "state", "pending")

    def __init__(self, group):
        self.group = group
        self.state = group.snapshot() if isinstance(group, ConsumerGroup) else \
            group.state if group is not None else None
        self.pending = 0


def _owned_by_other(group, member_id, replaced_id):
    """(topic id, partition) -> True while a member other than this one (or the static member
    it replaces) holds the partition: the group's partition owners, less the member's own."""
    own = set()
    for mid in (member_id, replaced_id):
        m = group.members.get(mid)
        if m is not None:
            own.update((tid, p) for tid, parts in m.owned().items() for p in parts)
    held = group.partition_epochs

    def owned(tid, p):
        return (tid, p) in held and (tid, p) not in own
    return owned


def write_records(manager, group_id, records, apply, answer):
    """Appends a modern group's ``records``, then ``apply()`` changes the memory; returns
    ``answer`` (a HeartbeatResult), or a future of it while the write replicates. A failed
    append changes nothing and answers its error (consumer and share groups alike)."""
    if not records:
        apply()
        return answer
    try:
        written = manager.store.append(group_id, records, for_offsets=False)
    except StoreError as e:
        return HeartbeatResult(e.code, f"writing the group's records failed: {e.cause}")
    apply()
    if written.replicated is None:
        return answer
    out = manager.loop.create_future()

    def done(f):
        if not out.done():
            e = f.exception()
            out.set_result(answer if e is None else HeartbeatResult(e.code, f"writing the group's records "
                                                                             f"failed: {e.cause}"))
    written.replicated.add_done_callback(done)
    return out
