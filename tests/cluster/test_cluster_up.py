"""`kafkacore cluster up`: one command starts ZooKeeper and N brokers, prints the bootstrap
servers (which real clients use), and Ctrl-C stops every process it started. A broker that dies
is reported while the others keep serving, and `kafkacore cluster restart N` brings it back."""
import json
import os
import signal
import subprocess
import sys
import time

from confluent_kafka.admin import AdminClient


def test_cluster_up_starts_zookeeper_and_brokers_and_ctrl_c_stops_them(tmp_path):
    from _zookeeper import skip_or_fail_without_zookeeper

    skip_or_fail_without_zookeeper()
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "cluster", "up", "--brokers", "2", "--data-dir",
                             str(tmp_path / "kc"), "--set", "zookeeper.session.timeout.ms=6000", "--racks", "east,west"],
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
        admin = AdminClient({"bootstrap.servers": bootstrap})
        md = admin.list_topics(timeout=30)
        assert sorted(md.brokers) == [1, 2] and md.controller_id in (1, 2)
        # --racks deals the racks to the brokers (broker.rack), and the cluster says so
        nodes = admin.describe_cluster().result(30).nodes
        assert sorted((n.id, n.rack) for n in nodes) == [(1, "east"), (2, "west")]
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    # nothing it started is left running
    leftovers = subprocess.run(["pgrep", "-f", str(tmp_path / "kc")], capture_output=True, text=True).stdout.split()
    assert [p for p in leftovers if int(p) != os.getpid()] == []
    assert (tmp_path / "kc" / "broker-1" / "meta.properties").exists()
    assert (tmp_path / "kc" / "zookeeper" / "zoo.cfg").exists()


def test_cluster_up_refuses_an_empty_rack_name_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "up", "--racks", "a,,b", "--data-dir",
                          str(tmp_path / "kc")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "rack names separated by commas" in out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2, out.stderr  # usage line + the error, no traceback
    assert not (tmp_path / "kc").exists()


def test_cluster_up_says_what_is_missing_without_zookeeper(tmp_path):
    env = dict(os.environ, KAFKACORE_ZOOKEEPER_JAR=str(tmp_path / "no-such.jar"))
    out = subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "up", "--data-dir", str(tmp_path / "kc")],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1
    assert "install" in out.stderr and "zookeeper" in out.stderr.lower(), out.stderr


def test_a_dead_broker_of_cluster_up_is_reported_and_restarted(tmp_path):
    """The failover a user starts `cluster up` to watch: kill a broker, the cluster keeps
    serving (its partitions move), the broker's death is reported with the command that
    restarts it, and that command brings it back into every ISR."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    from _cluster import wait_for
    from _zookeeper import skip_or_fail_without_zookeeper

    skip_or_fail_without_zookeeper()
    root = tmp_path / "kc"
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "cluster", "up", "--brokers", "3", "--data-dir",
                             str(root), "--set", "zookeeper.session.timeout.ms=6000"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []

    def read_until(prefix, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
            if prefix in line:
                return line
        raise AssertionError(f"no {prefix!r} within {timeout} s: {''.join(lines)}")

    try:
        bootstrap = read_until("bootstrap servers:", 120).split(":", 1)[1].strip()
        state = json.loads((root / "cluster-up.json").read_text())
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("up-failover", 1, replica_assignment=[[2, 1, 3]])])["up-failover"].result(60)
        wait_for(lambda: admin.list_topics("up-failover", timeout=10).topics["up-failover"].partitions[0].leader == 2,
                 "broker 2 leading", 60)
        os.kill(state["brokers"]["2"]["pid"], signal.SIGKILL)
        reported = read_until("broker 2 exited", 30)
        assert "the other brokers keep running" in reported
        assert f"kafkacore cluster restart 2 --data-dir {root}" in reported
        # the others keep serving: leadership moves after the session timeout, writes go on
        wait_for(lambda: admin.list_topics("up-failover", timeout=10).topics["up-failover"].partitions[0].leader
                 in (1, 3), "a new leader", 60)
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        p.produce("up-failover", b"after the failover")
        assert p.flush(30) == 0
        assert proc.poll() is None
        restarted = subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "restart", "2", "--data-dir",
                                    str(root)], capture_output=True, text=True, timeout=240)
        assert restarted.returncode == 0, restarted.stdout + restarted.stderr
        assert restarted.stdout.startswith("broker 2 restarted on "), restarted.stdout
        wait_for(lambda: sorted(admin.list_topics("up-failover", timeout=10).topics["up-failover"].partitions[0].isrs)
                 == [1, 2, 3], "broker 2 back in the ISR", 60)
        new_pid = json.loads((root / "cluster-up.json").read_text())["brokers"]["2"]["pid"]
        assert new_pid and new_pid != state["brokers"]["2"]["pid"]
        # errors are one line: a broker the cluster does not have, a directory without a cluster
        bad = subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "restart", "7", "--data-dir", str(root)],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and bad.stderr.strip().endswith("the cluster has no broker 7 (brokers: 1, 2, 3)")
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, "".join(lines) + out
    assert not (root / "cluster-up.json").exists()
    none = subprocess.run([sys.executable, "-m", "kafkacore", "cluster", "restart", "2", "--data-dir", str(root)],
                          capture_output=True, text=True, timeout=60)
    assert none.returncode == 1 and len(none.stderr.splitlines()) == 1 and "no `kafkacore cluster up`" in none.stderr


def test_cluster_up_with_sasl_ssl_between_brokers_and_for_clients(tmp_path):
    """--security sasl_ssl: a test CA made with openssl, SCRAM-SHA-512 over TLS between the
    brokers and for clients; the client settings are printed (the password stays in the 0600
    client.properties it names) and work with confluent-kafka for an acks=all write to two
    replicas."""
    import re

    from confluent_kafka import Producer
    from _zookeeper import skip_or_fail_without_zookeeper

    skip_or_fail_without_zookeeper()
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "cluster", "up", "--brokers", "2", "--data-dir",
                             str(tmp_path / "kc"), "--set", "zookeeper.session.timeout.ms=6000", "--security",
                             "sasl_ssl"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    lines = []
    try:
        deadline = time.monotonic() + 120
        while not any("sasl.jaas.config=" in ln for ln in lines) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
        bootstrap = next(ln for ln in lines if ln.startswith("bootstrap servers:")).split(":", 1)[1].strip()
        path = re.search(r"written to (\S+client\.properties):", "".join(lines)).group(1)
        assert os.stat(path).st_mode & 0o777 == 0o600
        props = dict(ln.split("=", 1) for ln in open(path).read().splitlines())
        assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanism"] == "SCRAM-SHA-512"
        assert "  security.protocol=SASL_SSL\n" in lines and f"  ssl.truststore.location={props['ssl.truststore.location']}\n" in lines
        user, password = re.search(r'username="([^"]+)" password="([^"]+)"', props["sasl.jaas.config"]).groups()
        assert password not in "".join(lines)
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": user, "sasl.password": password, "ssl.ca.location": props["ssl.truststore.location"]}
        from confluent_kafka.admin import NewTopic
        admin = AdminClient(conf)  # kept alive until the future resolves: its handle owns the request
        admin.create_topics([NewTopic("dev", 1, 2)])["dev"].result(60)
        p = Producer({**conf, "acks": "all", "message.timeout.ms": 60000})
        for i in range(10):
            p.produce("dev", b"%d" % i)
        assert p.flush(60) == 0
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    logs = "".join(open(tmp_path / "kc" / f"broker-{i}.log", errors="replace").read() for i in (1, 2))
    assert password not in logs and password not in out
