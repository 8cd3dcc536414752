"""The controller's rule for a partition whose replicas restarted unseen between two controllers
(kafkacore.cluster.controller.leader_after_bounce, KIP-380). The race itself, with real brokers
and ZooKeeper, is tests/cluster/test_controller_failover_race.py; here every case of the rule,
including those a running cluster reaches only by chance (the leader dead while a follower
bounced: a fault run wrote a leader outside its own ISR before the rule had this case)."""
import pytest

from kafkacore.cluster.controller import leader_after_bounce

REPLICAS = [1, 2, 3]


@pytest.mark.parametrize("leader, isr, live, bounced, expected", [
    (1, [1, 2, 3], {1, 2, 3}, {3}, (1, [1, 2])),        # a follower restarted: it leaves the ISR
    (1, [1, 2, 3], {1, 2, 3}, {1}, (2, [2, 3])),        # the leader restarted: the next ISR member leads
    (1, [1, 2, 3], {1, 2, 3}, {1, 2}, (3, [3])),
    (1, [1], {1, 2, 3}, {1}, (1, [1])),                 # the only ISR member: it keeps leading, new epoch
    (2, [1, 2, 3], {1, 3}, {1}, (3, [3])),              # the leader is dead and a follower restarted
    (2, [1, 2], {1, 3}, {1}, (1, [1])),                 # ... and the bounced follower is all that is left
    (2, [2, 3], {1}, {1}, (None, None)),                # no ISR member live: the offline election decides
])
def test_leader_after_bounce(leader, isr, live, bounced, expected):
    got = leader_after_bounce(REPLICAS, leader, isr, live, bounced)
    assert got == expected
    if got[0] is not None:
        assert got[0] in got[1] and set(got[1]) <= set(live)
