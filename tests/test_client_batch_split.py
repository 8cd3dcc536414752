"""Splitting a batch the broker refused as too large (kafkacore/client/batch_split.py), on the
compiled accumulator and its pure-Python twin alike: the parts hold the records in order, the
records' handles and callbacks follow their parts, and a renumbered batch stays valid. The
broker side (real refusals, every record written once) is in test_client_producer.py."""
import pytest

from kafkacore._loader import load_native
from kafkacore.client import accumulator_py
from kafkacore.client.batch_split import split_batch
from kafkacore.client.sender import _with_sequence
from kafkacore.errors import MessageTooLargeError
from kafkacore.record import iter_batches

_native = load_native("records")
IMPLS = [pytest.param(accumulator_py, id="twin")]
if _native is not None:
    IMPLS.append(pytest.param(_native, id="native"))


def _one_batch(impl, n, value=lambda i: b"v%03d" % i, callbacks=None):
    acc = impl.RecordAccumulator(batch_size=1000000, linger_ms=0)
    acc.partition_counts["t"] = 1
    handles = [acc.send("t", value(i), key=b"k%d" % i, headers=[("h", b"%d" % i)], timestamp_ms=1000 + i,
                        on_delivery=None if callbacks is None else (lambda e, md, i=i: callbacks.append((i, e, md))))
               for i in range(n)]
    [batch] = acc.drain(10**13, True)
    batch.data = batch.builder.build()
    batch.builder = None
    return acc, batch, handles


@pytest.mark.parametrize("impl", IMPLS)
def test_parts_hold_the_records_in_order_and_handles_follow_them(impl):
    calls = []
    acc, batch, handles = _one_batch(impl, 9, callbacks=calls)
    reserved = batch.reserved
    first, second = split_batch(batch, "none")
    assert (first.count, second.count) == (5, 4)  # about half the bytes each
    assert (first.reserved, second.reserved, batch.reserved) == (reserved, 0, 0)
    records = []
    for part in (first, second):
        part.data = part.builder.build()
        records += [r for b in iter_batches(part.data) for r in b]
    assert [(r.key, r.value, r.timestamp_ms, list(r.headers)) for r in records] == [
        (b"k%d" % i, b"v%03d" % i, 1000 + i, [("h", b"%d" % i)]) for i in range(9)]
    # the second part is written first, the first fails: the whole completes only then
    second.result.complete(100, -1, None)
    assert not batch.result.done() and not calls
    first.result.complete(-1, -1, MessageTooLargeError("too large"))
    assert batch.result.done()
    assert [type(h.exception(0)).__name__ for h in handles] == ["MessageTooLargeError"] * 5 + ["NoneType"] * 4
    assert [h.result(0).offset for h in handles[5:]] == [100, 101, 102, 103]
    with pytest.raises(MessageTooLargeError):
        handles[0].result(0)
    assert [(i, type(e).__name__, md and md.offset) for i, e, md in calls] == (
        [(i, "MessageTooLargeError", None) for i in range(5)] + [(i, "NoneType", 100 + i - 5) for i in range(5, 9)])
    assert isinstance(batch.result.error, MessageTooLargeError)  # what a send_many handle raises


@pytest.mark.parametrize("impl", IMPLS)
def test_a_part_split_again_resolves_through_both_levels(impl):
    acc, batch, handles = _one_batch(impl, 8)
    a, b = split_batch(batch, "none")
    a.data = a.builder.build()
    a1, a2 = split_batch(a, "none")
    for part, base in ((a1, 10), (a2, 20), (b, 30)):
        part.result.complete(base, -1, None)
    assert batch.result.done() and batch.result.error is None
    sizes = (a1.count, a2.count, b.count)
    want = [10 + i for i in range(sizes[0])] + [20 + i for i in range(sizes[1])] + [30 + i for i in range(sizes[2])]
    assert [h.result(0).offset for h in handles] == want


@pytest.mark.parametrize("impl", IMPLS)
def test_a_split_is_refused_for_one_record_or_twice(impl):
    acc, batch, handles = _one_batch(impl, 1)
    with pytest.raises(ValueError):
        split_batch(batch, "none")
    acc, batch, handles = _one_batch(impl, 4)
    split_batch(batch, "none")
    with pytest.raises(ValueError):
        batch.result.split([2, 2])


@pytest.mark.parametrize("impl", IMPLS)
def test_limit_batch_size_seals_the_topics_new_batches_early(impl):
    acc = impl.RecordAccumulator(batch_size=1000000, linger_ms=10**9)
    acc.partition_counts.update({"t": 1, "u": 1})
    acc.limit_batch_size("t", 2000)
    acc.limit_batch_size("t", 50000)  # a bigger limit never loosens a smaller one
    acc.limit_batch_size("u", 2000000)  # nor one above batch.size applies
    for i in range(100):
        acc.send("t", b"x" * 100)
        acc.send("u", b"x" * 100)
    ready = acc.drain(0, False)
    assert len(ready) >= 5 and {b.topic for b in ready} == {"t"}
    assert all(b.size <= 2000 for b in ready)


def test_a_renumbered_batch_keeps_a_valid_crc():
    """_close_gap moves a built batch's base sequence down: its CRC is written again."""
    builder = accumulator_py.RecordBatchBuilder("lz4")
    for i in range(3):
        builder.append(b"v%03d" % i, b"k%d" % i, 1000 + i, [("h", b"%d" % i)])
    builder.set_producer_state(7, 1, 40)
    built = builder.build()
    data = _with_sequence(built, 12)
    [decoded] = list(iter_batches(data))
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (7, 1, 12)
    decoded.validate()  # raises on a wrong CRC
    assert [r.value for r in decoded] == [b"v000", b"v001", b"v002"]
    assert data[:17] == built[:17] and data[21:53] == built[21:53] and data[57:] == built[57:]


@pytest.mark.parametrize("impl", IMPLS)
def test_whoever_waits_for_the_last_part_finds_the_whole_done(impl):
    """flush waits on the parts' results: once the last part is done, the records' handles
    (on the whole batch's result) must be done as well, with no window between the two."""
    import threading

    for _ in range(200):
        acc, batch, handles = _one_batch(impl, 4)
        a, b = split_batch(batch, "none")
        a.result.complete(0, -1, None)
        seen = []
        waiter = threading.Thread(target=lambda: seen.append((b.result.wait(5), handles[-1].done())))
        waiter.start()
        b.result.complete(2, -1, None)
        waiter.join(5)
        assert seen == [(True, True)]
