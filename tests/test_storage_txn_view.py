"""kafkacore/storage/txn_view.py: the read-only view of a partition's transactions computed
from its files (docs/transactions.md, section 9.3), checked against the Log that wrote them.

Random histories of open, committed, aborted and interleaved transactions over small segments
(so snapshots at rolls hold open transactions) are written through a real Log; at many points,
while the Log is still open and appending (as a running broker), the view's last stable offset
must be the Log's and its aborted list for a range must be Kafka's collection that the Log's
read_committed uses; decoding the range's files with that list must give exactly the committed
and non-transactional records. Then the same after a close (a snapshot in mid-segment), with
every snapshot removed (the whole log replayed), and with damaged files."""
import os
import random

import pytest

from kafkacore.record import decode_to_arrow
from kafkacore.storage import Log, LogConfig
from kafkacore.storage.txn_index import CorruptIndexError
from kafkacore.storage.txn_view import TxnView

from test_storage_transactions import Scenario


def view_of(d, log_start_offset=0, log_end_offset=None, lg=None):
    segs = sorted((int(n[:20]), os.path.getsize(os.path.join(d, n))) for n in os.listdir(d) if n.endswith(".log"))
    end = lg.log_end_offset if lg is not None else log_end_offset
    start = lg.log_start_offset if lg is not None else log_start_offset
    return TxnView(d, segs, start, end)


def committed_from_files(d, view, start, end):
    """{offset: value} of [start, end) decoded from the .log files with the view's aborted list.
    Each file is decoded on its own, so it gets the entries whose marker is in it or later: an
    entry ending before the file would make a later transaction of the same producer look
    aborted (the decoder's rule, as a consumer's fetch from an offset)."""
    aborted = view.aborted_transactions(start, end)
    out = {}
    for n in sorted(x for x in os.listdir(d) if x.endswith(".log")):
        with open(os.path.join(d, n), "rb") as f:
            data = f.read()
        base = int(n[:20])
        batch = decode_to_arrow(data, aborted=[(a.producer_id, a.first_offset) for a in aborted
                                               if a.last_offset >= base])
        for off, value in zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist()):
            if start <= off < end:
                out[off] = value
    return out


def history(s, rnd, steps, pids=(11, 12, 13, 14)):
    for _ in range(steps):
        pid = rnd.choice(pids)
        r = rnd.random()
        if r < 0.15:
            s.plain(rnd.randint(1, 3))
        elif r < 0.7 or pid not in s.first:
            s.send(pid, rnd.randint(1, 3))
        else:
            s.end(pid, commit=rnd.random() < 0.5)
        yield


def check(lg, s, rnd, view=None):
    view = view or view_of(lg.dir, lg=lg)
    assert view.last_stable_offset == lg.last_stable_offset
    end = lg.log_end_offset
    for _ in range(6):
        a = rnd.randrange(0, end + 1)
        b = rnd.randrange(a, end + 1)
        assert view.aborted_transactions(a, b) == lg.collect_aborted_transactions(a, b), (a, b)
    lso = view.last_stable_offset
    assert committed_from_files(lg.dir, view, 0, lso) == {o: v for o, v in s.visible.items() if o < lso}
    return view


@pytest.mark.parametrize("seed", range(3))
def test_the_view_of_a_log_being_written_is_the_logs(tmp_path, seed):
    rnd = random.Random(seed)
    d = str(tmp_path / "t-0")
    config = LogConfig({"segment.bytes": 700, "index.interval.bytes": 150})
    lg = Log(d, config)
    s = Scenario(lg)
    for step, _ in enumerate(history(s, rnd, 150)):
        if step % 10 == 9:
            check(lg, s, rnd)
    assert len(lg.segments) > 5 and len(s.aborted) >= 3
    view = check(lg, s, rnd)
    # the aborts below the latest snapshot come from .txnindex files, the later ones from the replay
    assert 0 < view.snapshot_offset < lg.log_end_offset
    lg.close()
    # a close writes a snapshot at the log end: nothing is replayed, the open transactions
    # come from it
    lg = Log(d, config)
    try:
        s.lg = lg
        view = check(lg, s, rnd)
        assert view.snapshot_offset == lg.log_end_offset and view.replayed_aborted == []
        assert sorted(view.open_transactions.values()) == s.open_first_offsets
        for _ in history(s, rnd, 30):
            pass
        check(lg, s, rnd)
        # without any snapshot, the whole log is replayed to the same answers
        for n in os.listdir(d):
            if n.endswith(".snapshot"):
                os.unlink(os.path.join(d, n))
        view = check(lg, s, rnd)
        assert view.snapshot_offset == 0 and len(view.replayed_aborted) == len(s.aborted)
    finally:
        lg.close()


def test_a_snapshot_past_the_views_end_is_not_used(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, LogConfig({"segment.bytes": 400}))
    s = Scenario(lg)
    s.send(1, 2)  # 0-1
    s.plain(2)  # 2-3
    lso_then, end_then = lg.last_stable_offset, lg.log_end_offset
    s.end(1, commit=False)
    for _ in range(6):
        s.plain(3)
    lg.close()
    assert lso_then == 0
    assert any(int(n[:20]) > end_then for n in os.listdir(d) if n.endswith(".snapshot"))
    # a reader that saw the files when they ended at end_then: the later snapshots describe data
    # it does not hold
    view = view_of(d, log_end_offset=end_then)
    assert (view.last_stable_offset, view.aborted_transactions(0, end_then)) == (0, [])
    assert view.snapshot_offset <= end_then


def test_damaged_files_are_errors(tmp_path):
    d = str(tmp_path / "t-0")
    lg = Log(d, LogConfig({"segment.bytes": 300}))
    s = Scenario(lg)
    s.send(1, 2)
    s.end(1, commit=False)
    for _ in range(5):
        s.plain(3)
    end = lg.log_end_offset
    lg.close()
    (idx,) = [n for n in os.listdir(d) if n.endswith(".txnindex")]
    path = os.path.join(d, idx)
    with open(path, "rb") as f:
        good = f.read()
    assert view_of(d, log_end_offset=end).aborted_transactions(0, end)[0].producer_id == 1
    with open(path, "wb") as f:
        f.write(b"\x00\x07" + good[2:])  # version 7
    with pytest.raises(CorruptIndexError, match="version 7"):
        view_of(d, log_end_offset=end).aborted_transactions(0, end)
    with open(path, "wb") as f:
        f.write(good)
    # a flipped byte in a batch the replay reads fails its CRC
    for n in os.listdir(d):
        if n.endswith(".snapshot"):
            os.unlink(os.path.join(d, n))
    log0 = os.path.join(d, "00000000000000000000.log")
    with open(log0, "r+b") as f:
        data = bytearray(f.read())
        data[70] ^= 0xFF
        f.seek(0)
        f.write(bytes(data))
    with pytest.raises(ValueError, match="CRC"):
        view_of(d, log_end_offset=end)
