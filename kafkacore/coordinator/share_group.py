"""A KIP-932 share group and its members: the membership state the coordinator keeps per group
(Kafka's ShareGroup and ShareGroupMember, ``org.apache.kafka.coordinator.group.modern.share``).

As in a KIP-848 consumer group there is a **group epoch** (bumped when the members or their
subscribed topics change), an **assignment epoch** (the group epoch the target assignment was
computed for) and a **member epoch** per member. Unlike a consumer group, a share partition may
be read by several members at once, so there is no revocation: a member gets its target
assignment, and the assignment epoch as its epoch, at its next heartbeat. Hence only Kafka's
three share-group states: Empty (no members), Stable, Dead.

A share group commits no offsets (its progress is the share-partition state the share
coordinator keeps in ``__share_group_state``); the offset attributes the GroupMetadataManager
reads of every group are here, always empty, so that it handles every type the same way.

Assignments are {topic id (16 bytes): set of partitions}, as Kafka keys them. Everything runs on
the broker's event loop.
"""
from __future__ import annotations

from . import group as g
from .consumer_group import copy_assignment, count_partitions

EMPTY = g.EMPTY
STABLE = g.STABLE
DEAD = g.DEAD
STATES = (EMPTY, STABLE, DEAD)

GROUP_TYPE = "share"
PROTOCOL_TYPE = "share"  # Kafka's ShareGroup.PROTOCOL_TYPE, what ListGroups reports

# member epochs with a meaning (Kafka's ShareGroupHeartbeatRequest constants)
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
MEMBER_STABLE = 0  # the State of a ShareGroupCurrentMemberAssignment record: always stable


class ShareGroupMember:
    """One member. ``same_metadata`` compares the fields of its ShareGroupMemberMetadata record,
    ``same_assignment`` those of its ShareGroupCurrentMemberAssignment record."""

    __slots__ = ("member_id", "rack_id", "client_id", "client_host", "subscribed_topic_names", "member_epoch",
                 "previous_member_epoch", "assigned")

    def __init__(self, member_id, rack_id=None, client_id="", client_host="", subscribed_topic_names=(),
                 member_epoch=0, previous_member_epoch=0, assigned=None):
        self.member_id = member_id
        self.rack_id = rack_id
        self.client_id = client_id
        self.client_host = client_host
        self.subscribed_topic_names = tuple(sorted(set(subscribed_topic_names)))
        self.member_epoch = member_epoch
        self.previous_member_epoch = previous_member_epoch
        self.assigned = copy_assignment(assigned or {})

    def copy(self):
        out = ShareGroupMember.__new__(ShareGroupMember)
        for s in self.__slots__:
            setattr(out, s, getattr(self, s))
        out.assigned = copy_assignment(self.assigned)
        return out

    _METADATA = ("rack_id", "client_id", "client_host", "subscribed_topic_names")
    _ASSIGNMENT = ("member_epoch", "previous_member_epoch", "assigned")

    def same_metadata(self, other):
        return all(getattr(self, s) == getattr(other, s) for s in self._METADATA)

    def same_assignment(self, other):
        return all(getattr(self, s) == getattr(other, s) for s in self._ASSIGNMENT)

    def __repr__(self):
        return (f"ShareGroupMember({self.member_id!r}, epoch={self.member_epoch}, "
                f"assigned={count_partitions(self.assigned)})")


class ShareGroup:
    __slots__ = ("group_id", "group_epoch", "assignment_epoch", "members", "target_assignment",
                 "subscription_metadata", "dead", "current_state_timestamp", "offsets", "offset_batches",
                 "pending_txn_offsets", "session_timers", "initialized")

    pending_members: dict = {}  # never any; read by the manager

    def __init__(self, group_id, now_ms=-1):
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ShareGroupMember] = {}
        self.target_assignment: dict[str, dict] = {}  # member id -> {topic id: set of partitions}
        # topic name -> (topic id, partition count): the subscribed topics as last recorded
        # (its ShareGroupPartitionMetadata record)
        self.subscription_metadata: dict = {}
        self.dead = False
        self.current_state_timestamp = now_ms
        self.offsets: dict = {}  # never any (see the module's docstring)
        self.offset_batches: dict = {}
        self.pending_txn_offsets: dict = {}
        self.session_timers: dict = {}  # member id -> TimerHandle
        # topic id -> (topic name, set of partitions): the share partitions whose state may
        # exist, ever assigned to a member (its ShareGroupStatePartitionMetadata record)
        self.initialized: dict = {}

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
        if self.dead:
            return DEAD
        return STABLE if self.members else EMPTY

    def transition(self, state, now_ms):
        """The manager's word that the group is gone (Dead)."""
        if state == DEAD:
            self.dead = True
        self.current_state_timestamp = now_ms

    @property
    def subscribed_topics(self):
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def is_subscribed_to(self, topic):
        return any(topic in m.subscribed_topic_names for m in self.members.values())

    def __repr__(self):
        return (f"ShareGroup({self.group_id!r}, {self.state}, epoch={self.group_epoch}, "
                f"assignment_epoch={self.assignment_epoch}, members={list(self.members)})")
