"""``kafkacore perf reference`` and the report of bench/bench_kafka_reference.py (issue 31),
against one real ``kafkacore serve``: a scenario runs in load processes of its own and comes out
beside its published figure; a tiny run of the curves' scenarios makes the plots (real PNG files
matplotlib reads back) and the generated table, which replaces itself between the markers."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from broker_client import ROOT, BrokerProcess  # tests/ is on sys.path (tests/tools/conftest.py)

from kafkacore.client.admin import AdminClient
from kafkacore.tools import perf_reference as ref

sys.path.insert(0, str(Path(ROOT) / "bench"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("perf-ref") / "data", settings={
        "auto.create.topics.enable": "false", "offsets.topic.num.partitions": "1"})
    b.start()
    yield b
    b.stop()


def test_perf_reference_runs_scenarios_beside_the_published_figures(broker):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-m", "kafkacore", "-b", broker.bootstrap, "perf", "reference", "--quick",
                        "--scenarios", "1,2", "-o", "json"], capture_output=True, text=True, timeout=120,
                       cwd=str(ROOT), env=env)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    one, two = data["results"]
    assert (one["key"], one["client"], one["records"]) == ("1", "kafkacore", ref.SCALES["quick"]["records"])
    assert one["records_per_sec"] > 0
    assert one["mb_per_sec"] == pytest.approx(one["records_per_sec"] * 100 / 2**20, rel=0.01)
    assert "producer 1" in one["busy"] and one["bound"]
    assert two["skipped"] == "needs 3 brokers, the cluster has 1"
    # progress on stderr (not a terminal: a line when each scenario starts and ends)
    assert "[1/2] scenario 1: one producer, no replication" in p.stderr
    assert "1. one producer, no replication (kafkacore, cluster): 100,000 records in" in p.stderr
    with AdminClient(broker.bootstrap) as admin:  # what it created, it deleted
        assert not [t for t in admin.list_topics() if t.startswith("kc-ref-")]


def test_a_tiny_run_makes_the_plots_and_the_table(broker, tmp_path):
    import matplotlib.image

    import bench_kafka_reference as bench

    with AdminClient(broker.bootstrap) as admin:
        runner = ref.Runner(admin, broker.bootstrap, ref.KAFKACORE_DRIVER, ref.SCALES["tiny"], ref.StderrProgress,
                            probe=lambda: {"broker": bench.proc_cpu_seconds(broker.proc.pid)}, target="single")
        try:
            results = [runner.run(key) for key in ("6", "5", "9a")]
        finally:
            runner.close()
    assert not [r for r in results if "error" in r or "skipped" in r], results
    sizes, growth, latency = results
    assert [p["record_size"] for p in sizes["points"]] == list(ref.RECORD_SIZES)
    assert "broker" in sizes["points"][0]["busy"]
    assert growth["points"][0]["stored_bytes"] == 0 < growth["points"][1]["stored_bytes"]
    assert growth["stored_bytes"] >= ref.SCALES["tiny"]["growth_bytes"]  # payload plus the batches' framing
    assert latency["latency_ms"]["samples"] == ref.SCALES["tiny"]["latency_records"]
    assert 0 < latency["latency_ms"]["p50"] <= latency["latency_ms"]["p99"] <= latency["latency_ms"]["max"]

    data = {"machine": ref.machine(), "scale": "tiny", "results": results, "loadavg_samples": [0.5, 1.5]}
    written = bench.write_plots(data, str(tmp_path / "plots"))
    assert sorted(os.path.basename(p) for p in written) == [
        "latency-percentiles.png", "throughput-vs-data-stored.png", "throughput-vs-record-size.png"]
    for path in written:
        height, width, _ = matplotlib.image.imread(path).shape
        assert height > 200 and width > 400

    doc = tmp_path / "doc.md"
    doc.write_text(f"# title\n\n{bench.MARKER_BEGIN}\nold\n{bench.MARKER_END}\n\nafter\n")
    for _ in range(2):  # a second run replaces the first table
        bench.write_docs(data, [str(doc)])
    text = doc.read_text()
    assert text.count(bench.MARKER_BEGIN) == 1 and "old" not in text and text.endswith("\n\nafter\n")
    assert "| 9a. end-to-end latency, one record at a time [kafkacore, single] | p50 2 ms p99 3 ms p99.9 14 ms |" in text
    assert f"p50 {latency['latency_ms']['p50']:g} ms" in text
    assert "10 B: " in text and "load average during the run 0.5-1.5" in text
