"""A fetch's long poll must not miss an append that lands between the fetch handler returning
and the server awaiting its answer. A Fetch and a Produce pipelined in one write on one
connection make that window certain: the server handles both frames before it awaits the
fetch. Before the waiter was registered in the handler, the fetch slept its whole max_wait_ms
(on a cluster, a follower's fetch slept replica.fetch.wait.max.ms and acks=all waited with it)."""
import time

import pytest

from broker_client import BrokerProcess, auto_create, request
from kafkacore.protocol.frames import RequestHeader, encode_request
from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData
from kafkacore.record import RecordBatchBuilder, iter_batches

PRODUCE, FETCH = 0, 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with BrokerProcess(tmp_path_factory.mktemp("long_poll") / "data", settings={"num.partitions": "1"}) as b:
        yield b


def _frame(conn, api_key, version, body):
    conn.correlation_id += 1
    conn.inflight[conn.correlation_id] = (api_key, version)
    return conn.correlation_id, encode_request(RequestHeader(api_key, version, conn.correlation_id, conn.client_id),
                                               body)


@pytest.mark.parametrize("version", [4, 12])
def test_an_append_pipelined_behind_a_long_poll_wakes_it(broker, version):
    with broker.client() as conn:
        topic = f"long-poll-{version}"
        auto_create(conn, topic)
        fetch = request(FETCH, replica_id=-1, max_wait_ms=8000, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, forgotten_topics_data=[],
                        topics=[FetchTopic(topic=topic, partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                                    partition_max_bytes=1 << 20)])])
        b = RecordBatchBuilder("none")
        b.append(b"woken", timestamp_ms=1_700_000_000_000)
        produce = request(PRODUCE, acks=1, timeout_ms=5000, topic_data=[
            TopicProduceData(name=topic, partition_data=[PartitionProduceData(index=0, records=b.build())])])
        fetch_id, fetch_frame = _frame(conn, FETCH, version, fetch)
        produce_id, produce_frame = _frame(conn, PRODUCE, 9, produce)
        start = time.monotonic()
        conn.send_raw(fetch_frame + produce_frame)
        fetched = conn.receive(fetch_id)
        waited = time.monotonic() - start
        produced = conn.receive(produce_id)
        assert produced.responses[0].partition_responses[0].error_code == 0
        pd = fetched.responses[0].partitions[0]
        assert pd.error_code == 0
        assert [r.value for batch in iter_batches(bytes(pd.records or b"")) for r in batch] == [b"woken"]
        assert waited < 4, f"the long poll slept {waited:.1f} s through the append (max_wait_ms 8000)"
