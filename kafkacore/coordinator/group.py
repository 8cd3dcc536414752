"""A classic consumer group and its members: the state the group coordinator keeps per group.

States are Kafka's (``GroupState``): Empty, PreparingRebalance, CompletingRebalance, Stable,
Dead. Everything here runs on the broker's event loop; there are no locks. The rules that
move a group between states live in ``group_coordinator``; this module holds the data and the
questions asked of it (who has rejoined, which protocol every member supports, which topics
the members subscribe to, ...).
"""
from __future__ import annotations

import struct

from ..protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from ..protocol.wire import ProtocolDecodeError, Reader

EMPTY = "Empty"
PREPARING_REBALANCE = "PreparingRebalance"
COMPLETING_REBALANCE = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD)

CONSUMER_PROTOCOL_TYPE = "consumer"
GROUP_TYPE = "classic"


class Member:
    """One member. ``join_future`` / ``sync_future`` are set while a JoinGroup / SyncGroup
    waits for the rebalance (Kafka's awaitingJoinCallback / awaitingSyncCallback); they stay
    set even when the client's connection went away, as in Kafka: the member still counts as
    rejoined. ``deadline`` is the loop time its session expires at, ``timer`` the handle
    that checks it."""

    __slots__ = ("member_id", "instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_future",
                 "sync_future", "is_new", "deadline", "timer")

    def __init__(self, member_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                 protocol_type, protocols, assignment=b""):
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols  # [(name, metadata bytes)] in the member's order of preference
        self.assignment = assignment
        self.join_future = None
        self.sync_future = None
        self.is_new = False
        self.deadline = 0.0
        self.timer = None

    @property
    def awaiting_join(self):
        return self.join_future is not None

    @property
    def awaiting_sync(self):
        return self.sync_future is not None

    def protocol_names(self):
        return [name for name, _md in self.protocols]

    def metadata(self, protocol):
        for name, md in self.protocols:
            if name == protocol:
                return md
        return b""

    def matches(self, protocols):
        """The same protocols, in the same order, with the same metadata."""
        if len(protocols) != len(self.protocols):
            return False
        return all(a[0] == b[0] and bytes(a[1]) == bytes(b[1]) for a, b in zip(protocols, self.protocols))

    def vote(self, candidates):
        """The first of this member's protocols that every member supports."""
        for name, _md in self.protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

    def __repr__(self):
        return f"Member({self.member_id!r}, instance={self.instance_id!r})"


class Group:
    __slots__ = ("group_id", "state", "generation", "protocol_type", "protocol_name", "leader_id", "members",
                 "pending_members", "static_members", "pending_sync", "offsets", "current_state_timestamp",
                 "new_member_added", "initial_delay", "join_timer", "sync_timer", "subscribed_topics",
                 "pending_txn_offsets", "offset_batches")

    def __init__(self, group_id, now_ms=-1):
        self.group_id = group_id
        self.state = EMPTY
        self.generation = 0
        self.protocol_type = None  # None: a group only used to store offsets ("simple" consumers)
        self.protocol_name = None
        self.leader_id = None
        self.members: dict[str, Member] = {}  # insertion order, as Kafka's LinkedHashMap
        self.pending_members: dict[str, object] = {}  # member id -> expiry TimerHandle (MEMBER_ID_REQUIRED dance)
        self.static_members: dict[str, str] = {}  # group.instance.id -> member id
        self.pending_sync: set[str] = set()  # members that have not sent SyncGroup for this generation
        self.offsets: dict = {}  # (topic, partition) -> OffsetAndMetadata
        # (topic, partition) -> the __consumer_offsets offset of the batch that wrote its committed
        # offset: a transaction's offsets replace only older ones (Kafka's olderThan)
        self.offset_batches: dict = {}
        # TxnOffsetCommit's offsets, by producer id, until that producer's COMMIT (applied) or
        # ABORT (dropped) marker reaches the group's __consumer_offsets partition:
        # {producer id: {(topic, partition): (OffsetAndMetadata, offset of its batch)}}
        self.pending_txn_offsets: dict[int, dict] = {}
        self.current_state_timestamp = now_ms
        self.new_member_added = False
        self.initial_delay = False  # the first rebalance of an empty group is being delayed
        self.join_timer = None
        self.sync_timer = None
        self.subscribed_topics = None  # set of topics, or None when not known

    # -- state --------------------------------------------------------------------------------
    def transition(self, state, now_ms):
        self.state = state
        self.current_state_timestamp = now_ms

    def is_leader(self, member_id):
        return self.leader_id is not None and self.leader_id == member_id

    def can_rebalance(self):
        return self.state in (STABLE, COMPLETING_REBALANCE, EMPTY)

    @property
    def group_type(self):
        return GROUP_TYPE

    # -- members ------------------------------------------------------------------------------
    def add(self, member, join_future=None):
        if not self.members:
            self.protocol_type = member.protocol_type
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.join_future = join_future
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id):
        member = self.members.pop(member_id, None)
        if member is not None and member.instance_id is not None \
                and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id, old_member_id, new_member_id):
        """Gives the static member a new member id, keeping its place, assignment and
        leadership. Returns the member (its old futures are the caller's to fence)."""
        member = self.members.pop(old_member_id)
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        if old_member_id in self.pending_sync:
            self.pending_sync.discard(old_member_id)
            self.pending_sync.add(new_member_id)
        return member

    def num_awaiting_join(self):
        return sum(1 for m in self.members.values() if m.join_future is not None)

    def all_joined(self):
        """Every member has rejoined and no MEMBER_ID_REQUIRED member is still expected."""
        return not self.pending_members and all(m.join_future is not None for m in self.members.values())

    def not_yet_rejoined(self):
        return [m for m in self.members.values() if m.join_future is None]

    def is_static_fenced(self, member_id, instance_id):
        """A static member known under a different member id (Kafka's isStaticMemberFenced)."""
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def rebalance_timeout_ms(self):
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def elect_joined_leader(self):
        """Keeps the leader if it rejoined, else the first member that did. False when none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.join_future is not None:
            return True
        for member_id, m in self.members.items():
            if m.join_future is not None:
                self.leader_id = member_id
                return True
        return False

    # -- protocols ----------------------------------------------------------------------------
    def candidate_protocols(self):
        """Protocols every member supports."""
        members = list(self.members.values())
        if not members:
            return set()
        common = set(members[0].protocol_names())
        for m in members[1:]:
            common &= set(m.protocol_names())
        return common

    def supports_protocols(self, protocol_type, names):
        if not self.members:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(self.candidate_protocols() & set(names))

    def select_protocol(self):
        """Each member votes for its most preferred protocol among those all members support;
        the most votes win (ties: the one voted for first, in member order)."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for m in self.members.values():
            name = m.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        best = max(votes.values())
        return next(name for name, n in votes.items() if n == best)

    def current_member_metadata(self):
        """[(member id, instance id, metadata for the selected protocol)] for the leader."""
        return [(m.member_id, m.instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def compute_subscribed_topics(self):
        """Topics the members of a consumer group subscribe to, from their subscriptions (the
        consumer protocol's metadata); None when not a consumer group or one does not parse."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or self.protocol_name is None:
            return None
        topics = set()
        for m in self.members.values():
            parsed = parse_subscription(m.metadata(self.protocol_name))
            if parsed is None:
                return None
            topics.update(parsed)
        return topics

    def is_subscribed_to(self, topic):
        """Unknown subscriptions count as subscribed (Kafka errs on the safe side)."""
        if self.subscribed_topics is None:
            return True
        return topic in self.subscribed_topics

    def __repr__(self):
        return (f"Group({self.group_id!r}, {self.state}, generation={self.generation}, "
                f"members={list(self.members)})")


def parse_subscription(data):
    """The topics of a ConsumerProtocolSubscription (int16 version + the struct), or None."""
    if data is None or len(data) < 2:
        return None
    try:
        (version,) = struct.unpack_from(">h", data, 0)
        if version < 0:
            return None
        sub = ConsumerProtocolSubscription.read(Reader(bytes(data), 2),
                                                min(version, ConsumerProtocolSubscription.MAX_VERSION))
    except (ProtocolDecodeError, struct.error, ValueError):
        return None
    return set(sub.topics or ())


def apply_committed_txn_offsets(offsets: dict, batches: dict, pending: dict) -> None:
    """A transaction's pending offsets ({tp: (OffsetAndMetadata, batch offset)}) at its COMMIT,
    into ``offsets`` and ``batches``: each replaces the committed offset only if that one was
    written before it (Kafka's CommitRecordMetadataAndOffset.olderThan), so a plain commit made
    while the transaction was open is not undone by the transaction's older one."""
    for tp, (om, batch) in pending.items():
        if tp not in offsets or batches.get(tp, -1) < batch:
            offsets[tp] = om
            batches[tp] = batch
