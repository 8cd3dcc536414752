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

Sticky, as Kafka's: a member keeps the partitions of its current assignment as far as the
balance allows (a move costs its share session and its fetches in flight), and only the rest
is handed out, each to the subscriber with the fewest of that topic and then the fewest in all,
which keeps the members' totals even across topics. A pure function, as the consumer group's
assignors: {member id: subscribed topic ids}, {topic id: partition count} and the current
assignments in, {member id: {topic id: set of partitions}} out.
"""
from __future__ import annotations

SIMPLE = "simple"
_CLASS_NAME = "org.apache.kafka.coordinator.group.assignor.SimpleAssignor"  # Kafka's name of it


def assignor_name(text):
    """``simple`` for its name or Kafka's class name, else None."""
    text = str(text).strip()
    return SIMPLE if text in (SIMPLE, _CLASS_NAME) else None


def assign(name, members, topics, current=None):
    """``members``: {member id: iterable of subscribed topic ids}; ``topics``: {topic id:
    partition count} of the subscribed topics that exist; ``current``: {member id: {topic id:
    set of partitions}}, the assignment to stay close to. Returns {member id: {topic id: set of
    partitions}}, every member present (empty when its topics have no partitions)."""
    if name != SIMPLE:
        raise ValueError(f"unknown share assignor {name!r}")
    current = current or {}
    out = {mid: {} for mid in members}
    load = dict.fromkeys(members, 0)  # partitions given so far, over all topics
    for tid in sorted(topics):
        n = topics[tid]
        readers = sorted(mid for mid, tids in members.items() if tid in tids)
        if not readers or n <= 0:
            continue
        had = {mid: sorted(p for p in current.get(mid, {}).get(tid, ()) if 0 <= p < n) for mid in readers}
        chosen = _one_reader_each(n, readers, had, load) if n >= len(readers) else \
            _one_partition_each(n, readers, had)
        for mid, parts in chosen.items():
            if parts:
                out[mid][tid] = parts
                load[mid] += len(parts)
    return out


def _one_reader_each(n, readers, had, load):
    """At least as many partitions as readers: each partition to one reader, q or q+1 each."""
    q, extra = divmod(n, len(readers))
    owner = {}
    count = dict.fromkeys(readers, 0)
    for mid in readers:  # each keeps up to q of its partitions (the first to claim one keeps it)
        for p in had[mid]:
            if count[mid] == q:
                break
            if p not in owner:
                owner[p] = mid
                count[mid] += 1
    for mid in readers:  # then up to ``extra`` of them keep one more
        spare = next((p for p in had[mid] if p not in owner), None) if extra and count[mid] == q else None
        if spare is not None:
            owner[spare] = mid
            count[mid] += 1
            extra -= 1
    for p in range(n):  # the rest to the readers with the fewest, of this topic then in all
        if p not in owner:
            mid = min(readers, key=lambda m: (count[m], load[m], m))
            owner[p] = mid
            count[mid] += 1
    chosen = {mid: set() for mid in readers}
    for p, mid in owner.items():
        chosen[mid].add(p)
    return chosen


def _one_partition_each(n, readers, had):
    """Fewer partitions than readers: each reader one partition, k or k+1 readers each."""
    k, extra = divmod(len(readers), n)
    count = [0] * n
    chosen = {}
    for mid in readers:  # keep a current partition that has room
        for p in had[mid]:
            if count[p] < k or (count[p] == k and extra > 0):
                if count[p] == k:
                    extra -= 1
                count[p] += 1
                chosen[mid] = {p}
                break
    for mid in readers:
        if mid not in chosen:
            p = min(range(n), key=lambda q: (count[q], q))
            count[p] += 1
            chosen[mid] = {p}
    return chosen
