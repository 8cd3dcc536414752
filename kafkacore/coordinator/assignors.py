"""The server-side assignors of KIP-848 consumer groups (Kafka's ConsumerGroupPartitionAssignor
implementations in ``org.apache.kafka.coordinator.group.assignor``), chosen by
``group.consumer.assignors`` (the first is the default) or by a member's ``ServerAssignor``.

An assignor sees the members (their subscribed topic ids and their current target assignment)
and the subscribed topics' partition counts, and returns each member's new target assignment,
as {topic id: set of partitions}. It is a pure function: the coordinator turns its answer into
records and reconciles the members towards it.

- ``uniform`` (Kafka's UniformAssignor, the default): every partition of a subscribed topic
  goes to one of the members subscribed to it, the members' partition counts differing by at
  most one where their subscriptions allow it, and a member keeps what it has whenever the
  balance allows (sticky): fewer partitions move when members come and go. Kafka's goals, by a
  simpler way: keep what is still valid, give each orphan to the least loaded eligible member,
  then move partitions from the most to the least loaded member that may take them until no
  move improves the balance.
- ``range`` (Kafka's RangeAssignor): per topic, the subscribed members in member-id order each
  get a contiguous range of partitions, the first ``partitions % members`` one more, so that
  co-partitioned topics line up member by member.
"""
from __future__ import annotations

UNIFORM = "uniform"
RANGE = "range"

# Kafka's class names for its two assignors (its config's default lists them)
_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": UNIFORM,
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": RANGE,
}


def assignor_name(text):
    """``uniform`` / ``range`` for an assignor's name or Kafka's class name of it, else None."""
    text = str(text).strip()
    if text in (UNIFORM, RANGE):
        return text
    return _CLASS_NAMES.get(text)


class MemberSpec:
    """What an assignor knows of a member: its subscribed topic ids and current target."""

    __slots__ = ("subscribed", "current")

    def __init__(self, subscribed, current):
        self.subscribed = frozenset(subscribed)
        self.current = current  # {topic id: set of partitions}


def assign(name, members, topics):
    """``members``: {member id: MemberSpec}; ``topics``: {topic id: partition count} of the
    subscribed topics that exist. Returns {member id: {topic id: set of partitions}} (every
    member, empty when it gets nothing)."""
    if name == RANGE:
        return _range(members, topics)
    if name == UNIFORM:
        return _uniform(members, topics)
    raise ValueError(f"unknown assignor {name!r}")


def _range(members, topics):
    out = {mid: {} for mid in members}
    for tid in sorted(topics):
        subscribed = sorted(mid for mid, spec in members.items() if tid in spec.subscribed)
        if not subscribed:
            continue
        n = topics[tid]
        quota, extra = divmod(n, len(subscribed))
        start = 0
        for i, mid in enumerate(subscribed):
            count = quota + (1 if i < extra else 0)
            if count:
                out[mid][tid] = set(range(start, start + count))
            start += count
    return out


def _uniform(members, topics):
    owner = {}  # (topic id, partition) -> member id
    load = {mid: 0 for mid in members}
    # 1. sticky: a member keeps its current partitions that still exist and that it subscribes to
    for mid in sorted(members):
        spec = members[mid]
        for tid, parts in spec.current.items():
            if tid not in topics or tid not in spec.subscribed:
                continue
            for p in parts:
                if p < topics[tid] and (tid, p) not in owner:
                    owner[(tid, p)] = mid
                    load[mid] += 1
    eligible = {tid: sorted(mid for mid, spec in members.items() if tid in spec.subscribed) for tid in topics}
    # 2. orphans (new partitions, those of members gone), fewest candidates first, to the least loaded
    orphans = [(tid, p) for tid in sorted(topics) for p in range(topics[tid]) if (tid, p) not in owner]
    orphans.sort(key=lambda tp: len(eligible[tp[0]]))
    for tid, p in orphans:
        candidates = eligible[tid]
        if not candidates:
            continue
        mid = min(candidates, key=lambda m: (load[m], m))
        owner[(tid, p)] = mid
        load[mid] += 1
    # 3. balance: move one partition at a time from a member to one with two fewer that may take it
    by_member = {mid: [] for mid in members}
    for tp, mid in owner.items():
        by_member[mid].append(tp)
    for parts in by_member.values():
        parts.sort()
    moved = True
    while moved:
        moved = False
        for donor in sorted(members, key=lambda m: (-load[m], m)):
            for i in range(len(by_member[donor]) - 1, -1, -1):
                tid, p = by_member[donor][i]
                receiver = min(eligible[tid], key=lambda m: (load[m], m))
                if load[receiver] + 1 < load[donor]:
                    by_member[donor].pop(i)
                    by_member[receiver].append((tid, p))
                    load[donor] -= 1
                    load[receiver] += 1
                    moved = True
                    break
            if moved:
                break
    out = {mid: {} for mid in members}
    for mid, parts in by_member.items():
        for tid, p in parts:
            out[mid].setdefault(tid, set()).add(p)
    return out
