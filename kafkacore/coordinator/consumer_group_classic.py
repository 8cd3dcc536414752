"""Classic members in KIP-848 consumer groups, and the online migration between classic and
consumer groups (KIP-848 "Upgrade & downgrade"; the classic-member parts of Kafka 4.0's
GroupMetadataManager, ConsumerGroup.fromClassicGroup and ClassicGroup.fromConsumerGroup).

``group.consumer.migration.policy`` (Kafka's ConsumerGroupMigrationPolicy): ``bidirectional``
(the default), ``upgrade``, ``downgrade`` or ``disabled``.

- **Upgrade.** A ConsumerGroupHeartbeat joining a classic group with members turns it into a
  consumer group, when the policy allows upgrades, the group uses the ``consumer`` protocol type
  and it has no more members than ``group.consumer.max.size``; otherwise GROUP_ID_NOT_FOUND, as
  in Kafka. Each classic member becomes a member at the classic generation, Stable, owning (and
  targeted with) its last classic assignment, subscribed to the topics of its JoinGroup metadata;
  the classic group's record is tombstoned and the consumer group's records written in its
  place. Members waiting in JoinGroup or SyncGroup are answered REBALANCE_IN_PROGRESS.
- **Classic members** keep speaking JoinGroup / SyncGroup / Heartbeat / LeaveGroup (served
  here): a JoinGroup is the member's heartbeat (its subscription and owned partitions come from
  its JoinGroup metadata), answered with its member epoch as the generation and its first
  protocol's name; SyncGroup hands it its assigned partitions; a Heartbeat answers
  REBALANCE_IN_PROGRESS when it must rejoin (an older epoch than the group's, partitions to
  revoke, or partitions that became free for it). Their sessions use their own
  ``session.timeout.ms``; told to rejoin, or answered a JoinGroup, a member must rejoin or sync
  within its rebalance timeout, else it is fenced (Kafka's join and sync timeouts). New classic members may join a consumer group whatever the policy
  (Kafka does the same); their protocols must be ``consumer`` and shared by the other classic
  members (else INCONSISTENT_GROUP_PROTOCOL).
- **Downgrade.** When the last member using the consumer protocol leaves (or is fenced) and
  classic members remain, the policy allowing downgrades and their number within
  ``group.max.size``, the group becomes a classic group: its records are tombstoned, a classic
  GroupMetadata record written (generation = the group epoch, each member's target assignment
  as its assignment) and a rebalance started, in which the members rejoin.

Committed offsets are keyed by group id and stay with the group both ways.
"""
from __future__ import annotations

import asyncio
import logging
import struct
import uuid

from ..clock import wall_ms
from ..errors import (FencedInstanceIdError, GroupIdNotFoundError, IllegalGenerationError,
                      InconsistentGroupProtocolError, KafkaError, MemberIdRequiredError, RebalanceInProgressError,
                      UnknownMemberIdError)
from ..protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from ..protocol.messages.consumer_protocol_assignment import TopicPartition as AssignedTopicPartition
from ..protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from ..protocol.wire import ProtocolDecodeError, Reader, Writer
from . import consumer_group_records as rec
from . import group as g
from .consumer_group import (MEMBER_STABLE, UNRELEASED_PARTITIONS, UNREVOKED_PARTITIONS, ClassicMember, ConsumerGroup,
                             ConsumerGroupMember)
from .group import Group, Member
from .offset_store import group_key, group_value

log = logging.getLogger("kafkacore.coordinator")

NONE = 0
POLICIES = ("bidirectional", "upgrade", "downgrade", "disabled")


def upgrade_enabled(policy):
    return policy in ("bidirectional", "upgrade")


def downgrade_enabled(policy):
    return policy in ("bidirectional", "downgrade")


# -- the embedded consumer protocol ----------------------------------------------------------------
def _version(data, what):
    if data is None or len(data) < 2:
        raise ProtocolDecodeError(f"consumer {what} shorter than its version")
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        raise ProtocolDecodeError(f"consumer {what} version {version}")
    return version


def decode_subscription(metadata) -> ConsumerProtocolSubscription:
    data = bytes(metadata)
    version = _version(data, "subscription")
    return ConsumerProtocolSubscription.read(Reader(data, 2), min(version, ConsumerProtocolSubscription.MAX_VERSION))


def decode_assignment(data) -> dict:
    """{topic name: set of partitions}; empty bytes are an empty assignment."""
    data = bytes(data or b"")
    if not data:
        return {}
    version = _version(data, "assignment")
    a = ConsumerProtocolAssignment.read(Reader(data, 2), min(version, ConsumerProtocolAssignment.MAX_VERSION))
    out: dict = {}
    for tp in a.assigned_partitions or ():
        out.setdefault(tp.topic, set()).update(tp.partitions)
    return out


def encode_assignment(by_name: dict, version: int) -> bytes:
    """A ConsumerProtocolAssignment at the version of the member's subscription (Kafka's rule)."""
    version = max(0, min(version, ConsumerProtocolAssignment.MAX_VERSION))
    w = Writer()
    w.int16(version)
    ConsumerProtocolAssignment(assigned_partitions=[
        AssignedTopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(by_name.items()) if ps
    ]).write(w, version)
    return w.getvalue()


class ClassicMembers:
    """The classic-protocol requests of consumer groups and the migrations, mixed into the
    ConsumerGroupCoordinator (its ``_heartbeat``, ``_write`` and fencing serve them).
    ``release_classic_group(group)`` and ``start_classic_group(group, rebalance reason or
    None)`` are the classic coordinator's: it answers a replaced classic group's waiters
    (REBALANCE_IN_PROGRESS) and stops its timers, or starts a classic group's sessions (and a
    rebalance)."""

    release_classic_group = None
    start_classic_group = None
    request_type = None  # the host's HeartbeatRequest

    # -- topic ids <-> names ------------------------------------------------------------------------
    def _ids(self, by_name):
        out = {}
        for name, parts in by_name.items():
            info = self.broker.topic(name)
            if info is not None:
                valid = {p for p in parts if 0 <= p < info.partitions}
                if valid:
                    out[info.topic_id] = valid
        return out

    def _names(self, by_id):
        out = {}
        for tid, parts in by_id.items():
            name = self.topic_name(tid)
            if name and parts:
                out[name] = set(parts)
        return out

    # -- upgrade -------------------------------------------------------------------------------------
    def can_upgrade(self, classic: Group) -> bool:
        """Kafka's validateOnlineUpgrade."""
        why = None
        if not upgrade_enabled(self.migration_policy):
            why = "the online upgrade is disabled"
        elif classic.protocol_type != g.CONSUMER_PROTOCOL_TYPE:
            why = "the group does not use the consumer embedded protocol"
        elif len(classic.members) > self.max_size:
            why = "the group size exceeds the consumer group maximum size"
        if why is not None:
            log.info("cannot upgrade classic group %s to consumer group because %s", classic.group_id, why)
        return why is None

    def upgraded(self, classic: Group, records: list) -> ConsumerGroup:
        """The consumer group the classic group becomes (Kafka's convertToConsumerGroup); its
        records are added to ``records``. Nothing is changed in memory here."""
        gid = classic.group_id
        group = ConsumerGroup(gid, wall_ms())
        group.group_epoch = group.assignment_epoch = classic.generation
        group.offsets, group.offset_batches = classic.offsets, classic.offset_batches
        group.pending_txn_offsets = classic.pending_txn_offsets
        for cm in classic.members.values():
            try:
                metadata = cm.metadata(classic.protocol_name) if classic.protocol_name else cm.protocols[0][1]
                sub = decode_subscription(metadata)
                assigned = self._ids(decode_assignment(cm.assignment))
            except (ProtocolDecodeError, IndexError, ValueError) as e:
                raise GroupIdNotFoundError(f"Cannot upgrade the classic group {gid} to consumer group because the "
                                           f"embedded consumer protocol is malformed: {e}.")
            member = ConsumerGroupMember(
                cm.member_id, instance_id=cm.instance_id, rack_id=sub.rack_id, client_id=cm.client_id,
                client_host=cm.client_host, subscribed_topic_names=sub.topics or (),
                rebalance_timeout_ms=cm.rebalance_timeout_ms, member_epoch=classic.generation,
                previous_member_epoch=classic.generation, state=MEMBER_STABLE, assigned=assigned,
                classic=ClassicMember(cm.session_timeout_ms, cm.protocols))
            group.put_member(member)
            group.target_assignment[member.member_id] = {tid: set(p) for tid, p in assigned.items()}
        group.update_state(wall_ms())
        # Kafka's order: the classic group's tombstone, then createConsumerGroupRecords
        records.append((group_key(gid), None))
        records.extend(rec.member_metadata_record(gid, m) for m in group.members.values())
        records.append(rec.group_epoch_record(gid, group.group_epoch))
        records.extend(rec.target_assignment_record(gid, mid, t) for mid, t in group.target_assignment.items())
        records.append(rec.target_assignment_epoch_record(gid, group.assignment_epoch))
        records.extend(rec.current_assignment_record(gid, m) for m in group.members.values())
        log.info("upgrading classic group %s (generation %d, %d members) to a consumer group", gid,
                 classic.generation, len(group.members))
        return group

    # -- downgrade -----------------------------------------------------------------------------------
    def should_downgrade(self, group: ConsumerGroup, leaving_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember."""
        leaving = group.members.get(leaving_id)
        if leaving is None or leaving.classic is not None or len(group.members) <= 1:
            return False
        if any(m.classic is None for mid, m in group.members.items() if mid != leaving_id):
            return False
        if not downgrade_enabled(self.migration_policy):
            log.info("cannot downgrade consumer group %s to classic group because the online downgrade is "
                     "disabled", group.group_id)
            return False
        if len(group.members) - 1 > self.broker.config["group.max.size"]:
            log.info("cannot downgrade consumer group %s to classic group because its size is greater than "
                     "group.max.size", group.group_id)
            return False
        return True

    def downgrade(self, group: ConsumerGroup, leaving_id: str, answer):
        """The consumer group becomes a classic group without ``leaving_id`` (Kafka's
        convertToClassicGroup): its records are tombstoned, the classic group's written, and the
        classic coordinator starts a rebalance once they are. None (nothing done: the member is
        removed as usual) when a member's embedded protocol does not decode."""
        gid = group.group_id
        records = []
        for mid in group.members:
            records.extend(rec.member_tombstones(gid, mid))
        records.extend(rec.group_tombstones(gid))
        classic = Group(gid, wall_ms())
        classic.generation = group.group_epoch
        classic.offsets, classic.offset_batches = group.offsets, group.offset_batches
        classic.pending_txn_offsets = group.pending_txn_offsets
        for mid, m in group.members.items():
            if mid != leaving_id:
                classic.add(Member(mid, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                                   m.classic.session_timeout_ms, g.CONSUMER_PROTOCOL_TYPE, list(m.classic.protocols)))
        try:
            classic.protocol_name = classic.select_protocol()
            classic.subscribed_topics = classic.compute_subscribed_topics()
            assignments = {}
            for member in classic.members.values():
                version = _version(member.metadata(classic.protocol_name), "subscription")
                assignments[member.member_id] = member.assignment = encode_assignment(
                    self._names(group.target_assignment.get(member.member_id, {})), version)
        except (ProtocolDecodeError, ValueError) as e:
            log.warning("cannot downgrade consumer group %s: its members' embedded consumer protocol: %s", gid, e)
            return None
        classic.transition(g.STABLE, wall_ms())
        records.append((group_key(gid), group_value(classic, assignments)))

        def apply():
            self.cancel_timers(group)
            group.transition(g.DEAD, wall_ms())
            self.groups[gid] = classic
            log.info("consumer group %s is downgraded to a classic group (generation %d, %d members)", gid,
                     classic.generation, len(classic.members))
            self.start_classic_group(classic, f"downgrade of group {gid} from consumer to classic")
        return self._write(gid, records, apply, answer)

    # -- the classic members' join and sync timeouts (Kafka's consumerGroupJoinKey / SyncKey) ---------------
    def _schedule_classic_timeout(self, group, timers, member, what):
        """Fences the member unless it does ``what`` within its rebalance timeout."""
        timers[member.member_id] = self.loop.call_later(
            max(member.rebalance_timeout_ms, 0) / 1000, self._on_classic_timeout, group, timers, member.member_id,
            what)

    def _on_classic_timeout(self, group, timers, member_id, what):
        timers.pop(member_id, None)
        member = group.members.get(member_id)
        if self._closed or self.groups.get(group.group_id) is not group or member is None:
            return
        log.info("classic member %s of consumer group %s did not %s within its rebalance timeout (%d ms), "
                 "fencing it", member_id, group.group_id, what, member.rebalance_timeout_ms)
        self._fence(group, member, f"the classic member failed to {what} within the rebalance timeout")

    def _expect_rejoin(self, group, member):
        if member.member_id not in group.join_timers:
            self._schedule_classic_timeout(group, group.join_timers, member, "rejoin")

    @staticmethod
    def _cancel(timers, member_id):
        handle = timers.pop(member_id, None)
        if handle is not None:
            handle.cancel()

    # -- the classic protocol's requests to a consumer group -----------------------------------------------
    def _classic_member(self, group, member_id, instance_id):
        """Kafka's validateConsumerGroupMember + throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            member = group.members.get(member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        else:
            member = group.static_member(instance_id)
            if member is None:
                raise UnknownMemberIdError(f"Member with instance id {instance_id} is not a member of group "
                                           f"{group.group_id}.")
            if member_id and member.member_id != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced "
                                            f"by member {member.member_id}.")
        if member.classic is None:
            raise UnknownMemberIdError(f"Member {member.member_id} does not use the classic protocol.")
        return member

    def classic_join(self, group, member_id, instance_id, client_id, client_host, session_timeout_ms,
                     rebalance_timeout_ms, protocol_type, protocols, require_known_member_id):
        """A JoinGroup to a consumer group with members (Kafka's classicGroupJoinToConsumerGroup).
        Returns (error, member id, generation, protocol name), or a future of it while the records
        replicate."""
        unknown = not member_id
        member_id = member_id or str(uuid.uuid4())
        try:
            if protocol_type != g.CONSUMER_PROTOCOL_TYPE or not protocols or not self._shared_protocols(
                    group, member_id, [n for n, _md in protocols]):
                raise InconsistentGroupProtocolError(f"Member {member_id}'s protocols are not supported.")
            if unknown and require_known_member_id and instance_id is None:
                self._check_size(group)
                raise MemberIdRequiredError()
            try:
                sub = decode_subscription(protocols[0][1])
            except (ProtocolDecodeError, ValueError) as e:
                raise InconsistentGroupProtocolError(f"Member {member_id}'s subscription is malformed: {e}.")
            existing = group.members.get(member_id) if instance_id is None else group.static_member(instance_id)
            if existing is not None and instance_id is not None and not unknown \
                    and existing.member_id != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced "
                                            f"by member {existing.member_id}.")
            if existing is not None and existing.classic is None and existing.member_id == member_id:
                raise UnknownMemberIdError(f"Member {member_id} does not use the classic protocol.")
            # (a member id the group does not know is a new member: the one MEMBER_ID_REQUIRED gave)
            owned = {}
            for tp in sub.owned_partitions or ():
                owned.setdefault(tp.topic, set()).update(tp.partitions)
            joining = existing is None or existing.member_id != member_id
            req = self.request_type(
                group.group_id, member_id, 0 if joining else existing.member_epoch, instance_id=instance_id,
                rack_id=sub.rack_id or None, rebalance_timeout_ms=rebalance_timeout_ms,
                subscribed_topic_names=list(sub.topics or ()), owned=[] if joining else [
                    (tid, sorted(ps)) for tid, ps in self._ids(owned).items()],
                client_id=client_id, client_host=client_host)
            result = self._heartbeat(req, ClassicMember(session_timeout_ms, protocols))
        except MemberIdRequiredError:
            return MemberIdRequiredError.code, member_id, -1, None
        except KafkaError as e:
            log.info("JoinGroup of %s to consumer group %s: %s", member_id, group.group_id, e)
            return e.code, "" if unknown else member_id, -1, None
        protocol_name = protocols[0][0]

        def to_join(r):
            if r.error != NONE:
                return r.error, "" if unknown else member_id, -1, None
            member = group.members.get(r.member_id)
            if self.groups.get(group.group_id) is group and member is not None:
                self._cancel(group.join_timers, r.member_id)
                self._cancel(group.sync_timers, r.member_id)
                self._schedule_classic_timeout(group, group.sync_timers, member, "sync")
            return NONE, r.member_id, r.member_epoch, protocol_name
        if not asyncio.isfuture(result):
            return to_join(result)
        out = self.loop.create_future()

        def done(f):
            if not out.done():
                out.set_result(to_join(f.result()))
        result.add_done_callback(done)
        return out

    def _shared_protocols(self, group, member_id, names):
        """Kafka's supportsClassicProtocols: a protocol every other classic member supports too."""
        others = [m for mid, m in group.members.items() if m.classic is not None and mid != member_id]
        if not others:
            return bool(names)
        return any(all(n in {p for p, _md in m.classic.protocols} for m in others) for n in names)

    def classic_sync(self, group, generation, member_id, instance_id, protocol_type, protocol_name):
        """A SyncGroup to a consumer group (Kafka's classicGroupSyncToConsumerGroup). Returns
        (error, protocol type, protocol name, assignment bytes)."""
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation != member.member_epoch:
                raise IllegalGenerationError(f"The request generation id {generation} is not equal to the member "
                                             f"epoch {member.member_epoch} of member {member.member_id}.")
            if (protocol_type is not None and protocol_type != g.CONSUMER_PROTOCOL_TYPE) or \
                    (protocol_name is not None and protocol_name != member.classic.protocol_name):
                raise InconsistentGroupProtocolError("The protocol type or name does not match the member's.")
            if group.group_epoch > member.member_epoch and member.state != UNREVOKED_PARTITIONS:
                self._expect_rejoin(group, member)
                raise RebalanceInProgressError(f"A new rebalance is triggered in group {group.group_id} and member "
                                               f"{member.member_id} should rejoin to catch up.")
        except KafkaError as e:
            return e.code, None, None, b""
        self._cancel(group.sync_timers, member.member_id)
        self._schedule_session(group, member.member_id)
        version = _version(member.classic.protocols[0][1], "subscription")
        return (NONE, g.CONSUMER_PROTOCOL_TYPE, member.classic.protocol_name,
                encode_assignment(self._names(member.assigned), version))

    def classic_heartbeat(self, group, member_id, instance_id, generation):
        """A Heartbeat to a consumer group (Kafka's classicGroupHeartbeatToConsumerGroup): the
        error code. REBALANCE_IN_PROGRESS tells the member to rejoin."""
        try:
            member = self._classic_member(group, member_id, instance_id)
            if generation != member.member_epoch:
                raise IllegalGenerationError(f"The request generation id {generation} is not equal to the member "
                                             f"epoch {member.member_epoch} of member {member.member_id}.")
        except KafkaError as e:
            return e.code
        self._schedule_session(group, member.member_id)
        if member.member_epoch < group.group_epoch or member.state == UNREVOKED_PARTITIONS or (
                member.state == UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(group, member)):
            self._expect_rejoin(group, member)
            return RebalanceInProgressError.code
        return NONE

    @staticmethod
    def _waiting_on_unreleased(group, member):
        """Kafka's waitingOnUnreleasedPartition: a partition of its target someone else still owns."""
        for tid, parts in group.target_assignment.get(member.member_id, {}).items():
            have = member.assigned.get(tid, set())
            if any(p not in have and (tid, p) in group.partition_epochs for p in parts):
                return True
        return False

    def classic_leave(self, group, leaving):
        """A LeaveGroup to a consumer group (Kafka's classicGroupLeaveToConsumerGroup): an error
        per (member id, instance id); an empty member id with an instance id removes that static
        member (an admin's removal)."""
        errors = []
        for member_id, instance_id in leaving:
            try:
                member = self._classic_member(group, member_id, instance_id)
            except KafkaError as e:
                errors.append(e.code)
                continue
            log.info("member %s has left consumer group %s through LeaveGroup", member.member_id, group.group_id)
            result = self._fence(group, member, "left the group through LeaveGroup")
            # (on a cluster the answer does not wait for the records to replicate)
            errors.append(NONE if asyncio.isfuture(result) else result.error)
        return errors

