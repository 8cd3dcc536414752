"""A KIP-848 consumer group and its members: the state the coordinator keeps per group (Kafka's
ConsumerGroup and ConsumerGroupMember, ``org.apache.kafka.coordinator.group.modern.consumer``).

- The **group epoch** goes up whenever the group's subscriptions or the subscribed topics'
  metadata change; the **assignment epoch** is the group epoch the target assignment was
  computed for; each member has its own **member epoch**, which reaches the assignment epoch
  once the member owns (only) what the target gives it. States (Kafka's names): Empty (no
  members), Assigning (the target is behind the group epoch), Reconciling (a member is not at
  the assignment epoch yet), Stable.
- A member's reconciliation state (Kafka's MemberState byte): STABLE, UNREVOKED_PARTITIONS
  (it must give partitions up before it moves on), UNRELEASED_PARTITIONS (partitions of its
  target are still owned by others).
- ``partition_epochs`` maps every partition some member owns (assigned or pending revocation)
  to that member's epoch: a partition in it is not handed to anyone else (Kafka's
  currentPartitionEpoch), so no partition has two owners.
- Committed offsets live here too, in the same attributes as a classic ``Group`` has, so that
  the GroupMetadataManager stores, expires and loads them without knowing the group type.

Assignments are {topic id (16 bytes): set of partitions}, as Kafka keys them. Everything runs on
the broker's event loop.
"""
from __future__ import annotations

from . import group as g

EMPTY = g.EMPTY
ASSIGNING = "Assigning"
RECONCILING = "Reconciling"
STABLE = g.STABLE
DEAD = g.DEAD
STATES = (EMPTY, ASSIGNING, RECONCILING, STABLE, DEAD)

GROUP_TYPE = "consumer"
PROTOCOL_TYPE = g.CONSUMER_PROTOCOL_TYPE  # what ListGroups / DescribeGroups report

# Kafka's MemberState
MEMBER_STABLE = 0
UNREVOKED_PARTITIONS = 1
UNRELEASED_PARTITIONS = 2
MEMBER_STATE_NAMES = {MEMBER_STABLE: "stable", UNREVOKED_PARTITIONS: "unrevoked_partitions",
                      UNRELEASED_PARTITIONS: "unreleased_partitions"}

# member epochs with a meaning (Kafka's ConsumerGroupHeartbeatRequest constants)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2


class ClassicMember:
    """What a member using the classic protocol brings (Kafka's ClassicMemberMetadata): its
    session timeout and its JoinGroup protocols [(name, metadata bytes)] in its order."""

    __slots__ = ("session_timeout_ms", "protocols")

    def __init__(self, session_timeout_ms, protocols):
        self.session_timeout_ms = session_timeout_ms
        self.protocols = tuple((name, bytes(md)) for name, md in protocols)

    @property
    def protocol_name(self):
        """The protocol the member is answered with (its first, as Kafka does)."""
        return self.protocols[0][0]

    def __eq__(self, other):
        return isinstance(other, ClassicMember) and (self.session_timeout_ms, self.protocols) == \
            (other.session_timeout_ms, other.protocols)

    __hash__ = None


def copy_assignment(a):
    return {tid: set(parts) for tid, parts in a.items() if parts}


def count_partitions(a):
    return sum(len(parts) for parts in a.values())


class ConsumerGroupMember:
    """One member. The fields compared by ``same_metadata`` are those of its
    ConsumerGroupMemberMetadata record; those of ``same_assignment`` of its
    ConsumerGroupCurrentMemberAssignment record."""

    __slots__ = ("member_id", "instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                 "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "member_epoch",
                 "previous_member_epoch", "state", "assigned", "pending_revocation", "classic", "acl_identity")

    def __init__(self, member_id, instance_id=None, rack_id=None, client_id="", client_host="",
                 subscribed_topic_names=(), subscribed_topic_regex=None, rebalance_timeout_ms=-1,
                 server_assignor=None, member_epoch=0, previous_member_epoch=0, state=MEMBER_STABLE,
                 assigned=None, pending_revocation=None, classic=None):
        self.member_id = member_id
        self.instance_id = instance_id
        self.rack_id = rack_id
        self.client_id = client_id
        self.client_host = client_host
        self.subscribed_topic_names = tuple(sorted(set(subscribed_topic_names)))
        self.subscribed_topic_regex = subscribed_topic_regex
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.member_epoch = member_epoch
        self.previous_member_epoch = previous_member_epoch
        self.state = state
        self.assigned = copy_assignment(assigned or {})
        self.pending_revocation = copy_assignment(pending_revocation or {})
        # a member speaking the classic protocol (JoinGroup/SyncGroup/Heartbeat) in this group:
        # ClassicMember (its session timeout and JoinGroup protocols), else None
        self.classic = classic
        # (principal, host) of its latest heartbeat, whose DESCRIBE ACLs filter what its regex
        # matches; None without an authorizer (and, as Kafka keeps none, after a reload until
        # the member heartbeats again)
        self.acl_identity = None

    def copy(self, member_id=None):
        out = ConsumerGroupMember.__new__(ConsumerGroupMember)
        for s in self.__slots__:
            setattr(out, s, getattr(self, s))
        out.assigned = copy_assignment(self.assigned)
        out.pending_revocation = copy_assignment(self.pending_revocation)
        if member_id is not None:
            out.member_id = member_id
        return out

    _METADATA = ("instance_id", "rack_id", "client_id", "client_host", "subscribed_topic_names",
                 "subscribed_topic_regex", "rebalance_timeout_ms", "server_assignor", "classic")
    _ASSIGNMENT = ("member_epoch", "previous_member_epoch", "state", "assigned", "pending_revocation")

    def same_metadata(self, other):
        return all(getattr(self, s) == getattr(other, s) for s in self._METADATA)

    def same_assignment(self, other):
        return all(getattr(self, s) == getattr(other, s) for s in self._ASSIGNMENT)

    def update_epoch(self, epoch):
        self.previous_member_epoch = self.member_epoch
        self.member_epoch = epoch

    def is_reconciled_to(self, assignment_epoch):
        return self.state == MEMBER_STABLE and self.member_epoch == assignment_epoch

    def owned(self):
        """Every partition the member holds: assigned and not yet revoked."""
        out = copy_assignment(self.assigned)
        for tid, parts in self.pending_revocation.items():
            out.setdefault(tid, set()).update(parts)
        return out

    def __repr__(self):
        return (f"ConsumerGroupMember({self.member_id!r}, epoch={self.member_epoch}, "
                f"state={MEMBER_STATE_NAMES.get(self.state, self.state)}, assigned={count_partitions(self.assigned)}, "
                f"revoking={count_partitions(self.pending_revocation)})")


class ConsumerGroup:
    __slots__ = ("group_id", "group_epoch", "assignment_epoch", "members", "static_members", "target_assignment",
                 "partition_epochs", "subscription_metadata", "resolved_regexes", "dead", "current_state_timestamp",
                 "offsets",
                 "offset_batches", "pending_txn_offsets", "session_timers", "rebalance_timers", "join_timers",
                 "sync_timers", "_state")

    pending_members: dict = {}  # never any (the classic MEMBER_ID_REQUIRED dance); read by the manager

    def __init__(self, group_id, now_ms=-1):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.target_assignment: dict[str, dict] = {}  # member id -> {topic id: set of partitions}
        self.partition_epochs: dict = {}  # (topic id, partition) -> epoch of the member owning it
        # topic name -> (topic id, partition count): the subscribed topics as last recorded
        # (Kafka's subscription metadata, its ConsumerGroupPartitionMetadata record)
        self.subscription_metadata: dict = {}
        # (regex, ACL identity) -> the topic names it matched when last resolved, less those the
        # identity may not describe (the members' regex subscriptions)
        self.resolved_regexes: dict[tuple, frozenset] = {}
        self.dead = False
        self.current_state_timestamp = now_ms
        self.offsets: dict = {}
        self.offset_batches: dict = {}
        self.pending_txn_offsets: dict = {}
        self.session_timers: dict = {}  # member id -> TimerHandle
        self.rebalance_timers: dict = {}  # member id -> TimerHandle
        # classic members: told to rejoin, or answered their JoinGroup, they must rejoin or sync
        # within their rebalance timeout (member id -> TimerHandle)
        self.join_timers: dict = {}
        self.sync_timers: dict = {}
        self._state = EMPTY

    # -- what the manager and the handlers ask of any group -------------------------------------
    @property
    def group_type(self):
        return GROUP_TYPE

    @property
    def protocol_type(self):
        return PROTOCOL_TYPE

    @property
    def protocol_name(self):
        return None

    @property
    def state(self):
        return DEAD if self.dead else self._state

    def transition(self, state, now_ms):
        """The manager's word that the group is gone (Dead)."""
        if state == DEAD:
            self.dead = True
        self.current_state_timestamp = now_ms

    def member_topics(self, member, resolved=None):
        """The topics a member subscribes to: its names and what its regex matched."""
        resolved = self.resolved_regexes if resolved is None else resolved
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            topics |= resolved.get((member.subscribed_topic_regex, member.acl_identity), frozenset())
        return topics

    @property
    def subscribed_topics(self):
        """The topics some member subscribes to (the manager keeps their offsets from expiring)."""
        return {t for m in self.members.values() for t in self.member_topics(m)}

    def is_subscribed_to(self, topic):
        return any(topic in self.member_topics(m) for m in self.members.values())

    # -- state ----------------------------------------------------------------------------------
    def update_state(self, now_ms):
        """Kafka's ConsumerGroup.maybeUpdateGroupState."""
        if not self.members:
            state = EMPTY
        elif self.group_epoch > self.assignment_epoch:
            state = ASSIGNING
        elif any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            state = RECONCILING
        else:
            state = STABLE
        if state != self._state:
            self._state = state
            self.current_state_timestamp = now_ms

    # -- members ----------------------------------------------------------------------------------
    def put_member(self, member):
        """Adds or replaces a member, keeping the owners of partitions current."""
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for tid, parts in member.owned().items():
            for p in parts:
                self.partition_epochs[(tid, p)] = member.member_epoch

    def remove_member(self, member_id):
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self._release(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target_assignment.pop(member_id, None)
        return member

    def _release(self, member):
        for tid, parts in member.owned().items():
            for p in parts:
                self.partition_epochs.pop((tid, p), None)

    # -- rollback --------------------------------------------------------------------------------
    def snapshot(self):
        """The group's state (offsets and timers aside, they have their own bookkeeping), for
        ``restore`` when a write fails (Kafka's timeline snapshots, reduced to one copy)."""
        return (self.group_epoch, self.assignment_epoch, {mid: m.copy() for mid, m in self.members.items()},
                dict(self.static_members), {mid: {t: set(p) for t, p in a.items()}
                                            for mid, a in self.target_assignment.items()},
                dict(self.partition_epochs), dict(self.subscription_metadata), dict(self.resolved_regexes),
                self.dead, self.current_state_timestamp, self._state)

    def restore(self, snapshot):
        (self.group_epoch, self.assignment_epoch, self.members, self.static_members, self.target_assignment,
         self.partition_epochs, self.subscription_metadata, self.resolved_regexes, self.dead,
         self.current_state_timestamp, self._state) = snapshot

    def static_member(self, instance_id):
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    def __repr__(self):
        return (f"ConsumerGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")


def preferred_assignor(members, default):
    """Kafka's computePreferredServerAssignor: the server assignor most members name (ties: the
    first named), else the configured default."""
    votes: dict[str, int] = {}
    for m in members:
        if m.server_assignor:
            votes[m.server_assignor] = votes.get(m.server_assignor, 0) + 1
    if not votes:
        return default
    best = max(votes.values())
    return next(name for name, n in votes.items() if n == best)
