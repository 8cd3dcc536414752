"""`kafkacore cluster up`: one command starts ZooKeeper and N brokers, prints the bootstrap
servers (which real clients use), and Ctrl-C stops every process it started."""
import os
import signal
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient


def test_cluster_up_starts_zookeeper_and_brokers_and_ctrl_c_stops_them(tmp_path):
    from _cluster import _require_zookeeper

    _require_zookeeper()
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "cluster", "up", "--brokers", "2", "--data-dir",
                             str(tmp_path / "kc"), "--set", "zookeeper.session.timeout.ms=6000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        deadline = time.monotonic() + 120
        while not any(ln.startswith("bootstrap servers:") for ln in lines) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        bootstrap = next(ln for ln in lines if ln.startswith("bootstrap servers:")).split(":", 1)[1].strip()
        assert len(bootstrap.split(",")) == 2
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=30)
        assert sorted(md.brokers) == [1, 2] and md.controller_id in (1, 2)
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    # nothing it started is left running
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "kc")], capture_output=True, text=True).stdout.split()
    assert [p for p in leftovers if int(p) != os.getpid()] == []
    assert (tmp_path / "kc" / "broker-1" / "meta.properties").exists()
    assert (tmp_path / "kc" / "zookeeper" / "zoo.cfg").exists()


def test_cluster_up_says_what_is_missing_without_zookeeper(tmp_path):
    env = dict(os.environ, KAFKACORE_ZOOKEEPER_JAR=str(tmp_path / "no-such.jar"))
    out = subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "up", "--data-dir", str(tmp_path / "kc")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1
    assert "install" in out.stderr and "zookeeper" in out.stderr.lower(), out.stderr
