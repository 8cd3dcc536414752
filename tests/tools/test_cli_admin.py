"""The administration commands (``kafkacore topics|groups|configs|cluster|records|partitions|
leaders|completion``) as users run them: ``python -m kafkacore`` subprocesses against one real
``kafkacore serve`` process for the module, and the read-only ones against tansu. Every change
is checked through another client (kafkacore's AdminClient, a consumer), every failure for its
exit code and its one line on stderr."""
import argparse
import os
import re
import socket
import subprocess
import sys
import time

import pytest

import _peers
from _cli import fails, kafkacore, read_terminal
from broker_client import ROOT, BrokerProcess
from kafkacore import Consumer, Producer
from kafkacore.client.admin import EARLIEST, TOPIC_RESOURCE, AdminClient
from kafkacore.tools.common import EXIT_FAILED, EXIT_UNREACHABLE, EXIT_USAGE

RETENTION_MS = "604800000"  # set on the broker: `configs describe broker 1` shows it as set there


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("cli") / "data", settings={"log.retention.ms": RETENTION_MS}) as b:
        yield b


@pytest.fixture(scope="module")
def admin(broker):
    with AdminClient(broker.bootstrap) as a:
        yield a


def kc(broker, *args, **kw):
    return kafkacore(*args, bootstrap=broker.bootstrap, **kw)


def produce(bootstrap, topic, per_partition, partitions=(0,), timestamps=None, batch_each=False):
    """``per_partition`` records into each partition (keys k0..), each acknowledged;
    ``batch_each``: one record per batch (each waited for before the next is sent)."""
    with Producer({"bootstrap.servers": bootstrap}) as p:
        handles = []
        for part in partitions:
            for i in range(per_partition):
                handles.append(p.send(topic, b"v%d" % i, key=b"k%d" % i, partition=part,
                                      timestamp_ms=timestamps[i] if timestamps else None))
                if batch_each:
                    handles[-1].result(10)
        for h in handles:
            h.result(10)


def segment_bytes(broker, topic, partition):
    d = os.path.join(broker.data_dir, f"{topic}-{partition}")
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".log"))


def first_offsets(bootstrap, group, topic, partitions, timeout=20.0):
    """{partition: offset of the first record} a group member of ``group`` is given."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        first = {}
        deadline = time.monotonic() + timeout
        while len(first) < len(partitions) and time.monotonic() < deadline:
            for r in c.poll(0.5):
                first.setdefault(r.partition, r.offset)
        return first
    finally:
        c.close(autocommit=False)


# -- topics -------------------------------------------------------------------------------------
def test_topics_create_describe_alter_add_partitions_delete(broker, admin):
    t = "cli-topic"
    r = kc(broker, "topics", "create", t, "-p", 3, "-c", "retention.ms=3600000", "-c", "cleanup.policy=delete")
    assert r.out == f"Created topic {t} (3 partitions, replication factor 1).\n"
    assert len(admin.describe_topics([t])[t].partitions) == 3
    assert {c.name: c.value for c in admin.describe_configs(TOPIC_RESOURCE, t)}["retention.ms"] == "3600000"
    assert "TOPIC_ALREADY_EXISTS" in fails("topics", "create", t, code=EXIT_FAILED, bootstrap=broker.bootstrap)
    assert kc(broker, "topics", "create", t, "--if-not-exists").out == f"Topic {t} already exists.\n"

    produce(broker.bootstrap, t, 5, partitions=(0, 2))
    listed = {row["name"]: row for row in kc(broker, "topics", "list", "-o", "json").json()}
    sizes = [segment_bytes(broker, t, p) for p in range(3)]
    assert listed[t] == {"name": t, "internal": False, "partitions": 3, "replication_factor": 1, "messages": 10,
                         "size_bytes": sum(sizes)}
    rows = {row["TOPIC"]: row for row in kc(broker, "topics", "list").table()}
    assert rows[t]["PARTITIONS"] == "3" and rows[t]["MESSAGES"] == "10" and rows[t]["SIZE"].endswith(" B")

    d = kc(broker, "topics", "describe", t, "-o", "json").json()
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"], p["log_start_offset"], p["log_end_offset"],
             p["size_bytes"]) for p in d["partitions"]] == [
        (0, 1, [1], [1], 0, 5, sizes[0]), (1, 1, [1], [1], 0, 0, 0), (2, 1, [1], [1], 0, 5, sizes[2])]
    assert d["partitions"][0]["max_timestamp_ms"] > 0 and d["partitions"][1]["max_timestamp_ms"] is None
    assert d["configs"] == {"retention.ms": {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"},
                            "cleanup.policy": {"value": "delete", "source": "DYNAMIC_TOPIC_CONFIG"}}
    text = kc(broker, "topics", "describe", t).out
    assert f"Topic: {t}  id: {d['topic_id']}  partitions: 3  replication factor: 1" in text
    assert "retention.ms    3600000  DYNAMIC_TOPIC_CONFIG" in text

    r = kc(broker, "topics", "alter", t, "-c", "segment.ms=600000", "--delete-config", "retention.ms")
    assert r.out == f"Altered topic {t}: segment.ms=600000, retention.ms removed.\n"
    configs = {c.name: c for c in admin.describe_configs(TOPIC_RESOURCE, t)}
    assert configs["segment.ms"].value == "600000" and configs["retention.ms"].value == RETENTION_MS
    assert kc(broker, "topics", "describe", t, "-o", "json").json()["configs"] == {
        "cleanup.policy": {"value": "delete", "source": "DYNAMIC_TOPIC_CONFIG"},
        "retention.ms": {"value": RETENTION_MS, "source": "STATIC_BROKER_CONFIG"},
        "segment.ms": {"value": "600000", "source": "DYNAMIC_TOPIC_CONFIG"}}

    assert kc(broker, "topics", "add-partitions", t, "-p", 5).out == f"Topic {t} now has 5 partitions (was 3).\n"
    assert len(admin.describe_topics([t])[t].partitions) == 5
    assert "must be above 5" in fails("topics", "add-partitions", t, "-p", 4, code=EXIT_FAILED,
                                      bootstrap=broker.bootstrap)

    assert kc(broker, "topics", "delete", t).out == f"Deleted topic {t}.\n"
    assert t not in admin.list_topics()
    assert "does not exist" in fails("topics", "delete", t, code=EXIT_FAILED, bootstrap=broker.bootstrap)
    assert kc(broker, "topics", "delete", t, "--if-exists", "-o", "json").json() == {"topic": t, "deleted": False}


def test_topics_list_shows_internal_topics_unless_excluded(broker, admin):
    kc(broker, "topics", "create", "cli-listed", "-p", 1)
    admin.alter_group_offsets("cli-listed-group", {("cli-listed", 0): 0})  # __consumer_offsets exists by now
    names = [row["name"] for row in kc(broker, "topics", "list", "-o", "jsonl").jsonl()]
    assert "__consumer_offsets" in names and "cli-listed" in names
    assert "__consumer_offsets" not in [row["name"] for row in
                                        kc(broker, "topics", "list", "--exclude-internal", "-o", "json").json()]


# -- groups -------------------------------------------------------------------------------------
def test_groups_describe_reset_offsets_and_delete(broker, admin):
    t, g = "cli-group-topic", "cli-group"
    kc(broker, "topics", "create", t, "-p", 2)
    base = 1_700_000_000_000
    produce(broker.bootstrap, t, 10, partitions=(0, 1), timestamps=[base + i * 1000 for i in range(10)])

    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": g, "client.id": "cli-test-client",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe([t])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 20 and time.monotonic() < deadline:
            got += c.poll(0.5)
        assert len(got) == 20
        c.commit({(t, 0): 4, (t, 1): 7})

        assert {"group": g, "type": "classic", "protocol": "consumer", "state": "Stable"} in kc(broker, "groups", "list", "-o", "json").json()
        d = kc(broker, "groups", "describe", g, "-o", "json").json()
        assert (d["state"], d["group_type"], d["protocol_type"], d["coordinator"], d["total_lag"]) == \
            ("Stable", "classic", "consumer", 1, 9)
        [member] = d["members"]
        assert member["client_id"] == "cli-test-client" and member["assignment"] == [f"{t}-0", f"{t}-1"]
        assert [(o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"], o["client_id"])
                for o in d["offsets"]] == [(0, 4, 10, 6, "cli-test-client"), (1, 7, 10, 3, "cli-test-client")]
        text = kc(broker, "groups", "describe", g).out
        assert "TOPIC" in text and "CURRENT-OFFSET  LOG-END-OFFSET  LAG" in text and member["member_id"] in text

        line = fails("groups", "reset-offsets", g, "--topic", t, "--to-earliest", "--execute", code=EXIT_FAILED,
                     bootstrap=broker.bootstrap)
        assert "is Stable with 1 active member(s)" in line
    finally:
        c.close(autocommit=False)

    # a dry run prints the plan and changes nothing
    r = kc(broker, "groups", "reset-offsets", g, "--all-topics", "--to-earliest")
    assert r.table() == [{"GROUP": g, "TOPIC": t, "PARTITION": "0", "CURRENT-OFFSET": "4", "NEW-OFFSET": "0"},
                         {"GROUP": g, "TOPIC": t, "PARTITION": "1", "CURRENT-OFFSET": "7", "NEW-OFFSET": "0"}]
    assert "Dry run" in r.err
    assert admin.list_group_offsets(g) == {(t, 0): 4, (t, 1): 7}

    def reset(*how):
        out = kc(broker, "groups", "reset-offsets", g, *how, "--execute", "-o", "json").json()
        assert out["executed"] is True
        return {row["partition"]: row["new_offset"] for row in out["partitions"]}

    assert reset("--topic", t, "--to-offset", 6) == {0: 6, 1: 6}
    assert admin.list_group_offsets(g) == {(t, 0): 6, (t, 1): 6}
    assert first_offsets(broker.bootstrap, g, t, [0, 1]) == {0: 6, 1: 6}  # a consumer resumes there

    assert reset("--topic", f"{t}:1", "--shift-by", -4) == {1: 2}
    assert reset("--topic", f"{t}:0", "--to-offset", 99) == {0: 10}  # kept inside the log
    assert reset("--topic", f"{t}:0", "--shift-by", -50) == {0: 0}
    assert reset("--topic", f"{t}:0", "--to-latest") == {0: 10}
    # the first record at or after base + 3.5 s is offset 4
    assert reset("--topic", f"{t}:1", "--to-datetime", "2023-11-14T22:13:23.500Z") == {1: 4}
    assert reset("--topic", f"{t}:1", "--to-datetime", "2023-11-14T22:13:23.500") == {1: 4}  # no zone: UTC
    assert admin.list_group_offsets(g) == {(t, 0): 10, (t, 1): 4}
    assert first_offsets(broker.bootstrap, g, t, [1]) == {1: 4}

    assert "partition cli-group-topic-5 does not exist" in fails(
        "groups", "reset-offsets", g, "--topic", f"{t}:5", "--to-earliest", code=EXIT_FAILED,
        bootstrap=broker.bootstrap)
    assert "argument --to-datetime" in fails("groups", "reset-offsets", g, "--topic", t, "--to-datetime", "soon",
                                             code=EXIT_USAGE, bootstrap=broker.bootstrap)
    assert "one of the arguments" in fails("groups", "reset-offsets", g, "--topic", t, code=EXIT_USAGE,
                                           bootstrap=broker.bootstrap)

    assert kc(broker, "groups", "delete", g).out == f"Deleted group {g}.\n"
    assert g not in [x.group_id for x in admin.list_groups()]
    assert "GROUP_ID_NOT_FOUND" in fails("groups", "delete", g, code=EXIT_FAILED, bootstrap=broker.bootstrap)
    assert "does not exist" in fails("groups", "describe", g, code=EXIT_FAILED, bootstrap=broker.bootstrap)


def test_reset_of_many_partitions_commits_them_all(broker, admin):
    """More partitions than one OffsetCommit carries (groups.COMMIT_CHUNK): every one is reset."""
    from kafkacore.tools.groups import COMMIT_CHUNK

    t, g = "cli-wide", "cli-wide-group"
    n = COMMIT_CHUNK + 20
    kc(broker, "topics", "create", t, "-p", n)
    r = kc(broker, "groups", "reset-offsets", g, "--topic", t, "--to-latest", "--execute", "-o", "jsonl")
    assert len(r.jsonl()) == 1 and len(r.jsonl()[0]["partitions"]) == n and r.err == ""  # no bar: not a terminal
    assert len(admin.list_group_offsets(g)) == n


# -- configs, cluster, records ------------------------------------------------------------------
def test_configs_describe_and_alter(broker, admin):
    t = "cli-configs"
    kc(broker, "topics", "create", t, "-c", "max.message.bytes=2000000")
    assert kc(broker, "configs", "describe", "topic", t).table() == [
        {"NAME": "max.message.bytes", "VALUE": "2000000", "SOURCE": "DYNAMIC_TOPIC_CONFIG", "READ-ONLY": "no"},
        {"NAME": "retention.ms", "VALUE": RETENTION_MS, "SOURCE": "STATIC_BROKER_CONFIG", "READ-ONLY": "no"}]
    every = {e["name"]: e for e in kc(broker, "configs", "describe", "topic", t, "--all", "-o", "json").json()}
    assert every["segment.bytes"]["source"] == "DEFAULT_CONFIG" and len(every) > 10

    broker_set = {e["name"]: e for e in kc(broker, "configs", "describe", "broker", 1, "-o", "json").json()}
    assert broker_set["log.retention.ms"] == {"name": "log.retention.ms", "value": RETENTION_MS,
                                              "source": "STATIC_BROKER_CONFIG", "read_only": False,  # dynamic
                                              "sensitive": False}
    assert broker_set["log.dirs"]["read_only"] is True
    assert all(e["source"] != "DEFAULT_CONFIG" for e in broker_set.values())

    r = kc(broker, "configs", "alter", "topic", t, "--set", "retention.bytes=1000000", "--delete", "max.message.bytes")
    assert r.out == f"Altered topic {t}: retention.bytes=1000000, max.message.bytes removed.\n"
    configs = {c.name: c for c in admin.describe_configs(TOPIC_RESOURCE, t)}
    assert configs["retention.bytes"].value == "1000000" and configs["max.message.bytes"].is_default

    line = fails("configs", "alter", "topic", t, "--set", "no.such.config=1", code=EXIT_FAILED,
                 bootstrap=broker.bootstrap)
    assert "INVALID_CONFIG" in line and "no.such.config" in line
    assert "INVALID_CONFIG" in fails("topics", "create", "cli-bad-config", "-c", "retention.ms=soon",
                                     code=EXIT_FAILED, bootstrap=broker.bootstrap)
    assert "nothing to change" in fails("configs", "alter", "topic", t, code=EXIT_USAGE, bootstrap=broker.bootstrap)
    assert "BROKER_NOT_AVAILABLE" in fails("configs", "describe", "broker", 7, code=EXIT_FAILED,
                                           bootstrap=broker.bootstrap)
    assert "invalid choice" in fails("configs", "describe", "group", "g", code=EXIT_USAGE, bootstrap=broker.bootstrap)


def test_cluster_describe(broker, admin):
    kc(broker, "topics", "create", "cli-cluster", "-p", 2)
    produce(broker.bootstrap, "cli-cluster", 3)
    d = kc(broker, "cluster", "describe", "-o", "json").json()
    cluster, topics = admin.metadata(None)
    assert (d["cluster_id"], d["controller"], d["topics"]) == (cluster.cluster_id, 1, len(topics))
    assert d["partitions"] == sum(len(t.partitions) for t in topics.values())
    assert d["under_replicated_partitions"] == [] and d["offline_partitions"] == []
    [b] = d["brokers"]
    vfs = os.statvfs(broker.data_dir)
    assert (b["id"], b["port"], b["controller"], b["log_dir"]) == (1, broker.port, True,
                                                                   os.path.abspath(broker.data_dir))
    assert b["data_bytes"] >= segment_bytes(broker, "cli-cluster", 0) > 0
    assert b["total_bytes"] == vfs.f_blocks * vfs.f_frsize and 0 < b["usable_bytes"] <= b["total_bytes"]
    text = kc(broker, "cluster", "describe").out
    assert f"Cluster id:   {cluster.cluster_id}" in text and "Under-replicated partitions: none" in text


def test_records_delete(broker, admin):
    t = "cli-records"
    kc(broker, "topics", "create", t, "-p", 2)
    produce(broker.bootstrap, t, 10, partitions=(0, 1))
    assert kc(broker, "records", "delete", t, "--partition", 0, "--before", 4).table() == [
        {"TOPIC": t, "PARTITION": "0", "LOG-START-OFFSET": "4"}]
    starts = admin.list_offsets({(t, 0): EARLIEST, (t, 1): EARLIEST})
    assert (starts[(t, 0)].offset, starts[(t, 1)].offset) == (4, 0)
    c = Consumer({"bootstrap.servers": broker.bootstrap})
    try:
        c.assign([(t, 0)])
        c.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            got = c.poll(0.5)
        assert got[0].offset == 4  # a reader from the beginning starts there
    finally:
        c.close()
    line = fails("records", "delete", t, "--partition", 1, "--before", 11, code=EXIT_FAILED,
                 bootstrap=broker.bootstrap)
    assert "offset 11 is beyond the high watermark of partition cli-records-1 (valid: 0 to 10" in line
    assert kc(broker, "records", "delete", t, "--before", "end", "-o", "json").json() == [
        {"topic": t, "partition": 0, "log_start_offset": 10}, {"topic": t, "partition": 1, "log_start_offset": 10}]
    assert "'minus one' is not an offset" in fails("records", "delete", t, "--before", "minus one", code=EXIT_USAGE,
                                                   bootstrap=broker.bootstrap)


def test_replica_commands_on_a_single_node_answer_as_a_cluster_of_one(broker):
    """A single node is a cluster of one: it serves ElectLeaders and the reassignment APIs as
    Kafka's lone broker does - nothing to elect, nothing in progress, its own broker the only
    valid target, another one refused."""
    kc(broker, "topics", "create", "cli-single")
    # every partition of the module's broker (other tests' topics too) is led by its preferred replica
    assert re.fullmatch(r"Preferred election: 0 elected, \d+ needed none\.\n",
                        kc(broker, "leaders", "elect", "--all-topic-partitions").out)
    assert "Unclean election: 0 elected, 1 needed none" in kc(
        broker, "leaders", "elect", "--topic", "cli-single", "--election-type", "UNCLEAN").out
    assert "No partition reassignment in progress" in kc(broker, "partitions", "reassign", "--list").out
    assert "started" in kc(broker, "partitions", "reassign", "--topic", "cli-single", "--partition", 0,
                           "--replicas", "1").out
    r = kc(broker, "partitions", "reassign", "--topic", "cli-single", "--partition", 0, "--replicas", "2",
           check=False)
    assert r.code == EXIT_FAILED and "INVALID_REPLICA_ASSIGNMENT" in r.out and "not live (live: [1])" in r.out, r
    assert "--topic" in fails("leaders", "elect", code=EXIT_USAGE, bootstrap=broker.bootstrap)
    assert "--topic needs --partition" in fails("partitions", "reassign", "--topic", "t", "--replicas", "1",
                                        code=EXIT_USAGE, bootstrap=broker.bootstrap)


def test_a_mistyped_command_or_verb_gets_the_closest_suggested():
    for args, suggestion in ((("topic", "list"), "topics"), (("topics", "lst"), "list"), (("grups",), "groups")):
        r = kafkacore(*args, check=False)
        assert r.code == EXIT_USAGE and r.out == ""
        assert r.err.strip().endswith(f"; did you mean '{suggestion}'?") and len(r.err.splitlines()) == 1, r.err
    assert "did you mean" not in kafkacore("xyzzy", check=False).err


def test_help_shows_no_rest_markup():
    """Descriptions come from module docstrings; their ``literals`` are shown plain."""
    from kafkacore.cli import build_parser

    def walk(parser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    yield from walk(child)

    parsers = list(walk(build_parser()))
    assert len(parsers) > 30
    for parser in parsers:
        text = parser.format_help()
        assert "``" not in text and ":class:" not in text, (parser.prog, text)


# -- bad input everywhere -----------------------------------------------------------------------
def test_bad_input_is_one_line_and_an_exit_code(broker, tmp_path):
    b = broker.bootstrap
    assert fails("topics", "describe", "no-such-topic", code=EXIT_FAILED, bootstrap=b).endswith(
        "topic 'no-such-topic' does not exist (UNKNOWN_TOPIC_OR_PARTITION)")
    assert "UNKNOWN_TOPIC_OR_PARTITION" in fails("topics", "alter", "no-such-topic", "-c", "retention.ms=1",
                                                 code=EXIT_FAILED, bootstrap=b)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in fails("configs", "describe", "topic", "no-such-topic",
                                                 code=EXIT_FAILED, bootstrap=b)
    assert "UNKNOWN_TOPIC_OR_PARTITION" in fails("records", "delete", "no-such-topic", "--before", 1,
                                                 code=EXIT_FAILED, bootstrap=b)
    assert "'x' is not a number above 0" in fails("topics", "create", "t", "-p", "x", code=EXIT_USAGE, bootstrap=b)
    assert "0 is not a number above 0" in fails("topics", "create", "t", "-p", "0", code=EXIT_USAGE, bootstrap=b)
    assert "'retention.ms' is not key=value" in fails("topics", "create", "t", "-c", "retention.ms",
                                                      code=EXIT_USAGE, bootstrap=b)
    assert "required: VERB" in fails("topics", code=EXIT_USAGE, bootstrap=b)
    assert "invalid choice" in fails("topics", "rename", "a", code=EXIT_USAGE, bootstrap=b)
    assert "cannot read --command-config" in fails("--command-config", tmp_path / "missing.properties", "topics",
                                                   "list", code=EXIT_USAGE, bootstrap=b)
    assert "HOST:PORT" in fails("topics", "list", code=EXIT_USAGE, bootstrap="localhost")

    started = time.monotonic()
    line = fails("topics", "list", code=EXIT_UNREACHABLE, bootstrap="127.0.0.1:1")
    assert "cannot reach the cluster" in line and "127.0.0.1:1" in line and time.monotonic() - started < 5
    # a listener that never answers: the connect timeout from --command-config bounds the wait
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        props = tmp_path / "fast.properties"
        props.write_text("socket.connection.setup.timeout.ms=1000\n")
        started = time.monotonic()
        line = fails("--command-config", props, "cluster", "describe", code=EXIT_UNREACHABLE,
                     bootstrap="127.0.0.1:%d" % silent.getsockname()[1])
        assert "no answer" in line and time.monotonic() - started < 8


def test_global_options_after_the_verb_and_a_closed_pipe(broker):
    r = kafkacore("topics", "list", "-b", broker.bootstrap, "-o", "json")  # as Kafka's scripts place them
    assert isinstance(r.json(), list)
    kc(broker, "topics", "create", "cli-closed-pipe", "-p", 1, "--if-not-exists")  # its own: the shared
    # broker holds only what earlier tests made, and their order varies
    p = subprocess.run(f"{sys.executable} -m kafkacore -b {broker.bootstrap} configs describe topic "
                       f"cli-closed-pipe --all | head -1", shell=True, capture_output=True, text=True,
                       cwd=str(ROOT), timeout=60)
    assert p.stdout.startswith("NAME") and p.stderr == ""


# -- shell completion ---------------------------------------------------------------------------
def _complete(script, line):
    """COMPREPLY of the bash completion for ``line`` (a trailing space: completing a new word)."""
    words = line + ('""' if line.endswith(" ") else "")
    cmd = (f"source {script}\nCOMP_WORDS=({words})\n"
           'COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n_kafkacore_complete\necho "${COMPREPLY[*]}"\n')
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return sorted(p.stdout.split())


def test_bash_completion(tmp_path):
    script = tmp_path / "kafkacore.bash"
    script.write_text(kafkacore("completion", "bash").out)
    assert _complete(script, "kafkacore to") == ["topics"]
    assert _complete(script, "kafkacore c") == ["cluster", "completion", "configs", "console", "consume"]
    assert _complete(script, "kafkacore -b 127.0.0.1:9092 topics de") == ["delete", "describe"]
    assert _complete(script, "kafkacore cluster ") == ["describe", "migrate", "restart", "up"]
    assert _complete(script, "kafkacore topics create t --rep") == ["--replica-assignment", "--replication-factor"]
    assert _complete(script, "kafkacore groups reset-offsets g --to-") == [
        "--to-datetime", "--to-earliest", "--to-latest", "--to-offset"]
    assert _complete(script, "kafkacore topics list -o j") == ["json", "jsonl"]
    assert _complete(script, "kafkacore configs describe ") == ["broker", "topic"]
    zsh = kafkacore("completion", "zsh").out
    assert "bashcompinit" in zsh and "complete -F _kafkacore_complete kafkacore" in zsh


def test_progress_bar_only_on_a_terminal():
    import io
    import pty

    from kafkacore.tools.progress import Progress

    piped = io.StringIO()
    with Progress(3, "work", stream=piped) as p:
        p.advance(3)
    assert piped.getvalue() == ""
    leader, follower = pty.openpty()
    with os.fdopen(follower, "w") as tty:
        with Progress(4, "work", stream=tty) as p:
            p.advance(2)
            p.update(4)
    drawn = read_terminal(leader).decode()
    os.close(leader)
    assert "work [" in drawn and "4/4 100%" in drawn and drawn.endswith("\r")


# -- tansu: the read-only commands against another Kafka-compatible broker ----------------------
@pytest.fixture(scope="module")
def tansu(tmp_path_factory):
    reason = _peers.unavailable("tansu")
    if reason:
        pytest.skip(reason)
    peer = _peers.TansuPeer(tmp_path_factory.mktemp("cli-tansu"))
    try:
        peer.start()
        yield peer
    finally:
        peer.close()


def test_read_only_commands_against_tansu(tansu):
    b = tansu.bootstrap
    t, g = "cli-tansu", "cli-tansu-group"
    with AdminClient(b) as a:
        a.create_topic(t, 2)
        # tansu 0.x puts the end of a partition one past the base offset of its last batch, not
        # past its last record: records go one per batch so that its offsets are right
        produce(b, t, 6, partitions=(0, 1), batch_each=True)
        a.alter_group_offsets(g, {(t, 0): 2, (t, 1): 5})

    listed = {row["name"]: row for row in kafkacore("topics", "list", "-o", "json", bootstrap=b).json()}
    assert listed[t] == {"name": t, "internal": False, "partitions": 2, "replication_factor": 1, "messages": 12,
                         "size_bytes": None}  # tansu has no DescribeLogDirs: the size is unknown
    assert kafkacore("topics", "list", bootstrap=b).table()[0]["SIZE"] == "-"
    d = kafkacore("topics", "describe", t, "-o", "json", bootstrap=b).json()
    assert [(p["partition"], p["log_start_offset"], p["log_end_offset"], p["size_bytes"]) for p in d["partitions"]] \
        == [(0, 0, 6, None), (1, 0, 6, None)]
    assert kafkacore("topics", "describe", t, bootstrap=b).out.startswith(f"Topic: {t}")

    assert g in [row["group"] for row in kafkacore("groups", "list", "-o", "json", bootstrap=b).json()]
    offsets = kafkacore("groups", "describe", g, "-o", "json", bootstrap=b).json()["offsets"]
    assert [(o["topic"], o["partition"], o["committed_offset"], o["log_end_offset"], o["lag"]) for o in offsets] == [
        (t, 0, 2, 6, 4), (t, 1, 5, 6, 1)]

    c = kafkacore("cluster", "describe", "-o", "json", bootstrap=b).json()
    assert [x["port"] for x in c["brokers"]] == [int(b.rsplit(":", 1)[1])] and c["controller"] == c["brokers"][0]["id"]
    assert c["topics"] >= 1 and c["offline_partitions"] == [] and c["brokers"][0]["data_bytes"] is None
    assert kafkacore("configs", "describe", "topic", t, bootstrap=b).code == 0
    assert "does not exist" in fails("topics", "describe", "no-such-topic", code=EXIT_FAILED, bootstrap=b)
