"""Partition assignors of the classic consumer protocol, and that protocol's two payloads.

A JoinGroup carries, per assignor, a ConsumerProtocolSubscription (int16 version, then the
struct of ../shared/kafka-protocol/message/ConsumerProtocolSubscription.json); the leader's
SyncGroup carries a ConsumerProtocolAssignment per member. Both are encoded at version 3, as
Kafka's Java client does, and decoded at whatever version a member sent (higher versions are read
as 3 and their unknown tail ignored), so members of other clients can share a group with ours.

Assignors (names as in librdkafka and the Java client's ``assignor.name()``):
- ``range`` (eager): per topic, members in order take consecutive runs of partitions, the first
  ``n % k`` one more than the rest (Kafka's RangeAssignor).
- ``roundrobin`` (eager): all partitions in (topic, partition) order dealt to members in turn,
  skipping members not subscribed to the topic (Kafka's RoundRobinAssignor).
- ``cooperative-sticky`` (cooperative): a balanced assignment that keeps as many owned partitions
  in place as it can; a partition moving from one member to another is withheld for one round so
  that its owner revokes it first (incremental rebalancing, KIP-429).
- ``sticky``: the same balance and stickiness, eager.
Members are ordered by group.instance.id when they have one, else by member id, as Kafka's
MemberInfo orders them.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from ..errors import KafkaConfigError
from ..protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from ..protocol.messages.consumer_protocol_assignment import TopicPartition as _AssignedTP
from ..protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from ..protocol.messages.consumer_protocol_subscription import TopicPartition as _OwnedTP
from ..protocol.wire import ProtocolDecodeError, Reader, Writer

PROTOCOL_VERSION = 3


@dataclass
class Subscription:
    topics: list
    user_data: bytes | None = None
    owned_partitions: list = field(default_factory=list)  # [(topic, partition)]
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass
class Assignment:
    partitions: list  # [(topic, partition)]
    user_data: bytes | None = None


def _group_by_topic(partitions):
    by_topic: dict[str, list] = {}
    for t, p in sorted(partitions):
        by_topic.setdefault(t, []).append(p)
    return by_topic


def encode_subscription(sub: Subscription) -> bytes:
    w = Writer()
    w.int16(PROTOCOL_VERSION)
    ConsumerProtocolSubscription(
        topics=list(sub.topics), user_data=sub.user_data,
        owned_partitions=[_OwnedTP(topic=t, partitions=ps) for t, ps in _group_by_topic(sub.owned_partitions).items()],
        generation_id=sub.generation_id, rack_id=None).write(w, PROTOCOL_VERSION)
    return w.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    """A member's subscription; malformed metadata raises ProtocolDecodeError."""
    if len(data) < 2:
        raise ProtocolDecodeError("consumer subscription shorter than its version")
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        raise ProtocolDecodeError(f"consumer subscription version {version}")
    s = ConsumerProtocolSubscription.read(Reader(data, 2), min(version, PROTOCOL_VERSION))
    owned = [(tp.topic, p) for tp in s.owned_partitions for p in tp.partitions]
    return Subscription(topics=list(s.topics), user_data=None if s.user_data is None else bytes(s.user_data),
                        owned_partitions=owned, generation_id=s.generation_id)


def encode_assignment(a: Assignment) -> bytes:
    w = Writer()
    w.int16(PROTOCOL_VERSION)
    ConsumerProtocolAssignment(
        assigned_partitions=[_AssignedTP(topic=t, partitions=ps) for t, ps in _group_by_topic(a.partitions).items()],
        user_data=a.user_data).write(w, PROTOCOL_VERSION)
    return w.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    """A member's assignment; empty bytes (a member the leader gave nothing) is an empty one."""
    if not data:
        return Assignment(partitions=[])
    if len(data) < 2:
        raise ProtocolDecodeError("consumer assignment shorter than its version")
    (version,) = struct.unpack_from(">h", data, 0)
    if version < 0:
        raise ProtocolDecodeError(f"consumer assignment version {version}")
    a = ConsumerProtocolAssignment.read(Reader(data, 2), min(version, PROTOCOL_VERSION))
    return Assignment(partitions=[(tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions],
                      user_data=None if a.user_data is None else bytes(a.user_data))


def _member_order(subs: dict):
    # Kafka's MemberInfo order: static members first, by group.instance.id, then the rest by
    # member id.
    return sorted(subs, key=lambda m: (subs[m].group_instance_id is None,
                                       subs[m].group_instance_id or m, m))


class _Assignor:
    name = ""
    rebalance_protocol = "EAGER"

    def subscription_user_data(self, topics, owned, generation):
        return None

    def assign(self, partition_counts: dict, subscriptions: dict) -> dict:
        raise NotImplementedError


class RangeAssignor(_Assignor):
    name = "range"

    def assign(self, partition_counts, subscriptions):
        order = _member_order(subscriptions)
        out = {m: [] for m in order}
        for topic in sorted(partition_counts):
            members = [m for m in order if topic in subscriptions[m].topics]
            if not members:
                continue
            n = partition_counts[topic]
            per, extra = divmod(n, len(members))
            start = 0
            for i, m in enumerate(members):
                count = per + (1 if i < extra else 0)
                out[m].extend((topic, p) for p in range(start, start + count))
                start += count
        return {m: Assignment(partitions=ps) for m, ps in out.items()}


class RoundRobinAssignor(_Assignor):
    name = "roundrobin"

    def assign(self, partition_counts, subscriptions):
        order = _member_order(subscriptions)
        out = {m: [] for m in order}
        if not order:
            return {}
        i = 0
        for topic in sorted(partition_counts):
            if not any(topic in subscriptions[m].topics for m in order):
                continue
            for p in range(partition_counts[topic]):
                while topic not in subscriptions[order[i % len(order)]].topics:
                    i += 1
                out[order[i % len(order)]].append((topic, p))
                i += 1
        return {m: Assignment(partitions=ps) for m, ps in out.items()}


class StickyAssignor(_Assignor):
    """Balanced and sticky (eager); CooperativeStickyAssignor adds the one-round hold-back."""
    name = "sticky"

    def assign(self, partition_counts, subscriptions):
        order = _member_order(subscriptions)
        rank = {m: i for i, m in enumerate(order)}
        eligible: dict[str, list] = {}
        for m in order:
            for t in subscriptions[m].topics:
                if partition_counts.get(t):
                    eligible.setdefault(t, []).append(m)
        # Claims from the previous generation: a partition two members claim goes to the one
        # with the newer generation (the other's claim is stale), ties to the first in order.
        previous_owner: dict[tuple, str] = {}
        claim_generation: dict[tuple, int] = {}
        for m in order:
            sub = subscriptions[m]
            for tp in sub.owned_partitions:
                if claim_generation.get(tp, -2) < sub.generation_id:
                    previous_owner[tp] = m
                    claim_generation[tp] = sub.generation_id
        assigned: dict[str, list] = {m: [] for m in order}
        owner: dict[tuple, str] = {}
        all_partitions = [(t, p) for t in sorted(eligible) for p in range(partition_counts[t])]
        # Balance target: with identical subscriptions every member ends at floor or ceil of the
        # share, so a member keeps at most ceil(share) of what it owned.
        share_cap = -(-len(all_partitions) // len(order)) if order else 0
        for tp, m in sorted(previous_owner.items(), key=lambda kv: (rank[kv[1]], kv[0])):
            t, p = tp
            if m in eligible.get(t, ()) and p < partition_counts.get(t, 0) and len(assigned[m]) < share_cap:
                assigned[m].append(tp)
                owner[tp] = m
        for tp in all_partitions:
            if tp not in owner:
                m = min(eligible[tp[0]], key=lambda c: (len(assigned[c]), rank[c]))
                assigned[m].append(tp)
                owner[tp] = m
        self._balance(assigned, owner, eligible, rank)
        result = {m: sorted(ps) for m, ps in assigned.items()}
        if self.rebalance_protocol == "COOPERATIVE":
            for m, ps in result.items():
                result[m] = [tp for tp in ps if previous_owner.get(tp, m) == m]
        return {m: Assignment(partitions=ps) for m, ps in result.items()}

    @staticmethod
    def _balance(assigned, owner, eligible, rank):
        # Move partitions from the most to the least loaded eligible member while that narrows
        # the gap by more than one; every move lowers the sum of squared loads, so this ends.
        moved = True
        while moved:
            moved = False
            for a in sorted(assigned, key=lambda m: (-len(assigned[m]), rank[m])):
                for tp in reversed(assigned[a]):
                    b = min(eligible[tp[0]], key=lambda c: (len(assigned[c]), rank[c]))
                    if len(assigned[a]) - len(assigned[b]) > 1:
                        assigned[a].remove(tp)
                        assigned[b].append(tp)
                        owner[tp] = b
                        moved = True
                        break
                if moved:
                    break


class CooperativeStickyAssignor(StickyAssignor):
    name = "cooperative-sticky"
    rebalance_protocol = "COOPERATIVE"

    def subscription_user_data(self, topics, owned, generation):
        # The Java client puts the generation in the user data too (for members that predate
        # the subscription's own generation_id field).
        return struct.pack(">i", generation)


_ASSIGNORS = {
    "range": RangeAssignor, "roundrobin": RoundRobinAssignor, "sticky": StickyAssignor,
    "cooperative-sticky": CooperativeStickyAssignor,
    # the Java client's class names mean the same assignors
    "org.apache.kafka.clients.consumer.RangeAssignor": RangeAssignor,
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": RoundRobinAssignor,
    "org.apache.kafka.clients.consumer.StickyAssignor": StickyAssignor,
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": CooperativeStickyAssignor,
}


def make_assignors(names) -> list:
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    out = []
    for n in names:
        if isinstance(n, _Assignor):
            out.append(n)
            continue
        cls = _ASSIGNORS.get(n)
        if cls is None:
            raise KafkaConfigError(f"partition.assignment.strategy: unknown assignor {n!r} "
                                   f"(known: range, roundrobin, sticky, cooperative-sticky)")
        out.append(cls())
    if not out:
        raise KafkaConfigError("partition.assignment.strategy: no assignor given")
    return out
