"""kafkacore.Consumer without a group (assign): against a real ``kafkacore serve`` process.

Records are written with kafkacore's Producer and, where the point is independence from our
own client, with confluent-kafka; they are read back and compared field by field.
"""
import os
import time

import pytest

from broker_client import BrokerProcess
from kafkacore import Consumer, Producer
from kafkacore.errors import CorruptRecordBatchError, KafkaConfigError, NoOffsetForPartitionError


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("consumer-broker"), {"num.partitions": "3"}) as b:
        yield b


def _producer(broker, **conf):
    return Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1, **conf})


def _consumer(broker, **conf):
    return Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest", **conf})


def _poll_all(c, n, timeout=20.0, arrow=False):
    out, rows = [], 0
    deadline = time.monotonic() + timeout
    while (rows if arrow else len(out)) < n and time.monotonic() < deadline:
        if arrow:
            b = c.poll_arrow(0.5)
            if b.num_rows:
                out.append(b)
                rows += b.num_rows
        else:
            out.extend(c.poll(0.5))
    return out


def _topic(name):
    return f"{name}-{os.getpid()}-{time.monotonic_ns() % 10**9}"


def test_records_come_back_exactly_in_order(broker):
    t = _topic("exact")
    sent = []
    with _producer(broker, **{"compression.type": "lz4"}) as p:
        for i in range(300):
            key = None if i % 5 == 0 else b"k%d" % (i % 7)
            value = None if i % 11 == 0 else b"value-%d" % i
            headers = [("h", b"%d" % i), ("empty", None)] if i % 3 == 0 else None
            md = p.send(t, value, key=key, headers=headers, timestamp_ms=1_700_000_000_000 + i).result(10)
            sent.append((md.partition, md.offset, key, value, headers or [], 1_700_000_000_000 + i))
    with _consumer(broker) as c:
        c.assign([(t, p) for p in range(3)])
        got = _poll_all(c, len(sent))
    assert len(got) == len(sent)
    by_pos = {(r.partition, r.offset): r for r in got}
    assert len(by_pos) == len(sent), "duplicates"
    for part, off, key, value, headers, ts in sent:
        r = by_pos[(part, off)]
        assert (r.topic, r.key, r.value, r.headers, r.timestamp_ms) == (t, key, value, headers, ts)
    for part in range(3):
        offsets = [r.offset for r in got if r.partition == part]
        assert offsets == sorted(offsets) and offsets == list(range(len(offsets)))


def test_max_records_and_positions(broker):
    t = _topic("maxrec")
    with _producer(broker) as p:
        p.send_many(t, [b"%d" % i for i in range(1000)], partition=0).result(10)
    with _consumer(broker) as c:
        c.assign([(t, 0)])
        first = []
        deadline = time.monotonic() + 10
        while not first and time.monotonic() < deadline:
            first = c.poll(0.5, max_records=7)
        assert [r.offset for r in first] == list(range(7))
        assert c.position(t, 0) == 7
        rest = _poll_all(c, 993)
        assert [r.offset for r in rest] == list(range(7, 1000))
        assert c.position(t, 0) == 1000
        assert c.lag() == {(t, 0): 0}


def test_a_fresh_consumers_first_poll_does_not_wait_out_an_idle_fetcher_loop(broker):
    # A new consumer knows no leader yet. Its fetcher used to note that and then sleep its
    # 0.5 s idle wait before asking for metadata, so a first poll shorter than that always
    # came back empty. Three fresh consumers get 0.45 s each: the old code fails all three.
    t = _topic("first-poll")
    with _producer(broker) as p:
        p.send_many(t, [b"%d" % i for i in range(300)]).result(10)
    times = []
    for _ in range(3):
        with _consumer(broker) as c:
            c.assign([(t, part, 0) for part in range(3)])
            t0 = time.monotonic()
            got = c.poll(0.45)
            times.append(round(time.monotonic() - t0, 3))
            if got:
                assert all(r.topic == t and r.offset >= 0 for r in got)
                return
    pytest.fail(f"no fresh consumer's first poll(0.45) returned records (took {times} s)")


def test_a_wake_pipe_writes_once_per_wait_and_always_for_stop():
    """The sender's and the fetcher's WakePipe: wake() writes only while the thread is about to
    wait or waiting (each write is a cross-CPU wake-up), once per wait; wake_always() (stop)
    writes regardless; select() drains the pipe and clears the flag."""
    from kafkacore.client.wake_pipe import WakePipe

    w = WakePipe()
    try:
        def pending():
            try:
                return os.read(w.fileno(), 4096)
            except BlockingIOError:
                return b""

        for _ in range(100):
            w.wake()
        assert pending() == b""  # awake (between waits): its next look at the state sees the change
        w.going_to_sleep()
        for _ in range(100):
            w.wake()
        assert pending() == b"x" and not w.sleeping
        w.wake_always()
        assert pending() == b"x"
        w.going_to_sleep()
        w.wake()
        w.going_to_sleep()
        assert w.select([], 5.0) == [w] and not w.sleeping and pending() == b""
        assert w.select([], 0) == []
    finally:
        w.close()
    # after the thread closed it, its descriptor numbers go to the next files opened: a late
    # stop() must not write into them
    r2, w2 = os.pipe()
    try:
        os.set_blocking(r2, False)
        w.wake_always()
        w.going_to_sleep()
        w.wake()
        with pytest.raises(BlockingIOError):
            os.read(r2, 1)
    finally:
        os.close(r2)
        os.close(w2)


def test_prefetch_refills_when_the_application_takes_without_waiting_out_the_idle_wait(broker):
    """With tiny fetches the fetcher fills its prefetch buffers and then waits for the
    application; each poll that empties one must wake it (wakeup()), or every refill waits out
    the fetcher's 0.5 s idle wait (measured so: 4-23 s here, against 0.2 s)."""
    t = _topic("refill")
    n = 3 * 60 * 10
    with _producer(broker, **{"batch.size": 1024}) as p:
        p.send_many(t, [b"v" * 90 for _ in range(n)]).result(10)
    # one ~1 KiB batch of 10 records per fetch and partition (batch.size 1 KiB below)
    with _consumer(broker, **{"max.partition.fetch.bytes": 1, "fetch.max.bytes": 1}) as c:
        c.assign([(t, part, 0) for part in range(3)])
        t0 = time.monotonic()
        got = _poll_all(c, n, timeout=60)
        took = time.monotonic() - t0
    assert len(got) == n
    assert took < 2, f"{n} records in {took:.1f} s: refills waited for the idle wait"


def test_seek_variants_and_offsets_for_times(broker):
    t = _topic("seek")
    with _producer(broker) as p:
        for i in range(50):
            p.send(t, b"%d" % i, partition=1, timestamp_ms=1_000_000 + i * 10)
        assert p.flush(10) == 0
    with _consumer(broker) as c:
        c.assign([(t, 1)])
        c.seek(t, 1, 42)
        assert [r.offset for r in _poll_all(c, 8)] == list(range(42, 50))
        c.seek_to_beginning()
        assert _poll_all(c, 1)[0].offset == 0
        c.seek_to_end()
        assert c.position(t, 1) == 50
        assert c.poll(0.3) == []
        found = c.offsets_for_times({(t, 1): 1_000_000 + 205})  # between records 20 and 21
        assert found[(t, 1)][0] == 21
        assert c.offsets_for_times({(t, 1): 9_999_999_999})[(t, 1)] is None
        assert c.beginning_offsets([(t, 1)]) == {(t, 1): 0}
        assert c.end_offsets([(t, 1)]) == {(t, 1): 50}
        c.seek(t, 1, found[(t, 1)][0])
        assert _poll_all(c, 1)[0].value == b"21"


def test_assign_with_offsets_and_reset_policies(broker):
    t = _topic("reset")
    with _producer(broker) as p:
        p.send_many(t, [b"a", b"b", b"c"], partition=0).result(10)
    with _consumer(broker) as c:
        c.assign([(t, 0, 2)])
        assert [r.value for r in _poll_all(c, 1)] == [b"c"]
    with _consumer(broker, **{"auto.offset.reset": "latest"}) as c:
        c.assign([(t, 0)])
        assert c.position(t, 0) == 3
    with _consumer(broker, **{"auto.offset.reset": "none"}) as c:
        c.assign([(t, 0)])
        with pytest.raises(NoOffsetForPartitionError, match=f"{t}-0"):
            c.poll(2.0)


def test_pause_and_resume(broker):
    t = _topic("pause")
    with _producer(broker) as p:
        p.send_many(t, [b"x"] * 10, partition=0).result(10)
        p.send_many(t, [b"y"] * 10, partition=1).result(10)
    with _consumer(broker) as c:
        c.assign([(t, 0), (t, 1)])
        c.pause([(t, 0)])
        assert c.paused() == {(t, 0)}
        got = _poll_all(c, 10, timeout=5)
        time.sleep(0.3)  # a negative check: nothing of the paused partition arrives meanwhile
        got += c.poll(0.3)
        assert {r.partition for r in got} == {1} and len(got) == 10
        c.resume([(t, 0)])
        got = _poll_all(c, 10, timeout=5)
        assert {r.partition for r in got} == {0} and len(got) == 10


def test_poll_arrow_matches_poll(broker):
    t = _topic("arrow")
    with _producer(broker, **{"compression.type": "zstd"}) as p:
        for i in range(500):
            p.send(t, b"v%d" % i, key=b"k%d" % i, headers=[("n", b"%d" % i)])
        assert p.flush(10) == 0
    with _consumer(broker) as c:
        c.assign([(t, p) for p in range(3)])
        records = _poll_all(c, 500)
        c.seek_to_beginning()
        batches = _poll_all(c, 500, arrow=True)
    rows = [row for b in batches for row in b.to_pylist()]
    assert batches[0].schema.names == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
                                       "headers"]
    expected = {(r.partition, r.offset): (r.key, r.value, r.timestamp_ms) for r in records}
    assert len(rows) == 500
    for row in rows:
        key, value, ts = expected[(row["partition"], row["offset"])]
        assert (row["key"], row["value"], row["topic"]) == (key, value, t)
        assert int(row["timestamp"].timestamp() * 1000) == ts
        assert row["headers"] == [{"key": "n", "value": value[1:]}]


def test_poll_arrow_respects_max_records_and_position(broker):
    t = _topic("arrowmax")
    with _producer(broker) as p:
        p.send_many(t, [b"%d" % i for i in range(100)], partition=0).result(10)
    with _consumer(broker) as c:
        c.assign([(t, 0)])
        c.seek(t, 0, 10)
        b = None
        deadline = time.monotonic() + 10
        while (b is None or b.num_rows == 0) and time.monotonic() < deadline:
            b = c.poll_arrow(0.5, max_records=25)
        assert b.column("offset").to_pylist() == list(range(10, 35))
        assert c.position(t, 0) == 35
        rest = _poll_all(c, 65, arrow=True)
        assert [o for x in rest for o in x.column("offset").to_pylist()] == list(range(35, 100))


def test_corrupt_batch_on_disk_raises_naming_topic_partition_offset(broker, tmp_path):
    t = _topic("corrupt")
    with _producer(broker) as p:
        p.send(t, b"good", partition=0).result(10)
        p.send(t, b"A" * 64, partition=0).result(10)
    # Flip a byte inside the second batch's value on disk: the broker serves segment bytes
    # as they are (sendfile), so the consumer's CRC check is what catches it.
    seg = os.path.join(broker.data_dir, f"{t}-0", "00000000000000000000.log")
    data = bytearray(open(seg, "rb").read())
    pos = data.rindex(b"A" * 64)
    data[pos + 10] ^= 0xFF
    with open(seg, "r+b") as f:
        f.seek(pos + 10)
        f.write(bytes([data[pos + 10]]))
    with _consumer(broker) as c:
        c.assign([(t, 0)])
        got = []
        with pytest.raises(CorruptRecordBatchError) as info:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                got += c.poll(0.5)
        assert f"{t}-0" in str(info.value) and "offset 1" in str(info.value)
        assert [r.value for r in got] == [b"good"]
    with _consumer(broker, **{"check.crcs": False}) as c:
        c.assign([(t, 0)])
        assert len(_poll_all(c, 2)) == 2


def test_confluent_written_records_read_by_our_consumer(broker):
    ck = pytest.importorskip("confluent_kafka")
    t = _topic("fromck")
    p = ck.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1, "compression.type": "snappy"})
    for i in range(200):
        p.produce(t, b"v%d" % i, key=b"k%d" % i, partition=0, headers=[("i", b"%d" % i)], timestamp=5000 + i)
    assert p.flush(10) == 0
    with _consumer(broker) as c:
        c.assign([(t, 0)])
        got = _poll_all(c, 200)
    assert [(r.key, r.value, r.headers, r.timestamp_ms) for r in got] == [
        (b"k%d" % i, b"v%d" % i, [("i", b"%d" % i)], 5000 + i) for i in range(200)]


def test_consumer_config_is_checked():
    with pytest.raises(KafkaConfigError, match="auto.offset.reset"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "auto.offset.reset": "smallest"})
    with pytest.raises(KafkaConfigError, match="fetch.min.byte"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "fetch.min.byte": 1})
    with pytest.raises(KafkaConfigError, match="bootstrap.servers"):
        Consumer({"group.id": "g"})
    with pytest.raises(KafkaConfigError, match="heartbeat.interval.ms"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "session.timeout.ms": 3000, "heartbeat.interval.ms": 3000})


def test_socket_buffer_sizes_are_set_on_the_clients_connections(broker):
    # send.buffer.bytes / receive.buffer.bytes become SO_SNDBUF / SO_RCVBUF (Linux reports
    # twice the value set, its own bookkeeping included); -1, the default, leaves the kernel's
    import socket

    from kafkacore.client.config import consumer_config, producer_config

    assert producer_config({"bootstrap.servers": "x:1"})["receive.buffer.bytes"] == -1
    assert consumer_config({"bootstrap.servers": "x:1"})["send.buffer.bytes"] == -1
    t = _topic("sockbuf")
    sizes = {"send.buffer.bytes": 50000, "receive.buffer.bytes": 100000}
    with _producer(broker, **sizes) as p:
        p.send_many(t, [b"%d" % i for i in range(100)], partition=0).result(10)
        conns = [c for c in p._sender.connections.values() if not c.closed]
        assert conns, "the producer holds no connection after sending"
        for conn in conns:
            assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 100000
            assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 200000
    with _consumer(broker, **sizes) as c:
        c.assign([(t, 0, 0)])
        assert len(_poll_all(c, 100)) == 100
        conns = [conn for conn in c._fetcher.connections.values() if not conn.closed]
        assert conns, "the consumer's fetcher holds no connection after fetching"
        for conn in conns:
            assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) == 100000
            assert conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) == 200000
    with pytest.raises(KafkaConfigError, match="receive.buffer.bytes"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "receive.buffer.bytes": -2})


def test_fetch_min_bytes_makes_the_broker_wait_up_to_fetch_max_wait_ms(broker):
    t = _topic("minbytes")
    with _producer(broker) as p:
        p.send(t, b"one small record", partition=0).result(10)
    # 1 MiB minimum: the broker holds each Fetch for fetch.max.wait.ms before answering with
    # the little there is, so the record cannot arrive sooner than that after assignment
    with _consumer(broker, **{"fetch.min.bytes": 1 << 20, "fetch.max.wait.ms": 600}) as c:
        t0 = time.monotonic()
        c.assign([(t, 0)])
        got = _poll_all(c, 1)
        waited = time.monotonic() - t0
    assert [r.value for r in got] == [b"one small record"]
    assert waited >= 0.5, f"the record came after {waited:.3f} s, before fetch.max.wait.ms"


def test_tiny_fetch_limits_still_make_progress_and_read_committed_reads_everything(broker):
    t = _topic("limits")
    values = [b"%05d" % i + b"x" * 2000 for i in range(300)]
    with _producer(broker, **{"batch.size": 16384}) as p:
        p.send_many(t, values, partition=0).result(20)
    # limits below one batch: Kafka still returns the first batch whole, so reading never stalls
    conf = {"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 1024, "isolation.level": "read_committed"}
    with _consumer(broker, **conf) as c:
        c.assign([(t, 0)])
        got = _poll_all(c, 300, timeout=60)
    assert [r.value for r in got] == values


def test_consumer_carries_on_across_a_broker_restart(tmp_path):
    """The fetch in flight when the broker goes away is released, so the consumer fetches
    again from the restarted broker (a lost connection once left its partitions stuck)."""
    with BrokerProcess(tmp_path / "data", {"num.partitions": "2"}) as b:
        t = _topic("restart")
        with _producer(b) as p:
            p.send_many(t, [b"a%d" % i for i in range(100)], partition=0).result(10)
        with _consumer(b, **{"fetch.max.wait.ms": 200}) as c:
            c.assign([(t, 0), (t, 1)])
            first = _poll_all(c, 100)
            assert [r.value for r in first] == [b"a%d" % i for i in range(100)]
            c.poll(0.3)  # a long-poll Fetch is now in flight
            b.restart()
            with _producer(b) as p:
                p.send_many(t, [b"b%d" % i for i in range(50)], partition=1).result(20)
            again = _poll_all(c, 50, timeout=30)
    assert [r.value for r in again] == [b"b%d" % i for i in range(50)]


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_fetched_aborted_transactions_reach_the_decoders(isolation):
    """No broker serves aborted lists yet (issue 15 step 7): a Fetch response is handed to the
    fetcher by hand. Under read_committed it keeps the partition's aborted_transactions with
    the buffered data and both poll paths drop those transactions; under read_uncommitted
    the list is ignored, as the Java client does."""
    import threading
    from types import SimpleNamespace

    from _kcutil import interleaved_txns
    from kafkacore.client.consumer import Consumer
    from kafkacore.client.fetcher import Fetcher, TopicPartitionState
    from kafkacore.protocol.messages.fetch_response import AbortedTransaction, PartitionData

    buf, aborted, kept = interleaved_txns("lz4")
    everything = [o for o in range(19) if o not in (6, 11, 12, 17)]
    config = {"fetch.max.wait.ms": 500, "fetch.min.bytes": 1, "fetch.max.bytes": 1 << 20,
              "max.partition.fetch.bytes": 1 << 20, "isolation.level": isolation, "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000,
              "client.rack": "", "metadata.max.age.ms": 300000}
    for arrow in (False, True):
        lock = threading.Lock()
        st = TopicPartitionState()
        st.position = st.fetch_position = 0
        st.in_flight = True
        fetcher = Fetcher(config, cluster=None, states={("t", 0): st}, lock=lock,
                          data_ready=threading.Condition(lock))
        try:
            part = PartitionData(partition_index=0, high_watermark=19, last_stable_offset=19, log_start_offset=0,
                                 aborted_transactions=[AbortedTransaction(producer_id=p, first_offset=f)
                                                       for p, f in aborted], records=memoryview(buf))
            fetcher._handle([(("t", 0), 0, st.version)],
                            SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[part])]))
        finally:
            fetcher._wake.close()
        (data,) = st.buffered
        assert data.next_offset == 19
        assert (data.aborted is not None) == (isolation == "read_committed")
        consumer = SimpleNamespace(_check_crcs=True, _lock=lock)
        count, chunk, new_pos, exhausted = Consumer._decode(consumer, ("t", 0), st, data, 1000, arrow)
        got = chunk.column("offset").to_pylist() if arrow else [r.offset for r in chunk]
        assert got == (kept if isolation == "read_committed" else everything)
        assert (count, new_pos, exhausted) == (len(got), 19, True)
