"""send_many's native runs (kc_append.c, RecordAccumulator._append_run): values read straight
from a numpy "S" array or an Arrow binary array are appended many at a time, without the GIL,
where a list goes one record at a time. Both paths must build the same batches byte for byte,
under every limit the accumulator applies (batch.size, buffer.memory, the sticky partitioner's
byte budget, max.request.size), and the pure-Python twin the same as both; and the sender may
drain and release other batches while a run fills one, losing and repeating nothing."""
import gc
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from kafkacore._loader import load_native
from kafkacore.client import accumulator_py
from kafkacore.errors import RecordTooLargeError
from kafkacore.record import iter_batches

_native = load_native("records")
pytestmark = pytest.mark.skipif(_native is None, reason="the native extension is not built")

TS0 = 1_700_000_000_000


def _accumulator(impl, partitions=3, **kw):
    conf = dict(batch_size=4096, linger_ms=10**9, buffer_memory=1 << 30, max_request_size=1 << 20,
                sticky_partition_bytes=1000)
    conf.update(kw)
    acc = impl.RecordAccumulator(**conf)
    acc.partition_counts["t"] = partitions
    return acc


def _send(acc, impl, values, seed, **kw):
    """send_many into a fresh accumulator; (returned index, [(partition, batch bytes)])."""
    if impl is _native:
        _native.seed_sticky_random(seed)
    handle = impl.BulkHandle()
    got = acc.send_many("t", values, handle=handle, **kw)
    out = []
    for b in acc.drain(10**13, True):
        out.append((b.partition, bytes(b.builder.build())))
    return got, handle.records, out


def _values(n, width, rng):
    raw = rng.integers(1, 256, size=(n, width), dtype=np.uint8)  # no NUL: bytes() keeps every byte
    return raw.view(f"S{width}").ravel()


@pytest.mark.parametrize("width", [1, 100, 3000])
@pytest.mark.parametrize("timestamps", [False, True])
def test_numpy_runs_build_the_batches_one_record_appends_build(width, timestamps):
    rng = np.random.default_rng(width)
    n = 2000
    values = _values(n, width, rng)
    as_list = [bytes(v) for v in values]
    kw = {}
    if timestamps:
        kw["timestamps_ms"] = np.array([TS0 + (i * 7919) % 5000 - 2500 for i in range(n)], dtype=np.int64)
    fast = _send(_accumulator(_native), _native, values, 12345, **kw)
    slow = _send(_accumulator(_native), _native, as_list, 12345, **kw)
    assert fast[0] == slow[0] == -1 and fast[1] == slow[1] == n
    assert [p for p, _ in fast[2]] == [p for p, _ in slow[2]]
    if not timestamps:  # both used "now", taken once per call: the records differ only there
        fast_b = [_strip_times(b) for _, b in fast[2]]
        slow_b = [_strip_times(b) for _, b in slow[2]]
        assert fast_b == slow_b
    else:
        assert fast[2] == slow[2]
    assert sum(_count(b) for _, b in fast[2]) == n


def _strip_times(batch):
    # base and max timestamp (bytes 27-43) and the CRC (17-21) follow the clock
    return batch[:17] + batch[21:27] + batch[43:]


def _count(batch):
    return sum(len(list(b)) for b in iter_batches(batch))


@pytest.mark.parametrize("kind", ["binary", "large_binary", "string"])
def test_arrow_runs_with_nulls_and_an_offset_build_the_batches_of_a_list(kind):
    rng = np.random.default_rng(7)
    items = [None if i % 11 == 3 else bytes(rng.integers(97, 123, size=int(rng.integers(0, 300)), dtype=np.uint8))
             for i in range(3000)]
    typ = {"binary": pa.binary(), "large_binary": pa.large_binary(), "string": pa.string()}[kind]
    arr = pa.array([None if v is None else (v.decode() if kind == "string" else v) for v in items], type=typ)
    arr = arr.slice(17)  # a non-zero Arrow offset
    stamps = np.arange(len(arr), dtype=np.int64) + TS0
    fast = _send(_accumulator(_native), _native, arr, 99, timestamps_ms=stamps)
    slow = _send(_accumulator(_native), _native, items[17:], 99, timestamps_ms=stamps)
    twin_fast = _send(_accumulator(_native), _native, arr, 99, timestamps_ms=stamps, partition=1)
    twin = _send(_accumulator(accumulator_py), accumulator_py, items[17:], 0, timestamps_ms=stamps, partition=1)
    assert fast == slow
    assert twin_fast == twin
    decoded = [r.value for _, b in fast[2] for batch in iter_batches(b) for r in batch]
    assert sorted(decoded, key=lambda v: (v is None, v)) == sorted(items[17:], key=lambda v: (v is None, v))


@pytest.mark.parametrize("partitions, batch_size, n", [
    (1, 4096, 3000),  # the budget spent, the same partition again
    (100, 4096, 6000),  # runs follow the sticky partitioner over the first 64 partitions only
    (7, 1 << 20, 60000),  # 1 MB batches grown inside the runs, into blocks of the block cache
])
def test_runs_follow_the_sticky_partitioner_as_one_record_appends_do(partitions, batch_size, n):
    """A run goes on from the open batch of one partition to the next the sticky partitioner
    chooses (kc_append_sticky_runs), growing each batch as it fills: the same partitions,
    order of batches and bytes as a list sent one record at a time."""
    values = _values(n, 100, np.random.default_rng(partitions))
    stamps = np.full(n, TS0, dtype=np.int64)
    fast = _send(_accumulator(_native, partitions, batch_size=batch_size), _native, values, 4242, timestamps_ms=stamps)
    slow = _send(_accumulator(_native, partitions, batch_size=batch_size), _native, [bytes(v) for v in values], 4242,
                 timestamps_ms=stamps)
    assert fast == slow
    assert fast[1] == n and sum(_count(b) for _, b in fast[2]) == n
    assert len({p for p, _ in fast[2]}) == min(partitions, len(fast[2]))  # (spread: every partition used)


def test_explicit_partition_runs_match_the_twin():
    rng = np.random.default_rng(3)
    values = _values(5000, 57, rng)
    stamps = np.full(len(values), TS0, dtype=np.int64)
    native = _send(_accumulator(_native), _native, values, 1, partition=2, timestamps_ms=stamps)
    twin = _send(_accumulator(accumulator_py), accumulator_py, [bytes(v) for v in values], 1, partition=2,
                 timestamps_ms=stamps)
    assert native == twin
    assert {p for p, _ in native[2]} == {2} and len(native[2]) > 50


@pytest.mark.parametrize("impl", [pytest.param(accumulator_py, id="twin"), pytest.param(_native, id="native")])
def test_buffer_memory_stops_a_run_where_it_stops_one_record_appends(impl):
    rng = np.random.default_rng(5)
    values = _values(3000, 100, rng)
    stamps = np.full(len(values), TS0, dtype=np.int64)
    memory = 50_000
    fast = _send(_accumulator(_native, buffer_memory=memory), _native, values, 8, timestamps_ms=stamps,
                 partition=0)
    other = _send(_accumulator(impl, buffer_memory=memory), impl, [bytes(v) for v in values], 8,
                  timestamps_ms=stamps, partition=0)
    assert 0 < fast[0] < len(values)  # stopped: the index to resume from
    assert fast == other


def test_a_record_above_max_request_size_is_refused_after_the_ones_before_it_are_queued():
    values = np.array([b"a" * 10, b"b" * 10, b"c" * 10, b"d" * 10] + [b"e" * 10] * 40, dtype="S10")
    wide = np.array([b"x" * 2000] * 3 + [b"y" * 5000], dtype="S5000")
    acc = _accumulator(_native, max_request_size=3000)
    handle = _native.BulkHandle()
    assert acc.send_many("t", values, handle=handle) == -1
    with pytest.raises(RecordTooLargeError):
        acc.send_many("t", wide, handle=handle, partition=0)  # width 5000 > max.request.size
    assert handle.records == len(values)


def test_the_sender_drains_and_releases_beside_a_filling_run_and_loses_nothing():
    """A thread drains, builds, decodes and releases batches as fast as it can while another
    sends numpy slices through long GIL-free runs, with collections that hand the GIL over
    (a gc callback that sleeps) on both threads. Every record comes out once, in order per
    partition, and buffer.memory is all given back."""
    acc = _accumulator(_native, batch_size=64 * 1024, sticky_partition_bytes=16384, linger_ms=0)
    n_slices, per_slice, width = 40, 2500, 40
    rng = np.random.default_rng(11)
    slices = []
    for s in range(n_slices):
        v = _values(per_slice, width, rng)
        # the record's number in its first 8 bytes: order is checked per partition
        raw = v.view(np.uint8).reshape(per_slice, width)
        raw[:, :8] = np.arange(s * per_slice, (s + 1) * per_slice, dtype=">u8").view(np.uint8).reshape(per_slice, 8)
        slices.append(v)
    seen = {0: [], 1: [], 2: []}
    done = threading.Event()
    failures = []

    def drain_loop():
        try:
            while True:
                finished = done.is_set()
                for b in acc.drain(int(time.time() * 1000), finished, {("other", 0)}):
                    for batch in iter_batches(bytes(b.builder.build())):
                        seen[b.partition].extend(int.from_bytes(r.value[:8], "big") for r in batch)
                    acc.release(b)
                if finished:
                    return
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            failures.append(e)

    yield_gil = lambda phase, info: time.sleep(0.0001)  # noqa: E731
    old = gc.get_threshold()
    gc.callbacks.append(yield_gil)
    gc.set_threshold(20, 5, 5)
    t = threading.Thread(target=drain_loop)
    t.start()
    try:
        for v in slices:
            handle = _native.BulkHandle()
            assert acc.send_many("t", v, handle=handle) == -1
            assert handle.records == per_slice
    finally:
        done.set()
        t.join(60)
        gc.callbacks.remove(yield_gil)
        gc.set_threshold(*old)
    assert not failures
    everything = sorted(x for part in seen.values() for x in part)
    assert everything == list(range(n_slices * per_slice))
    for part in seen.values():
        assert part == sorted(part)
    assert acc.buffered == 0


def test_released_gil_says_whether_the_last_send_many_let_the_gil_go():
    """Producer.send_many hands the sender the GIL between chunks only when the accumulator's
    runs did not (time.sleep(0) can wait a whole switch interval to get it back)."""
    values = _values(1000, 50, np.random.default_rng(1))
    acc = _accumulator(_native, batch_size=1 << 20, sticky_partition_bytes=1 << 20)
    assert acc.send_many("t", values, handle=_native.BulkHandle()) == -1 and acc.released_gil
    assert acc.send_many("t", [bytes(v) for v in values], handle=_native.BulkHandle()) == -1
    assert not acc.released_gil
    assert acc.send_many("t", values[:10], handle=_native.BulkHandle()) == -1  # too short a run
    assert not acc.released_gil
    twin = _accumulator(accumulator_py)
    assert twin.send_many("t", values, handle=accumulator_py.BulkHandle()) == -1 and not twin.released_gil


def test_malformed_arrow_offsets_are_refused_after_the_records_before_them():
    """Hostile input: an Arrow array built from raw buffers, whose offsets run backwards at one
    record (pyarrow's cheap validation does not look at them; offsets into a missing data
    buffer, which pyarrow refuses itself, are covered by the C tests). The run
    stops there, the ordinary path raises a one-line ValueError naming the record, and the
    records before it are queued and built intact."""
    import struct
    offsets = [0, 3, 6, 9, 12, 10, 14]  # record 4 runs backwards
    data = pa.py_buffer(b"abcdefghijklmnop")
    bad = pa.Array.from_buffers(pa.binary(), 6, [None, pa.py_buffer(struct.pack("<7i", *offsets)), data])
    values = pa.concat_arrays([pa.array([b"x" * 10] * 100, pa.binary()), bad])  # a long run first
    acc = _accumulator(_native, batch_size=1 << 20, sticky_partition_bytes=1 << 20)
    handle = _native.BulkHandle()
    with pytest.raises(ValueError, match=r"malformed Arrow offsets at 104"):
        acc.send_many("t", values, handle=handle, partition=0)
    assert handle.records == 104
    [batch] = acc.drain(10**13, True)
    got = [r.value for b in iter_batches(bytes(batch.builder.build())) for r in b]
    assert got == [b"x" * 10] * 100 + [b"abc", b"def", b"ghi", b"jkl"]
