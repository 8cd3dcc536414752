"""Failed writes in the storage engine, with real processes and real files.

A child process runs the engine under a small RLIMIT_FSIZE with SIGXFSZ ignored, so that
write() and ftruncate() past the limit fail with EFBIG as they would on a full disk. Appends
must succeed up to the limit and then raise KafkaStorageError (56) leaving the log exactly as
it was; once the child raises its soft limit back to the hard limit, appends go on with
contiguous offsets; reopened without a clean shutdown, every acknowledged append is there.

The child reports what it saw as JSON on stdout; the assertions are made here."""
import errno
import json
import os
import struct
import subprocess
import sys

import pytest

from kafkacore.storage import Log

import storage_writer as W

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))

# The child: python -c CHILD scenario data_dir limit
CHILD = r'''
import hashlib, json, os, random, resource, signal, sys, traceback
sys.path.insert(0, TESTS_DIR)
import storage_writer as W
from kafkacore.storage import Log

scenario, data_dir, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() past the limit fails with EFBIG
report = {"acks": [], "events": []}


def sha(b):
    return hashlib.sha256(b).hexdigest()


def state(log):
    seg = log.active_segment
    with open(seg.offset_index.path, "rb") as f:
        index = f.read()
    with open(seg.time_index.path, "rb") as f:
        times = f.read()
    return {
        "end": log.log_end_offset, "hw": log.high_watermark, "segments": [s.base_offset for s in log.segments],
        "active_size": seg.size, "file_size": os.stat(seg.log_path).st_size,
        "content": sha(log.read_batches_bytes()), "read_at_end": log.read(log.log_end_offset, 1 << 20).length,
        "index_entries": seg.offset_index.entries, "time_entries": seg.time_index.entries,
        "index": sha(index[:seg.offset_index.entries * 8]), "times": sha(times[:seg.time_index.entries * 12]),
        "files": sorted(os.listdir(log.dir)),
    }


def append(log, buf, what):
    first = log.log_end_offset
    try:
        info = log.append(buf)
    except Exception as e:
        ev = {"what": what, "ok": False, "type": type(e).__name__, "code": getattr(e, "code", None),
              "message": str(e), "errno": getattr(e.__cause__, "errno", None),
              "traceback": traceback.format_exc(), "end_before": first, "bytes": len(buf)}
        report["events"].append(ev)
        return ev
    report["acks"].append([info.first_offset, info.last_offset, len(buf)])
    ev = {"what": what, "ok": True, "first": info.first_offset, "last": info.last_offset,
          "end_before": first, "bytes": len(buf)}
    report["events"].append(ev)
    return ev


def sized_batch(first, min_bytes, max_bytes=None):
    """An uncompressed batch at first of at least min_bytes (and at most max_bytes)."""
    n = 1
    while True:
        buf = W.build_batch(first, n, "none")
        if len(buf) >= min_bytes:
            assert max_bytes is None or len(buf) <= max_bytes, (len(buf), max_bytes)
            return buf
        n += 1


def lift():
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))
    report["lifted"] = True


def limit_to(n):
    _soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))


def fill_until_failure(log, rng, multi):
    for i in range(100000):
        first = log.log_end_offset
        if multi:
            buf = b"".join(W.build_batch(first + 10 * j, 10, rng.choice(W.CODECS)) for j in range(3))
        else:
            buf = W.build_append(rng, first)[0]
        before = state(log)
        ev = append(log, buf, "fill")
        if not ev["ok"]:
            return buf, before
    raise AssertionError("the limit was never reached")


def scenario_log_write(multi):
    """The log file reaches the limit: the write of a batch fails part way."""
    config = W.make_config(**{"segment.bytes": 1 << 20, "segment.index.bytes": 16384})
    log = Log(os.path.join(data_dir, "efbig-0"), config)
    limit_to(limit)
    rng = random.Random(17)
    buf, before = fill_until_failure(log, rng, multi)
    report["before"] = before
    report["after_failure"] = state(log)
    append(log, buf, "again-at-limit")
    report["after_second_failure"] = state(log)
    lift()
    append(log, buf, "same-after-lift")
    for _ in range(30):
        append(log, W.build_append(rng, log.log_end_offset)[0], "after-lift")
    report["final"] = state(log)
    log.close()


def scenario_roll(small_first):
    """The limit hits as a roll creates the next segment: preallocating its index fails."""
    config = W.make_config(**{"segment.bytes": 32768, "segment.index.bytes": 131072})
    log = Log(os.path.join(data_dir, "roll-0"), config)  # active indexes preallocated already
    limit_to(limit)
    rng = random.Random(23)
    while log.active_segment.size + 6000 < config.segment_bytes:
        buf = W.build_batch(log.log_end_offset, rng.randint(3, 12), "none")
        ev = append(log, buf, "fill")
        assert ev["ok"], ev
    assert len(log.segments) == 1
    room = config.segment_bytes - log.active_segment.size
    report["room"] = room
    big = sized_batch(log.log_end_offset, room + 1, config.segment_bytes)
    report["before"] = state(log)
    append(log, big, "roll-at-limit")
    report["after_failure"] = state(log)
    small = sized_batch(log.log_end_offset, 1)  # one record: fits in the room left
    report["small_bytes"] = len(small)
    if small_first:
        append(log, small, "small-at-limit")
        report["after_small_at_limit"] = state(log)
    lift()
    if small_first:
        small = sized_batch(log.log_end_offset, 1)
        append(log, small, "small-after-lift")
    append(log, sized_batch(log.log_end_offset, room + 1, config.segment_bytes), "roll-after-lift")
    for _ in range(40):
        append(log, W.build_append(rng, log.log_end_offset)[0], "after-lift")
    report["final"] = state(log)
    try:
        log.close()
        report["closed"] = True
    except Exception:
        report["close_error"] = traceback.format_exc()


try:
    {"log-write": lambda: scenario_log_write(False),
     "log-write-multi": lambda: scenario_log_write(True),
     "roll": lambda: scenario_roll(False),
     "roll-small-first": lambda: scenario_roll(True)}[scenario]()
except BaseException:
    report["crash"] = traceback.format_exc()
sys.stdout.write(json.dumps(report))
sys.stdout.flush()
'''.replace("TESTS_DIR", repr(TESTS_DIR))


def run_child(scenario, data_dir, limit):
    proc = subprocess.run([sys.executable, "-c", CHILD, scenario, str(data_dir), str(limit)],
                          capture_output=True, env=os.environ.copy(), timeout=300)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"child output is not JSON:\n{proc.stdout[-2000:]!r}\n{proc.stderr.decode(errors='replace')}")
    assert "crash" not in report, "the child failed:\n" + report["crash"]
    return report


def failure_events(report, what=None):
    return [e for e in report["events"] if not e["ok"] and (what is None or e["what"] == what)]


def assert_storage_error(ev):
    assert ev["type"] == "KafkaStorageError", f"{ev['what']}: expected KafkaStorageError:\n{ev.get('traceback')}"
    assert ev["code"] == 56
    assert ev["errno"] == errno.EFBIG, ev["message"]


def assert_acks_contiguous(report):
    acks = report["acks"]
    assert acks and acks[0][0] == 0
    for (f1, l1, _), (f2, _l2, _) in zip(acks, acks[1:]):
        assert f2 == l1 + 1, ("offsets not contiguous", l1, f2)
    return acks[-1][1]


def check_files_follow_index_rule(d, config):
    """Every segment of a log closed in one session: indexes on disk are the rule's entries
    plus the final time entry, files trimmed."""
    logs = sorted(n for n in os.listdir(d) if n.endswith(".log"))
    for name in logs:
        base = int(name[:20])
        data = W._read_file(os.path.join(d, name))
        offs, times, final, _running = W.expected_index_entries(data, base, config.index_interval_bytes)
        ib = W._read_file(os.path.join(d, name[:-4] + ".index"))
        tb = W._read_file(os.path.join(d, name[:-4] + ".timeindex"))
        assert [tuple(x) for x in (struct.unpack_from(">ii", ib, i) for i in range(0, len(ib), 8))] == offs, name
        want_times = times + ([final] if final else [])
        assert [tuple(x) for x in (struct.unpack_from(">qi", tb, i) for i in range(0, len(tb), 12))] == want_times, name


def reopen_and_check(d, config, last_acked, acked_bytes=None):
    """Reopens without a clean shutdown, everything rescanned: every acknowledged record is
    there and valid, offsets contiguous from 0, no segment out of place."""
    log = Log(d, config, recovery_point=0, clean_shutdown=False)
    try:
        lr = log.load_result
        assert lr.truncated_bytes == 0, vars(lr)
        assert lr.deleted_segments == 0, vars(lr)
        assert log.log_end_offset == last_acked + 1
        offset, data_len = 0, 0
        for seg in log.segments:
            data = seg.read_bytes(0, seg.size)
            batches = W.check_batches(data)
            if seg is not log.segments[-1]:
                assert batches, f"empty segment {seg.base_offset} in the middle of the log"
            if batches:
                assert batches[0][0] == seg.base_offset == offset, (seg, batches[0], offset)
                offset = batches[-1][1] + 1
            data_len += len(data)
        assert offset == last_acked + 1
        # and through Log.read from every batch start
        expected = 0
        while expected < log.log_end_offset:
            sl = log.read(expected, 1 << 30)
            got = W.check_batches(sl.read())
            assert got and got[0][0] == expected, (expected, got[:1])
            expected = got[-1][1] + 1
        if acked_bytes is not None:
            assert data_len == acked_bytes
    finally:
        log.close()


@pytest.mark.parametrize("scenario", ["log-write", "log-write-multi"])
def test_failed_log_write_leaves_the_log_unchanged(tmp_path, scenario):
    limit = 200_000
    report = run_child(scenario, tmp_path, limit)
    fails = failure_events(report)
    assert [e["what"] for e in fails] == ["fill", "again-at-limit"], fails
    first_fail, second_fail = fails
    assert_storage_error(first_fail)
    assert_storage_error(second_fail)
    before, after = report["before"], report["after_failure"]
    # appends succeeded up to the limit...
    good = [a for a in report["acks"] if a[0] < first_fail["end_before"]]
    assert len(good) >= 5
    assert before["active_size"] == sum(a[2] for a in good)
    # ...and the failing one crossed it part way: a partial write happened and was undone
    assert before["active_size"] < limit < before["active_size"] + first_fail["bytes"]
    # the log is unchanged by the failed append: offsets, reads, indexes, the file itself
    assert after == before, {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    assert after["file_size"] == after["active_size"], "a partial batch is left in the file"
    assert after["read_at_end"] == 0
    assert report["after_second_failure"] == before
    # once the limit is lifted the same append succeeds at the same offsets, and more follow
    assert report.get("lifted")
    ok_after = [e for e in report["events"] if e["ok"] and e["what"] in ("same-after-lift", "after-lift")]
    assert ok_after and ok_after[0]["what"] == "same-after-lift"
    assert ok_after[0]["first"] == first_fail["end_before"]
    assert len(ok_after) == 31
    last = assert_acks_contiguous(report)
    assert report["final"]["end"] == last + 1
    assert report["final"]["file_size"] == report["final"]["active_size"] == sum(a[2] for a in report["acks"])
    d = str(tmp_path / "efbig-0")
    config = W.make_config(**{"segment.bytes": 1 << 20, "segment.index.bytes": 16384})
    check_files_follow_index_rule(d, config)  # the scan state was restored after the failure
    reopen_and_check(d, config, last, acked_bytes=sum(a[2] for a in report["acks"]))


@pytest.mark.parametrize("scenario", ["roll", "roll-small-first"])
def test_failed_roll_leaves_the_log_usable(tmp_path, scenario):
    """segment.index.bytes is 128 KiB and the file size limit 64 KiB: the roll's new segment
    cannot preallocate its index. The append fails with KafkaStorageError, nothing of it is
    visible, and once the limit is lifted the log takes appends again: one that still fits the
    old segment ("roll-small-first") and one that rolls."""
    limit = 65536
    report = run_child(scenario, tmp_path, limit)
    fails = failure_events(report)
    roll_fail = failure_events(report, "roll-at-limit")
    assert len(roll_fail) == 1, report["events"][-3:]
    assert_storage_error(roll_fail[0])
    before, after = report["before"], report["after_failure"]
    for key in ("end", "hw", "segments", "content", "read_at_end", "active_size", "file_size"):
        assert after[key] == before[key], (key, before[key], after[key])
    assert after["file_size"] == after["active_size"]
    if scenario == "roll-small-first":
        # still at the limit, an append that needs no roll either succeeds or fails cleanly
        small = [e for e in report["events"] if e["what"] == "small-at-limit"][0]
        if not small["ok"]:
            assert small["type"] == "KafkaStorageError", (
                f"append after a failed roll raised {small['type']}:\n{small['traceback']}")
        after_lift = [e for e in report["events"] if e["what"] == "small-after-lift"][0]
        assert after_lift["ok"], f"append after the limit was lifted failed:\n{after_lift.get('traceback')}"
    assert report.get("lifted")
    unexpected = [e for e in fails if e["what"] not in ("roll-at-limit", "small-at-limit")]
    assert not unexpected, "\n".join(e.get("traceback", "") for e in unexpected)
    rolled = [e for e in report["events"] if e["what"] == "roll-after-lift"][0]
    assert rolled["ok"]
    last = assert_acks_contiguous(report)
    final = report["final"]
    assert final["end"] == last + 1
    assert len(final["segments"]) >= 3
    assert report.get("closed"), report.get("close_error")
    d = str(tmp_path / "roll-0")
    config = W.make_config(**{"segment.bytes": 32768, "segment.index.bytes": 131072})
    # no segment file is left that the log does not hold (the failed roll's new segment)
    bases = {int(n[:20]) for n in os.listdir(d) if n[:20].isdigit() and not n.endswith(".snapshot")}
    assert bases == set(final["segments"]), (sorted(bases), final["segments"])
    reopen_and_check(d, config, last)
