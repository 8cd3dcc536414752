"""The in-process metadata store (kafkacore/cluster/local_znodes.py) on its own: what it keeps
across a restart, how it loads damaged files, and ZooKeeper's rules it applies. Its behaviour
under KafkaZkClient is tested beside a real ZooKeeper's in tests/test_zk_client.py (every test
there runs against both)."""
import json

import pytest
from kazoo.exceptions import (BadVersionError, NoChildrenForEphemeralsError, NodeExistsError, NoNodeError,
                              NotEmptyError, RolledBackError, RuntimeInconsistency)

from _kcutil import wait_for
from kafkacore.cluster import local_znodes
from kafkacore.cluster.local_znodes import LOG_FILE, SNAPSHOT_FILE, ZnodeTree
from kafkacore.cluster.zk_client import KafkaZkClient
from kafkacore.errors import KafkaStorageError


@pytest.fixture
def trees():
    made = []

    def make(directory=None):
        t = ZnodeTree(None if directory is None else str(directory))
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()


def client(tree):
    c = KafkaZkClient(None, znodes=tree)
    c.start()
    return c


def write_topic(tree, name):
    """A client on ``tree`` writes Kafka's top-level paths and a one-partition topic, then closes."""
    zk = client(tree)
    zk.create_top_level_paths()
    zk.create_topic(name, {0: [1]})
    zk.close()


def test_persistent_znodes_survive_a_restart_and_ephemeral_ones_do_not(tmp_path, trees):
    tree = trees(tmp_path)
    zk = client(tree)
    zk.create_top_level_paths()
    cluster_id = zk.get_or_create_cluster_id()
    epoch = zk.register_broker(1, "127.0.0.1", 9092)
    zk.create_topic("orders", {0: [1], 1: [1]}, {"cleanup.policy": "compact"})
    zk.create_partition_state("orders", 0, 1, 0, [1], 1)
    zk.set_topic_configs("orders", {"retention.ms": "1000"})
    note = zk.create_config_change_notification("topics/orders")
    state, version = zk.get_partition_state("orders", 0)
    topic_data, topic_stat = zk.get_data("/brokers/topics/orders")
    zk.close()
    tree.close()

    again = trees(tmp_path)
    zk = client(again)
    assert zk.get_cluster_id() == cluster_id
    assert zk.get_all_broker_ids() == []  # the registration was ephemeral: gone with its session
    assert zk.get_partition_state("orders", 0) == (state, version)
    data, stat = zk.get_data("/brokers/topics/orders")
    assert data == topic_data and (stat.version, stat.czxid, stat.mzxid) == (
        topic_stat.version, topic_stat.czxid, topic_stat.mzxid)
    assert zk.get_topic_configs("orders") == {"retention.ms": "1000"}
    # the sequence goes on where it was: a restarted store never hands out a number twice
    assert zk.create_config_change_notification("topics/orders") > note
    # and zxids only grow: a new registration's epoch is above the old one
    assert zk.register_broker(1, "127.0.0.1", 9092) > epoch
    zk.close()


def test_the_files_hold_kafkas_znode_json(tmp_path, trees):
    tree = trees(tmp_path)
    write_topic(tree, "t")
    tree.close()
    snap = json.loads((tmp_path / SNAPSHOT_FILE).read_text())
    topic = json.loads(snap["znodes"]["/brokers/topics/t"]["data"])
    assert topic["partitions"] == {"0": [1]} and topic["version"] == 3
    assert (tmp_path / LOG_FILE).read_bytes() == b""  # a clean close folds the log into the snapshot


def test_a_torn_last_line_is_dropped_and_the_rest_loads(tmp_path, trees):
    tree = trees(tmp_path)
    write_topic(tree, "kept")
    # the process dies (the tree is never closed) while writing its next line
    with open(tmp_path / LOG_FILE, "ab") as f:
        f.write(b'{"zxid": 99, "znodes": {"/brokers/topics/torn": {"da')
    assert b"/brokers/topics/kept" in (tmp_path / LOG_FILE).read_bytes()  # only the log has it
    zk = client(trees(tmp_path))
    assert zk.get_all_topics() == ["kept"]
    zk.close()


@pytest.mark.parametrize("damage", ["middle line", "snapshot", "format version"])
def test_damage_elsewhere_is_a_one_line_storage_error(tmp_path, trees, damage):
    tree = trees(tmp_path)
    write_topic(tree, "t")
    tree.close()
    if damage == "middle line":
        good = b'{"zxid": 50, "znodes": {"/a": null}}\n'
        (tmp_path / LOG_FILE).write_bytes(b"garbage\n" + good)
    elif damage == "snapshot":
        (tmp_path / SNAPSHOT_FILE).write_bytes(b"\x00\xff not json")
    else:
        snap = json.loads((tmp_path / SNAPSHOT_FILE).read_text())
        snap["version"] = 99
        (tmp_path / SNAPSHOT_FILE).write_text(json.dumps(snap))
    with pytest.raises(KafkaStorageError) as e:
        ZnodeTree(str(tmp_path))
    assert "\n" not in str(e.value) and str(tmp_path) in str(e.value)


def test_the_log_is_folded_into_a_snapshot_as_it_grows(tmp_path, trees, monkeypatch):
    monkeypatch.setattr(local_znodes, "SNAPSHOT_EVERY", 5)
    tree = trees(tmp_path)
    zk = client(tree)
    zk.create_top_level_paths()
    for i in range(12):
        zk.set_or_create_entity_configs("topics", f"t{i}", {"retention.ms": str(i)})
    assert len((tmp_path / LOG_FILE).read_bytes().splitlines()) < 5
    zk.close()
    tree.close()
    zk = client(trees(tmp_path))
    assert [zk.get_entity_configs("topics", f"t{i}") for i in range(12)] == [{"retention.ms": str(i)} for i in range(12)]
    zk.close()


def test_a_write_that_cannot_be_logged_changes_nothing(tmp_path, trees):
    tree = trees(tmp_path)
    s = tree.session()
    s.start()
    s.create("/a", b"1")
    real = tree._log

    class Full:  # the disk is full: the write fails
        def tell(self):
            return real.tell()

        def write(self, b):
            raise OSError(28, "No space left on device")

        def seek(self, pos):
            real.seek(pos)

        def truncate(self):
            real.truncate()

    tree._log = Full()
    with pytest.raises(KafkaStorageError, match="No space left on device"):
        s.set("/a", b"2")
    with pytest.raises(KafkaStorageError):
        s.create("/b", b"")
    tree._log = real
    assert s.get("/a")[0] == b"1" and s.get("/a")[1].version == 0 and s.exists("/b") is None
    s.set("/a", b"3")
    s.stop()
    tree.close()
    again = trees(tmp_path).session()
    again.start()
    assert again.get("/a")[0] == b"3" and again.get("/a")[1].version == 1 and again.exists("/b") is None


def test_zookeepers_rules(trees):
    s = trees().session()
    s.start()
    with pytest.raises(NoNodeError):
        s.create("/no/parent", b"")
    s.create("/p", b"")
    with pytest.raises(NodeExistsError):
        s.create("/p", b"")
    with pytest.raises(BadVersionError):
        s.set("/p", b"x", 3)
    s.create("/p/c", b"")
    with pytest.raises(NotEmptyError):
        s.delete("/p")
    e = s.create("/e", b"", ephemeral=True)
    with pytest.raises(NoChildrenForEphemeralsError):
        s.create(e + "/child", b"")
    assert s.create("/p/seq-", b"", sequence=True) == "/p/seq-0000000001"  # the parent's cversion
    # a multi is all or nothing, and answers per op as ZooKeeper does
    t = s.transaction()
    t.create("/p/new", b"")
    t.check("/p", 7)
    t.delete("/p/c")
    results = t.commit()
    assert [type(r) for r in results] == [RolledBackError, BadVersionError, RuntimeInconsistency]
    assert s.exists("/p/new") is None and s.exists("/p/c") is not None


def test_watches_see_changes_in_order_and_end_with_the_session(trees):
    tree = trees()
    owner, watcher = tree.session(), tree.session()
    owner.start()
    watcher.start()
    seen, kids = [], []
    watcher.watch_data("/n", lambda data, stat: seen.append(data))
    owner.create("/n", b"1")
    owner.set("/n", b"2")
    owner.delete("/n")
    # every change, in order, from before the znode existed to after it went
    wait_for(lambda: seen == [None, b"1", b"2", None], lambda: f"the data watch's changes (seen {seen})")
    owner.create("/dir", b"")
    watcher.watch_children("/dir", kids.append)
    owner.create("/dir/eph", b"", ephemeral=True)
    wait_for(lambda: kids[-1:] == [["eph"]], lambda: f"the child (seen {kids})")
    owner.stop()  # the session ends: its ephemeral goes, and the watcher sees it go
    wait_for(lambda: kids[-1:] == [[]], lambda: f"the ephemeral going with its session (seen {kids})")
