"""kcat (Debian's build, librdkafka 2.0.x) against the broker: metadata, topic auto-creation,
every codec, Java-compatible key partitioning (``partitioner=murmur2_random``), balanced consumer
groups (-G) with rebalances, committed offsets across consumer and broker restarts.

kcat's limits shape this module: it cannot set record timestamps (the broker gets the producer's
clock: checked against a window) nor per-record headers (headers are per invocation, so records
are sent in runs that share headers, in order), it reports no delivery offsets (placement comes
from reading the topic back), it has no admin API (topics are auto-created, or created with
confluent-kafka where a partition count is needed), and it commits only automatically
(enable.auto.commit; on revoke and on close)."""
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections import defaultdict

import pytest

from _compat import (
    CODECS, HEARTBEAT_INTERVAL_MS, MAX_POLL_INTERVAL_MS, SESSION_TIMEOUT_MS, TANSU_END_OFFSETS, WAIT,
    EndOffsetMismatch, Rec, check_consumed, check_end_offsets, check_placement, expected_by_position,
    group_rebalance_scenario, make_records, next_offsets,
)
from _broker import AUTO_CREATE_PARTITIONS, BROKER_KIND
from _kcutil import SOURCE_ROOT
from kafkacore.partitioner import partition_for_key

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
if KCAT is None:
    if os.environ.get("CI"):
        raise RuntimeError("kcat is not installed (ci/compat_deps.sh installs it)")
    pytest.skip("kcat is not installed (ci/compat_deps.sh installs it)", allow_module_level=True)

CLIENT_ID = "compat-kcat"
GROUP_SETTINGS = [
    "-X", f"session.timeout.ms={SESSION_TIMEOUT_MS}",
    "-X", f"heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}",
    "-X", f"max.poll.interval.ms={MAX_POLL_INTERVAL_MS}",
    "-X", "auto.offset.reset=earliest",
]
_ASSIGN = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$")
_EOF = re.compile(r"Reached end of topic (\S+) \[(\d+)\] at offset (\d+)")


def _json_record(line):
    m = json.loads(line)
    assert m["tstype"] == "create", f"timestamp type {m['tstype']} at {m['partition']}/{m['offset']}"
    h = m.get("headers") or []
    headers = tuple((h[i], None if h[i + 1] is None else h[i + 1].encode()) for i in range(0, len(h), 2))
    enc = (lambda s: None if s is None else s.encode())
    return m["partition"], m["offset"], Rec(enc(m["key"]), enc(m["payload"]), headers, m["ts"])


def _runs(records):
    """Consecutive runs kcat can send in one invocation: same headers, and all values null (-Z)
    or none null."""
    runs = []
    for r in records:
        sig = (r.headers, r.value is None)
        if runs and runs[-1][0] == sig:
            runs[-1][1].append(r)
        else:
            runs.append((sig, [r]))
    return runs


class KcatClient:
    record_options = {"ascii_only": True}
    exact_timestamps = False  # kcat cannot set them; produce() checks them against its clock

    def __init__(self, bootstrap):
        self.bootstrap = bootstrap
        self.known = defaultdict(set)  # topic -> {(partition, offset)} placed by earlier produce() calls

    def base(self, *args):
        return [KCAT, "-b", self.bootstrap, "-X", f"client.id={CLIENT_ID}", *args]

    def run(self, args, *, input=None, timeout=WAIT):
        try:
            proc = subprocess.run(self.base(*args), input=input, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"kcat {' '.join(args)} did not finish within {timeout:.0f}s:\n"
                                 f"{(e.stderr or b'').decode(errors='replace')[-3000:]}") from None
        assert proc.returncode == 0, (f"kcat {' '.join(args)} exited {proc.returncode}:\n"
                                      f"{proc.stderr.decode(errors='replace')[-3000:]}")
        return proc

    def metadata(self, topic=None):
        args = ["-L", "-J"] + (["-t", topic] if topic else [])
        return json.loads(self.run(args).stdout)

    def partitions(self, topic):
        md = self.metadata(topic)
        (t,) = [t for t in md["topics"] if t["topic"] == topic]
        assert not t.get("error"), t
        return len(t["partitions"])

    def produce(self, topic, records, codec="none"):
        t0 = int(time.time() * 1000)
        for (headers, null_values), run in _runs(records):
            args = ["-P", "-t", topic, "-K", r"\t", "-X", "partitioner=murmur2_random",
                    "-X", f"compression.codec={codec}"]
            for k, v in headers:
                args += ["-H", k if v is None else f"{k}={v.decode()}"]
            if null_values:
                args.append("-Z")  # an empty value is sent as null
            lines = []
            for r in run:
                value = "" if r.value is None else r.value.decode()
                assert "\t" not in value and "\n" not in value
                lines.append(value if r.key is None else f"{r.key.decode()}\t{value}")
            self.run(args, input=("\n".join(lines) + "\n").encode())
        t1 = int(time.time() * 1000)
        return self._placement(topic, records, t0, t1)

    def _placement(self, topic, records, t0, t1):
        """Where the records landed, from reading the topic back: by value (unique, but for empty
        and null ones, which only keyed records have: those take the unmatched offsets of their
        key's partition in send order)."""
        everything = self.read_topic(topic)
        new = [(p, o, r) for p, o, r in everything if (p, o) not in self.known[topic]]
        assert len(new) == len(records), f"read back {len(new)} new records, produced {len(records)}"
        by_value = {r.value: (p, o) for p, o, r in new if r.value}
        placed = [by_value.get(r.value) if r.value else None for r in records]
        assert all(pl is not None for r, pl in zip(records, placed) if r.value), "records not read back"
        free = defaultdict(list)
        used = set(pl for pl in placed if pl)
        for p, o, _ in sorted(new):
            if (p, o) not in used:
                free[p].append(o)
        num_partitions = self.partitions(topic)
        for i, r in enumerate(records):
            if not r.value:
                assert r.key is not None
                p = partition_for_key(r.key, num_partitions)
                assert free[p], f"record {i} (key {r.key!r}, value {r.value!r}) not found on partition {p}"
                placed[i] = (p, free[p].pop(0))
        stray = {p: o for p, o in free.items() if o}
        assert not stray, f"records read back that were not produced there: {stray}"
        ts = {(p, o): r.timestamp for p, o, r in new}
        late = [(pl, ts[pl]) for pl in placed if not t0 - 1000 <= ts[pl] <= t1 + 1000]
        assert not late, f"CreateTime outside the produce window [{t0}, {t1}]: {late[:5]}"
        self.known[topic].update(placed)
        return placed

    def read_topic(self, topic):
        out = self.run(["-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q"]).stdout.decode()
        return [_json_record(line) for line in out.splitlines() if line.strip()]

    def read_all(self, topic, counts):
        got = self.read_topic(topic)
        return sorted(got, key=lambda t: (t[0], t[1]))

    def end_offsets(self, topic, partitions):
        args = ["-Q", "-J"]
        for p in partitions:
            args += ["-t", f"{topic}:{p}:-1"]
        got = json.loads(self.run(args).stdout)[topic]
        return {int(k): v["offset"] for k, v in got.items() if k.isdigit()}

    def group_consume(self, group, topic, count, timeout=WAIT):
        """A -G member that exits after ``count`` records (committing them on close)."""
        proc = self.run(["-G", group, topic, "-J", "-u", "-c", str(count), *GROUP_SETTINGS], timeout=timeout)
        return [_json_record(line) for line in proc.stdout.decode().splitlines() if line.strip()]

    def committed_for(self, group, topic, partitions):
        """kcat cannot list committed offsets: a member with -e starts at the group's committed
        offsets and reports where each partition ends; anything it consumes means the commit was
        below the log end (it does not commit)."""
        proc = self.run(["-G", group, topic, "-J", "-u", "-e", "-X", "enable.auto.commit=false", *GROUP_SETTINGS])
        firsts = {}
        for p, o, _ in (_json_record(line) for line in proc.stdout.decode().splitlines() if line.strip()):
            firsts.setdefault(p, o)
        ends = {int(m.group(2)): int(m.group(3)) for m in _EOF.finditer(proc.stderr.decode()) if m.group(1) == topic}
        return {p: firsts.get(p, ends.get(p)) for p in partitions}

    def member(self, name, group, topic):
        return KcatMember(self, name, group, topic)


class KcatMember:
    """A long-running ``kcat -G`` process (same contract as _compat.ThreadMember): records from its
    JSON output, the assignment from its rebalance messages, auto-commit; SIGTERM to leave."""

    def __init__(self, client, name, group, topic):
        self.client, self.name, self.group, self.topic = client, name, group, topic
        self._lock = threading.Lock()
        self._records, self.history, self._stderr = [], [], []
        self._assignment = None
        self._stopping = False
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            self.client.base("-G", self.group, self.topic, "-J", "-u", *GROUP_SETTINGS,
                             "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=200"),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._readers:
            t.start()
        return self

    def _read_stdout(self):
        for line in self.proc.stdout:
            if line.strip():
                rec = _json_record(line)
                with self._lock:
                    self._records.append(rec)

    def _read_stderr(self):
        for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            with self._lock:
                self._stderr.append(line)
                m = _ASSIGN.search(line)
                if m:
                    parts = sorted(int(p) for p in re.findall(r"\[(\d+)\]", m.group(2)))
                    self.history.append(("assign" if m.group(1) == "assigned" else "revoke", parts))
                    self._assignment = frozenset(parts) or None if m.group(1) == "assigned" else None

    def assignment(self):
        self.check()
        with self._lock:
            return self._assignment

    def records(self):
        with self._lock:
            return list(self._records)

    def check(self):
        if self.proc.poll() is not None and not self._stopping:
            raise AssertionError(f"kcat member {self.name} exited with {self.proc.returncode}:\n"
                                 + "\n".join(self._stderr[-40:]))

    @property
    def stopping(self):
        return self._stopping

    def stop(self, timeout=WAIT):
        self.check()
        self._stopping = True
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise AssertionError(f"kcat member {self.name} did not exit within {timeout:.0f}s of SIGTERM")
        for t in self._readers:
            t.join(5)
        assert code == 0, f"kcat member {self.name} exited with {code}:\n" + "\n".join(self._stderr[-40:])


@pytest.fixture(scope="module")
def client(broker):
    return KcatClient(broker.bootstrap)


def _create_topic(bootstrap, name, partitions):
    """kcat has no admin API: another client creates topics that need a given partition count."""
    admin_mod = pytest.importorskip("confluent_kafka.admin")
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap, "client.id": CLIENT_ID + "-admin"})
    for fut in admin.create_topics([admin_mod.NewTopic(name, partitions, 1)], operation_timeout=10).values():
        fut.result(WAIT)


def test_metadata_and_auto_create(client, broker, unique_name):
    topic = unique_name()
    client.run(["-P", "-t", topic], input=b"first\n")
    md = client.metadata(topic)
    assert len(md["brokers"]) == 1
    (b,) = md["brokers"]
    assert b["name"] == broker.bootstrap, "the broker must advertise the address clients reach it on"
    if BROKER_KIND == "kafkacore":
        assert b["id"] == 1 and md["controllerid"] == 1
    (t,) = [t for t in md["topics"] if t["topic"] == topic]
    assert not t.get("error")
    if AUTO_CREATE_PARTITIONS is not None:
        assert len(t["partitions"]) == AUTO_CREATE_PARTITIONS
    assert all(p["leader"] == b["id"] and [r["id"] for r in p["replicas"]] == [b["id"]] for p in t["partitions"])
    (rec,) = client.read_topic(topic)
    assert rec[2].value == b"first" and rec[2].key is None and rec[1] == 0


@pytest.mark.xfail_tansu(reason=TANSU_END_OFFSETS, raises=EndOffsetMismatch)
@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_roundtrip(client, unique_name, codec):
    topic = unique_name()
    sent = make_records(300, topic, **client.record_options)
    placed = client.produce(topic, sent, codec=codec)  # auto-creates the topic
    n = client.partitions(topic)
    check_placement(sent, placed, n, first_offsets={})
    check_consumed(expected_by_position(sent, placed), client.read_all(topic, None), ignore_timestamps=True)
    check_end_offsets(client, topic, {p: sum(1 for q, _ in placed if q == p) for p in range(n)})


@pytest.mark.xfail_tansu(reason=TANSU_END_OFFSETS, raises=EndOffsetMismatch)
def test_group_rebalance(client, broker, unique_name):
    topic, group = unique_name(), unique_name("g-")
    _create_topic(broker.bootstrap, topic, 6)
    group_rebalance_scenario(client, topic, group, 6, make_member=lambda n: client.member(n, group, topic))


def _resume_check(first_run, second_run, label):
    committed = next_offsets(first_run)
    firsts = {}
    for p, o, _ in second_run:
        firsts.setdefault(p, o)
    assert firsts == {p: committed.get(p, 0) for p in firsts}, f"{label}: resumed at {firsts}, committed {committed}"


@pytest.mark.xfail_tansu(reason=TANSU_END_OFFSETS, raises=EndOffsetMismatch)
def test_commit_and_resume(client, unique_name):
    topic, group = unique_name(), unique_name("g-")
    sent = make_records(300, topic, **client.record_options)
    placed = client.produce(topic, sent)
    n = client.partitions(topic)
    expected = expected_by_position(sent, placed)

    got1 = client.group_consume(group, topic, 120)
    got2 = client.group_consume(group, topic, len(sent) - 120)
    _resume_check(got1, got2, "second member")
    check_consumed(expected, sorted(got1 + got2, key=lambda t: t[:2]), label="first + resumed member",
                   ignore_timestamps=True)

    more = make_records(100, topic + "-more", seed=1, **client.record_options)
    placed_more = client.produce(topic, more)
    got3 = client.group_consume(group, topic, len(more))
    check_consumed(expected_by_position(more, placed_more), got3, label="third member", ignore_timestamps=True)
    ends = next_offsets([(p, o, None) for p, o in placed + placed_more])
    assert client.committed_for(group, topic, range(n)) == {p: ends.get(p, 0) for p in range(n)}
    check_end_offsets(client, topic, {p: ends.get(p, 0) for p in range(n)})


@pytest.mark.broker_restart
def test_resume_after_broker_restart(client, broker, unique_name):
    topic, group = unique_name(), unique_name("g-")
    batch1 = make_records(400, topic, **client.record_options)
    placed1 = client.produce(topic, batch1)
    n = client.partitions(topic)
    expected = expected_by_position(batch1, placed1)
    got1 = client.group_consume(group, topic, 250)

    broker.restart()

    check_consumed(expected, client.read_all(topic, None), label="log read back after the restart",
                   ignore_timestamps=True)
    got2 = client.group_consume(group, topic, len(batch1) - 250)
    _resume_check(got1, got2, "after the restart")
    check_consumed(expected, sorted(got1 + got2, key=lambda t: t[:2]), label="across the restart",
                   ignore_timestamps=True)

    batch2 = make_records(150, topic + "-2", seed=2, **client.record_options)
    placed2 = client.produce(topic, batch2)
    check_placement(batch2, placed2, n, first_offsets=next_offsets([(p, o, None) for p, o in placed1]))

    broker.restart()

    got3 = client.group_consume(group, topic, len(batch2))
    check_consumed(expected_by_position(batch2, placed2), got3, label="after the second restart",
                   ignore_timestamps=True)
    ends = next_offsets([(p, o, None) for p, o in placed1 + placed2])
    assert client.committed_for(group, topic, range(n)) == {p: ends.get(p, 0) for p in range(n)}
    check_end_offsets(client, topic, {p: ends.get(p, 0) for p in range(n)})


def test_the_readme_run_command_starts_a_broker_kcat_uses(tmp_path):
    """README's quick start: ``ci/main.sh`` (here with a free port and a scratch data directory)
    serves a broker that kcat lists, writes to and reads from; SIGTERM stops it cleanly."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = SOURCE_ROOT
    if not os.path.exists(os.path.join(root, "ci", "main.sh")):
        pytest.skip("a copy of kafkacore/ and tests/ without ci/ (ci/python_sanitize.sh)")
    proc = subprocess.Popen(["bash", os.path.join(root, "ci", "main.sh"), "--port", str(port), "--data-dir",
                             str(tmp_path / "data")], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while "listening on" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "ci/main.sh exited before listening"
        assert f"127.0.0.1:{port}" in line and str(tmp_path / "data") in line
        bootstrap = f"127.0.0.1:{port}"
        listing = subprocess.run([KCAT, "-b", bootstrap, "-L"], capture_output=True, text=True, timeout=30)
        assert f"broker 1 at 127.0.0.1:{port}" in listing.stdout, listing.stdout + listing.stderr
        subprocess.run([KCAT, "-b", bootstrap, "-P", "-t", "readme", "-K", ":"], input="k1:v1\nk2:v2\n",
                       text=True, check=True, timeout=30)
        out = subprocess.run([KCAT, "-b", bootstrap, "-C", "-t", "readme", "-e", "-f", "%k=%s\n"],
                             capture_output=True, text=True, timeout=30)
        assert sorted(out.stdout.split()) == ["k1=v1", "k2=v2"], out.stdout + out.stderr
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "stopped cleanly" in rest
