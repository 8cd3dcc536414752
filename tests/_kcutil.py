"""Shared helpers for the kafkacore test suite (not a test module).

``NATIVE`` tells which implementation ``kafkacore`` selected for this run; the suite runs
once with the compiled extensions and once with ``KAFKACORE_NO_EXTENSIONS=1`` (the pure-
Python twins), and tests that exercise the "selected" implementation cover both.
"""
import importlib
import os
import random
import socket
import struct
import time

import pytest
from hypothesis import strategies as st

import kafkacore
from kafkacore._loader import extensions_disabled
from kafkacore.checksum import crc32c_py
from kafkacore.record import batch_py

NATIVE = kafkacore.native_extensions()
# The checkout (README, ci/): beside tests/ normally; named by $KAFKACORE_SOURCE_ROOT when the
# suite runs as a copy against an installed package (ci/installed_test.sh).
SOURCE_ROOT = os.path.abspath(os.environ.get("KAFKACORE_SOURCE_ROOT")
                              or os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


# KAFKACORE_TEST_SCALE=10 multiplies Hypothesis example counts (for a long fuzzing run).
SCALE = max(1, int(os.environ.get("KAFKACORE_TEST_SCALE", "1") or 1))


def by_mode(native, twin):
    """A size: the first when the compiled extensions are in use, the second for the twins."""
    return native if NATIVE else twin


def examples(native, twin=None):
    """A Hypothesis max_examples by mode (twin defaults to the native count), times SCALE."""
    return (native if NATIVE or twin is None else twin) * SCALE


def native_module(name):
    """kafkacore._ext.<name> when it is built and extensions are not disabled, else None.

    Parity tests (native against twin) only run in the native pass: in the twin pass they
    would repeat exactly the same comparison."""
    if extensions_disabled():
        return None
    try:
        return importlib.import_module(f"kafkacore._ext.{name}")
    except ImportError:
        return None


def requires_native(name):
    return pytest.mark.skipif(
        native_module(name) is None,
        reason=f"kafkacore._ext.{name} not built or extensions disabled (parity runs in the native pass)",
    )


# ---------------------------------------------------------------------------------------
# Comparable views of records and batches


def rec_tuple(rec):
    return (rec.offset, rec.timestamp_ms, rec.key, rec.value, [tuple(h) for h in rec.headers])


BATCH_FIELDS = (
    "base_offset", "batch_length", "partition_leader_epoch", "magic", "crc", "attributes",
    "last_offset_delta", "base_timestamp", "max_timestamp", "producer_id", "producer_epoch",
    "base_sequence", "count", "position", "size_in_bytes", "last_offset", "next_offset",
    "compression_type", "compression", "timestamp_type", "is_transactional", "is_control",
)


def batch_fields(batch):
    return {f: getattr(batch, f) for f in BATCH_FIELDS}


def wrap64(v):
    return ((v + (1 << 63)) % (1 << 64)) - (1 << 63)


# ---------------------------------------------------------------------------------------
# Batch specifications: what to hand a builder, and what decoding must give back


def random_bytes(n, seed, compressible=False):
    rnd = random.Random(seed)
    if compressible:
        words = [rnd.randbytes(rnd.randint(1, 12)) for _ in range(16)]
        out = bytearray()
        while len(out) < n:
            out += words[rnd.randrange(16)]
        return bytes(out[:n])
    return rnd.randbytes(n)


def small_values(max_size=300):
    return st.one_of(
        st.none(),
        st.just(b""),
        st.binary(max_size=max_size),
        # repetitive data, so that every codec really compresses
        st.builds(lambda chunk, n: chunk * n, st.binary(min_size=1, max_size=8), st.integers(1, 64)),
    )


keys_st = st.one_of(st.none(), st.just(b""), st.binary(max_size=40))
header_keys_st = st.text(max_size=12)  # any unicode, including astral code points and ""
headers_st = st.lists(
    st.tuples(header_keys_st, st.one_of(st.none(), st.binary(max_size=24))), max_size=4
)
timestamps_st = st.one_of(
    st.integers(0, 1 << 42),
    st.integers(INT64_MIN, INT64_MAX),
    st.sampled_from([INT64_MIN, INT64_MIN + 1, INT64_MAX, INT64_MAX - 1, -1, 0, 1]),
)


@st.composite
def records_st(draw, min_size=1, max_size=12, values=None):
    values = small_values() if values is None else values
    n = draw(st.integers(min_size, max_size))
    base_ts = draw(timestamps_st)
    out = []
    for _ in range(n):
        # Mostly timestamps near each other, as real producers write them; sometimes anything.
        ts = draw(st.one_of(st.integers(-5000, 5000).map(lambda d: wrap64(base_ts + d)), timestamps_st))
        out.append((draw(values), draw(keys_st), ts, draw(headers_st)))
    return out


@st.composite
def batch_specs(draw, max_records=12, codecs=CODECS, values=None, control=True):
    transactional = draw(st.booleans())
    params = dict(
        compression=draw(st.sampled_from(codecs)),
        base_offset=draw(st.one_of(st.integers(0, 1 << 40), st.integers(0, INT64_MAX),
                                   st.sampled_from([0, INT64_MAX]))),
        producer_id=draw(st.one_of(st.just(-1), st.integers(0, INT64_MAX))),
        producer_epoch=draw(st.integers(-1, 32767)),
        base_sequence=draw(st.one_of(st.just(-1), st.integers(0, INT32_MAX))),
        transactional=transactional,
        log_append_time=draw(st.booleans()),
        partition_leader_epoch=draw(st.one_of(st.just(-1), st.integers(0, INT32_MAX))),
        control=draw(st.booleans()) if control and transactional else False,
    )
    return params, draw(records_st(max_size=max_records, values=values))


def build_batch(builder_cls, spec):
    params, records = spec
    b = builder_cls(**params)
    for value, key, ts, headers in records:
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    return b.build()


def expected_records(spec):
    """The records iteration must give back for a spec, as rec_tuple()s."""
    params, records = spec
    max_ts = max(r[2] for r in records)
    out = []
    for i, (value, key, ts, headers) in enumerate(records):
        out.append((
            wrap64(params["base_offset"] + i),
            max_ts if params["log_append_time"] else ts,
            key,
            value,
            [(k, v) for k, v in headers],
        ))
    return out


# ---------------------------------------------------------------------------------------
# Hand-built batches (for shapes our builder never writes)

HEADER = struct.Struct(">qiiBIhiqqqhii")


def encode_records(records, base_ts=None):
    """Records section bytes for [(value, key, ts, headers)], offset deltas 0..n-1."""
    base_ts = records[0][2] if base_ts is None else base_ts
    out = bytearray()
    for i, (value, key, ts, headers) in enumerate(records):
        hdrs = [(k.encode("utf-8"), v) for k, v in headers]
        batch_py.encode_record(out, wrap64(ts - base_ts), i, key, value, hdrs)
    return bytes(out)


def assemble_batch(records_section, count, *, attributes=0, base_offset=0, last_offset_delta=None,
                   base_ts=0, max_ts=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                   partition_leader_epoch=-1, magic=2, crc=None):
    """Header + records section, with a correct CRC-32C unless ``crc`` is given."""
    last = count - 1 if last_offset_delta is None else last_offset_delta
    total = 61 + len(records_section)
    head = bytearray(HEADER.pack(base_offset, total - 12, partition_leader_epoch, magic, 0, attributes,
                                 last, base_ts, max_ts, producer_id, producer_epoch, base_sequence, count))
    buf = head + records_section
    if crc is None:
        crc = crc32c_py(memoryview(buf)[21:])
    struct.pack_into(">I", buf, 17, crc)
    return bytes(buf)


def fix_crc(buf, pos=0):
    """Rewrites the CRC of the batch at ``pos`` (after its header was edited)."""
    buf = bytearray(buf)
    (blen,) = struct.unpack_from(">i", buf, pos + 8)
    end = pos + 12 + blen
    struct.pack_into(">I", buf, pos + 17, crc32c_py(memoryview(buf)[pos + 21:end]))
    return bytes(buf)


def wait_for(predicate, what=None, timeout=30.0, interval=0.05, tolerate=()):
    """The suite's one wait: calls ``predicate()`` until it returns something truthy and returns
    that; AssertionError naming ``what`` (a string, or a function giving one, called at the
    timeout) after ``timeout`` seconds. Exceptions of the types in ``tolerate`` count as
    "not yet" (a restarting broker answers errors for a while) and the last one is reported."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = predicate()
            if last:
                return last
        except tolerate as e:
            last = e
        if time.monotonic() >= deadline:
            described = what() if callable(what) else what
            raise AssertionError(f"timed out after {timeout:g} s waiting for {described or predicate} "
                                 f"(last: {last!r})")
        time.sleep(interval)


def _tcp_queues(local, remote):
    """(tx_queue, rx_queue) of the IPv4 TCP socket from ``local`` to ``remote`` ((ip, port)
    pairs) in /proc/net/tcp, or None when this network namespace has no such socket."""
    def hexaddr(addr):
        # the kernel prints the address as the u32 it stores (network order read natively)
        return "%08X:%04X" % (struct.unpack("=I", socket.inet_aton(addr[0]))[0], addr[1])
    want = (hexaddr(local), hexaddr(remote))
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            if (fields[1], fields[2]) == want:
                tx, rx = fields[4].split(":")
                return int(tx, 16), int(rx, 16)
    return None


def peer_has_read(sock):
    """True once the process at the other end of the loopback TCP connection ``sock`` has read
    every byte sent on it: nothing sent is unacknowledged at this end, and nothing received is
    unread at the other (the two checks in that order, in two passes over /proc/net/tcp, so
    that bytes arriving between the passes cannot be missed). A broker dispatches a request's
    frame as it reads it, so this is the moment a request sent on ``sock`` has reached the
    broker (a long poll parked, a SyncGroup waiting for its leader): a predicate for wait_for
    where a test must make its next move only after that, on another connection."""
    local, remote = sock.getsockname()[:2], sock.getpeername()[:2]
    ours = _tcp_queues(local, remote)
    if ours is None or ours[0] != 0:
        return False
    theirs = _tcp_queues(remote, local)
    return theirs is not None and theirs[1] == 0


# ---------------------------------------------------------------------------------------
# Transactions (read_committed decoding)


def txn_batch(producer_id, base_offset, n, codec="none", transactional=True, epoch=0, ts=1_700_000_000_000,
              builder_cls=None):
    """A data batch of n records valued b"<offset>" (so kept offsets can be read back from values)."""
    b = (builder_cls or batch_py.RecordBatchBuilder)(compression=codec, base_offset=base_offset)
    b.set_producer_state(producer_id, epoch, 0, transactional=transactional)
    for i in range(n):
        b.append(b"%d" % (base_offset + i), key=b"p%d" % producer_id, timestamp_ms=ts + base_offset + i)
    return b.build()


def txn_marker(producer_id, offset, commit, epoch=0):
    from kafkacore.record.control import end_txn_marker_batch
    return end_txn_marker_batch(producer_id, epoch, 0, commit, 1_700_000_000_000, base_offset=offset)


def interleaved_txns(codec="none"):
    """Producer 1 aborts twice and commits once between, producer 2 commits, producer 3 is
    idempotent (not transactional), producer -1 plain: kept offsets and the aborted list."""
    parts = [
        txn_batch(1, 0, 2, codec),            # 0-1   P1 txn A (aborted)
        txn_batch(2, 2, 2, codec),            # 2-3   P2 txn (committed)
        txn_batch(3, 4, 1, codec, transactional=False),  # 4  idempotent producer
        txn_batch(1, 5, 1, codec),            # 5     P1 txn A
        txn_marker(1, 6, commit=False),       # 6     ABORT A
        txn_batch(-1, 7, 2, codec, transactional=False),  # 7-8 plain producer
        txn_batch(1, 9, 2, codec),            # 9-10  P1 txn B (committed)
        txn_marker(2, 11, commit=True),       # 11    COMMIT P2
        txn_marker(1, 12, commit=True),       # 12    COMMIT B
        txn_batch(1, 13, 3, codec),           # 13-15 P1 txn C (aborted)
        txn_batch(2, 16, 1, codec),           # 16    P2 txn (open at the end of the fetch)
        txn_marker(1, 17, commit=False),      # 17    ABORT C
        txn_batch(1, 18, 1, codec, transactional=False),  # 18 P1 outside a transaction
    ]
    aborted = [(1, 13), (1, 0)]  # a broker lists them by segment; the order is not relied on
    kept = [2, 3, 4, 7, 8, 9, 10, 16, 18]
    return b"".join(parts), aborted, kept


@st.composite
def txn_logs(draw):
    """A partition's log as a broker writes it: producers 0-3 interleave transactions that end
    with a COMMIT or ABORT marker (or are still open), with idempotent and plain batches in
    between, in random codecs. Returns (buffer, aborted list as Fetch returns it, kept offsets)."""
    offset = draw(st.integers(0, 1 << 40))
    open_first, pending = {}, {}
    parts, aborted, kept = [], [], []
    for _ in range(draw(st.integers(1, 20))):
        kind = draw(st.sampled_from(["data", "data", "end", "plain"]))
        pid = draw(st.integers(0, 3))
        if kind == "data":
            n = draw(st.integers(1, 3))
            parts.append(txn_batch(pid, offset, n, draw(st.sampled_from(CODECS))))
            open_first.setdefault(pid, offset)
            pending.setdefault(pid, []).extend(range(offset, offset + n))
            offset += n
        elif kind == "end":
            commit = draw(st.booleans())
            parts.append(txn_marker(pid, offset, commit))  # also for a producer without an open transaction
            offset += 1
            if pid in open_first:
                first = open_first.pop(pid)
                recs = pending.pop(pid)
                if commit:
                    kept += recs
                else:
                    aborted.append((pid, first))
        else:
            n = draw(st.integers(1, 3))
            parts.append(txn_batch(draw(st.sampled_from([-1, 10])), offset, n, draw(st.sampled_from(CODECS)),
                                   transactional=False))
            kept += range(offset, offset + n)
            offset += n
    for recs in pending.values():  # still open: a read_committed fetch stops before them (LSO)
        kept += recs
    aborted = draw(st.permutations(aborted))
    aborted += draw(st.lists(st.tuples(st.integers(50, 60), st.integers(0, 1 << 41)), max_size=2))  # unseen ids
    return b"".join(parts), list(aborted), sorted(kept)


def corrupt_payload_txn_batch(producer_id, base_offset, codec_id=4):
    """A transactional batch whose compressed records section is garbage under a valid CRC:
    reading its records fails, dropping it unread does not."""
    return assemble_batch(b"\x00not a zstd frame\xff" * 3, 2, attributes=codec_id | 0x10, base_offset=base_offset,
                          producer_id=producer_id, producer_epoch=0, base_sequence=0)


def read_offsets_topic(bootstrap, partition, timeout=15.0):
    """Every (key, value) of one __consumer_offsets partition, up to its end as it was when
    asked, read with kafka-python (a client other than ours)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition("__consumer_offsets", partition)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        out = []
        wait_for(lambda: out.extend((r.key, r.value) for rs in consumer.poll(timeout_ms=100).values() for r in rs)
                 or consumer.position(tp) >= end, "the whole partition read", timeout=timeout)
        return out
    finally:
        consumer.close()


def share_consume_accepting(bootstrap, group, topic, count, timeout=30.0):
    """The sorted int values a confluent-kafka ShareConsumer got until it had ``count`` records
    (or ``timeout`` passed), each accepted (implicit acknowledgement, committed), then closed."""
    import confluent_kafka

    c = confluent_kafka.ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.subscribe([topic])
    got = []
    try:
        deadline = time.monotonic() + timeout
        while len(got) < count and time.monotonic() < deadline:
            for m in c.poll(0.5):
                assert m.error() is None, m.error()
                got.append(int(m.value()))
        c.commit_sync(30)
    finally:
        c.close()
    return sorted(got)
