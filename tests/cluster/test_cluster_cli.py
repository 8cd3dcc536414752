"""The ``kafkacore`` operator commands on a real three-broker ZooKeeper cluster: ``cluster
describe`` (every broker, the controller, each broker's data directory through DescribeLogDirs),
``topics describe`` sizes from the leaders, a partition moved with ``partitions reassign`` (one
partition, then Kafka's reassignment JSON) and its preferred leader restored with ``leaders
elect``; the results checked in the cluster's metadata."""
import json

from _cli import fails, kafkacore
from _cluster import topic_metadata, wait_for
from kafkacore import Producer

TOPIC = "cli-moves"


def leader_and_replicas(cluster, partition):
    p = topic_metadata(cluster, TOPIC)[partition]
    return p.leader, list(p.replicas), sorted(p.isrs)


def test_cluster_describe_reassign_and_elect(cluster, tmp_path):
    b = cluster.bootstrap_servers
    d = kafkacore("cluster", "describe", "-o", "json", bootstrap=b).json()
    assert sorted(x["id"] for x in d["brokers"]) == [1, 2, 3] and d["controller"] in (1, 2, 3)
    assert [x["controller"] for x in d["brokers"]].count(True) == 1
    assert all(x["data_bytes"] is not None and x["usable_bytes"] > 0 for x in d["brokers"])
    assert d["offline_partitions"] == []

    kafkacore("topics", "create", TOPIC, "--replica-assignment", "1:2,2:3", bootstrap=b)
    wait_for(lambda: [leader_and_replicas(cluster, p) for p in (0, 1)] == [(1, [1, 2], [1, 2]), (2, [2, 3], [2, 3])],
             "both partitions led by their first replica with a full ISR", 60)
    with Producer({"bootstrap.servers": b, "acks": "all"}) as p:
        for h in [p.send(TOPIC, b"x" * 100, partition=0) for _ in range(20)]:
            h.result(30)
    described = kafkacore("topics", "describe", TOPIC, "-o", "json", bootstrap=b).json()["partitions"]
    assert [(x["replicas"], x["log_end_offset"]) for x in described] == [([1, 2], 20), ([2, 3], 0)]
    assert described[0]["size_bytes"] > 2000 and described[1]["size_bytes"] == 0  # the leaders' copies

    # partition 0 moves to brokers 3 and 1 (3 preferred); its leader, 1, stays a replica and keeps leading
    r = kafkacore("partitions", "reassign", "--topic", TOPIC, "--partition", 0, "--replicas", "3,1", "--wait",
                  "-o", "json", bootstrap=b)
    assert r.json() == [{"topic": TOPIC, "partition": 0, "replicas": [3, 1], "result": "done"}]
    wait_for(lambda: leader_and_replicas(cluster, 0)[1:] == ([3, 1], [1, 3]), "partition 0 on brokers 3 and 1", 60)
    assert kafkacore("partitions", "reassign", "--list", bootstrap=b).out == "No partition reassignment in progress.\n"

    if leader_and_replicas(cluster, 0)[0] != 3:
        out = kafkacore("leaders", "elect", "--topic", TOPIC, "--partition", 0, bootstrap=b).out
        assert out.endswith("Preferred election: 1 elected, 0 needed none.\n")
    wait_for(lambda: leader_and_replicas(cluster, 0)[0] == 3, "broker 3 leading partition 0", 30)
    again = kafkacore("leaders", "elect", "--all-topic-partitions", "-o", "json", bootstrap=b).json()
    assert {"topic": TOPIC, "partition": 0, "result": "ELECTION_NOT_NEEDED"} in [
        {**x, "result": x["result"].split(":")[0]} for x in again]

    # Kafka's reassignment JSON: partition 1's replicas swap order
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": TOPIC, "partition": 1, "replicas": [3, 2], "log_dirs": ["any", "any"]}]}))
    assert kafkacore("partitions", "reassign", "--reassignment-json-file", plan, "--wait", bootstrap=b).table() == [
        {"TOPIC": TOPIC, "PARTITION": "1", "REPLICAS": "3,2", "RESULT": "done"}]
    wait_for(lambda: leader_and_replicas(cluster, 1)[1] == [3, 2], "partition 1's replicas reordered", 30)
    r = kafkacore("partitions", "reassign", "--cancel", "--topic", TOPIC, "--partition", 1, check=False, bootstrap=b)
    assert r.code == 1 and r.table() == [{"TOPIC": TOPIC, "PARTITION": "1", "RESULT": (
        f"NO_REASSIGNMENT_IN_PROGRESS: no reassignment of {TOPIC}-1 is in progress")}]
    assert "not a list of broker ids" in fails("partitions", "reassign", "--topic", TOPIC, "--partition", 0,
                                               "--replicas", "3,x", code=2, bootstrap=b)
    plan.write_text('{"version": 1, "partitions": [{"topic": "t"}]}')
    assert "integer \"partition\"" in fails("partitions", "reassign", "--reassignment-json-file", plan, code=2,
                                            bootstrap=b)
