"""The server-side assignor of KIP-932 share groups: ``simple`` (Kafka's SimpleAssignor, the
one named by ``group.share.assignors``).

A share partition may be read by many members at once (the share-partition leader hands its
records out under acquisition locks), so unlike a consumer group's assignors this one may give
a partition to several members, and it never waits for a partition to be revoked. KIP-932's
rules: every partition of a subscribed topic goes to at least one member subscribed to it;
when a topic has at least as many partitions as subscribed members, each partition goes to
exactly one of them, spread evenly (counts differing by at most one); when it has fewer, each
member gets one partition, the partitions shared as evenly as the counts allow. So every
member gets at least one partition whenever any exist.

Per topic, members are taken in member-id order, starting where the previous topic's turn
ended, so that the members' totals stay even across several topics. A pure function, as the
consumer group's assignors: {member id: subscribed topic ids} and {topic id: partition count}
in, {member id: {topic id: set of partitions}} out.
"""
from __future__ import annotations

SIMPLE = "simple"
_CLASS_NAME = "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"  # Kafka's name of it


def assignor_name(text):
    """``simple`` for its name or Kafka's class name, else None."""
    text = str(text).strip()
    return SIMPLE if text in (SIMPLE, _CLASS_NAME) else None


def assign(name, members, topics):
    """``members``: {member id: iterable of subscribed topic ids}; ``topics``: {topic id:
    partition count} of the subscribed topics that exist. Returns {member id: {topic id: set of
    partitions}}, every member present (empty when its topics have no partitions)."""
    if name != SIMPLE:
        raise ValueError(f"unknown share assignor {name!r}")
    out = {mid: {} for mid in members}
    subscribed = {mid: frozenset(tids) for mid, tids in members.items()}
    turn = 0  # where the next topic's round starts, over all members in id order
    order = sorted(members)
    for tid in sorted(topics):
        n = topics[tid]
        readers = [mid for mid in order[turn:] + order[:turn] if tid in subscribed[mid]]
        if not readers or n <= 0:
            continue
        if n >= len(readers):
            for p in range(n):
                out[readers[p % len(readers)]].setdefault(tid, set()).add(p)
            last = readers[(n - 1) % len(readers)]
        else:
            for i, mid in enumerate(readers):
                out[mid].setdefault(tid, set()).add(i % n)
            last = readers[-1]
        turn = (order.index(last) + 1) % len(order)
    return out
