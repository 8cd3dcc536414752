"""The one write path (ReplicaManager.append_records over Partition.append_records_to_leader):
Produce, transaction markers and the coordinators' internal topics are all checked against
min.insync.replicas *before* anything is written, as Kafka checks them, and a coordinator's
acks=all wait whose client went away completes without raising.

Against a real ``kafkacore serve`` process: a single node's partitions have the ISR [itself],
so a topic with min.insync.replicas=2 refuses every acks=all write there - the case where a
transaction coordinator used to append one ABORT marker per retry."""
import asyncio
import glob

import pytest

from broker_client import BrokerProcess, auto_create, find_coordinators, request
from kafkacore.client.admin import AdminClient
from kafkacore.protocol.messages.add_partitions_to_txn_request import AddPartitionsToTxnTopic
from kafkacore.protocol.messages.offset_commit_request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
from kafkacore.protocol.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from kafkacore.record import iter_batches

INIT_PID, ADD_PARTITIONS, END_TXN, DESCRIBE_TXNS, WRITE_TXN_MARKERS, OFFSET_COMMIT = 22, 24, 26, 65, 27, 8
NONE, NOT_ENOUGH_REPLICAS, COORDINATOR_NOT_AVAILABLE = 0, 19, 15
TOPIC_RESOURCE = 2


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("write-path") / "data", settings={
        "transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2"})
    b.start()
    with AdminClient(b.bootstrap) as admin:
        admin.create_topic("strict", 1, 1, configs={"min.insync.replicas": "2"})
    with b.client() as c:
        find_coordinators(c)  # as a client does first: the coordinators' topics exist and are led
    yield b
    b.stop()


def _batches(broker, topic, partition):
    out = []
    for path in sorted(glob.glob(f"{broker.data_dir}/{topic}-{partition}/*.log")):
        with open(path, "rb") as f:
            out.extend(iter_batches(f.read()))
    return out


def _log_end(broker, topic, partition):
    from kafkacore.client.admin import LATEST
    with AdminClient(broker.bootstrap) as admin:
        return admin.list_offsets({(topic, partition): LATEST})[(topic, partition)].offset


def _wait_for_output(broker, text, timeout=30):
    import time
    deadline = time.monotonic() + timeout
    while text not in broker.output():
        assert time.monotonic() < deadline, f"the broker never logged {text!r}"
        time.sleep(0.05)


def test_a_marker_for_a_partition_below_min_isr_is_refused_before_it_is_written(broker):
    with broker.client() as c:
        r = c.call(INIT_PID, 4, request(INIT_PID, transactional_id="strict-txn", transaction_timeout_ms=60000,
                                        producer_id=-1, producer_epoch=-1))
        pid, epoch = r.producer_id, r.producer_epoch
        r = c.call(ADD_PARTITIONS, 3, request(
            ADD_PARTITIONS, v3_and_below_transactional_id="strict-txn", v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[AddPartitionsToTxnTopic(name="strict", partitions=[0])]))
        assert r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == NONE
        # the abort is decided (PrepareAbort written); its marker cannot be written: the
        # coordinator retries it, and each retry is refused before the append
        assert c.call(END_TXN, 3, request(END_TXN, transactional_id="strict-txn", producer_id=pid,
                                          producer_epoch=epoch, committed=False)).error_code == NONE
        _wait_for_output(broker, "marker of producer %d" % pid)
        # the same marker straight to the leader (as Kafka's admin abort sends it), again and again
        marker = WritableTxnMarker(producer_id=pid, producer_epoch=epoch, transaction_result=False,
                                   coordinator_epoch=0,
                                   topics=[WritableTxnMarkerTopic(name="strict", partition_indexes=[0])])
        for _ in range(20):
            r = c.call(WRITE_TXN_MARKERS, 1, request(WRITE_TXN_MARKERS, markers=[marker]))
            assert r.markers[0].topics[0].partitions[0].error_code == NOT_ENOUGH_REPLICAS
        state = c.call(DESCRIBE_TXNS, 0, request(DESCRIBE_TXNS, transactional_ids=["strict-txn"]))
        assert state.transaction_states[0].transaction_state == "PrepareAbort"
    assert _log_end(broker, "strict", 0) == 0
    assert _batches(broker, "strict", 0) == []
    # once the ISR may be this one replica, the coordinator's next retry writes the one marker
    with AdminClient(broker.bootstrap) as admin:
        admin.alter_configs(TOPIC_RESOURCE, "strict", delete=["min.insync.replicas"])
    with broker.client() as c:
        import time
        deadline = time.monotonic() + 30
        while True:
            state = c.call(DESCRIBE_TXNS, 0, request(DESCRIBE_TXNS, transactional_ids=["strict-txn"]))
            if state.transaction_states[0].transaction_state == "CompleteAbort":
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.05)
    batches = _batches(broker, "strict", 0)
    assert [(b.is_control, b.producer_id) for b in batches] == [(True, pid)]
    assert _log_end(broker, "strict", 0) == 1


def test_an_offset_commit_to_a_coordinator_partition_below_min_isr_writes_nothing(broker):
    with broker.client() as c:
        auto_create(c, "committed")
    with AdminClient(broker.bootstrap) as admin:
        admin.alter_group_offsets("strict-group", {("committed", 0): 3})  # creates __consumer_offsets
        admin.alter_configs(TOPIC_RESOURCE, "__consumer_offsets", {"min.insync.replicas": "2"})
        try:
            ends = {p: _log_end(broker, "__consumer_offsets", p) for p in range(2)}
            with broker.client() as c:
                body = request(OFFSET_COMMIT, group_id="strict-group", generation_id_or_member_epoch=-1,
                               member_id="", group_instance_id=None, retention_time_ms=-1,
                               topics=[OffsetCommitRequestTopic(name="committed", partitions=[
                                   OffsetCommitRequestPartition(partition_index=0, committed_offset=7,
                                                                committed_leader_epoch=-1, committed_metadata="")])])
                r = c.call(OFFSET_COMMIT, 8, body)
            # Kafka's GroupMetadataManager maps NOT_ENOUGH_REPLICAS to COORDINATOR_NOT_AVAILABLE
            assert r.topics[0].partitions[0].error_code == COORDINATOR_NOT_AVAILABLE
            assert {p: _log_end(broker, "__consumer_offsets", p) for p in range(2)} == ends
            assert admin.list_group_offsets("strict-group")[("committed", 0)] == 3
        finally:
            admin.alter_configs(TOPIC_RESOURCE, "__consumer_offsets", delete=["min.insync.replicas"])
        admin.alter_group_offsets("strict-group", {("committed", 0): 7})
        assert admin.list_group_offsets("strict-group")[("committed", 0)] == 7


def test_a_produce_with_acks_all_below_min_isr_is_refused_and_acks_1_is_written(broker):
    from kafkacore.record import RecordBatchBuilder
    from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topic("strict-produce", 1, 1, configs={"min.insync.replicas": "2"})
    with broker.client() as c:
        def produce(acks):
            b = RecordBatchBuilder(compression="none")
            b.append(b"v", key=b"k")
            r = c.call(0, 9, request(0, transactional_id=None, acks=acks, timeout_ms=5000, topic_data=[
                TopicProduceData(name="strict-produce", partition_data=[
                    PartitionProduceData(index=0, records=b.build())])]))
            return r.responses[0].partition_responses[0].error_code
        assert produce(-1) == NOT_ENOUGH_REPLICAS
        assert _log_end(broker, "strict-produce", 0) == 0
        assert produce(1) == NONE  # min.insync.replicas binds acks=all only
    assert _log_end(broker, "strict-produce", 0) == 1


def test_a_commit_whose_client_went_away_still_counts_once_replicated_and_raises_nothing(tmp_path):
    """The group coordinator's acks=all wait for an offset commit: the request is cancelled (its
    connection closed) while a follower has not fetched the write yet. When the follower catches
    up, the offsets count and nothing raises (it once raised InvalidStateError from a callback)."""
    from broker_client import create_topic_and_wait, internal_topic_ready, start_single_node
    from kafkacore.replication.replica_manager import LeaderAndIsrState
    from kafkacore.coordinator.offset_store import OffsetAndMetadata

    async def scenario():
        loop = asyncio.get_running_loop()
        failures = []
        loop.set_exception_handler(lambda _loop, context: failures.append(context))
        broker = await start_single_node(tmp_path, {"offsets.topic.num.partitions": "1"})
        try:
            await create_topic_and_wait(broker, "t", 1)
            coordinator = broker.group_coordinator
            await internal_topic_ready(broker, coordinator.store)
            partition = broker.replica_manager.partitions[("__consumer_offsets", 0)]
            # a second replica in the ISR that has not fetched yet: the commit waits for it
            partition.log.make_replicated()
            partition.make_leader(LeaderAndIsrState(broker.node_id, partition.leader_epoch + 1, [broker.node_id, 99],
                                                    [broker.node_id, 99], 1, -1))
            answer = coordinator.commit_offsets("g", "", None, -1, {("t", 0): OffsetAndMetadata(5, -1, "", 0)})
            assert asyncio.isfuture(answer)
            waiter = loop.create_task(_await(answer))
            # one turn of the loop, not a wait: the task runs up to its await of the answer (a
            # task cancelled before it ever ran would not cancel the answer)
            await asyncio.sleep(0)
            waiter.cancel()  # what the server does when the client's connection closes
            await asyncio.gather(waiter, return_exceptions=True)
            assert answer.cancelled()
            broker.replica_manager.follower_fetched(partition, 99, partition.log.log_end_offset)
            # the offsets count in the replicated write's callback, a turn or two of the loop later
            deadline = loop.time() + 10
            while ("t", 0) not in coordinator.groups["g"].offsets and loop.time() < deadline:
                await asyncio.sleep(0.001)
            assert partition.log.high_watermark == partition.log.log_end_offset
            assert coordinator.groups["g"].offsets[("t", 0)].offset == 5
            assert failures == []
        finally:
            broker.shutdown()

    async def _await(fut):
        return await fut

    asyncio.run(scenario())
