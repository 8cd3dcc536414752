"""The leader's bookkeeping of one partition (kafkacore.cluster.Partition) on a real log: the low
watermark that DeleteRecords waits for. The whole path, brokers and ZooKeeper included, is in
tests/cluster/test_cluster_admin.py; here the cases a running cluster makes slow to reach: a
follower not heard from, a dead follower's broker, and leadership moving while a deletion waits."""
import asyncio

import pytest

from kafkacore.replication.partition import Partition
from kafkacore.replication.replica_manager import LeaderAndIsrState
from kafkacore.errors import NotLeaderOrFollowerError
from kafkacore.record import RecordBatchBuilder
from kafkacore.storage import Log, LogConfig

LOCAL, FOLLOWER, OTHER = 0, 1, 2


@pytest.fixture
def leader(tmp_path):
    """A partition led by broker 0 with followers 1 and 2, ten records all replicated."""
    lg = Log(str(tmp_path / "t-0"), LogConfig({"segment.bytes": 200}))
    lg.make_replicated()
    for first in range(0, 10, 2):
        b = RecordBatchBuilder(base_offset=first)
        for o in range(first, first + 2):
            b.append(b"value %d" % o, timestamp_ms=1_700_000_000_000 + o)
        lg.append(b.build())
    partition = Partition("t", 0, lg, LOCAL)
    partition.make_leader(LeaderAndIsrState(LOCAL, 1, [LOCAL, FOLLOWER, OTHER], [LOCAL, FOLLOWER, OTHER], 0, 1))
    alive = {LOCAL, FOLLOWER, OTHER}
    partition.replica_alive = alive.__contains__
    yield partition, alive
    lg.close()


def run(coro):
    return asyncio.run(coro)


def test_the_low_watermark_is_unknown_until_every_follower_has_fetched(leader):
    partition, _alive = leader
    assert partition.low_watermark() == -1
    partition.update_follower_fetch_state(FOLLOWER, 10, log_start_offset=0)
    assert partition.low_watermark() == -1  # OTHER has not fetched in this leadership
    partition.update_follower_fetch_state(OTHER, 10, log_start_offset=0)
    assert partition.log.high_watermark == 10
    assert partition.low_watermark() == 0


def test_a_deletion_waits_for_each_live_follower_and_not_for_a_dead_one(leader):
    partition, alive = leader
    for r in (FOLLOWER, OTHER):
        partition.update_follower_fetch_state(r, 10, log_start_offset=0)
    assert partition.log.delete_records(6) == 6

    async def scenario():
        waiting = partition.wait_for_low_watermark(6)
        assert partition.low_watermark() == 0 and not waiting.done()
        partition.update_follower_fetch_state(FOLLOWER, 10, log_start_offset=6)
        assert not waiting.done()  # OTHER still holds records below 6
        alive.discard(OTHER)  # its broker died (UpdateMetadata): its log start no longer counts
        partition.replica_liveness_changed()
        return await asyncio.wait_for(waiting, 1)

    assert run(scenario()) == 6


def test_a_waiting_deletion_fails_when_leadership_moves(leader):
    partition, _alive = leader
    for r in (FOLLOWER, OTHER):
        partition.update_follower_fetch_state(r, 10, log_start_offset=0)
    partition.log.delete_records(4)

    async def scenario():
        waiting = partition.wait_for_low_watermark(4)
        partition.make_follower(LeaderAndIsrState(FOLLOWER, 2, [LOCAL, FOLLOWER, OTHER], [LOCAL, FOLLOWER, OTHER],
                                                  1, 1))
        with pytest.raises(NotLeaderOrFollowerError):
            await asyncio.wait_for(waiting, 1)

    run(scenario())


def test_a_new_leadership_forgets_the_followers_log_starts(leader):
    """Each leadership starts from unknown, as Kafka's replica states do: a follower's log start
    from an older epoch may be stale."""
    partition, _alive = leader
    for r in (FOLLOWER, OTHER):
        partition.update_follower_fetch_state(r, 10, log_start_offset=0)
    assert partition.low_watermark() == 0
    partition.make_leader(LeaderAndIsrState(LOCAL, 2, [LOCAL, FOLLOWER, OTHER], [LOCAL, FOLLOWER, OTHER], 1, 1))
    assert partition.low_watermark() == -1
