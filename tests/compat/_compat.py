"""Client-independent parts of the compatibility suite: the records every client sends, the exact
round-trip check, and the consumer-group / commit-resume / broker-restart scenarios, which each
client module drives through a small adapter (see the ``*Adapter`` docstrings below)."""
import os
import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from _kcutil import wait_for
from kafkacore.partitioner import partition_for_key

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")

# Consumer-group timings: short, so that rebalances are quick, but the broker must honour them.
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
MAX_POLL_INTERVAL_MS = 15000  # also the JoinGroup rebalance timeout of the Java-style clients
WAIT = 30.0  # default deadline of one waited-for condition


@dataclass(frozen=True)
class Rec:
    key: object  # bytes or None
    value: object  # bytes or None
    headers: tuple  # ((str, bytes or None), ...) in order, duplicates allowed
    timestamp: int  # ms

    def short(self):
        def b(x):
            if x is None:
                return "None"
            return repr(x[:24]) + (f"..+{len(x) - 24}" if len(x) > 24 else "")
        return f"Rec(key={b(self.key)}, value={b(self.value)}, headers={self.headers!r}, ts={self.timestamp})"


def now_ms():
    return int(time.time() * 1000)


_BINARY_KEYS = [bytes([j, 0, 0xFF, (j * 37) & 0xFF, 0x80]) for j in range(6)]


def make_records(n, tag, *, seed=0, ascii_only=False, null_headers=True, unkeyed_every=4, base_ts=None):
    """n records, deterministic for (tag, seed): keyed ones from a pool of 24 keys (so several
    records share a key), every ``unkeyed_every``-th one without a key, a few with an empty key;
    values of 0..~4 KB, some compressible, some random, a few empty, a few null (tombstones);
    zero to four headers (duplicate names, empty and null values, non-ASCII names); explicit CreateTime timestamps from the last ten minutes, deliberately not
    in send order. ``ascii_only``: printable keys, values and headers (for kcat's text I/O);
    ``null_headers=False`` for producers that cannot send a null header value (kafka-python)."""
    rnd = random.Random(f"{tag}/{seed}")
    base_ts = (now_ms() - 600_000) if base_ts is None else base_ts
    keys = [f"key-{tag}-{j}".encode() for j in range(18)] + ([] if ascii_only else _BINARY_KEYS)
    sizes = (0, 1, 17, 120, 700, 2500, 4100)
    recs = []
    for i in range(n):
        key = None if unkeyed_every and i % unkeyed_every == unkeyed_every - 1 else keys[rnd.randrange(len(keys))]
        size = sizes[i % len(sizes)]
        prefix = f"{tag}#{i}:".encode()
        if ascii_only or i % 3:
            body = (f"value {i} of {tag}, " * (size // 16 + 1)).encode()[:size]
        else:
            body = rnd.randbytes(size)
        value = prefix + body
        if key is not None and i % 50 == 10:
            value = None  # a tombstone
        elif i % 50 == 20:
            value = b""
        if i % 50 == 30:
            key = b""  # empty, not null: hashed like any key
        h = (i // 25) % 5 if ascii_only else i % 5  # kcat sets headers per invocation: runs of 25
        if h == 0:
            headers = ()
        elif h == 1:
            headers = (("trace-id", f"{tag}-{i}".encode()),)
        elif h == 2:
            headers = (("dup", b"first"), ("dup", b"second"), ("empty", b"")) + ((("null", None),) if null_headers else ())
        elif h == 3:
            headers = (("h\u00e9ader-\u00fc" if not ascii_only else "hdr-u", (b"\x00\xff\x01" if not ascii_only else b"bin")),
                       ("n", str(i).encode()))
        else:
            headers = (("content-type", b"application/octet-stream"),)
        ts = base_ts + (i * 7919) % 100_003  # a permutation of offsets: not monotonic
        recs.append(Rec(key, value, headers, ts))
    return recs


def wait_until(cond, timeout=WAIT, desc=None):
    """The suite's wait (_kcutil.wait_for) with this suite's default timeout."""
    return wait_for(cond, desc, timeout)


# --------------------------------------------------------------------------------------------
# exact round trip


def check_placement(sent, placed, num_partitions, *, first_offsets=None):
    """Delivery reports against what was sent: keyed records on Java's murmur2 partition,
    per-partition offsets contiguous and in send order. ``first_offsets`` {partition: offset}
    where each partition's offsets must start (0 for a fresh topic)."""
    assert len(placed) == len(sent), f"{len(placed)} delivery reports for {len(sent)} records"
    wrong = [(r.key, p, partition_for_key(r.key, num_partitions))
             for r, (p, _) in zip(sent, placed) if r.key is not None and p != partition_for_key(r.key, num_partitions)]
    assert not wrong, (f"{len(wrong)} keyed records not on the Java client's partition "
                       f"(key, got, murmur2 partition), first: {wrong[:5]}")
    by_partition = defaultdict(list)
    for p, o in placed:
        assert 0 <= p < num_partitions, f"partition {p} out of range 0..{num_partitions - 1}"
        by_partition[p].append(o)
    for p, offsets in by_partition.items():
        start = offsets[0] if first_offsets is None else first_offsets.get(p, 0)
        assert offsets == list(range(start, start + len(offsets))), (
            f"partition {p}: offsets in send order are not contiguous from {start}: "
            f"{_first_gap(offsets, start)}")
    if first_offsets is not None:
        assert set(by_partition) <= set(range(num_partitions))


def _first_gap(offsets, start):
    for i, o in enumerate(offsets):
        if o != start + i:
            return f"index {i}: {o} (expected {start + i}); around: {offsets[max(0, i - 3):i + 4]}"
    return "ok"


def expected_by_position(sent, placed):
    return {(p, o): r for r, (p, o) in zip(sent, placed)}


def check_consumed(expected, consumed, *, label="consumed", ignore_timestamps=False):
    """``expected`` {(partition, offset): Rec}; ``consumed`` [(partition, offset, Rec)] in the
    order one consumer got them. Exactly the expected records, each once, identical, and in
    offset order within each partition. ``ignore_timestamps`` for producers that cannot set them
    (kcat), whose timestamps are checked elsewhere."""
    counts = Counter((p, o) for p, o, _ in consumed)
    dups = sorted(k for k, c in counts.items() if c > 1)
    assert not dups, f"{label}: {len(dups)} records delivered more than once, first (partition, offset): {dups[:10]}"
    last = {}
    for p, o, _ in consumed:
        assert o > last.get(p, -1), f"{label}: partition {p} went from offset {last[p]} to {o}"
        last[p] = o
    got = {(p, o): r for p, o, r in consumed}
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    assert not missing and not extra, (
        f"{label}: {len(missing)} missing (first {missing[:10]}), {len(extra)} unexpected (first {extra[:10]}) "
        f"of {len(expected)} expected")
    if ignore_timestamps:
        got = {k: replace(r, timestamp=expected[k].timestamp) for k, r in got.items()}
    bad = [(k, expected[k], got[k]) for k in sorted(expected) if got[k] != expected[k]]
    if bad:
        k, e, g = bad[0]
        raise AssertionError(f"{label}: {len(bad)} records differ from what was sent; first at {k}:\n"
                             f"  sent: {e.short()}\n  got:  {g.short()}")


def check_roundtrip(sent, placed, consumed, num_partitions, *, fresh_topic=True):
    check_placement(sent, placed, num_partitions, first_offsets={} if fresh_topic else None)
    check_consumed(expected_by_position(sent, placed), consumed)


def _loose(client):
    return not getattr(client, "exact_timestamps", True)


# --------------------------------------------------------------------------------------------
# scenarios
#
# class ClientAdapter:
#     record_options: dict      extra make_records() arguments for what the client can send
#     produce(topic, records, **options) -> [(partition, offset)]  aligned with records
#     read_all(topic, expected_counts: {partition: n}) -> [(partition, offset, Rec)]
#         assign (no group) and read every partition from offset 0 until the counts are reached
#     group_consumer(group, topic, on_assign=None, on_revoke=None) -> GroupConsumer
#     end_offsets(topic, partitions) -> {partition: high watermark}
#     committed_for(group, topic, partitions) -> {partition: offset or None}   without joining
#
# class GroupConsumer:   (subscribes on creation, manual commits only, earliest reset)
#     poll(max_records) -> [(partition, offset, Rec)]   one short poll; serves rebalance callbacks
#     commit(offsets: {partition: next offset})         synchronous; raises CommitRetry when the
#                                                       client refuses because a rebalance is under way
#     committed(partitions) -> {partition: offset or None}
#     close()                                           leaves the group
#  Callbacks (called from inside poll): on_assign(partitions), on_revoke(partitions)


class EndOffsetMismatch(AssertionError):
    """The broker's log end offsets (ListOffsets latest) are not what was written."""


def check_end_offsets(client, topic, expected):
    """``expected`` {partition: log end offset}; checked through the client's ListOffsets."""
    got = client.end_offsets(topic, sorted(expected))
    if got != expected:
        raise EndOffsetMismatch(f"log end offsets of {topic} (ListOffsets latest): got {got}, expected {expected}")


TANSU_END_OFFSETS = ("answers ListOffsets(latest) with the base offset of the last batch + 1, not the log end "
                     "offset")


class CommitRetry(Exception):
    """The client would not commit now (a rebalance is under way); commit again after a poll."""


def poll_until(consumer, pred, got, *, timeout=WAIT, max_records=50, desc="records"):
    """Polls into ``got`` until pred(got)."""
    deadline = time.monotonic() + timeout
    while not pred(got):
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s: have {len(got)} {desc}")
        got.extend(consumer.poll(max_records))
    return got


def next_offsets(consumed):
    out = {}
    for p, o, _ in consumed:
        out[p] = max(out.get(p, 0), o + 1)
    return out


def commit_resume_scenario(client, topic, group, num_partitions=3):
    """Consume part, commit explicit offsets, close; a new member of the group resumes exactly
    there and finishes; records produced later are all that a third member gets."""
    sent = make_records(300, topic, **client.record_options)
    placed = client.produce(topic, sent)
    check_placement(sent, placed, num_partitions, first_offsets={})
    expected = expected_by_position(sent, placed)

    c1 = client.group_consumer(group, topic)
    try:
        got1 = poll_until(c1, lambda g: len(g) >= 120, [], max_records=40)
        # commit less than was consumed on one partition: the resume point is the commit, not the
        # consumer's position
        committed = next_offsets(got1)
        p_back = max(committed, key=committed.get)
        committed[p_back] -= 7
        c1.commit(committed)
        seen = c1.committed(range(num_partitions))
        assert seen == {p: committed.get(p) for p in range(num_partitions)}, (
            f"committed offsets read back {seen} != committed {committed}")
    finally:
        c1.close()
    got1 = [(p, o, r) for p, o, r in got1 if o < committed.get(p, 0)]

    c2 = client.group_consumer(group, topic)
    try:
        got2 = poll_until(c2, lambda g: len(got1) + len(g) >= len(sent), [])
        first = {}
        for p, o, _ in got2:
            first.setdefault(p, o)
        assert first == {p: committed.get(p, 0) for p in first}, (
            f"resumed at {first}, committed {committed}")
        check_consumed(expected, got1 + got2, label="first + resumed consumer")
        c2.commit(next_offsets(got2))
    finally:
        c2.close()

    more = make_records(100, topic + "-more", seed=1, **client.record_options)
    placed_more = client.produce(topic, more)
    check_placement(more, placed_more, num_partitions, first_offsets=next_offsets(
        [(p, o, None) for p, o in placed]))
    c3 = client.group_consumer(group, topic)
    try:
        got3 = poll_until(c3, lambda g: len(g) >= len(more), [])
        check_consumed(expected_by_position(more, placed_more), got3, label="third consumer")
        c3.commit(next_offsets(got3))
        final = c3.committed(range(num_partitions))
    finally:
        c3.close()
    ends = next_offsets([(p, o, None) for p, o in placed + placed_more])
    assert final == {p: ends.get(p) for p in range(num_partitions)}, f"final commits {final}, log ends {ends}"
    check_end_offsets(client, topic, {p: ends.get(p, 0) for p in range(num_partitions)})


def broker_restart_scenario(client, broker, topic, group, num_partitions=3):
    """Committed offsets and the log survive a broker restart (twice); offsets continue."""
    batch1 = make_records(200, topic + "-1", **client.record_options)
    placed1 = client.produce(topic, batch1)
    batch2 = make_records(200, topic + "-2", seed=2, **client.record_options)
    placed2 = client.produce(topic, batch2)
    check_placement(batch1 + batch2, placed1 + placed2, num_partitions, first_offsets={})
    expected = expected_by_position(batch1 + batch2, placed1 + placed2)

    c1 = client.group_consumer(group, topic)
    try:
        got1 = poll_until(c1, lambda g: len(g) >= 250, [], max_records=40)
        committed = next_offsets(got1)
        c1.commit(committed)
    finally:
        c1.close()

    broker.restart()

    counts = Counter(p for p, _ in placed1 + placed2)
    check_consumed(expected, client.read_all(topic, counts), label="log read back after the restart")
    check_end_offsets(client, topic, {p: counts.get(p, 0) for p in range(num_partitions)})

    c2 = client.group_consumer(group, topic)
    try:
        assert c2.committed(range(num_partitions)) == {p: committed.get(p) for p in range(num_partitions)}, (
            "committed offsets after the restart")
        rest = {k: r for k, r in expected.items() if k[1] >= committed.get(k[0], 0)}
        got2 = poll_until(c2, lambda g: len(g) >= len(rest), [])
        check_consumed(rest, got2, label="resumed after the broker restart")
        c2.commit(next_offsets(got2))
    finally:
        c2.close()

    batch3 = make_records(150, topic + "-3", seed=3, **client.record_options)
    placed3 = client.produce(topic, batch3)
    check_placement(batch3, placed3, num_partitions, first_offsets={p: counts.get(p, 0) for p in range(num_partitions)})

    broker.restart()

    c3 = client.group_consumer(group, topic)
    try:
        got3 = poll_until(c3, lambda g: len(g) >= len(batch3), [])
        check_consumed(expected_by_position(batch3, placed3), got3, label="after the second restart")
        c3.commit(next_offsets(got3))
        final = c3.committed(range(num_partitions))
    finally:
        c3.close()
    ends = next_offsets([(p, o, None) for p, o in placed1 + placed2 + placed3])
    assert final == {p: ends.get(p) for p in range(num_partitions)}, f"final commits {final}, log ends {ends}"
    check_end_offsets(client, topic, {p: ends.get(p, 0) for p in range(num_partitions)})


class ThreadMember:
    """A group member on its own thread: poll, record, commit what was consumed after every poll
    and in on_revoke (so records are consumed exactly once across rebalances)."""

    def __init__(self, client, name, group, topic):
        self.client, self.name, self.group, self.topic = client, name, group, topic
        self._lock = threading.Lock()
        self._records = []
        self._assignment = None  # None while unassigned / in a rebalance
        self.history = []  # ("assign"/"revoke", sorted partitions), in order
        self._uncommitted = {}
        self._stop = threading.Event()
        self._error = None
        self._consumer = None
        self.retried_commits = 0
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self):
        self._thread.start()
        return self

    # called on the member's thread, from inside poll()
    def _on_assign(self, partitions):
        with self._lock:
            # cooperative protocols add to the assignment, eager ones replace an empty one
            self._assignment = frozenset(self._assignment or ()) | frozenset(partitions)
            self.history.append(("assign", sorted(partitions)))

    def _on_revoke(self, partitions):
        self._commit()
        with self._lock:
            remaining = frozenset(self._assignment or ()) - frozenset(partitions)
            self._assignment = remaining or None
            self.history.append(("revoke", sorted(partitions)))

    def _commit(self):
        if self._uncommitted:
            self._consumer.commit(dict(self._uncommitted))
            self._uncommitted.clear()

    def _try_commit(self):
        try:
            self._commit()
        except CommitRetry:
            self.retried_commits += 1  # kept in _uncommitted: the next poll's on_revoke commits them

    def _run(self):
        try:
            self._consumer = self.client.group_consumer(self.group, self.topic, on_assign=self._on_assign,
                                                        on_revoke=self._on_revoke)
            try:
                stop_deadline = None
                while True:
                    if self._stop.is_set():
                        if not self._uncommitted:
                            break
                        stop_deadline = stop_deadline or time.monotonic() + WAIT / 2
                        if time.monotonic() > stop_deadline:
                            self._commit()  # raises what the client says
                    got = self._consumer.poll(100)
                    if got:
                        with self._lock:
                            self._records.extend(got)
                        for p, o, _ in got:
                            self._uncommitted[p] = o + 1
                    self._try_commit()
            finally:
                self._consumer.close()
        except BaseException as e:  # reported by check()/stop()
            self._error = e

    def assignment(self):
        self.check()
        with self._lock:
            return self._assignment

    def records(self):
        with self._lock:
            return list(self._records)

    def check(self):
        if self._error is not None:
            raise AssertionError(f"member {self.name} failed: {self._error!r}") from self._error

    @property
    def stopping(self):
        return self._stop.is_set()

    def stop(self, timeout=WAIT):
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"member {self.name} did not stop within {timeout:.0f}s"
        self.check()


def wait_balanced(members, num_partitions, timeout=WAIT):
    """Until every member has a non-empty assignment and together they cover every partition
    exactly once; returns {member name: partitions}."""
    def state():
        return {m.name: m.assignment() for m in members}

    def ok():
        s = state()
        if any(not a for a in s.values()):
            return None
        flat = sorted(p for a in s.values() for p in a)
        return s if flat == list(range(num_partitions)) else None

    return wait_until(ok, timeout, desc=lambda: f"a balanced assignment of {num_partitions} partitions, have "
                                                f"{ {k: sorted(v) if v else v for k, v in state().items()} }")


def group_rebalance_scenario(client, topic, group, num_partitions=6, make_member=None):
    """A consumer group growing to three members, losing one, gaining one, while records keep
    coming: at every stable point the assignment covers each partition exactly once, and over the
    whole run every record is consumed exactly once; the final commits equal the log end."""
    make_member = make_member or (lambda name: ThreadMember(client, name, group, topic))
    members = {}
    sent, placed = [], []
    batch_no = 0

    def produce(n):
        nonlocal batch_no
        batch_no += 1
        recs = make_records(n, f"{topic}-b{batch_no}", seed=batch_no, **client.record_options)
        got = client.produce(topic, recs)
        sent.extend(recs)
        placed.extend(got)

    def all_consumed():
        return sum(len(m.records()) for m in members.values()) >= len(sent)

    def count_desc():
        return f"{len(sent)} records consumed, have {[(n, len(m.records())) for n, m in members.items()]}"

    def active():
        return [m for m in members.values() if not m.stopping]

    def join(name):
        members[name] = make_member(name).start()

    t0 = time.monotonic()
    steps = []

    def step(what):
        steps.append((round(time.monotonic() - t0, 2), what))

    try:
        produce(240)
        join("a")
        wait_balanced(active(), num_partitions)
        step('wait_balanced(active(), num_partitions)')
        wait_until(lambda: len(members["a"].records()) >= 1, desc=count_desc)
        step('wait_until(lambda: len(members["a"].reco')
        join("b")
        wait_balanced(active(), num_partitions)
        step('wait_balanced(active(), num_partitions)')
        produce(120)
        join("c")
        three = wait_balanced(active(), num_partitions)
        step('three = wait_balanced(active(), num_part')
        assert all(len(a) == num_partitions // 3 for a in three.values()), f"uneven assignment for 3 members: {three}"
        produce(120)
        wait_until(all_consumed, desc=count_desc)
        step('wait_until(all_consumed, desc=count_desc')

        members["a"].stop()  # leaves the group
        wait_balanced(active(), num_partitions)
        step('wait_balanced(active(), num_partitions)')
        produce(120)
        wait_until(all_consumed, desc=count_desc)
        step('wait_until(all_consumed, desc=count_desc')

        join("d")
        final = wait_balanced(active(), num_partitions)
        step('final = wait_balanced(active(), num_part')
        assert sorted(final) == ["b", "c", "d"]
        produce(120)
        wait_until(all_consumed, desc=count_desc)
        step('wait_until(all_consumed, desc=count_desc')
    finally:
        errors = []
        for m in members.values():
            try:
                m.stop()
            except AssertionError as e:
                errors.append(e)
        if errors:
            raise errors[0]

    if os.environ.get("KAFKACORE_COMPAT_VERBOSE"):
        print("group scenario steps (s):", steps)
    check_placement(sent, placed, num_partitions, first_offsets={})
    expected = expected_by_position(sent, placed)
    everything = []
    for name, m in members.items():
        recs = m.records()
        check_consumed({(p, o): expected[(p, o)] for p, o, _ in recs if (p, o) in expected}, recs,
                       label=f"member {name}", ignore_timestamps=_loose(client))
        everything.extend(recs)
    everything.sort(key=lambda t: (t[0], t[1]))
    check_consumed(expected, everything, label="the group as a whole", ignore_timestamps=_loose(client))
    ends = next_offsets([(p, o, None) for p, o in placed])
    ends = {p: ends.get(p) for p in range(num_partitions)}
    committed = client.committed_for(group, topic, range(num_partitions))
    assert committed == ends, f"group commits {committed} != log end {ends}"
    check_end_offsets(client, topic, ends)
    return {n: m.history for n, m in members.items()}
