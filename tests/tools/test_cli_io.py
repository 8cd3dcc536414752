"""The data commands of the kafkacore CLI against a real broker: ``produce``, ``consume``,
``perf produce`` / ``perf consume`` and the offline ``log dump``.

One ``kafkacore serve`` process serves the module (auto-creation off, so an unknown topic is
an error); every command runs as a real ``python -m kafkacore`` process with the worktree's
code, and what it did is checked with kafkacore's own Consumer and AdminClient, and with the
files the broker wrote (a copy of its data directory taken while it was stopped)."""
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _cli import kafkacore as run_kafkacore, read_terminal
from broker_client import ROOT, BrokerProcess, free_port  # tests/ is on sys.path (tests/tools/conftest.py)

import kafkacore
from kafkacore import Consumer, Producer
from kafkacore.client.admin import LATEST, AdminClient
from kafkacore.tools.progress import Progress

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
NOW_MS = int(time.time() * 1000)
TXN_TOPIC, DUMP_TOPIC = "io-txn", "io-dump"
DUMP_RECORDS = 300


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("cli-io") / "data", settings={
        "auto.create.topics.enable": "false", "num.partitions": "3", "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1"})
    b.start()
    yield b
    b.stop()


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient(broker.bootstrap) as a:
        yield a


def kc(broker, *args, stdin=None, timeout=60, bootstrap=None):
    """``python -m kafkacore -b <broker> ARGS`` with the worktree's code; a CompletedProcess
    with text stdout/stderr (bytes stdin allowed)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "kafkacore"]
    if broker is not None or bootstrap is not None:
        cmd += ["-b", bootstrap or broker.bootstrap]
    p = subprocess.run(cmd + [str(a) for a in args], input=stdin.encode() if isinstance(stdin, str) else stdin,
                       capture_output=True, timeout=timeout, cwd=str(ROOT), env=env)
    return subprocess.CompletedProcess(p.args, p.returncode, p.stdout.decode("utf-8"), p.stderr.decode("utf-8"))


def one_error_line(p, code, *words):
    """The command failed with ``code`` and said so in exactly one line naming ``words``."""
    assert p.returncode == code, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def create(admin, name, partitions=3, configs=None):
    admin.create_topic(name, partitions, 1, configs=configs)
    return name


def read_all(broker, topic, partitions, isolation="read_uncommitted"):
    """Every record of the topic, through kafkacore's Consumer (no group)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "isolation.level": isolation})
    try:
        tps = [(topic, p) for p in range(partitions)]
        c.assign(tps)
        c.seek_to_beginning()
        ends = c.end_offsets(tps)
        out, deadline = [], time.monotonic() + 30
        while any(c.position(*tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, "records did not arrive"
            out += c.poll(0.5)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        c.close()


def end_offsets(admin, topic, partitions):
    found = admin.list_offsets({(topic, p): LATEST for p in range(partitions)})
    return {p: found[(topic, p)].offset for p in range(partitions)}


# -- produce and consume ---------------------------------------------------------------------
@pytest.mark.parametrize("codec", CODECS)
def test_keys_and_headers_round_trip_with_each_compression(broker, admin, codec, tmp_path):
    topic = create(admin, f"io-rt-{codec}")
    lines = [f"key-{i}:value {i} ünïcode:with colon" for i in range(40)] + [":empty key", "k-empty:"]
    p = kc(broker, "produce", topic, "--key-separator", ":", "--header", "trace=t1", "--header", "app=cli",
           "--compression", codec, stdin="\n".join(lines) + "\n")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert p.stderr.startswith(f"kafkacore produce: {len(lines)} records produced to {topic} (partitions ")
    expected = sorted((kafkacore.partition_for_key(k.encode(), 3), k.encode(), v.encode())
                      for k, _, v in (line.partition(":") for line in lines))
    headers = [("trace", b"t1"), ("app", b"cli")]

    got = read_all(broker, topic, 3)
    assert sorted((r.partition, r.key, r.value) for r in got) == expected
    assert all(r.headers == headers for r in got)

    c = kc(broker, "consume", topic, "--format", "json")
    assert c.returncode == 0, c.stderr
    printed = [json.loads(line) for line in c.stdout.splitlines()]
    assert sorted((d["partition"], d["key"].encode(), d["value"].encode()) for d in printed) == expected
    assert all(d["headers"] == [["trace", "t1"], ["app", "cli"]] and d["topic"] == topic for d in printed)
    assert sorted((d["partition"], d["offset"]) for d in printed) == [(r.partition, r.offset) for r in got]
    assert c.stderr.strip() == f"kafkacore consume: {len(lines)} records from {topic}"

    # the batches on disk carry the codec asked for (log dump of the partition directories)
    dump = kc(None, "log", "dump", "--summary", "-o", "json",
              *[Path(broker.data_dir) / f"{topic}-{n}" for n in range(3)])
    assert dump.returncode == 0, dump.stderr
    codecs = {}
    for f in json.loads(dump.stdout)["files"]:
        if f["kind"] == "segment":
            for name, n in f["summary"]["codecs"].items():
                codecs[name] = codecs.get(name, 0) + n
    assert set(codecs) == {codec}


def test_produce_json_lines(broker, admin):
    topic = create(admin, "io-json")
    ts = NOW_MS - 3_600_000
    lines = [
        {"key": "k1", "value": "plain text", "headers": {"h": "1", "n": 2}, "timestamp": ts},
        {"key": {"id": 7}, "value": {"name": "ü", "tags": [1, 2]}, "partition": 2},
        {"value": None, "key": "tombstone", "partition": 1},
        {"value": 42, "headers": [["dup", "a"], ["dup", None]], "timestamp": "2024-05-01T12:00:00.250Z",
         "partition": 0},
        # what consume --format json prints goes back in: its extra fields are ignored
        {"topic": "elsewhere", "partition": 0, "offset": 99, "timestamp": ts + 1, "timestamp_type": "CreateTime",
         "key": None, "value": "copied", "headers": []},
    ]
    p = kc(broker, "produce", topic, "--format", "json", stdin="\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert p.returncode == 0, p.stderr
    got = {r.value: r for r in read_all(broker, topic, 3)}
    assert len(got) == 5
    r = got[b"plain text"]
    assert (r.key, r.timestamp_ms, r.headers) == (b"k1", ts, [("h", b"1"), ("n", b"2")])
    r = got['{"name":"ü","tags":[1,2]}'.encode()]
    assert (r.key, r.partition) == (b'{"id":7}', 2)
    r = got[None]
    assert (r.key, r.partition) == (b"tombstone", 1)
    r = got[b"42"]
    assert (r.partition, r.timestamp_ms, r.headers) == (0, 1714564800250, [("dup", b"a"), ("dup", None)])
    r = got[b"copied"]
    assert (r.partition, r.timestamp_ms, r.key, r.offset < 99) == (0, ts + 1, None, True)


def test_a_bad_line_stops_produce_after_sending_the_lines_before_it(broker, admin):
    topic = create(admin, "io-badline", partitions=1)
    good = "\n".join(json.dumps({"value": f"v{i}"}) for i in range(5))
    p = kc(broker, "produce", topic, "--format", "json", stdin=good + "\n{not json\n" + json.dumps({"value": "x"}))
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith(f"kafkacore produce: 5 records produced to {topic}")
    assert len(lines) == 2 and lines[1].startswith("kafkacore produce: error: line 6: not JSON")
    assert end_offsets(admin, topic, 1) == {0: 5}

    p = kc(broker, "produce", topic, "--key-separator", "\\t", stdin="a\t1\nb\t2\nno separator here\nc\t3\n")
    one_line = p.stderr.strip().splitlines()[-1]
    assert p.returncode == 1 and one_line == "kafkacore produce: error: line 3: no key separator '\\t'"
    assert end_offsets(admin, topic, 1) == {0: 7}

    p = kc(broker, "produce", topic, "--format", "json", stdin='{"value": "a", "vaule": "typo"}\n')
    assert p.returncode == 1 and "line 1: unknown field 'vaule'" in p.stderr

    # a record the producer refuses: the others are written and counted, the error is named
    for extra in ([], ["--header", "h=1"]):
        before = end_offsets(admin, topic, 1)[0]
        p = kc(broker, "produce", topic, "-X", "max.request.size=400", *extra,
               stdin="small\n" + "x" * 1000 + "\nafter\n")
        assert p.returncode == 1
        summary, error = p.stderr.strip().splitlines()
        assert summary.startswith(f"kafkacore produce: 2 records produced to {topic} (partition 0: 2), 1 failed in ")
        assert error.startswith("kafkacore produce: error: 1 record not written: ") and \
            error.endswith("(MESSAGE_TOO_LARGE)"), error
        assert end_offsets(admin, topic, 1)[0] == before + 2


def test_bad_input_is_one_line_and_an_exit_code(broker, admin, tmp_path):
    create(admin, "io-bad", partitions=2)
    # one format across commands: what happened, then Kafka's name in parentheses
    one_error_line(kc(broker, "produce", "io-no-such-topic", stdin="x\n"), 1, "io-no-such-topic", "does not exist",
                   "(UNKNOWN_TOPIC_OR_PARTITION)")
    one_error_line(kc(broker, "consume", "io-no-such-topic"), 1, "io-no-such-topic", "does not exist",
                   "(UNKNOWN_TOPIC_OR_PARTITION)")
    one_error_line(kc(broker, "produce", "io-bad", "--partition", "5", stdin="x\n"), 1, "partition 5", "2 partitions")
    one_error_line(kc(broker, "consume", "io-bad", "--partition", "2"), 1, "partition 2")
    one_error_line(kc(broker, "consume", "io-bad", "--offset", "7"), 2, "--offset N needs --partition")
    one_error_line(kc(broker, "consume", "io-bad", "--offset", "7", "--partition", "0"), 1, "out of range")
    one_error_line(kc(broker, "consume", "io-bad", "--from-time", "yesterday"), 2, "ISO-8601")
    one_error_line(kc(broker, "consume", "io-bad", "--format", "{offset} {nope}"), 2, "unknown field {nope}")
    one_error_line(kc(broker, "produce", "io-bad", "-X", "linger.ms=soon", stdin="x\n"), 2, "linger.ms")
    one_error_line(kc(broker, "produce", "io-bad", "--file", tmp_path / "missing.txt"), 2, "missing.txt")
    one_error_line(kc(broker, "perf", "produce", "io-bad", "--num-records", "0", "--record-size", "10"), 2)
    for cmd in (["produce", "io-bad"], ["consume", "io-bad"], ["perf", "consume", "io-bad"]):
        started = time.monotonic()
        p = kc(None, *cmd, stdin="x\n", bootstrap=f"127.0.0.1:{free_port()}")
        one_error_line(p, 3, "cannot reach the cluster")
        assert time.monotonic() - started < 10


def test_consume_from_time_picks_the_first_record_at_or_after_it(broker, admin):
    topic = create(admin, "io-time", partitions=2)
    base = NOW_MS - 600_000
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i in range(10):
            p.send(topic, b"v%d" % i, partition=i % 2, timestamp_ms=base + i * 1000)
    iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((base + 5500) // 1000)) + f".{(base + 5500) % 1000:03d}Z"
    c = kc(broker, "consume", topic, "--from-time", iso, "--format", "{partition} {offset} {timestamp} {value}")
    assert c.returncode == 0, c.stderr
    # partition 0 holds i = 0, 2, 4, 6, 8 and partition 1 i = 1, 3, 5, 7, 9: first at or after +5.5 s: 6 and 7
    assert sorted(c.stdout.splitlines()) == sorted(f"{i % 2} {i // 2} {base + i * 1000} v{i}" for i in range(6, 10))
    c = kc(broker, "consume", topic, "--from-time", base + 9000, "--format", "{value}")
    assert c.stdout.splitlines() == ["v9"]
    c = kc(broker, "consume", topic, "--from-time", base + 60_000)
    assert (c.returncode, c.stdout) == (0, "")


def test_group_commits_what_was_printed(broker, admin):
    topic = create(admin, "io-group", partitions=1)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.send_many(topic, [b"r%d" % i for i in range(10)]).result(30)
    c = kc(broker, "consume", topic, "--group", "io-g", "--max-messages", "3", "--format", "{offset}")
    assert (c.returncode, c.stdout.split()) == (0, ["0", "1", "2"]), c.stderr
    assert admin.list_group_offsets("io-g") == {(topic, 0): 3}
    c = kc(broker, "consume", topic, "--group", "io-g", "--from-beginning", "--format", "{offset}")
    assert c.stdout.split() == [str(i) for i in range(3, 10)]  # the committed offset wins over --from-beginning
    assert admin.list_group_offsets("io-g") == {(topic, 0): 10}
    c = kc(broker, "consume", topic, "--group", "io-g", "--offset", "-2", "--format", "{offset}")
    assert c.stdout.split() == ["8", "9"]  # an explicit start wins over the committed offset
    # without --group nothing is committed, and no group appears
    groups = {g.group_id for g in admin.list_groups()}
    assert kc(broker, "consume", topic, "--max-messages", "2").returncode == 0
    assert {g.group_id for g in admin.list_groups()} == groups
    assert admin.list_group_offsets("io-g") == {(topic, 0): 10}


def test_binary_values_print_safely_and_templates(broker, admin):
    topic = create(admin, "io-binary", partitions=1)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.send(topic, b"\x00\xff\x01bin", key=b"\xc3\x28", headers=[("h", b"\x80")]).result(10)
        p.send(topic, b"line1\nline2\ttab", key=None).result(10)
        p.send(topic, None, key=b"gone").result(10)
    raw = subprocess.run([sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, "consume", topic],
                         capture_output=True, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert raw.returncode == 0
    text = raw.stdout.decode("utf-8")  # valid UTF-8, one line per record, no control bytes
    assert text.splitlines() == ["\\x00\\xff\\x01bin", "line1\\nline2\\ttab", "null"]
    c = kc(broker, "consume", topic, "--format", "{offset}|{key}|{value}|{headers}\\t.", "--max-messages", "2")
    assert c.stdout.splitlines() == ["0|\\xc3(|\\x00\\xff\\x01bin|h=\\x80\t.", "1|null|line1\\nline2\\ttab|\t."]
    j = kc(broker, "-o", "jsonl", "consume", topic, "--offset", "-1")  # -o jsonl is the json format
    assert [json.loads(line) for line in j.stdout.splitlines()] == [
        {"topic": topic, "partition": 0, "offset": 2, "timestamp": json.loads(j.stdout)["timestamp"],
         "timestamp_type": "CreateTime", "key": "gone", "value": None, "headers": []}]


def _read_line(stream, timeout):
    """One line from a subprocess's stdout pipe, waiting at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    buf = b""
    while not buf.endswith(b"\n"):
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no line within {timeout} s (got {buf!r})"
        chunk = os.read(stream.fileno(), 1)
        assert chunk, f"end of output (got {buf!r})"
        buf += chunk
    return buf.decode()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_follow_prints_new_records_and_a_stop_signal_commits_leaves_and_summarises(broker, admin, sig, code):
    """Ctrl-C, and SIGTERM (a service manager's stop) alike: what was printed is committed, the
    member leaves the group at once (it does not linger until its session times out), the
    summary is printed; exit 130 or 143."""
    topic = create(admin, f"io-follow-{sig.name.lower()}", partitions=1)
    group = f"{topic}-g"
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.send(topic, b"before").result(10)
        proc = subprocess.Popen(
            [sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, "consume", topic, "--follow",
             "--from-beginning", "--group", group], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)),
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as a terminal's Ctrl-C finds it
        try:
            assert _read_line(proc.stdout, 30) == "before\n"
            p.send(topic, b"after").result(10)
            assert _read_line(proc.stdout, 30) == "after\n"
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == code, err
    assert out == b"" and err.decode().strip() == f"kafkacore consume: 2 records from {topic}"
    assert admin.list_group_offsets(group) == {(topic, 0): 2}
    described = admin.describe_group(group)
    assert described.members == [] and described.state == "Empty", described


def test_a_closed_pipe_ends_consume_quietly(broker, admin):
    topic = create(admin, "io-pipe", partitions=1)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.send_many(topic, [b"x" * 200] * 5000).result(30)  # 1 MB: far more than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, "consume", topic],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT),
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert _read_line(proc.stdout, 30) == "x" * 200 + "\n"
    proc.stdout.close()  # `| head -1`
    err = proc.stderr.read()
    assert proc.wait(30) == 0
    assert err == b""


@pytest.mark.parametrize("command, client", [(["produce"], "producer"), (["consume"], "consumer"),
                                             (["perf", "produce"], "producer"), (["perf", "consume"], "consumer")])
def test_the_x_example_in_help_is_a_property_of_that_client(command, client):
    """consume --help once suggested a producer setting (-X linger.ms=20), which consume refuses."""
    from kafkacore.client.config import consumer_config, producer_config
    text = run_kafkacore(*command, "--help").out
    m = re.search(r"e\.g\.\s+-X\s+(\S+)=(\S+?)\)?\s", text)
    assert m, text
    check = producer_config if client == "producer" else consumer_config
    assert check({m.group(1): m.group(2)}, bootstrap_required=False)[m.group(1)] is not None


# -- perf ------------------------------------------------------------------------------------
def test_perf_produce_and_consume(broker, admin):
    topic = create(admin, "io-perf")
    n = 20000
    p = kc(broker, "perf", "produce", topic, "--num-records", n, "--record-size", 100, "-o", "json",
           "-X", "linger.ms=2")
    assert p.returncode == 0, p.stderr
    s = json.loads(p.stdout)
    assert (s["records"], s["failed"], s["record_size"]) == (n, 0, 100)
    lat = s["latency_ms"]
    assert 0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["p99.9"] <= lat["max"]
    assert 0 < lat["avg"] <= lat["max"]
    assert s["records_per_sec"] > 0 and s["mb_per_sec"] == pytest.approx(s["records_per_sec"] * 100 / 2**20, rel=0.02)
    assert sum(end_offsets(admin, topic, 3).values()) == n
    print(f"perf produce: {s['records_per_sec']:.0f} records/s, latency {lat}")

    t = kc(broker, "perf", "produce", topic, "--num-records", 500, "--record-size", 10, "--throughput", 1000,
           "--reporting-interval", 100)
    assert t.returncode == 0, t.stderr
    assert t.stdout.startswith("500 records sent in ") and "p99.9" in t.stdout
    secs = float(t.stdout.split(" records sent in ")[1].split(" s")[0])
    assert 0.4 < secs < 5  # paced to 1000 records/s
    progress = t.stderr.splitlines()  # not a terminal: a line per interval
    assert len(progress) >= 2 and all(" records acknowledged: " in line for line in progress), t.stderr

    c = kc(broker, "perf", "consume", topic, "-o", "json")
    assert c.returncode == 0, c.stderr
    s = json.loads(c.stdout)
    assert s["records"] == n + 500
    assert s["mb"] == pytest.approx((n * 100 + 500 * 10) / 2**20, abs=1e-4)
    c = kc(broker, "perf", "consume", topic, "--messages", 1000, "--group", "io-perf-g", "-o", "json")
    assert json.loads(c.stdout)["records"] == 1000
    c = kc(broker, "perf", "consume", topic, "--messages", n + 501, "--timeout", 1000)
    one_error_line(c, 1, f"read {n + 500} of {n + 501} records")


def test_one_record_is_one_record(broker, admin):
    """Counts agree with their nouns in every summary: "1 record", never "1 records"."""
    topic = create(admin, "io-one", partitions=1)
    produced = kc(broker, "produce", topic, stdin=b"only\n")
    assert produced.returncode == 0 and f"1 record produced to {topic}" in produced.stderr, produced.stderr
    perf = kc(broker, "perf", "produce", topic, "--num-records", 1, "--record-size", 10)
    assert perf.returncode == 0 and "1 record sent in" in perf.stdout, perf.stdout + perf.stderr
    read = kc(broker, "perf", "consume", topic, "--messages", 2)
    assert read.returncode == 0 and "2 records (" in read.stdout, read.stdout + read.stderr
    for r in (produced, perf, read):
        assert not re.search(r"(?<![\d.,])1 records\b", r.stdout + r.stderr), r.stdout + r.stderr  # not "4.1 records/s"


def test_perf_produce_draws_a_live_line_on_a_terminal(broker, admin):
    topic = create(admin, "io-perf-tty", partitions=1)
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, "perf", "produce", topic,
                             "--num-records", "4000", "--record-size", "20", "--throughput", "4000"],
                            stdout=subprocess.PIPE, stderr=slave, cwd=str(ROOT),
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    os.close(slave)
    shown = read_terminal(master)  # until the child closes the terminal
    os.close(master)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0
    assert out.startswith("4000 records sent in ")  # the summary is clean on stdout
    assert f"perf produce {topic}".encode() in shown and b"records/s" in shown and b"%" in shown
    assert shown.endswith(b" \r")  # erased at the end: blanked, the cursor back at the start


def test_progress_draws_only_on_a_terminal():
    master, slave = pty.openpty()
    with os.fdopen(slave, "w") as tty:
        bar = Progress(200, "copy", unit="B", stream=tty, delay=0)
        assert bar.enabled
        bar.update(100)
        bar.close()
    shown = read_terminal(master).decode()
    os.close(master)
    assert shown.startswith("\rcopy [") and "100 B/200 B 50%" in shown and "ETA" in shown
    assert shown.endswith(" \r")
    r, w = os.pipe()
    with os.fdopen(w, "w") as pipe:
        bar = Progress(200, "copy", stream=pipe, delay=0)
        assert not bar.enabled
        bar.update(100)
        bar.close()
    with os.fdopen(r) as f:
        assert f.read() == ""


# -- log dump --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_copy(broker, admin, tmp_path_factory):
    """A copy of the broker's data directory, taken while it was stopped (so the checkpoints
    and the clean-shutdown marker are there), holding DUMP_TOPIC (several segments, index
    entries) and TXN_TOPIC (a committed and an aborted transaction)."""
    create(admin, DUMP_TOPIC, partitions=1, configs={"segment.bytes": "1500", "index.interval.bytes": "300"})
    create(admin, TXN_TOPIC, partitions=1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": "0", "compression.type": "lz4"}) as p:
        for i in range(0, DUMP_RECORDS, 10):
            p.send_many(DUMP_TOPIC, [b"value-%04d" % j for j in range(i, i + 10)],
                        timestamps_ms=[NOW_MS + j for j in range(i, i + 10)]).result(30)
    with Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "io-txn-id"}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(TXN_TOPIC, b"kept-1")
        p.send(TXN_TOPIC, b"kept-2")
        p.commit_transaction(30)
        p.begin_transaction()
        p.send(TXN_TOPIC, b"dropped")
        p.flush(30)
        p.abort_transaction(30)
    broker.stop()
    try:
        copy = tmp_path_factory.mktemp("dump") / "data"
        shutil.copytree(broker.data_dir, copy)
    finally:
        broker.start()
    return copy


def dump(*args):
    return kc(None, "log", "dump", *args)


def test_log_dump_matches_what_was_produced(stopped_copy):
    part = stopped_copy / f"{DUMP_TOPIC}-0"
    p = dump(part, "-o", "json", "--records")
    assert p.returncode == 0, p.stderr
    files = json.loads(p.stdout)["files"]
    segments = [f for f in files if f["kind"] == "segment"]
    assert len(segments) >= 3  # segment.bytes=6000 rolled it
    batches = [b for s in segments for b in s["batches"]]
    assert len(batches) == DUMP_RECORDS // 10
    assert [(b["base_offset"], b["last_offset"], b["count"]) for b in batches] == [
        (i, i + 9, 10) for i in range(0, DUMP_RECORDS, 10)]
    assert {b["compression"] for b in batches} == {"lz4"}
    assert all(b["magic"] == 2 and b["producer_id"] >= 0 and not b["control"] for b in batches)
    records = [r for b in batches for r in b["records"]]
    assert [(r["offset"], r["value"], r["timestamp"]) for r in records] == [
        (i, f"value-{i:04d}", NOW_MS + i) for i in range(DUMP_RECORDS)]
    for s in segments:  # each file named by its first offset
        assert s["base_offset"] == s["batches"][0]["base_offset"] == int(Path(s["file"]).stem)
        assert s["summary"]["records"] == sum(b["count"] for b in s["batches"])
    indexes = [f for f in files if f["kind"] == "offset-index"]
    assert sum(f["summary"]["entries"] for f in indexes) > 0
    time_entries = [e for f in files if f["kind"] == "time-index" for e in f["entries"]]
    assert time_entries and all(e["timestamp"] == NOW_MS + e["offset"] for e in time_entries)  # the batch's last
    assert all(f["summary"]["empty_slots"] == 0 for f in indexes[:-1])  # rolled: trimmed to its entries
    snapshots = [f for f in files if f["kind"] == "producer-snapshot"]
    assert snapshots and snapshots[-1]["base_offset"] == DUMP_RECORDS  # taken at the clean shutdown
    assert snapshots[-1]["entries"][0]["last_offset"] == DUMP_RECORDS - 1

    v = dump(part, "--verify")
    assert v.returncode == 0, v.stdout + v.stderr
    assert v.stdout.rstrip().endswith("verify: no problems")
    table = dump(part / "00000000000000000000.log")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[1].split()[:4] == ["BASE", "LAST", "COUNT", "POSITION"]
    assert lines[2].split()[:3] == ["0", "9", "10"]
    assert "lz4" in lines[2]


def test_log_dump_reads_the_checkpoints_of_a_data_directory(stopped_copy):
    p = dump(stopped_copy, "-o", "json", "--summary")
    assert p.returncode == 0, p.stderr
    files = {os.path.relpath(f["file"], stopped_copy): f for f in json.loads(p.stdout)["files"]}
    assert {"recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint",
            "meta.properties", ".kafka_cleanshutdown", f"{DUMP_TOPIC}-0/leader-epoch-checkpoint"} <= set(files)
    p = dump(stopped_copy / "recovery-point-offset-checkpoint", stopped_copy / "replication-offset-checkpoint",
             stopped_copy / f"{DUMP_TOPIC}-0" / "leader-epoch-checkpoint", stopped_copy / "meta.properties",
             "-o", "json")
    files = json.loads(p.stdout)["files"]
    for f in files[:2]:  # recovery point and high watermark: the log end at the clean shutdown
        assert {"topic": DUMP_TOPIC, "partition": 0, "offset": DUMP_RECORDS} in f["entries"]
        assert {"topic": TXN_TOPIC, "partition": 0, "offset": 5} in f["entries"]
    assert files[2]["entries"] == [{"epoch": 0, "start_offset": 0}]
    assert {"key": "node.id", "value": "1"} in files[3]["entries"]
    t = dump(stopped_copy / "recovery-point-offset-checkpoint")
    assert t.stdout.splitlines()[1].split() == ["TOPIC", "PARTITION", "OFFSET"]
    assert any(line.split() == [DUMP_TOPIC, "0", str(DUMP_RECORDS)] for line in t.stdout.splitlines())


def test_log_dump_shows_transaction_markers_and_the_txnindex(stopped_copy):
    part = stopped_copy / f"{TXN_TOPIC}-0"
    p = dump(part, "-o", "json", "--records", "--verify")
    assert p.returncode == 0, p.stderr
    files = json.loads(p.stdout)["files"]
    (seg,) = [f for f in files if f["kind"] == "segment"]
    shape = [(b["base_offset"], b["transactional"], b["control"], b.get("marker")) for b in seg["batches"]]
    assert shape == [(0, True, False, None), (2, True, True, "COMMIT"), (3, True, False, None),
                     (4, True, True, "ABORT")]
    pid = seg["batches"][0]["producer_id"]
    assert seg["batches"][3]["records"] == [{"offset": 4, "timestamp": seg["batches"][3]["max_timestamp"],
                                             "marker": "ABORT", "coordinator_epoch": 0}]
    (txn,) = [f for f in files if f["kind"] == "txn-index"]
    assert txn["entries"] == [{"producer_id": pid, "first_offset": 3, "last_offset": 4, "last_stable_offset": 5}]
    lines = dump(part, "--records").stdout.splitlines()
    assert any("control COMMIT" in line for line in lines)
    assert any(line.strip().startswith("offset 4 ") and line.rstrip().endswith("ABORT  coordinator epoch 0")
               for line in lines)


def test_log_dump_verify_names_a_corrupt_byte(stopped_copy, tmp_path):
    source = stopped_copy / f"{DUMP_TOPIC}-0"
    bad = tmp_path / f"{DUMP_TOPIC}-0"
    shutil.copytree(source, bad)
    seg = sorted(bad.glob("*.log"))[0]
    batches = json.loads(dump(seg, "-o", "json").stdout)["files"][0]["batches"]
    target = batches[2]
    data = bytearray(seg.read_bytes())
    data[target["position"] + target["size"] - 5] ^= 0x40  # a byte of the third batch's records
    seg.write_bytes(bytes(data))
    plain = dump(seg)  # without --verify the framing is sound: no CRC is computed
    assert plain.returncode == 0
    v = dump(bad, "--verify")
    line = one_error_line(v, 1, "1 problem found", seg.name, f"position {target['position']}",
                          f"offset {target['base_offset']}", "CRC-32C mismatch")
    assert line.startswith("kafkacore log dump: error:")
    assert f"PROBLEM at position {target['position']}, offset {target['base_offset']}: CRC-32C mismatch" in v.stdout


def test_log_dump_verify_checks_index_entries(stopped_copy, tmp_path):
    bad = tmp_path / "p"
    shutil.copytree(stopped_copy / f"{DUMP_TOPIC}-0", bad)
    index = sorted(p for p in bad.glob("*.index") if p.stat().st_size)[0]
    data = bytearray(index.read_bytes())
    data[7] = (data[7] + 1) % 256  # the first entry's position, off a batch start
    index.write_bytes(bytes(data))
    v = dump(bad, "--verify")
    one_error_line(v, 1, index.name, "entry 0", "no batch", "starts at position")


def test_log_dump_refuses_what_is_not_kafka(tmp_path, stopped_copy):
    passwd = tmp_path / "00000000000000000000.log"
    shutil.copy("/etc/passwd", passwd)
    one_error_line(dump(passwd), 1, "not a Kafka log segment", str(passwd))
    noise = tmp_path / "random.bin"
    noise.write_bytes(os.urandom(4096))
    p = dump(noise)
    assert one_error_line(p, 1, "not a Kafka log segment", "random.bin").startswith("kafkacore log dump: error:")
    assert p.stdout == ""
    one_error_line(dump(tmp_path / "nowhere.log"), 1, "nowhere.log")
    seg = sorted((stopped_copy / f"{DUMP_TOPIC}-0").glob("*.log"))[0]
    cut = tmp_path / seg.name
    cut.write_bytes(seg.read_bytes()[:-7])
    one_error_line(dump(cut), 1, "truncated batch", "bytes left at the end")
    snap = tmp_path / "00000000000000000005.snapshot"
    snap.write_bytes(b"\x00\x01garbage")
    one_error_line(dump(snap), 1, "not a producer snapshot")
    ckpt = tmp_path / "recovery-point-offset-checkpoint"
    ckpt.write_text("0\n2\nevents 0 5\n")
    one_error_line(dump(ckpt), 1, "malformed checkpoint file", "expected 2 entries, found 1")


def test_a_closed_pipe_ends_log_dump_quietly(stopped_copy):
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "log", "dump", "--records", stopped_copy],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(ROOT),
                            env=dict(os.environ, PYTHONPATH=str(ROOT)))
    proc.stdout.close()  # gone before the first line is written: `| head -0`
    err = proc.stderr.read()
    assert (proc.wait(30), err) == (0, b"")
