"""The README's snippets run as written: the Python blocks in order in one fresh interpreter,
the Spark pipeline as a script of its own, and the `kafkacore serve` line starts a broker. The
only change made is the broker address: the blocks name 127.0.0.1:9092, the test's broker
listens on a free port (and its data directory is the one the Spark pipeline is given through
$KAFKACORE_DATA_DIR, as ci/main.sh's would be found)."""
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _kcutil import SOURCE_ROOT
from broker_client import BrokerProcess, free_port

README = Path(SOURCE_ROOT) / "README.md"
pytestmark = pytest.mark.skipif(not README.is_file(), reason="a copy of tests/ without the checkout beside it "
                                "(ci/python_sanitize.sh); ci/installed_test.sh names it in KAFKACORE_SOURCE_ROOT")


def _blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README.read_text(), re.S)


def test_the_python_snippets_run_as_written(tmp_path):
    blocks = [b for b in _blocks("python") if "kafkacore_spark" not in b]
    assert len(blocks) >= 4, "the README's overview, storage, client and embedded snippets"
    # Kafka's default join delay, which the README's poll loop must live with (the suite's
    # brokers set it to 0)
    with BrokerProcess(tmp_path / "broker", settings={"group.initial.rebalance.delay.ms": "3000"}) as broker:
        code = "\n".join(blocks).replace("127.0.0.1:9092", broker.bootstrap)
        script = tmp_path / "readme_snippets.py"
        script.write_text(code)
        work = tmp_path / "cwd"
        work.mkdir()
        out = subprocess.run([sys.executable, str(script)], cwd=work, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    # iter_batches printed the three records of the batch: offset, timestamp, key, value, headers
    assert re.fullmatch(r"0 \d{13} b'k' b'value' \[\('trace', b'1'\)\]", lines[0]), lines[0]
    assert re.fullmatch(r"1 \d{13} None b'v1' \[\]", lines[1]), lines[1]
    assert re.fullmatch(r"2 \d{13} None b'v2' \[\]", lines[2]), lines[2]
    # the consumer got the four records the producer sent, as a list of ConsumerRecord
    consumed = eval(lines[3])  # noqa: S307 - our own printout of tuples of ints and bytes
    assert sorted(v for _p, _o, _k, v in consumed) == [b"v1", b"v2", b"v3", b"value"]
    assert lines[4].startswith("kcat -b 127.0.0.1:") and lines[4].endswith(" -L works while the with block runs")
    # each snippet kept to its own data directory
    assert (work / "storage-demo" / "events-0").is_dir() and (work / "embedded-demo" / "events-5").is_dir()
    assert (work / "embedded-demo" / ".kafka_cleanshutdown").exists()


def test_the_serve_line_starts_a_broker(tmp_path):
    [line] = [ln for b in _blocks("sh") for ln in b.splitlines() if ln.startswith("kafkacore serve")]
    args = line.split("#", 1)[0].split()[2:]
    port = free_port()
    args[args.index("--port") + 1] = str(port)
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "kafkacore", "serve", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        first = proc.stdout.readline()
        assert f"listening on 127.0.0.1:{port}" in first and str(tmp_path / "broker-data") in first, first
        assert time.monotonic() < deadline
    finally:
        proc.terminate()
        proc.wait(30)
    assert proc.returncode == 0
    props = (tmp_path / "broker-data" / "meta.properties").read_text()
    assert "cluster.id=" in props


@pytest.mark.parametrize("command", ["ci/main.sh", "ci/test.sh"])
def test_the_quick_start_names_two_commands_that_exist(command):
    text = README.read_text()
    start = text.index("## Quick start")
    quick = text[start:text.index("\n## ", start + 1)]
    [block] = re.findall(r"```sh\n(.*?)```", quick, re.S)
    assert [ln.split()[0] for ln in block.strip().splitlines()] == ["ci/main.sh", "ci/test.sh"]
    assert os.access(Path(SOURCE_ROOT) / command, os.R_OK)


def test_the_operator_tool_lines_run_as_written(tmp_path):
    """The README's five operator commands, each line through bash as a user types it, against
    a broker named by $KAFKACORE_BOOTSTRAP_SERVERS (the console line runs until it answers)."""
    [block] = _blocks("console")
    lines = [ln for ln in block.strip().splitlines()]
    assert len(lines) == 5 and all(ln.startswith(("kafkacore ", "printf ")) for ln in lines)
    with BrokerProcess(tmp_path / "broker") as broker:
        env = dict(os.environ, KAFKACORE_BOOTSTRAP_SERVERS=broker.bootstrap,
                   PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))

        def run(line):
            out = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=60)
            assert out.returncode == 0, (line, out.stdout, out.stderr)
            return out.stdout

        create, produce, consume, describe, console = lines
        assert "Created topic orders (3 partitions" in run(create)
        run(produce)
        got = sorted(ln.split(" ", 1)[1] for ln in run(consume).splitlines())
        assert got == ["k1 hello", "k2 world"]
        from kafkacore.client.admin import AdminClient

        with AdminClient(broker.bootstrap) as admin:  # a group to describe: billing read one record
            [tp] = [("orders", p) for p in range(3)
                    if admin.list_offsets({("orders", p): -1})[("orders", p)].offset > 0][:1]
            admin.alter_group_offsets("billing", {tp: 0})
        table = run(describe)
        assert "billing" in table and "LAG" in table
        port = free_port()
        proc = subprocess.Popen(["bash", "-c", "exec " + console.split("#")[0].replace("9000", str(port))], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert f"http://127.0.0.1:{port}" in proc.stdout.readline()
            import json
            import urllib.request

            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/overview", timeout=30) as r:
                overview = json.load(r)
            assert overview["topics"] == 1 and [b["port"] for b in overview["brokers"]] == [broker.port]
        finally:
            proc.terminate()
            proc.wait(30)


def test_the_spark_pipeline_runs_as_written(tmp_path):
    """The Spark block alone, as a user's job script: it makes its own SparkSession and data."""
    pytest.importorskip("pyspark")
    import json

    from kafkacore import Consumer

    [code] = [b for b in _blocks("python") if "kafkacore_spark" in b]
    with BrokerProcess(tmp_path / "broker") as broker:
        script = tmp_path / "job.py"
        script.write_text(code.replace("127.0.0.1:9092", broker.bootstrap))
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
        env.update(KAFKACORE_DATA_DIR=str(broker.data_dir), SPARK_LOCAL_IP="127.0.0.1")
        out = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=600)
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-5000:]
        assert "29 orders above 100 written to big-orders" in out.stdout.splitlines(), out.stdout
        c = Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"})
        try:
            c.assign([("big-orders", p) for p in range(c.list_topics()["big-orders"])])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 29 and time.monotonic() < deadline:
                got += [(r.key, json.loads(r.value)) for r in c.poll(0.5)]
        finally:
            c.close()
    want = [("NL" if i % 2 else "FR", {"id": i, "amount": i * 10.0, "country": "NL" if i % 2 else "FR"})
            for i in range(11, 40)]
    assert sorted(got, key=lambda kv: kv[1]["id"]) == [(k.encode(), o) for k, o in want]
