"""The broker's network layer, produce, fetch and list offsets, against a real
``kafkacore serve`` process: framing and limits, pipelining, version negotiation, long-poll
wake-ups, sendfile, idempotence across restarts, clean shutdown, bad configuration."""
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _kcutil import peer_has_read, wait_for
from broker_client import ROOT, BrokerProcess, KafkaConnection, auto_create, free_port, request
from kafkacore.protocol.frames import RequestHeader, encode_request
from kafkacore.protocol.messages.api_versions_response import ApiVersionsResponse
from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkacore.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from kafkacore.protocol.messages.metadata_request import MetadataRequestTopic
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.protocol.wire import Reader
from kafkacore.record import RecordBatchBuilder, iter_batches

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS, INIT_PID = 0, 1, 2, 3, 18, 22


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("broker") / "data",
                       settings={"socket.request.max.bytes": str(2 << 20), "num.partitions": "2"}) as b:
        yield b


def batch(values, key=None, ts=1_700_000_000_000, compression="none", pid=-1, epoch=-1, seq=-1):
    b = RecordBatchBuilder(compression, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i, v in enumerate(values):
        b.append(v, key=key, timestamp_ms=ts + i)
    return b.build()


def create(conn, topic, version=12):
    return auto_create(conn, topic, version)


def produce(conn, topic, partition, records, acks=-1, version=9):
    body = request(PRODUCE, acks=acks, timeout_ms=5000, topic_data=[
        TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])])
    if acks == 0:
        conn.send(PRODUCE, version, body)
        return None
    return conn.call(PRODUCE, version, body).responses[0].partition_responses[0]


def fetch_body(topic, partition, offset, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20,
               partition_max_bytes=10 << 20, topic_id=None):
    return request(FETCH, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, topics=[
        FetchTopic(topic=topic, topic_id=topic_id or b"\0" * 16, partitions=[
            FetchPartition(partition=partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])])


def fetch(conn, topic, partition, offset, version=12, **kw):
    resp = conn.call(FETCH, version, fetch_body(topic, partition, offset, **kw))
    assert resp.error_code == 0
    return resp.responses[0].partitions[0]


def values_of(records):
    return [r.value for b in iter_batches(bytes(records or b"")) for r in b]


def alive(b):
    with b.client() as c:
        resp = c.call(API_VERSIONS, 3, request(API_VERSIONS, client_software_name="t", client_software_version="1"))
        return resp.error_code == 0


# -- version negotiation ----------------------------------------------------------------------
def test_api_versions_every_version_and_the_advertised_ranges(broker):
    with broker.client() as c:
        for v in range(0, 5):
            body = request(API_VERSIONS, client_software_name="t", client_software_version="1")
            resp = c.call(API_VERSIONS, v, body)
            assert resp.error_code == 0
            ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            assert ranges[PRODUCE] == (0, 11)  # advertised from 0 for librdkafka's compression check
            assert ranges[FETCH] == (4, 17) and ranges[API_VERSIONS] == (0, 4) and ranges[METADATA] == (0, 12)


def test_api_versions_above_4_is_answered_in_v0_with_unsupported_version(broker):
    with broker.client() as c:
        c.send_raw(struct.pack(">ihhih", 10, API_VERSIONS, 9, 77, -1))
        frame = c.read_frame()
        r = Reader(frame)
        assert r.int32() == 77
        resp = ApiVersionsResponse.read(r, 0)
        assert resp.error_code == 35
        assert any(k.api_key == API_VERSIONS and k.max_version == 4 for k in resp.api_keys)


def test_produce_v0_to_v2_are_refused_with_unsupported_version(broker):
    with broker.client() as c:
        create(c, "old-produce")
        for v in (0, 1, 2):
            body = request(PRODUCE, acks=1, timeout_ms=1000, topic_data=[TopicProduceData(
                name="old-produce", partition_data=[PartitionProduceData(index=0, records=b"")])])
            resp = c.call(PRODUCE, v, body)
            assert resp.responses[0].partition_responses[0].error_code == 35


@pytest.mark.parametrize("api_key, version, name", [
    (9999 & 0x7FFF, 0, "unknown"), (FETCH, 99, "Fetch"), (METADATA, 40, "Metadata"),
    (57, 0, "UpdateFeatures"), (52, 0, "Vote")])
def test_an_api_or_version_not_served_closes_the_connection_as_kafka_does(broker, api_key, version, name):
    """Kafka's SocketServer rejects a request header whose API or version is not enabled and
    closes the connection; the broker answered with a 6-byte frame (correlation id, error 35)
    that no client could parse (kafka-go: "unexpected EOF")."""
    with broker.client() as c:
        c.send_raw(struct.pack(">ihhih", 10, api_key, version, 5, -1))
        assert c.is_closed_by_peer()
    assert alive(broker)
    assert f"api key {api_key} ({name}) version {version} is not enabled on this broker" in broker.output()
    with broker.client() as c:
        assert c.call(METADATA, 1, request(METADATA, topics=[])).topics == []


# -- framing and limits -------------------------------------------------------------------------
def test_oversize_frame_closes_only_that_connection(broker):
    with broker.client() as c:
        c.send_raw(struct.pack(">i", (2 << 20) + 1))
        assert c.is_closed_by_peer()
    assert alive(broker)
    assert "socket.request.max.bytes" in broker.output()


@pytest.mark.parametrize("junk", [
    b"\xff\xff\xff\xff", struct.pack(">i", 3) + b"abc", struct.pack(">i", 12) + b"\x00\x03\x00\x05" + b"\x00" * 8,
    # junk, the same in every process (pytest-xdist's workers must collect the same test ids)
    struct.pack(">ihhih", 10, METADATA, 9, 1, 50) + b"", random.Random(64).randbytes(64)])
def test_malformed_frames_close_the_connection_and_the_broker_lives(broker, junk):
    with broker.client() as c:
        c.send_raw(junk)
        c.sock.shutdown(socket.SHUT_WR) if junk[:4] != b"\xff\xff\xff\xff" else None
        assert c.is_closed_by_peer()
    assert alive(broker)


def test_a_large_frame_arrives_in_pieces(broker):
    with broker.client() as c:
        create(c, "large-frame")
        values = [os.urandom(1000) for _ in range(700)]  # ~700 KiB: larger than the read buffer
        frame = encode_request(RequestHeader(PRODUCE, 9, 1, "t"), request(PRODUCE, acks=1, timeout_ms=1000, topic_data=[
            TopicProduceData(name="large-frame", partition_data=[PartitionProduceData(index=0, records=batch(values))])]))
        c.inflight[1] = (PRODUCE, 9)
        for i in range(0, len(frame), 65521):
            c.send_raw(frame[i:i + 65521])
            time.sleep(0.002)  # not ordering: the broker reads the frame in several pieces
        resp = c.receive(1)
        assert resp.responses[0].partition_responses[0].error_code == 0
        assert values_of(fetch(c, "large-frame", 0, 0).records) == values


def test_a_stalled_request_and_an_idle_connection_are_closed(tmp_path):
    """A client that announces a frame and stops sending is dropped after request.timeout.ms
    (it would otherwise hold a buffer of the announced size); a connection with nothing going
    on is dropped after connections.max.idle.ms; one that keeps talking stays."""
    settings = {"request.timeout.ms": "2000", "connections.max.idle.ms": "5000"}
    with BrokerProcess(tmp_path / "data", settings=settings) as b:
        with b.client() as big, b.client() as small, b.client() as idle, b.client() as busy:
            started = time.monotonic()
            big.send_raw(struct.pack(">i", 1 << 20) + b"x" * 100)  # 1 MiB announced, 100 bytes sent
            small.send_raw(struct.pack(">i", 40) + b"\x00\x12")  # an ApiVersions cut short
            assert big.is_closed_by_peer(timeout=10) and small.is_closed_by_peer(timeout=10)
            stalled_after = time.monotonic() - started
            assert 1.5 < stalled_after < 8, stalled_after
            for _ in range(7):  # traffic every second: never idle
                assert busy.call(API_VERSIONS, 3, request(API_VERSIONS, client_software_name="t",
                                                          client_software_version="1")).error_code == 0
                time.sleep(1)
            assert idle.is_closed_by_peer(timeout=5)
            assert 4.5 < time.monotonic() - started < 13
            assert alive(b)
        log_text = b.output()
        assert "a request stalled for" in log_text and "after 100 bytes of 1048576" in log_text
        assert "connections.max.idle.ms" in log_text


# -- pipelining and long polls ------------------------------------------------------------------
def test_pipelined_responses_come_back_in_request_order_and_a_long_poll_blocks_only_its_connection(broker):
    with broker.client() as c, broker.client() as other:
        create(c, "pipeline")
        t0 = time.monotonic()
        cid_fetch = c.send(FETCH, 12, fetch_body("pipeline", 0, 0, max_wait_ms=1500, min_bytes=1))
        cid_meta = c.send(METADATA, 12, request(METADATA, topics=None))
        # another connection is served at once
        assert other.call(METADATA, 12, request(METADATA, topics=None)).topics
        assert time.monotonic() - t0 < 1.0
        first = c.read_frame()
        second = c.read_frame()
        waited = time.monotonic() - t0
        assert struct.unpack_from(">i", first)[0] == cid_fetch
        assert struct.unpack_from(">i", second)[0] == cid_meta
        assert 1.4 <= waited < 5


def test_long_poll_is_woken_by_an_append(broker):
    with broker.client() as c, broker.client() as p:
        create(c, "wakeup")
        result = {}

        def poll():
            t = time.monotonic()
            result["part"] = fetch(c, "wakeup", 0, 0, max_wait_ms=10000, min_bytes=1)
            result["took"] = time.monotonic() - t
        th = threading.Thread(target=poll)
        th.start()
        # the Fetch is sent and the broker has taken it: the long poll is parked
        wait_for(lambda: c.inflight and peer_has_read(c.sock), "the broker to take the long poll", 10, 0.005)
        produce(p, "wakeup", 0, batch([b"hello"]))
        th.join(15)
        assert values_of(result["part"].records) == [b"hello"]
        assert result["took"] < 1.5  # answered on the append, far before the 10 s wait


def test_min_bytes_waits_for_enough_data(broker):
    with broker.client() as c, broker.client() as p:
        create(c, "minbytes")
        produce(p, "minbytes", 0, batch([b"x" * 10]))
        t = time.monotonic()
        part = fetch(c, "minbytes", 0, 0, max_wait_ms=600, min_bytes=10_000)
        assert time.monotonic() - t >= 0.55  # not enough data: waited the whole max_wait
        assert values_of(part.records) == [b"x" * 10]


# -- produce ------------------------------------------------------------------------------------
def test_produce_acks_and_errors(broker):
    with broker.client() as c:
        create(c, "acks")
        r1 = produce(c, "acks", 0, batch([b"a", b"b"]), acks=1)
        assert (r1.error_code, r1.base_offset, r1.log_start_offset) == (0, 0, 0)
        produce(c, "acks", 0, batch([b"c"]), acks=0)  # no response at all
        r2 = produce(c, "acks", 0, batch([b"d"]), acks=-1)
        assert (r2.error_code, r2.base_offset) == (0, 3)  # the acks=0 batch landed at 2
        assert produce(c, "acks", 0, batch([b"e"]), acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
        assert produce(c, "no-such-topic", 0, batch([b"e"])).error_code == 3
        assert produce(c, "acks", 7, batch([b"e"])).error_code == 3
        two = batch([b"f"]) + batch([b"g"])
        assert produce(c, "acks", 0, two).error_code == 87  # INVALID_RECORD: one batch per partition
        bad = bytearray(batch([b"h"]))
        bad[-1] ^= 0xFF
        assert produce(c, "acks", 0, bytes(bad)).error_code == 2  # CORRUPT_MESSAGE
        big = batch([os.urandom(1_100_000)])
        assert produce(c, "acks", 0, big).error_code in (10, 18)  # MESSAGE_TOO_LARGE
        assert produce(c, "__consumer_offsets", 0, batch([b"x"])).error_code == 17
        assert values_of(fetch(c, "acks", 0, 0).records) == [b"a", b"b", b"c", b"d"]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produced_batches_are_fetched_back_byte_for_byte_but_for_offsets(broker, codec):
    with broker.client() as c:
        topic = f"codec-{codec}"
        create(c, topic)
        sent = [batch([b"v%d" % i for i in range(50)], key=b"k", compression=codec) for _ in range(3)]
        for i, b in enumerate(sent):
            assert produce(c, topic, 1, b).base_offset == 50 * i
        got = list(iter_batches(bytes(fetch(c, topic, 1, 0).records)))
        assert [g.base_offset for g in got] == [0, 50, 100]
        for g, b in zip(got, sent):
            g.validate()
            assert g.to_bytes()[12:] != b""
            assert g.to_bytes()[61:] == b[61:] and g.compression == codec


# -- fetch -------------------------------------------------------------------------------------
def test_fetch_offsets_watermarks_limits_and_topic_ids(broker):
    with broker.client() as c:
        meta = create(c, "fetchy")
        for i in range(20):
            produce(c, "fetchy", 0, batch([os.urandom(900) for _ in range(10)]))  # ~9 KiB batches
        part = fetch(c, "fetchy", 0, 0, partition_max_bytes=30_000)
        assert (part.high_watermark, part.last_stable_offset, part.log_start_offset) == (200, 200, 0)
        got = list(iter_batches(bytes(part.records)))
        assert 1 <= len(got) <= 4 and got[0].base_offset == 0
        # a limit below one batch still returns the first batch whole (KIP-74)
        small = fetch(c, "fetchy", 0, 55, partition_max_bytes=10)
        assert [b.base_offset for b in iter_batches(bytes(small.records))] == [50]
        assert fetch(c, "fetchy", 0, 200).records in (b"", None) or len(fetch(c, "fetchy", 0, 200).records) == 0
        assert fetch(c, "fetchy", 0, 201).error_code == 1  # OFFSET_OUT_OF_RANGE
        assert fetch(c, "fetchy", 5, 0).error_code == 3
        # v13+ names topics by id
        by_id = fetch(c, "", 0, 100, version=16, topic_id=meta.topic_id)
        assert by_id.error_code == 0 and next(iter_batches(bytes(by_id.records))).base_offset == 100
        assert fetch(c, "", 0, 0, version=16, topic_id=b"\x01" * 16).error_code == 100  # UNKNOWN_TOPIC_ID
        # a client that thinks it has a fetch session is told to start over
        body = fetch_body("fetchy", 0, 0)
        body.session_id, body.session_epoch = 1234, 5
        assert c.call(FETCH, 12, body).error_code == 70


def test_large_fetch_through_sendfile_matches_the_log(broker):
    with broker.client() as c:
        create(c, "bigfetch")
        values = [os.urandom(100_000) for _ in range(30)]
        for i in range(0, 30, 5):
            assert produce(c, "bigfetch", 0, batch(values[i:i + 5])).error_code == 0
        part = fetch(c, "bigfetch", 0, 0, partition_max_bytes=8 << 20)
        assert len(part.records) > 2_900_000
        assert values_of(part.records) == values
        with open(os.path.join(broker.data_dir, "bigfetch-0", "00000000000000000000.log"), "rb") as f:
            assert bytes(part.records) == f.read()


def test_list_offsets_earliest_latest_timestamp_and_max(broker):
    with broker.client() as c:
        create(c, "listoff")
        produce(c, "listoff", 0, batch([b"a", b"b", b"c"], ts=1000))  # ts 1000..1002
        produce(c, "listoff", 0, batch([b"d"], ts=5000))
        produce(c, "listoff", 0, batch([b"e"], ts=3000))

        def lookup(ts, version=7):
            resp = c.call(LIST_OFFSETS, version, request(LIST_OFFSETS, replica_id=-1, topics=[ListOffsetsTopic(
                name="listoff", partitions=[ListOffsetsPartition(partition_index=0, timestamp=ts)])]))
            p = resp.topics[0].partitions[0]
            return p.error_code, p.offset, p.timestamp
        assert lookup(-2) == (0, 0, -1)
        assert lookup(-1) == (0, 5, -1)
        assert lookup(1001) == (0, 1, 1001)
        assert lookup(2500) == (0, 3, 5000)
        assert lookup(6000) == (0, -1, -1)
        assert lookup(-3) == (0, 3, 5000)
        v0 = c.call(LIST_OFFSETS, 0, request(LIST_OFFSETS, replica_id=-1, topics=[ListOffsetsTopic(
            name="listoff", partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1, max_num_offsets=1)])]))
        assert v0.topics[0].partitions[0].old_style_offsets == [5]


# -- idempotence --------------------------------------------------------------------------------
def _init_pid(c):
    resp = c.call(INIT_PID, 4, request(INIT_PID, transactional_id=None, transaction_timeout_ms=60000))
    assert resp.error_code == 0
    return resp.producer_id, resp.producer_epoch


def test_idempotent_retries_are_written_once_and_sequences_are_checked_across_restarts(tmp_path):
    with BrokerProcess(tmp_path / "data") as b:
        with b.client() as c:
            create(c, "idem")
            pid, epoch = _init_pid(c)
            seq = 0
            for i in range(5):
                r = produce(c, "idem", 0, batch([b"%d-%d" % (i, j) for j in range(4)], pid=pid, epoch=epoch, seq=seq))
                assert (r.error_code, r.base_offset) == (0, 4 * i)
                seq += 4
            # a retry of each of the last five batches: acknowledged with the original offset, not written
            for i in range(5):
                r = produce(c, "idem", 0, batch([b"%d-%d" % (i, j) for j in range(4)], pid=pid, epoch=epoch, seq=4 * i))
                assert (r.error_code, r.base_offset) == (0, 4 * i)
            assert produce(c, "idem", 0, batch([b"gap"], pid=pid, epoch=epoch, seq=seq + 1)).error_code == 45
            assert produce(c, "idem", 0, batch([b"old"], pid=pid, epoch=epoch - 1 if epoch else -2, seq=seq)).error_code \
                in (45, 47)
            assert produce(c, "idem", 0, batch([b"new-epoch"], pid=pid, epoch=epoch + 1, seq=3)).error_code == 45
            # a second producer id never collides
            pid2, _ = _init_pid(c)
            assert pid2 != pid
        b.restart()  # clean: state from the .snapshot written at shutdown
        snaps = [n for n in os.listdir(os.path.join(b.data_dir, "idem-0")) if n.endswith(".snapshot")]
        assert snaps, "no producer snapshot written at shutdown"
        with b.client() as c:
            r = produce(c, "idem", 0, batch([b"4-%d" % j for j in range(4)], pid=pid, epoch=epoch, seq=16))
            assert (r.error_code, r.base_offset) == (0, 16)  # still recognised as a retry
            r = produce(c, "idem", 0, batch([b"next"], pid=pid, epoch=epoch, seq=20))
            assert (r.error_code, r.base_offset) == (0, 20)
            pid3, _ = _init_pid(c)
            assert pid3 not in (pid, pid2)  # ids are not reused after a restart
        b.kill()  # unclean: the batches after the last snapshot are replayed from the log
        b.start()
        with b.client() as c:
            r = produce(c, "idem", 0, batch([b"next"], pid=pid, epoch=epoch, seq=20))
            assert (r.error_code, r.base_offset) == (0, 20)
            assert produce(c, "idem", 0, batch([b"skip"], pid=pid, epoch=epoch, seq=30)).error_code == 45
            values = values_of(fetch(c, "idem", 0, 0).records)
            assert values == [b"%d-%d" % (i, j) for i in range(5) for j in range(4)] + [b"next"]


# -- process lifecycle ----------------------------------------------------------------------------
def test_sigterm_stops_cleanly_and_writes_the_clean_shutdown_marker(tmp_path):
    b = BrokerProcess(tmp_path / "data").start()
    with b.client() as c:
        create(c, "lifecycle")
        produce(c, "lifecycle", 0, batch([b"persist me"]))
    assert b.stop() == 0
    assert os.path.exists(os.path.join(b.data_dir, ".kafka_cleanshutdown"))
    assert "stopped cleanly" in b.output()
    b.start()
    try:
        with b.client() as c:
            assert values_of(fetch(c, "lifecycle", 0, 0).records) == [b"persist me"]
    finally:
        b.stop()


def _serve(args, env=None, timeout=20):
    return subprocess.run([sys.executable, "-m", "kafkacore", "serve", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=str(ROOT), env=env)


@pytest.mark.parametrize("args, needle", [
    (["--set", "num.partitions=zero"], "num.partitions='zero'"),
    (["--set", "log.retention.ms=abc"], "log.retention.ms"),
    (["--set", "no.such.setting=1"], "no.such.setting"),
    (["--set", "message.max.bytes=-5"], "message.max.bytes"),
    (["--set", "replica.selector.class=com.example.MySelector"], "replica.selector.class='com.example.MySelector'"),
])
def test_a_bad_config_value_stops_start_up_naming_key_and_value(tmp_path, args, needle):
    proc = _serve(["--port", str(free_port()), "--data-dir", str(tmp_path), *args])
    assert proc.returncode == 2
    assert needle in proc.stderr and "bad configuration" in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["--port", "99999"], "argument --port: 99999 is not a port number"),
    (["--port", "-1"], "argument --port: -1 is not a port number"),
    (["--port", "ninety"], "argument --port: 'ninety' is not a port number"),
    (["--log-level", "loud"], "argument --log-level"),
    (["--no-such-option"], "unrecognized arguments: --no-such-option"),
    (["--data-dir", "{file}"], "--data-dir {file}: is not a directory"),
    (["--data-dir", "{file}/under/it"], "--data-dir {file}/under/it: {file} is a file, not a directory"),
])
def test_a_bad_argument_is_one_line_naming_it_and_exit_code_2(tmp_path, args, needle):
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory")
    args = [a.format(file=a_file) for a in args]
    proc = _serve(args if "--port" in args else ["--port", str(free_port()), *args])
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle.format(file=a_file) in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert a_file.read_text() == "not a directory"


def test_a_port_in_use_fails_before_the_data_directory_is_touched(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        data = tmp_path / "never-created"
        proc = _serve(["--port", str(port), "--data-dir", str(data)])
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [f"kafkacore: cannot listen on 127.0.0.1:{port}: Address already in use"]
    assert not data.exists()


# root (CI) passes every permission check: the broker runs without the capabilities that let it
NO_DAC_OVERRIDE = ["setpriv", "--inh-caps=-dac_override,-dac_read_search",
                   "--bounding-set=-dac_override,-dac_read_search"]


def _serve_as(prefix, args, timeout=20):
    return subprocess.run([*prefix, sys.executable, "-m", "kafkacore", "serve", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=str(ROOT))


@pytest.mark.parametrize("where", ["the directory", "a directory to create inside it"])
def test_an_unwritable_data_directory_is_one_line(tmp_path, where):
    """Permission denied: one line naming the path, no traceback after it (the lock's __del__
    used to read a descriptor the failed open never set)."""
    if os.geteuid() != 0 and not shutil.which("setpriv"):
        pytest.skip("needs setpriv")
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o500)
    target = data if where == "the directory" else data / "sub"
    try:
        proc = _serve_as(NO_DAC_OVERRIDE if os.geteuid() == 0 else [],
                         ["--port", str(free_port()), "--data-dir", str(target)])
    finally:
        data.chmod(0o700)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [f"kafkacore: cannot start: Permission denied: "
                                                f"{target / '.lock' if target == data else target}"], proc.stderr


def test_a_read_only_data_directory_is_one_line(tmp_path):
    """A read-only file system (a tmpfs mounted read-only in a private mount namespace)."""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare to mount a read-only file system")
    ro = tmp_path / "ro"
    ro.mkdir()
    script = (f'mount -t tmpfs -o ro tmpfs "{ro}" && exec "{sys.executable}" -m kafkacore serve '
              f'--port {free_port()} --data-dir "{ro}"')
    proc = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True, timeout=20,
                          cwd=str(ROOT))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [f"kafkacore: cannot start: Read-only file system: {ro / '.lock'}"]


def test_a_second_broker_on_a_data_directory_in_use_refuses_to_start(broker):
    """Kafka's .lock: the second broker names the directory and the holder and stops; the first
    keeps every acknowledged record (before the lock both acked writes at the same offsets)."""
    with broker.client() as c:
        create(c, "locked")
        produce(c, "locked", 0, batch([b"first"]))
    proc = _serve(["--port", str(free_port()), "--data-dir", broker.data_dir])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"kafkacore: cannot start: data directory {os.path.abspath(broker.data_dir)} is in use by process "
        f"{broker.proc.pid} on {socket.gethostname()} ({os.path.abspath(broker.data_dir)}/.lock is locked); "
        "stop that broker or choose another data directory"]
    with broker.client() as c:
        produce(c, "locked", 0, batch([b"second"]))
        assert values_of(fetch(c, "locked", 0, 0).records) == [b"first", b"second"]


def test_config_file_uses_kafka_property_names(tmp_path):
    port = free_port()
    props = tmp_path / "server.properties"
    props.write_text(f"# a Kafka-style file\nlisteners=PLAINTEXT://127.0.0.1:{port}\nlog.dirs={tmp_path / 'd'}\n"
                     "num.partitions=4\nauto.create.topics.enable=true\nnum.network.threads=3\n"
                     "metric.reporters=\nmetrics.num.samples=2\n")
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--config", str(props)], cwd=str(ROOT),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        assert f"listening on 127.0.0.1:{port}" in line and str(tmp_path / "d") in line
        with KafkaConnection("127.0.0.1", port) as c:
            assert len(create(c, "four").partitions) == 4
    finally:
        proc.terminate()
        proc.wait(20)
    assert proc.returncode == 0


def test_no_options_serves_the_embedded_default_data_directory(tmp_path):
    env = dict(os.environ, XDG_DATA_HOME=str(tmp_path / "xdg"))
    env.pop("KAFKACORE_DATA_DIR", None)
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--port", str(port)], cwd=str(ROOT), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = proc.stdout.readline()
        expected = str(tmp_path / "xdg" / "kafkacore" / "data")
        assert expected in line
        assert os.path.exists(os.path.join(expected, "meta.properties"))
    finally:
        proc.send_signal(2)  # SIGINT stops it cleanly too
        proc.wait(20)
    assert proc.returncode == 0


# -- fuzzing the live request path ----------------------------------------------------------------
_API_KEYS = [0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 32, 33, 37, 42, 44, 47, 60]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(api_key=st.sampled_from(_API_KEYS), version=st.integers(-1, 20), body=st.binary(max_size=300))
def test_random_request_bodies_never_take_the_broker_down(broker, api_key, version, body):
    frame = struct.pack(">hhih", api_key, version, 1, 1) + b"t" + body
    with broker.client(timeout=5) as c:
        c.send_raw(struct.pack(">i", len(frame)) + frame)
        c.sock.settimeout(0.3)
        try:
            c.sock.recv(65536)  # a response, the connection closed, or a request still waiting
        except (ConnectionResetError, socket.timeout):
            pass
    assert broker.proc.poll() is None, broker.output()[-3000:]


def test_the_broker_still_serves_after_the_fuzzing(broker):
    assert alive(broker)
    assert "Traceback" not in broker.output(), broker.output()[-3000:]


@pytest.mark.parametrize("damage, needle", [
    ("broker/handlers/list_groups.py", "kafkacore.broker.handlers.list_groups failed to import"),
    ("coordinator/group_coordinator.py", "group_coordinator.py"),
])
def test_a_broken_install_stops_the_broker_loudly(tmp_path, damage, needle):
    """A handler or coordinator module that fails to import must stop the broker: skipping it
    silently dropped an API from ApiVersions (or the group coordinator) while serving."""
    import shutil

    import kafkacore

    copy = tmp_path / "site"
    shutil.copytree(os.path.dirname(kafkacore.__file__), copy / "kafkacore",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "kafkacore" / damage, "a") as f:
        f.write("\nthis line is a typo\n")
    env = dict(os.environ, PYTHONPATH=str(copy))
    proc = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--port", "0", "--data-dir",
                           str(tmp_path / "data")], capture_output=True, text=True, timeout=60, cwd=str(tmp_path),
                          env=env)
    assert proc.returncode != 0 and "listening on" not in proc.stdout, proc.stdout
    assert needle in proc.stderr and "SyntaxError" in proc.stderr, proc.stderr[-2000:]


def test_auto_creation_answers_leader_not_available_first_as_kafka_does(broker):
    """Kafka's Metadata answers the request that auto-creates a topic with LEADER_NOT_AVAILABLE
    and no partitions; the retry sees it. kafka-go's TestConn deletes a topic and expects
    exactly this from the next auto-creating Metadata request (kafkacore used to return the
    new partitions at once)."""
    with broker.client() as c:
        def meta(name):
            return c.call(METADATA, 12, request(METADATA, topics=[MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=True)).topics[0]

        first = meta("lazy")
        assert (first.error_code, first.partitions) == (5, [])
        # a client retries after its backoff; the controller has given the partitions leaders
        again = wait_for(lambda: (lambda t: t.error_code == 0 and t)(meta("lazy")), "the auto-created topic's leaders")
        assert len(again.partitions) == 2
        resp = c.call(20, 4, request(20, topic_names=["lazy"], timeout_ms=5000))  # DeleteTopics
        assert resp.responses[0].error_code == 0
        recreated = meta("lazy")
        assert (recreated.error_code, recreated.partitions) == (5, [])
        wait_for(lambda: meta("lazy").error_code == 0, "the re-created topic's leaders")


def test_port_0_takes_a_free_port_and_advertises_the_one_bound(tmp_path):
    """`serve --port 0`: Metadata names the port the broker listens on, not 0 (Kafka registers
    the bound port), so a client that reconnects to what the broker advertises reaches it."""
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", "--host", "127.0.0.1", "--port", "0",
                             "--data-dir", str(tmp_path / "data")], cwd=str(ROOT), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "listening on" not in line and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line or proc.poll() is None, "the broker exited before listening"
        port = int(line.split("listening on 127.0.0.1:")[1].split()[0])
        assert port != 0 and "advertised as PLAINTEXT://127.0.0.1:%d" % port in line
        with KafkaConnection("127.0.0.1", port) as conn:
            resp = conn.call(3, 12, request(3, topics=None))
        assert [(b.host, b.port) for b in resp.brokers] == [("127.0.0.1", port)]
    finally:
        proc.terminate()
        proc.wait(30)
