"""kafkacore.Broker (embedded): in-process broker, producers and consumers without a socket,
and the same storage and group coordinator seen by network clients (kcat, confluent-kafka)."""
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

import kafkacore

from kafkacore import Broker
from kafkacore.errors import InvalidPartitionsError, TopicAlreadyExistsError


def _poll_all(c, n, timeout=15.0):
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out.extend(c.poll(0.3))
    return out


def test_embedded_produce_and_consume(tmp_path):
    with Broker(tmp_path / "data", config={"num.partitions": 2}) as b:
        assert b.create_topic("events", partitions=3) == 3
        with pytest.raises(TopicAlreadyExistsError):
            b.create_topic("events", partitions=3)
        with pytest.raises(InvalidPartitionsError):
            b.create_topic("bad", partitions=0)
        p = b.producer({"linger.ms": 1, "compression.type": "lz4"})
        mds = [p.send("events", b"v%d" % i, key=b"k%d" % i, headers=[("i", b"%d" % i)]).result(10)
               for i in range(60)]
        assert p.send_many("events", [b"bulk"] * 1000).result(10) == 1000
        p.close()
        c = b.consumer({"auto.offset.reset": "earliest"})
        c.assign([("events", i) for i in range(3)])
        got = _poll_all(c, 1060)
        c.close()
        assert len(got) == 1060
        by_pos = {(r.partition, r.offset): r for r in got}
        for i, md in enumerate(mds):
            r = by_pos[(md.partition, md.offset)]
            assert (r.key, r.value, r.headers) == (b"k%d" % i, b"v%d" % i, [("i", b"%d" % i)])
        assert b.topics()["events"] == 3
        # auto-created by metadata on first send, with num.partitions
        p = b.producer()
        p.send("auto", b"x").result(10)
        p.close()
        assert b.topics()["auto"] == 2
    # the files are Kafka's layout and survive a restart
    assert os.path.exists(tmp_path / "data" / "events-0" / "00000000000000000000.log")
    assert os.path.exists(tmp_path / "data" / ".kafka_cleanshutdown")
    with Broker(tmp_path / "data") as b:
        c = b.consumer({"auto.offset.reset": "earliest"})
        c.assign([("events", i) for i in range(3)])
        assert len(_poll_all(c, 1060)) == 1060
        c.close()


def test_kcat_sees_embedded_writes_and_embedded_sees_kcat_writes(tmp_path):
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (ci/compat_deps.sh installs it)")
    with Broker(tmp_path / "data") as b:
        b.create_topic("shared", partitions=1)
        host, port = b.serve("127.0.0.1", 0)
        p = b.producer({"linger.ms": 0})
        for i in range(5):
            p.send("shared", b"embedded-%d" % i, key=b"k").result(10)
        p.close()
        out = subprocess.run(["kcat", "-b", f"{host}:{port}", "-C", "-t", "shared", "-e", "-q", "-f", "%k=%s\n"],
                             capture_output=True, text=True, timeout=30)
        assert out.stdout.split() == [f"k=embedded-{i}" for i in range(5)], out.stderr
        subprocess.run(["kcat", "-b", f"{host}:{port}", "-P", "-t", "shared", "-K", ":"],
                       input="a:from-kcat-1\nb:from-kcat-2\n", text=True, check=True, timeout=30)
        c = b.consumer({"auto.offset.reset": "earliest"})
        c.assign([("shared", 0)])
        got = _poll_all(c, 7)
        c.close()
        assert [r.value for r in got[5:]] == [b"from-kcat-1", b"from-kcat-2"]
        assert [r.key for r in got[5:]] == [b"a", b"b"]


def test_groups_and_offsets_are_shared_with_network_clients(tmp_path):
    ck = pytest.importorskip("confluent_kafka")
    with Broker(tmp_path / "data", config={"group.initial.rebalance.delay.ms": 0}) as b:
        b.create_topic("t", partitions=1)
        host, port = b.serve("127.0.0.1", 0)
        p = b.producer()
        p.send_many("t", [b"%d" % i for i in range(10)], partition=0).result(10)
        p.close()
        c = b.consumer({"group.id": "shared-group", "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.assign([("t", 0)])
        assert len(_poll_all(c, 10)) == 10
        c.commit({("t", 0): 7})
        assert c.committed([("t", 0)]) == {("t", 0): 7}
        c.close()
        # a network client in the same group resumes from the embedded consumer's commit
        nc = ck.Consumer({"bootstrap.servers": f"{host}:{port}", "group.id": "shared-group",
                          "enable.auto.commit": False})
        try:
            committed = nc.committed([ck.TopicPartition("t", 0)], timeout=10)
            assert committed[0].offset == 7
            nc.assign([ck.TopicPartition("t", 0, 7)])
            msgs = []
            deadline = time.monotonic() + 10
            while len(msgs) < 3 and time.monotonic() < deadline:
                m = nc.poll(0.5)
                if m is not None and m.error() is None:
                    msgs.append(m.value())
            assert msgs == [b"7", b"8", b"9"]
            nc.commit(offsets=[ck.TopicPartition("t", 0, 9)], asynchronous=False)
        finally:
            nc.close()
        c = b.consumer({"group.id": "shared-group"})
        assert c.committed([("t", 0)]) == {("t", 0): 9}
        c.close()


def test_embedded_idempotent_producer_writes_each_record_once(tmp_path):
    with Broker(tmp_path / "data") as b:
        b.create_topic("idem", partitions=1)
        p = b.producer({"enable.idempotence": True, "acks": "all", "linger.ms": 2})
        hs = [p.send("idem", b"%d" % i) for i in range(2000)]
        assert p.flush(20) == 0
        assert [h.result().offset for h in hs] == list(range(2000))
        p.close()
        c = b.consumer({"auto.offset.reset": "earliest"})
        c.assign([("idem", 0)])
        got = _poll_all(c, 2000)
        c.close()
        assert [r.value for r in got] == [b"%d" % i for i in range(2000)]
        lg = b.core.get_log("idem", 0)
        assert lg.producer_state is not None


def test_an_embedded_broker_locks_its_data_directory(tmp_path):
    """Two embedded brokers (or an embedded one and `kafkacore serve`) on one directory would
    write at the same offsets; the second is refused, naming the directory and this process."""
    from kafkacore.errors import KafkaStorageError

    with Broker(tmp_path / "data") as b:
        b.create_topic("t", partitions=1)
        with pytest.raises(KafkaStorageError, match=f"data directory {tmp_path / 'data'} is in use by process {os.getpid()}"):
            Broker(tmp_path / "data")
        out = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--port", "0", "--data-dir",
                              str(tmp_path / "data")], capture_output=True, text=True, timeout=60)
        assert out.returncode == 1 and f"in use by process {os.getpid()}" in out.stderr, out.stderr
        b.producer({}).send("t", b"still mine").result(10)
    with Broker(tmp_path / "data") as again:  # closed: free again
        c = again.consumer({"auto.offset.reset": "earliest"})
        c.assign([("t", 0)])
        assert [r.value for r in _poll_all(c, 1)] == [b"still mine"]


COLUMNAR_CHILD = r"""
import sys
import numpy as np
from kafkacore import Broker

with Broker(sys.argv[1]) as b:
    b.create_topic("cols", partitions=2)
    p = b.producer({})
    values = np.array([b"v%05d" % i for i in range(3000)], dtype="S6")
    assert p.send_many("cols", values, partition=1).result(30) == 3000
    p.close()
    c = b.consumer({})
    c.assign([("cols", 0, 0)])
    empty = c.poll_arrow(0.2)  # partition 0 is empty: the empty batch, in the full schema
    assert empty.num_rows == 0 and empty.schema.names[:2] == ["key", "value"], empty.schema
    c.assign([("cols", 1, 1234)])  # mid-batch: the fetched batch starts before the position
    got = []
    while sum(x.num_rows for x in got) < 3000 - 1234:
        got.append(c.poll_arrow(5.0))
    c.close()
    rows = [r for x in got for r in x.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(1234, 3000)), rows[:2]
    assert [r["value"] for r in rows] == [bytes(v) for v in values[1234:]]
    assert {(r["topic"], r["partition"]) for r in rows} == {("cols", 1)}
print("pandas" in sys.modules)
"""


def test_columnar_round_trip_in_a_fresh_process_leaves_pandas_unimported(tmp_path):
    """send_many(numpy) then poll_arrow in a fresh interpreter, as an application runs them:
    the rows are right (an empty poll, a position inside a batch), and nothing made pyarrow
    convert Python values or call to_numpy, which import pandas when it is installed (seconds
    on a loaded machine at the process's first poll_arrow)."""
    pytest.importorskip("pandas")
    if not kafkacore.native_extensions():
        # the pure-Python twin (record/arrow_py.py) builds its columns from Python lists, which
        # pyarrow converts through pandas: the rows are checked by the parity tests there
        pytest.skip("the native columnar reader's property (the twin converts Python lists)")
    out = subprocess.run([sys.executable, "-c", COLUMNAR_CHILD, str(tmp_path / "data")], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False", out.stdout


def _thread_cpu(native_id):
    """User + system CPU seconds of one thread of this process (Linux /proc)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread CPU from /proc")
def test_flush_waiting_on_in_flight_requests_does_not_spin_the_sender(tmp_path):
    # Issue 30: while every in-flight slot was taken, flush() made the sender loop with a zero
    # select timeout, burning a core and the GIL the embedded broker needs to answer.
    with Broker(tmp_path / "data") as b:
        b.create_topic("busy", partitions=1)
        p = b.producer({"acks": 1, "linger.ms": 0, "batch.size": 1000,
                        "max.in.flight.requests.per.connection": 1})
        p.partitions_for("busy")
        release = threading.Event()
        b.submit(release.wait, 30)  # the broker's loop answers nothing until released
        try:
            for i in range(50):  # ~5 batches: one in flight, the rest queued behind it
                p.send("busy", b"%099d" % i)
            assert p.flush(0.3) > 0  # the sender has taken them; nothing can be answered yet
            p.send("busy", b"last")  # an open batch held behind the queued ones
            before = _thread_cpu(p._sender.native_id)
            assert p.flush(1.0) > 0
            spent = _thread_cpu(p._sender.native_id) - before
        finally:
            release.set()
        assert p.flush(20) == 0
        p.close()
        assert spent < 0.1, f"the sender used {spent:.2f} s of CPU while waiting 1 s for answers"


def test_poll_arrow_over_many_fetched_pieces_and_partitions(tmp_path):
    """poll_arrow() decodes the pieces a poll takes (several per partition here: small fetches,
    small batches) in one pass into one batch: every row keeps its partition, offset and value,
    once, in offset order per partition, also where max_records cuts a piece."""
    import numpy as np

    with Broker(tmp_path / "data") as b:
        b.create_topic("pieces", partitions=3)
        p = b.producer({"batch.size": 4096, "linger.ms": 0})
        sent = {}
        for part in range(3):
            values = np.array([b"p%d-%05d" % (part, i) for i in range(3000)], dtype="S8")
            assert p.send_many("pieces", values, partition=part).result(30) == 3000
            sent[part] = [bytes(v) for v in values]
        p.close()
        c = b.consumer({"max.partition.fetch.bytes": 8192})
        c.assign([("pieces", part, 0) for part in range(3)])
        got = {0: [], 1: [], 2: []}
        offsets = {0: [], 1: [], 2: []}
        deadline = time.monotonic() + 30
        joined = 0
        while sum(map(len, got.values())) < 9000 and time.monotonic() < deadline:
            batch = c.poll_arrow(1.0, max_records=1000)
            assert batch.num_rows <= 1000
            if len({*batch.column("partition").to_pylist()}) > 1:
                joined += 1
            for row in batch.to_pylist():
                assert row["topic"] == "pieces"
                got[row["partition"]].append(row["value"])
                offsets[row["partition"]].append(row["offset"])
        c.close()
    assert got == sent
    assert offsets == {part: list(range(3000)) for part in range(3)}
    assert joined, "no poll returned rows of more than one partition: the joined path was not run"
