"""The transaction coordinator on the wire, against a real ``kafkacore serve`` process
(docs/transactions.md §3): FindCoordinator with key type 1, InitProducerId with a transactional
id (new ids, epoch bumps, KIP-360, fencing), AddPartitionsToTxn / AddOffsetsToTxn, EndTxn with
the markers it writes, DescribeTransactions / ListTransactions, hung transactions aborted after
their timeout, and the state kept in __transaction_state across a restart (Kafka's format)."""
import struct
import time

import pytest

from broker_client import BrokerProcess, auto_create, find_coordinators, request
from kafkacore.coordinator.transaction_log import partition_for_transactional_id
from kafkacore.protocol.messages.add_partitions_to_txn_request import (AddPartitionsToTxnTopic,
                                                                        AddPartitionsToTxnTransaction)
from kafkacore.record import iter_batches

FIND_COORDINATOR, INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 10, 22, 24, 25, 26
DESCRIBE_TXNS, LIST_TXNS = 65, 66
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REQUEST = 0, 3, 42
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS, OPERATION_NOT_ATTEMPTED = 50, 51, 55
PRODUCER_FENCED, TRANSACTIONAL_ID_NOT_FOUND = 90, 105


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data", settings={
        "transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "4", "num.partitions": "3",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    b.start()
    with b.client() as c:
        for t in ("tx-a", "tx-b"):
            auto_create(c, t)
        find_coordinators(c)  # as a client does first; the tests then talk to the coordinators
    yield b
    b.stop()


def init_pid(c, txn_id, timeout_ms=60000, pid=-1, epoch=-1, v=4):
    r = c.call(INIT_PID, v, request(INIT_PID, transactional_id=txn_id, transaction_timeout_ms=timeout_ms,
                                    producer_id=pid, producer_epoch=epoch))
    return r.error_code, r.producer_id, r.producer_epoch


def add_partitions(c, txn_id, pid, epoch, parts, v=3):
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    body = request(ADD_PARTITIONS, v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                   v3_and_below_producer_epoch=epoch,
                   v3_and_below_topics=[AddPartitionsToTxnTopic(name=t, partitions=ps) for t, ps in topics.items()])
    r = c.call(ADD_PARTITIONS, v, body)
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end_txn(c, txn_id, pid, epoch, commit, v=3):
    return c.call(END_TXN, v, request(END_TXN, transactional_id=txn_id, producer_id=pid, producer_epoch=epoch,
                                      committed=commit)).error_code


def describe(c, txn_id):
    return c.call(DESCRIBE_TXNS, 0, request(DESCRIBE_TXNS, transactional_ids=[txn_id])).transaction_states[0]


def wait_state(c, txn_id, state, timeout=10):
    deadline = time.monotonic() + timeout
    while True:
        d = describe(c, txn_id)
        if d.transaction_state == state or time.monotonic() > deadline:
            assert d.transaction_state == state, d
            return d
        time.sleep(0.05)


# -- InitProducerId and FindCoordinator ----------------------------------------------------------
def test_find_coordinator_for_a_transactional_id_names_this_node(broker):
    with broker.client() as c:
        for v in (1, 2, 3):
            r = c.call(FIND_COORDINATOR, v, request(FIND_COORDINATOR, key="any-txn", key_type=1))
            assert (r.error_code, r.node_id, r.port) == (NONE, 1, broker.port)
        r = c.call(FIND_COORDINATOR, 4, request(FIND_COORDINATOR, key_type=1, coordinator_keys=["", "t"]))
        assert [x.error_code for x in r.coordinators] == [INVALID_REQUEST, NONE]


def test_init_producer_id_gives_an_id_and_bumps_its_epoch_each_time(broker):
    with broker.client() as c:
        code, pid, epoch = init_pid(c, "init-1")
        assert code == NONE and pid >= 0 and epoch == 0
        assert init_pid(c, "init-1") == (NONE, pid, 1)  # a restarted producer: same id, next epoch
        assert init_pid(c, "init-1", v=0)[0] == NONE
        other = init_pid(c, "init-2")
        assert other[0] == NONE and other[1] != pid
        # KIP-360 (v3+): the current epoch bumps; the previous one is a lost answer's retry
        assert init_pid(c, "init-1", pid=pid, epoch=2) == (NONE, pid, 3)
        assert init_pid(c, "init-1", pid=pid, epoch=2) == (NONE, pid, 3)
        assert init_pid(c, "init-1", pid=pid, epoch=1)[0] == PRODUCER_FENCED
        assert init_pid(c, "init-1", pid=pid, epoch=1, v=3)[0] == INVALID_PRODUCER_EPOCH  # before v4
        assert init_pid(c, "init-1", pid=other[1], epoch=0)[0] == PRODUCER_FENCED  # another id


@pytest.mark.parametrize("txn_id,timeout_ms,pid,epoch,code", [
    ("", 60000, -1, -1, INVALID_REQUEST),
    ("bad-timeout", 0, -1, -1, INVALID_TRANSACTION_TIMEOUT),
    ("bad-timeout", 900001, -1, -1, INVALID_TRANSACTION_TIMEOUT),
    ("half-named", 60000, 5, -1, INVALID_REQUEST),
])
def test_init_producer_id_refuses_bad_requests(broker, txn_id, timeout_ms, pid, epoch, code):
    with broker.client() as c:
        assert init_pid(c, txn_id, timeout_ms, pid, epoch)[0] == code


# -- a transaction's partitions -----------------------------------------------------------------
def test_add_partitions_checks_the_producer_and_the_partitions(broker):
    with broker.client() as c:
        _code, pid, epoch = init_pid(c, "add-1")
        assert add_partitions(c, "add-1", pid, epoch, [("tx-a", 0), ("nope", 0)]) == {
            ("tx-a", 0): OPERATION_NOT_ATTEMPTED, ("nope", 0): UNKNOWN_TOPIC_OR_PARTITION}
        assert describe(c, "add-1").transaction_state == "Empty"
        assert add_partitions(c, "add-1", pid + 1000, epoch, [("tx-a", 0)]) == {("tx-a", 0): INVALID_PRODUCER_ID_MAPPING}
        assert add_partitions(c, "add-1", pid, epoch + 1, [("tx-a", 0)]) == {("tx-a", 0): PRODUCER_FENCED}
        assert add_partitions(c, "add-1", pid, epoch + 1, [("tx-a", 0)], v=1) == {("tx-a", 0): INVALID_PRODUCER_EPOCH}
        assert add_partitions(c, "never-initialised", pid, epoch, [("tx-a", 0)]) == {
            ("tx-a", 0): INVALID_PRODUCER_ID_MAPPING}
        assert add_partitions(c, "add-1", pid, epoch, [("tx-a", 0), ("tx-b", 0)]) == {
            ("tx-a", 0): NONE, ("tx-b", 0): NONE}
        d = describe(c, "add-1")
        assert (d.transaction_state, d.producer_id, d.producer_epoch) == ("Ongoing", pid, epoch)
        assert sorted((t.topic, p) for t in d.topics for p in t.partitions) == [("tx-a", 0), ("tx-b", 0)]
        assert d.transaction_start_time_ms > 0
        r = c.call(ADD_OFFSETS, 3, request(ADD_OFFSETS, transactional_id="add-1", producer_id=pid,
                                           producer_epoch=epoch, group_id="grp-1"))
        assert r.error_code == NONE
        d = describe(c, "add-1")
        assert any(t.topic == "__consumer_offsets" for t in d.topics)
        # ending a transaction that is not open
        _c, pid2, epoch2 = init_pid(c, "add-2")
        assert end_txn(c, "add-2", pid2, epoch2, True) == INVALID_TXN_STATE


def test_add_partitions_batched_form_with_verify_only(broker):
    with broker.client() as c:
        _code, pid, epoch = init_pid(c, "verify-1")
        assert add_partitions(c, "verify-1", pid, epoch, [("tx-a", 1)]) == {("tx-a", 1): NONE}
        body = request(ADD_PARTITIONS, transactions=[AddPartitionsToTxnTransaction(
            transactional_id="verify-1", producer_id=pid, producer_epoch=epoch, verify_only=True,
            topics=[AddPartitionsToTxnTopic(name="tx-a", partitions=[1, 2])])])
        for v, unverified in ((4, INVALID_TXN_STATE), (5, 120)):  # TRANSACTION_ABORTABLE from v5
            r = c.call(ADD_PARTITIONS, v, body)
            codes = {(t.name, p.partition_index): p.partition_error_code
                     for t in r.results_by_transaction[0].topic_results for p in t.results_by_partition}
            assert codes == {("tx-a", 1): NONE, ("tx-a", 2): unverified}
        d = describe(c, "verify-1")
        assert sorted(p for t in d.topics for p in t.partitions) == [1]  # verification added nothing


def test_describe_and_list_transactions(broker):
    with broker.client() as c:
        _code, pid, epoch = init_pid(c, "list-1")
        add_partitions(c, "list-1", pid, epoch, [("tx-a", 0)])
        assert describe(c, "unknown-id").error_code == TRANSACTIONAL_ID_NOT_FOUND
        r = c.call(LIST_TXNS, 1, request(LIST_TXNS, state_filters=["Ongoing", "Nonsense"], producer_id_filters=[],
                                         duration_filter=-1))
        assert r.error_code == NONE and r.unknown_state_filters == ["Nonsense"]
        assert ("list-1", pid, "Ongoing") in [(t.transactional_id, t.producer_id, t.transaction_state)
                                              for t in r.transaction_states]
        r = c.call(LIST_TXNS, 0, request(LIST_TXNS, state_filters=[], producer_id_filters=[pid]))
        assert [t.transactional_id for t in r.transaction_states] == ["list-1"]
        r = c.call(LIST_TXNS, 1, request(LIST_TXNS, state_filters=[], producer_id_filters=[pid],
                                         duration_filter=3_600_000))
        assert r.transaction_states == []  # not open for an hour


# -- ending transactions (markers) ----------------------------------------------------------------
def _control_batches(broker, topic, partition):
    import glob
    out = []
    for path in sorted(glob.glob(f"{broker.data_dir}/{topic}-{partition}/*.log")):
        with open(path, "rb") as f:
            out.extend(b for b in iter_batches(f.read()) if b.is_control)
    return out


def test_commit_and_abort_write_markers_and_complete(broker):
    with broker.client() as c:
        _code, pid, epoch = init_pid(c, "end-1")
        assert add_partitions(c, "end-1", pid, epoch, [("tx-b", 0)]) == {("tx-b", 0): NONE}
        assert end_txn(c, "end-1", pid, epoch, True) == NONE
        d = wait_state(c, "end-1", "CompleteCommit")
        assert d.topics == []
        assert end_txn(c, "end-1", pid, epoch, True) == NONE  # a retry of the commit
        assert end_txn(c, "end-1", pid, epoch, False) == INVALID_TXN_STATE
        markers = [b for b in _control_batches(broker, "tx-b", 0) if b.producer_id == pid]
        assert len(markers) == 1 and markers[0].producer_epoch == epoch
        assert add_partitions(c, "end-1", pid, epoch, [("tx-b", 0)]) == {("tx-b", 0): NONE}  # the next one
        assert end_txn(c, "end-1", pid, epoch, False) == NONE
        wait_state(c, "end-1", "CompleteAbort")
        assert end_txn(c, "end-1", pid, epoch, True) == INVALID_TXN_STATE
        assert len([b for b in _control_batches(broker, "tx-b", 0) if b.producer_id == pid]) == 2


def test_a_new_instance_fences_the_old_one_and_aborts_its_transaction(broker):
    with broker.client() as c:
        _code, pid, epoch = init_pid(c, "fence-1")
        add_partitions(c, "fence-1", pid, epoch, [("tx-a", 0)])
        assert init_pid(c, "fence-1")[0] == CONCURRENT_TRANSACTIONS  # the abort starts
        wait_state(c, "fence-1", "CompleteAbort")
        code, pid2, epoch2 = init_pid(c, "fence-1")
        assert (code, pid2) == (NONE, pid) and epoch2 == epoch + 2  # one bump to fence, one for the new instance
        assert end_txn(c, "fence-1", pid, epoch, True) == PRODUCER_FENCED  # the zombie
        assert end_txn(c, "fence-1", pid, epoch, True, v=1) == INVALID_PRODUCER_EPOCH
        marker = [b for b in _control_batches(broker, "tx-a", 0) if b.producer_id == pid][-1]
        assert marker.producer_epoch == epoch + 1


def test_a_hung_transaction_is_aborted_after_its_timeout(broker):
    with broker.client() as c:
        _code, pid, epoch = init_pid(c, "hung-1", timeout_ms=500)
        add_partitions(c, "hung-1", pid, epoch, [("tx-a", 2)])
        d = wait_state(c, "hung-1", "CompleteAbort", timeout=10)
        assert d.producer_epoch == epoch + 1
        assert end_txn(c, "hung-1", pid, epoch, True) == PRODUCER_FENCED


# -- persistence ------------------------------------------------------------------------------------
def test_the_state_survives_a_restart_in_kafkas_record_format(tmp_path):
    b = BrokerProcess(tmp_path / "data", settings={"transaction.state.log.num.partitions": "3"})
    b.start()
    try:
        with b.client() as c:
            auto_create(c, "persist")
            find_coordinators(c, transactional_id="persist-1")
            _code, pid, epoch = init_pid(c, "persist-1", timeout_ms=45000)
            add_partitions(c, "persist-1", pid, epoch, [("persist", 0)])
        b.restart()
        with b.client() as c:
            d = describe(c, "persist-1")
            assert (d.transaction_state, d.producer_id, d.producer_epoch, d.transaction_timeout_ms) == (
                "Ongoing", pid, epoch, 45000)
            assert [(t.topic, t.partitions) for t in d.topics] == [("persist", [0])]
    finally:
        b.stop()
    # the last record of the id: key v0 + TransactionLogKey, value v0 + TransactionLogValue
    p = partition_for_transactional_id("persist-1", 3)
    import glob
    records = []
    for path in sorted(glob.glob(f"{b.data_dir}/__transaction_state-{p}/*.log")):
        with open(path, "rb") as f:
            for batch in iter_batches(f.read()):
                records.extend((r.key, r.value) for r in batch)
    key, value = records[-1]
    assert key == struct.pack(">hh", 0, len("persist-1")) + b"persist-1"
    version, vpid, vepoch, timeout, status = struct.unpack_from(">hqhib", value)
    assert (version, vpid, vepoch, timeout, status) == (0, pid, epoch, 45000, 1)  # Ongoing


# -- the partition side: ListOffsets, DescribeProducers, WriteTxnMarkers ---------------------------
LIST_OFFSETS, WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = 2, 27, 61


def _latest(c, topic, partition, isolation):
    from kafkacore.protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
    r = c.call(LIST_OFFSETS, 5, request(LIST_OFFSETS, replica_id=-1, isolation_level=isolation, topics=[
        ListOffsetsTopic(name=topic, partitions=[ListOffsetsPartition(partition_index=partition, timestamp=-1)])]))
    return r.topics[0].partitions[0].offset


def test_an_open_transaction_holds_the_lso_until_an_admin_abort_marker(broker):
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from kafkacore.protocol.messages.describe_producers_request import TopicRequest
    from kafkacore.protocol.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic

    topic = "hanging"
    plain = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(3):
        plain.produce(topic, b"before-%d" % i, partition=0)
    plain.flush(30)
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "hanging-1"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"open", partition=0)
    p.flush(30)
    plain.produce(topic, b"after", partition=0)
    plain.flush(30)
    with broker.client() as c:
        assert _latest(c, topic, 0, 0) == 5  # the high watermark
        assert _latest(c, topic, 0, 1) == 3  # the last stable offset: the open transaction's first offset
        r = c.call(DESCRIBE_PRODUCERS, 0, request(DESCRIBE_PRODUCERS, topics=[
            TopicRequest(name=topic, partition_indexes=[0, 9])]))
        part, missing = r.topics[0].partitions
        assert missing.error_code == UNKNOWN_TOPIC_OR_PARTITION
        txn = [s for s in part.active_producers if s.current_txn_start_offset >= 0]
        assert len(txn) == 1 and txn[0].current_txn_start_offset == 3
        pid, epoch = txn[0].producer_id, txn[0].producer_epoch
        # Kafka's admin abortTransaction: an ABORT marker straight to the partition leader
        marker = WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=False,
                                   coordinator_epoch=0, topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])
        stale = WritableTxnMarker(producer_id=pid, producer_epoch=epoch - 1, transaction_result=False,
                                  coordinator_epoch=0, topics=[WritableTxnMarkerTopic(name=topic, partition_indexes=[0])])
        r = c.call(WRITE_TXN_MARKERS, 1, request(WRITE_TXN_MARKERS, markers=[stale]))
        assert r.markers[0].topics[0].partitions[0].error_code == INVALID_PRODUCER_EPOCH
        r = c.call(WRITE_TXN_MARKERS, 1, request(WRITE_TXN_MARKERS, markers=[marker]))
        assert r.markers[0].topics[0].partitions[0].error_code == NONE
        assert _latest(c, topic, 0, 1) == _latest(c, topic, 0, 0) == 6  # the marker took offset 5
    got = []
    cons = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "hanging-reader",
                                     "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                     "enable.partition.eof": True})
    try:
        cons.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        while True:
            m = cons.poll(10)
            assert m is not None
            if m.error():
                break
            got.append(m.value())
    finally:
        cons.close()
    assert got == [b"before-0", b"before-1", b"before-2", b"after"]


def test_a_broker_killed_between_prepare_commit_and_the_markers_completes_the_commit(tmp_path):
    """The crash Kafka's design is about: PrepareCommit is durable in __transaction_state but no
    marker was written. The broker is SIGKILLed with a transaction open and PrepareCommit is
    appended to its __transaction_state while it is down (what a crash right after that write
    leaves); on restart the coordinator writes the markers and CompleteCommit, and readers see
    the transaction whole."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    from kafkacore.coordinator.transaction_log import decode_key, decode_value, key_bytes, value_bytes
    from kafkacore.coordinator.transaction_metadata import TxnState
    from kafkacore.record import RecordBatchBuilder
    from kafkacore.storage import LogManager

    b = BrokerProcess(tmp_path / "data", settings={"transaction.state.log.num.partitions": "1",
                                                   "num.partitions": "2"})
    b.start()
    p = None
    try:
        p = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "crash-1"})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(6):
            p.produce("crash-topic", b"v%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        with b.client() as c:
            assert describe(c, "crash-1").transaction_state == "Ongoing"
        b.kill()
        lm = LogManager(b.data_dir, background=False, cleaner_enable=False)
        try:
            lg = lm.get_log("__transaction_state", 0)
            last = None
            for batch in iter_batches(lg.read(lg.log_start_offset, 1 << 20).read()):
                for r in batch:
                    if decode_key(r.key) == "crash-1":
                        last = r.value
            md = decode_value("crash-1", last)
            assert md.state is TxnState.ONGOING and len(md.partitions) == 2
            t = md.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, int(time.time() * 1000))
            builder = RecordBatchBuilder(compression="none")
            builder.append(value_bytes(t), key=key_bytes("crash-1"), timestamp_ms=t.txn_last_update_ms)
            lg.append(builder.build(), leader_epoch=0)
        finally:
            lm.shutdown()
        b.start()
        with b.client() as c:
            d = wait_state(c, "crash-1", "CompleteCommit")
            assert d.producer_epoch == md.producer_epoch
        cons = confluent_kafka.Consumer({"bootstrap.servers": b.bootstrap, "group.id": "crash-reader",
                                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                                         "enable.partition.eof": True})
        try:
            cons.assign([confluent_kafka.TopicPartition("crash-topic", part, 0) for part in (0, 1)])
            got, eof = [], set()
            while len(eof) < 2:
                m = cons.poll(10)
                assert m is not None
                if m.error():
                    eof.add(m.partition())
                    continue
                got.append(m.value())
        finally:
            cons.close()
        assert sorted(got) == [b"v%d" % i for i in range(6)]
    finally:
        if b.proc is not None and b.proc.poll() is None:
            b.stop()


def test_an_idle_transactional_id_expires_and_starts_over(tmp_path):
    """transactional.id.expiration.ms: an id idle that long in Empty/Complete* gets a tombstone
    and is forgotten; an InitProducerId for it then starts over with a new producer id."""
    b = BrokerProcess(tmp_path / "data", settings={
        "transaction.state.log.num.partitions": "1", "transactional.id.expiration.ms": "300",
        "transaction.remove.expired.transaction.cleanup.interval.ms": "200"})
    b.start()
    try:
        with b.client() as c:
            find_coordinators(c, transactional_id="expiring-1")
            _code, pid, _epoch = init_pid(c, "expiring-1")
            deadline = time.monotonic() + 10
            while describe(c, "expiring-1").error_code != TRANSACTIONAL_ID_NOT_FOUND:
                assert time.monotonic() < deadline, "the idle id did not expire"
                time.sleep(0.1)
            code, pid2, epoch2 = init_pid(c, "expiring-1")
            assert code == NONE and pid2 != pid and epoch2 == 0
    finally:
        b.stop()
    # the expiry is a tombstone (null value) for the id in __transaction_state
    import glob
    records = []
    for path in sorted(glob.glob(f"{b.data_dir}/__transaction_state-0/*.log")):
        with open(path, "rb") as f:
            records += [(r.key, r.value) for batch in iter_batches(f.read()) for r in batch]
    key = struct.pack(">hh", 0, len("expiring-1")) + b"expiring-1"
    values = [v for k, v in records if k == key]
    # expired (a tombstone), then written anew (it may expire again before the broker stops)
    assert None in values and any(v is not None for v in values[values.index(None) + 1:]), values
