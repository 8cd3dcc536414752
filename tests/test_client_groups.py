"""kafkacore.Consumer in consumer groups against a real broker process, with both group
protocols (``group.protocol`` classic and consumer, KIP-848): rebalances across member processes
(every record consumed, no partition owned by two members at once), commits and resume, static
membership, max.poll.interval, cooperative-sticky, pattern subscriptions, auto-commit. The
consumer protocol's own cases (mixed groups with librdkafka, fencing, config rules) are in
tests/test_client_consumer_protocol.py."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

from broker_client import BrokerProcess
from kafkacore import Consumer, Producer
from kafkacore.client.config import CLASSIC_ONLY
from kafkacore.errors import NoOffsetForPartitionError

HERE = os.path.dirname(os.path.abspath(__file__))


# the consumer protocol's session and heartbeat are the broker's: short ones keep the tests fast
CONSUMER_GROUP_SETTINGS = {"group.consumer.session.timeout.ms": "3000", "group.consumer.min.session.timeout.ms": "1000",
                           "group.consumer.heartbeat.interval.ms": "200",
                           "group.consumer.min.heartbeat.interval.ms": "100"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("group-broker"), settings=CONSUMER_GROUP_SETTINGS) as b:
        yield b


@pytest.fixture(params=["classic", "consumer"])
def protocol(request):
    return request.param


def _topic(name):
    return f"{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


def _fill(broker, topic, partitions, per_partition):
    from broker_client import request
    with broker.client() as conn:
        resp = conn.call(19, 5, request(19, topics=[
            __import__("kafkacore.protocol.messages.create_topics_request", fromlist=["x"]).CreatableTopic(
                name=topic, num_partitions=partitions, replication_factor=1)], timeout_ms=10000))
        assert resp.topics[0].error_code == 0
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2}) as p:
        for part in range(partitions):
            p.send_many(topic, [b"%d-%d" % (part, i) for i in range(per_partition)], partition=part).result(20)


def _consumer(broker, group, protocol="classic", **conf):
    """A member of ``group``; the classic protocol's own settings go only to a classic member
    (a consumer-protocol member refuses them, as Java's does)."""
    conf = {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "group.protocol": protocol, **conf}
    if protocol == "consumer":
        conf = {k: v for k, v in conf.items() if k not in CLASSIC_ONLY}
    return Consumer(conf)


def _wait(cond, timeout=20.0, step=0.05, poll=()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for c in poll:
            c.poll(0.05)
        if cond():
            return True
        time.sleep(step)
    return False


def _events(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _double_owners(outs, ends):
    """Partitions two members owned at one moment, from the members' own assign/revoke/lost
    events (one clock: the processes share the machine). ``ends``: {out: time} past which a
    member owns nothing (it was killed)."""
    spans = []  # (partition, start, end, member)
    for out in outs:
        start = {}
        for e in _events(out):
            for p in map(tuple, e.get("partitions", ())):
                if e["event"] == "assigned":
                    start[p] = e["t"]
                elif e["event"] in ("revoked", "lost") and p in start:
                    spans.append((p, start.pop(p), e["t"], out))
        spans += [(p, t, ends.get(out, float("inf")), out) for p, t in start.items()]
    return [(a, b) for a in spans for b in spans
            if a[3] < b[3] and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]]


def _current_assignment(events):
    owned = set()
    for e in events:
        if e["event"] == "assigned":
            owned |= {tuple(p) for p in e["partitions"]}
        elif e["event"] in ("revoked", "lost"):
            owned -= {tuple(p) for p in e["partitions"]}
    return owned


# "consumer": group.protocol=consumer, the coordinator's (uniform) assignor
@pytest.mark.parametrize("strategy", ["range", "roundrobin", "cooperative-sticky", "consumer"])
def test_three_member_processes_rebalance_and_consume_everything_once(broker, tmp_path, strategy):
    topic, group = _topic("grp"), _topic("g")
    _fill(broker, topic, 6, 200)
    stop = str(tmp_path / "stop")
    procs, outs = [], []

    def start(i):
        out = str(tmp_path / f"m{i}.jsonl")
        outs.append(out)
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "client_member.py"), broker.bootstrap,
                                       group, topic, strategy, out, stop]))
    try:
        start(0)
        assert _wait(lambda: len(_current_assignment(_events(outs[0]))) == 6, 30), _events(outs[0])
        start(1)
        start(2)

        def balanced():
            owned = [_current_assignment(_events(o)) for o in outs]
            return sorted(len(o) for o in owned) == [2, 2, 2] and set().union(*owned) == {
                (topic, p) for p in range(6)}
        assert _wait(balanced, 40), [_events(o) for o in outs]
        # a member leaves: the other two take its partitions
        killed_at = time.time()
        procs[0].terminate()
        procs[0].wait(20)

        def rebalanced():
            owned = [_current_assignment(_events(o)) for o in outs[1:]]
            return sorted(len(o) for o in owned) == [3, 3] and set().union(*owned) == {(topic, p) for p in range(6)}
        assert _wait(rebalanced, 40), [_events(o) for o in outs]
        # everything consumed: every offset at least once, and (commit after each poll,
        # revocations inside poll) none twice
        def consumed():
            seen = [tuple(x) for o in outs for e in _events(o) if e["event"] == "records" for x in e["items"]]
            return len(set(seen)) == 1200
        assert _wait(consumed, 40)
        seen = [tuple(x) for o in outs for e in _events(o) if e["event"] == "records" for x in e["items"]]
        assert len(set(seen)) == 1200
        dupes = len(seen) - len(set(seen))
        assert dupes <= 200, f"{dupes} records consumed twice"  # at most one in-flight poll per handoff
        assert _double_owners(outs, {outs[0]: killed_at}) == []
        if strategy in ("cooperative-sticky", "consumer"):
            # cooperative: the first member never gave up everything at once
            ev = _events(outs[0])
            for e in ev:
                if e["event"] == "revoked":
                    assert len(e["partitions"]) < 6, ev
    finally:
        open(stop, "w").close()
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_commit_and_resume_from_committed_offset(broker, protocol):
    topic, group = _topic("resume"), _topic("g")
    _fill(broker, topic, 1, 100)
    with _consumer(broker, group, protocol, **{"enable.auto.commit": False}) as c:
        c.subscribe([topic])
        got = []
        assert _wait(lambda: got.extend(c.poll(0.2, max_records=30)) or len(got) >= 30)
        c.commit()
        assert c.committed([(topic, 0)]) == {(topic, 0): 30}
    with _consumer(broker, group, protocol, **{"enable.auto.commit": False}) as c:
        c.subscribe([topic])
        got = []
        assert _wait(lambda: got.extend(c.poll(0.2)) or len(got) >= 70)
        assert [r.offset for r in got] == list(range(30, 100))
        c.commit([(topic, 0, 55)])
        assert c.committed([(topic, 0)]) == {(topic, 0): 55}
        done = []
        c.commit({(topic, 0): 60}, asynchronous=True, callback=lambda err, offs: done.append((err, offs)))
        assert _wait(lambda: done, 10) and done[0][0] is None
        assert c.committed([(topic, 0)]) == {(topic, 0): 60}


def test_auto_commit(broker, protocol):
    topic, group = _topic("auto"), _topic("g")
    _fill(broker, topic, 1, 10)
    with _consumer(broker, group, protocol, **{"auto.commit.interval.ms": 200}) as c:
        c.subscribe([topic])
        got = []
        assert _wait(lambda: got.extend(c.poll(0.1)) or len(got) == 10)
        assert _wait(lambda: c.poll(0.1) == [] and c.committed([(topic, 0)]) == {(topic, 0): 10}, 10)


def test_auto_offset_reset_none_in_a_group(broker, protocol):
    topic, group = _topic("none"), _topic("g")
    _fill(broker, topic, 1, 3)
    with _consumer(broker, group, protocol, **{"auto.offset.reset": "none"}) as c:
        c.subscribe([topic])
        with pytest.raises(NoOffsetForPartitionError, match=f"{topic}-0"):
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                c.poll(0.2)



def test_static_member_restart_keeps_its_partitions_without_rebalance(broker, protocol):
    topic, group = _topic("static"), _topic("g")
    _fill(broker, topic, 4, 5)
    events = []
    a = _consumer(broker, group, protocol, **{"group.instance.id": "a", "partition.assignment.strategy": "range"})
    b = _consumer(broker, group, protocol, **{"group.instance.id": "b", "partition.assignment.strategy": "range"})
    try:
        a.subscribe([topic], on_revoke=lambda _c, tps: events.append(("a-revoked", tps)))
        b.subscribe([topic], on_revoke=lambda _c, tps: events.append(("b-revoked", tps)))
        assert _wait(lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2, 30, poll=(a, b))
        owned_b = b.assignment()
        events.clear()
        b.close()  # static: no LeaveGroup
        b = _consumer(broker, group, protocol, **{"group.instance.id": "b", "partition.assignment.strategy": "range"})
        b.subscribe([topic])
        assert _wait(lambda: b.assignment() == owned_b, 30, poll=(a, b))
        for _ in range(10):
            a.poll(0.05)
        assert events == [], "a static member's restart must not rebalance the others"
    finally:
        a.close()
        b.close()



def test_member_that_stops_polling_leaves_the_group(broker, protocol):
    topic, group = _topic("maxpoll"), _topic("g")
    _fill(broker, topic, 2, 5)
    conf = {"max.poll.interval.ms": 1500, "partition.assignment.strategy": "range"}
    a = _consumer(broker, group, protocol, **conf)
    b = _consumer(broker, group, protocol, **conf)
    try:
        a.subscribe([topic])
        b.subscribe([topic])
        assert _wait(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, 30, poll=(a, b))
        # b stops polling: after max.poll.interval.ms it leaves, and a gets both partitions
        assert _wait(lambda: len(a.assignment()) == 2, 30, poll=(a,))
        # b comes back on its next poll
        assert _wait(lambda: len(b.assignment()) == 1 and len(a.assignment()) == 1, 30, poll=(a, b))
    finally:
        a.close()
        b.close()



def test_pattern_subscription_picks_up_new_topics(broker, protocol):
    prefix = _topic("pat")
    _fill(broker, prefix + "-a", 1, 2)
    with _consumer(broker, _topic("g"), protocol, **{"metadata.max.age.ms": 500}) as c:
        c.subscribe("^" + re.escape(prefix) + "-.*")
        assert _wait(lambda: c.assignment() == {(prefix + "-a", 0)}, 20, poll=(c,))
        _fill(broker, prefix + "-b", 1, 2)
        assert _wait(lambda: c.assignment() == {(prefix + "-a", 0), (prefix + "-b", 0)}, 20, poll=(c,))


def test_compiled_pattern_matches_whole_names_as_java(broker, protocol):
    """subscribe(re.compile(...)) takes a topic only when the pattern matches its whole name
    (Java's Pattern.matcher(topic).matches()). A "^" string: with the classic protocol the client
    searches it, as librdkafka's regexec() does; with the consumer protocol the coordinator
    matches whole names (Kafka's RE2J matches())."""
    prefix = _topic("whole")
    _fill(broker, prefix, 1, 2)
    _fill(broker, prefix + "-longer", 1, 2)
    with _consumer(broker, _topic("g"), protocol) as c:
        c.subscribe(re.compile(re.escape(prefix)))
        assert _wait(lambda: c.assignment() == {(prefix, 0)}, 20, poll=(c,))
    with _consumer(broker, _topic("g"), protocol) as c:
        c.subscribe("^" + re.escape(prefix))
        want = {(prefix, 0)} if protocol == "consumer" else {(prefix, 0), (prefix + "-longer", 0)}
        assert _wait(lambda: c.assignment() == want, 20, poll=(c,))


def test_unsubscribe_revokes_commits_and_leaves_then_subscribe_rejoins(broker, protocol):
    """unsubscribe(): the partitions are revoked while the consumer is still a member (auto-commit
    commits their positions - a group with other members takes no commit from a non-member -
    and on_revoke is called), then it leaves; the other member takes over, and a new
    subscribe() joins again."""
    from kafkacore.client.admin import AdminClient
    topic, group = _topic("unsub"), _topic("g")
    _fill(broker, topic, 2, 5)
    revoked = []
    conf = {"auto.commit.interval.ms": 60000, "partition.assignment.strategy": "range"}
    with _consumer(broker, group, protocol, **conf) as a, _consumer(broker, group, protocol, **conf) as b:
        a.subscribe([topic], on_revoke=lambda _c, tps: revoked.append(sorted(tps)))
        b.subscribe([topic])
        assert _wait(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, 30, poll=(a, b))
        revoked.clear()
        mine = a.assignment()
        assert _wait(lambda: a.lag() == {tp: 0 for tp in mine}, poll=(a, b))  # all 5 read
        member = a._group.member_id
        a.unsubscribe()
        assert revoked == [sorted(mine)] and a.assignment() == set()
        with AdminClient(broker.bootstrap) as admin:
            assert admin.list_group_offsets(group, sorted(mine)) == {tp: 5 for tp in mine}
            assert _wait(lambda: b.assignment() == {(topic, 0), (topic, 1)}, 20, poll=(b,))
            assert member not in {m.member_id for m in admin.describe_group(group).members}
        a.subscribe([topic])
        assert _wait(lambda: len(a.assignment()) == 1 and len(b.assignment()) == 1, 30, poll=(a, b))
