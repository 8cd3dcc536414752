"""Crash-test writer for the storage engine (a script, not a test module).

    python tests/storage_writer.py DATA_DIR SEED
    python tests/storage_writer.py DATA_DIR SEED txn

Opens a LogManager (background threads on) on DATA_DIR with small segments and a small index
interval, so that rolls, index entries, background flushes and checkpoints happen often, and
appends batches to the partition ``crash-0`` forever: a seeded mix of codecs, batch sizes and
appends of several batches at once. After every append returns it writes one line to stdout,
the acknowledgement,

    first_offset last_offset sha256-of-the-payloads

and flushes. A test kills it with SIGKILL at a random moment and checks that every
acknowledged append survived.

With ``txn`` it writes to ``txn-0`` instead: transactional batches of producers 1-3, COMMIT
and ABORT markers (append_marker) and plain batches, in a seeded random order, carrying on the
producers' sequences and open transactions from what the log holds; each ack is
``kind producer_id first_offset last_offset`` with kind d (plain), t (transactional data),
c (COMMIT) or a (ABORT).

Everything in a record is a function of its offset (``record_for``), so a checker can verify
any record it finds in the log, acknowledged or not. ``payload_digest`` is what the sha256 of
an ack covers. The test modules import this file for those helpers and for ``make_config``."""
import hashlib
import os
import random
import struct
import sys

TOPIC = "crash"
PARTITION = 0
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
T0 = 1_700_000_000_000  # record timestamps are T0 + a function of the offset

CONFIG = {
    "segment.bytes": 64 * 1024,
    "index.interval.bytes": 512,
    # 150 offset entries / 100 time entries: a segment also rolls on a full index now and then
    "segment.index.bytes": 1200,
    "retention.ms": -1,
    "flush.ms": 150,  # background flushes move the recovery point while the writer runs
}

_POOL = random.Random(20240601).randbytes(1 << 16)


def make_config(**extra):
    from kafkacore.storage import LogConfig
    overrides = dict(CONFIG)
    overrides.update(extra)
    return LogConfig(overrides)


def record_for(offset):
    """(key, value, timestamp_ms, headers) of the record at offset."""
    h = (offset * 2654435761) & 0xFFFFFFFF
    kind = offset % 5
    if kind == 0:  # compressible
        value = (b"%d-" % offset) * (1 + h % 40)
    elif kind == 1:
        value = b""
    else:  # incompressible
        start = h % (len(_POOL) - 400)
        value = _POOL[start:start + (h >> 8) % 400]
    key = None if offset % 7 == 3 else b"k%d" % offset
    # mostly ascending, sometimes behind: the time index only takes a grown maximum
    ts = T0 + 3 * offset - (10_000 if offset % 11 == 5 else 0)
    headers = [("o", b"%d" % offset)] if offset % 4 == 0 else []
    return key, value, ts, headers


def payload_digest(values):
    h = hashlib.sha256()
    for v in values:
        v = b"" if v is None else v
        h.update(struct.pack(">i", len(v)))
        h.update(v)
    return h.hexdigest()


def build_batch(first_offset, count, codec):
    from kafkacore.record import RecordBatchBuilder
    b = RecordBatchBuilder(compression=codec)
    for o in range(first_offset, first_offset + count):
        key, value, ts, headers = record_for(o)
        b.append(value, key=key, timestamp_ms=ts, headers=headers)
    return b.build()


def build_append(rng, first_offset):
    """(bytes of one or more batches, record count) for an append starting at first_offset."""
    nbatches = 1 if rng.random() < 0.85 else rng.randint(2, 3)
    out = bytearray()
    offset = first_offset
    for _ in range(nbatches):
        r = rng.random()
        count = rng.randint(1, 4) if r < 0.4 else rng.randint(5, 30) if r < 0.9 else rng.randint(31, 100)
        out += build_batch(offset, count, rng.choice(CODECS))
        offset += count
    return bytes(out), offset - first_offset


# -- checking helpers (used by the tests) ---------------------------------------------------

def check_batches(data):
    """Checks that data is whole record batches, each passing validate() and holding exactly
    the records record_for describes, offsets ascending without gaps inside a batch. Returns
    [(base_offset, last_offset)]."""
    from kafkacore.record import iter_batches
    out = []
    pos = 0
    for batch in iter_batches(data):
        assert batch.position == pos, (batch.position, pos)
        batch.validate()
        assert batch.magic == 2
        base, last = batch.base_offset, batch.last_offset
        assert batch.count == last - base + 1, (base, last, batch.count)
        expect = base
        max_ts = None
        for rec in batch:
            assert rec.offset == expect, (rec.offset, expect)
            key, value, ts, headers = record_for(rec.offset)
            assert rec.key == key, rec.offset
            assert rec.value == value, rec.offset
            assert rec.timestamp_ms == ts, rec.offset
            assert [tuple(h) for h in rec.headers] == headers, rec.offset
            max_ts = ts if max_ts is None else max(max_ts, ts)
            expect += 1
        assert expect == last + 1, (expect, last)
        assert batch.max_timestamp == max_ts, (base, batch.max_timestamp, max_ts)
        out.append((base, last))
        pos += batch.size_in_bytes
    assert pos == len(data), f"{len(data) - pos} bytes after the last whole batch"
    return out


def batch_headers(data):
    """[(position, base, last, max_timestamp, size)] of whole batches in data (headers only)."""
    out = []
    pos = 0
    while pos < len(data):
        base, blen = struct.unpack_from(">qi", data, pos)
        delta = struct.unpack_from(">i", data, pos + 23)[0]
        max_ts = struct.unpack_from(">q", data, pos + 35)[0]
        out.append((pos, base, base + delta, max_ts, blen + 12))
        pos += blen + 12
    assert pos == len(data)
    return out


def expected_index_entries(data, base_offset, interval):
    """The index rule applied to a segment's bytes, written independently of the engine:
    (offset entries [(relative offset, position)], time entries [(timestamp, relative offset)],
    the final time entry a segment gets when it becomes inactive (or None),
    {last offset of a batch: (max timestamp so far, offset of that max) after it})."""
    offsets, times, running = [], [], {}
    last_index_pos = 0
    max_ts, off_of_max, last_time_ts = -1, -1, -1
    for pos, _base, last, bmax, _size in batch_headers(data):
        if bmax > max_ts:
            max_ts, off_of_max = bmax, last
        running[last] = (max_ts, off_of_max)
        if pos - last_index_pos > interval:
            offsets.append((last - base_offset, pos))
            last_index_pos = pos
            if max_ts > last_time_ts:
                times.append((max_ts, off_of_max - base_offset))
                last_time_ts = max_ts
    final = (max_ts, off_of_max - base_offset) if max_ts > -1 and max_ts > last_time_ts else None
    return offsets, times, final, running


def _read_file(path):
    with open(path, "rb") as f:
        return f.read()


def check_segment_indexes(segment, interval, *, active, exact):
    """Checks a LogSegment's .index and .timeindex files on disk against the index rule.
    exact: the time index is the rule's entries plus the final one (a segment written or
    rebuilt in one go, then made inactive). Otherwise (a segment appended to across reopens,
    where each close added a final entry) it must hold every entry of the rule, and every entry
    must be a true (max timestamp so far, offset of the batch holding it) pair."""
    data = segment.read_bytes(0, segment.size)
    assert len(data) == segment.size
    base = segment.base_offset
    offs, times, final, running = expected_index_entries(data, base, interval)
    ib = _read_file(segment.offset_index.path)
    tb = _read_file(segment.time_index.path)
    n, m = segment.offset_index.entries, segment.time_index.entries
    where = f"segment {base} ({segment.size} bytes)"
    if active:
        assert len(ib) == segment.offset_index.max_entries * 8, (where, len(ib))
        assert len(tb) == segment.time_index.max_entries * 12, (where, len(tb))
    else:
        assert len(ib) == n * 8, (where, len(ib), n)
        assert len(tb) == m * 12, (where, len(tb), m)
    actual_offs = [struct.unpack_from(">ii", ib, i * 8) for i in range(n)]
    assert actual_offs == offs, (where, "offset index", actual_offs, offs)
    actual_times = [struct.unpack_from(">qi", tb, i * 12) for i in range(m)]
    want_exact = times + ([final] if final else [])
    if exact:
        assert actual_times == want_exact, (where, "time index", actual_times, want_exact)
        return
    prev = None
    for ts, rel in actual_times:
        assert running.get(base + rel) == (ts, base + rel), (where, "time entry", (ts, rel))
        assert prev is None or ts > prev, (where, "time index not increasing", actual_times)
        prev = ts
    missing = set(times) - set(actual_times)
    assert not missing, (where, "time index lacks entries of the rule", sorted(missing))
    if not active and running:
        seg_max = max(v[0] for v in running.values())
        assert actual_times and actual_times[-1][0] == seg_max, (where, "no final time entry", actual_times)


def main(argv):
    data_dir, seed = argv[1], int(argv[2])
    import kafkacore
    from kafkacore.storage import LogManager
    # the test checks that the child runs in its mode (KAFKACORE_NO_EXTENSIONS passed through)
    sys.stderr.write(f"storage_writer: native={kafkacore.native_extensions()}\n")
    sys.stderr.flush()
    rng = random.Random(seed)
    manager = LogManager(data_dir, make_config(), background=True, flush_check_interval_ms=50,
                         checkpoint_interval_ms=40, retention_check_interval_ms=3_600_000)
    log = manager.get_or_create_log(TOPIC, PARTITION)
    out = sys.stdout
    while True:
        first = log.log_end_offset
        buf, count = build_append(rng, first)
        info = log.append(buf)
        if info.first_offset != first or info.last_offset != first + count - 1:
            sys.stderr.write(f"append returned {info!r}, expected {first}..{first + count - 1}\n")
            sys.stderr.flush()
            os._exit(3)
        digest = payload_digest(record_for(o)[1] for o in range(first, first + count))
        out.write(f"{info.first_offset} {info.last_offset} {digest}\n")
        out.flush()


TXN_TOPIC = "txn"
TXN_CONFIG = {
    "segment.bytes": 4096,
    "index.interval.bytes": 256,
    "retention.ms": -1,
    "flush.ms": 150,
}


def txn_batch(pid, seq, n, transactional, ts=T0):
    from kafkacore.record import RecordBatchBuilder
    b = RecordBatchBuilder(producer_id=pid, producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
                           transactional=transactional)
    for i in range(n):
        b.append(b"v%d/%d" % (pid, seq + i), key=b"k%d" % (i % 5), timestamp_ms=ts + i)
    return b.build()


def main_txn(data_dir, seed):
    from kafkacore.storage import LogManager
    rng = random.Random(seed)
    manager = LogManager(data_dir, make_config(**TXN_CONFIG), background=True, flush_check_interval_ms=50,
                         checkpoint_interval_ms=40, retention_check_interval_ms=3_600_000)
    log = manager.get_or_create_log(TXN_TOPIC, PARTITION)
    state = log.producer_state
    seq = {}
    for pid in (1, 2, 3):
        e = state.producers.get(pid)
        seq[pid] = e.last_seq + 1 if e is not None and e.batches else 0
    out = sys.stdout
    while True:
        pid = rng.choice((1, 2, 3))
        e = state.producers.get(pid)
        is_open = e is not None and e.current_txn_first_offset >= 0
        r = rng.random()
        if r < 0.2:
            n = rng.randint(1, 4)
            info = log.append(txn_batch(-1, -1, n, False))
            kind, pid = "d", -1
        elif r < 0.7 or (not is_open and r < 0.9):
            n = rng.randint(1, 4)
            info = log.append(txn_batch(pid, seq[pid], n, True))
            seq[pid] += n
            kind = "t"
        else:
            commit = rng.random() < 0.4
            info = log.append_marker(pid, 0, 0, commit=commit)
            kind = "c" if commit else "a"
        out.write(f"{kind} {pid} {info.first_offset} {info.last_offset}\n")
        out.flush()


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[3] == "txn":
        main_txn(sys.argv[1], int(sys.argv[2]))
    else:
        main(sys.argv)
