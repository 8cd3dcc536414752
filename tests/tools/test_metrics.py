"""``kafkacore serve --set metrics.port=N``: Prometheus metrics and /healthz over HTTP, against a
real broker process (one for the module, started with ``--log-format json``), read by this
module's own parser of the text exposition format and scraped by a real Prometheus server
(tests/_prometheus.py)."""
import json
import logging
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/broker_client.py

from _exposition import parse_exposition, value  # noqa: E402
from _prometheus import Prometheus  # noqa: E402
from broker_client import BrokerProcess, KafkaConnection, free_port, request  # noqa: E402
from kafkacore import Consumer, Producer  # noqa: E402
from kafkacore.client.admin import TOPIC_RESOURCE, AdminClient  # noqa: E402
from kafkacore.protocol.messages.fetch_request import FetchPartition, FetchTopic  # noqa: E402
from kafkacore.protocol.messages.produce_request import PartitionProduceData, TopicProduceData  # noqa: E402
from kafkacore.record import RecordBatchBuilder  # noqa: E402

FETCH, METADATA = 1, 3


def http_get(port, path, method="GET"):
    """(status, headers, body text) of one request."""
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape(port):
    status, headers, body = http_get(port, "/metrics")
    assert status == 200 and headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    return parse_exposition(body)[0]


def segment_bytes(data_dir, topic):
    return sum(f.stat().st_size for f in Path(data_dir).glob(f"{topic}-*/*.log"))


def create_topic(bootstrap, name, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(name, partitions, 1)], operation_timeout=20)[name].result(30)


def produce(bootstrap, topic, n, prefix=b"v"):
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as p:
        handles = [p.send(topic, prefix + b"-%d" % i, key=b"k%d" % i) for i in range(n)]
        p.flush(30)
        for h in handles:
            h.result(30)


# -- the broker shared by the module ------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("metrics") / "data"
    b = BrokerProcess(d, settings={"metrics.port": str(free_port())}, extra_args=["--log-format", "json"])
    b.metrics_port = int(b.settings["metrics.port"])
    b.start()
    try:
        yield b
    finally:
        rc = b.stop()
        assert rc == 0, b.output()


def test_produced_records_and_bytes_are_counted_exactly(broker):
    before = scrape(broker.metrics_port)
    create_topic(broker.bootstrap, "m-produce", 3)
    produce(broker.bootstrap, "m-produce", 250)
    m = scrape(broker.metrics_port)
    assert value(m, "kafka_server_brokertopicmetrics_messagesin_total", topic="m-produce") == 250
    on_disk = segment_bytes(broker.data_dir, "m-produce")
    # no recompression (compression.type=producer): the batches as received are the segments' bytes
    assert value(m, "kafka_server_brokertopicmetrics_bytesin_total", topic="m-produce") == on_disk > 250 * 5
    assert (value(m, "kafka_server_brokertopicmetrics_messagesin_total")
            - (value(before, "kafka_server_brokertopicmetrics_messagesin_total") or 0)) == 250
    sizes = {p: value(m, "kafka_log_log_size", topic="m-produce", partition=str(p)) for p in range(3)}
    for p, size in sizes.items():
        assert size == sum(f.stat().st_size for f in Path(broker.data_dir, f"m-produce-{p}").glob("*.log"))
    assert sum(value(m, "kafka_log_log_logendoffset", topic="m-produce", partition=str(p)) for p in range(3)) == 250
    assert all(value(m, "kafka_log_log_logstartoffset", topic="m-produce", partition=str(p)) == 0 for p in range(3))
    assert all(value(m, "kafka_log_log_numlogsegments", topic="m-produce", partition=str(p)) == 1 for p in range(3))
    produced = sum(v for k, v in m["kafka_network_requestmetrics_requests_total"].items()
                   if dict(k)["request"] == "Produce")
    produced_before = sum(v for k, v in before.get("kafka_network_requestmetrics_requests_total", {}).items()
                          if dict(k)["request"] == "Produce")
    assert produced > produced_before
    assert value(m, "kafka_network_requestmetrics_totaltimems_count", request="Produce") == produced
    assert value(m, "kafka_network_requestmetrics_totaltimems_sum", request="Produce") > 0
    assert value(m, "kafka_server_replicamanager_partitioncount") == value(m, "kafka_server_replicamanager_leadercount")
    assert value(m, "kafka_server_replicamanager_partitioncount") >= 3
    assert value(m, "kafka_server_replicamanager_underreplicatedpartitions") == 0


def test_a_single_node_reports_itself_as_the_controller_and_running(broker):
    """Dashboards and alerts written for Kafka work on one node too: the usual
    sum(activecontrollercount) != 1 alert stays quiet, the cluster-wide counts are the node's."""
    create_topic(broker.bootstrap, "m-controller", 2)
    m = scrape(broker.metrics_port)
    assert value(m, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(m, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    with AdminClient(broker.bootstrap) as admin:
        topics = admin.list_topics(internal=True)
    assert value(m, "kafka_controller_kafkacontroller_globaltopiccount") == len(topics)
    assert value(m, "kafka_controller_kafkacontroller_globalpartitioncount") == sum(
        len(t.partitions) for t in topics.values())
    assert value(m, "kafka_server_kafkaserver_brokerstate") == 3


def test_produce_and_fetch_requests_failures_and_rejected_bytes_are_counted(broker):
    """What dashboards built on the JMX exporter plot beside the byte rates: produce and fetch
    requests per partition, the failed ones, and the bytes refused for their size."""
    create_topic(broker.bootstrap, "m-requests", 1)
    before = scrape(broker.metrics_port)

    def delta(m, name, **labels):
        return (value(m, name, **labels) or 0) - (value(before, name, **labels) or 0)

    produce(broker.bootstrap, "m-requests", 20)
    with AdminClient(broker.bootstrap) as admin:
        admin.alter_configs(TOPIC_RESOURCE, "m-requests", {"max.message.bytes": "2000"})
    big = RecordBatchBuilder()
    big.append(b"x" * 5000)
    frame = big.build()
    with KafkaConnection("127.0.0.1", broker.port) as c:
        resp = c.call(0, 9, request(0, acks=1, timeout_ms=5000, topic_data=[TopicProduceData(
            name="m-requests", partition_data=[PartitionProduceData(index=0, records=frame)])]))
        assert resp.responses[0].partition_responses[0].error_code == 10  # MESSAGE_TOO_LARGE
    m = scrape(broker.metrics_port)
    prefix = "kafka_server_brokertopicmetrics_"
    assert delta(m, prefix + "failedproducerequests_total", topic="m-requests") == 1
    assert delta(m, prefix + "totalproducerequests_total", topic="m-requests") >= 2
    assert delta(m, prefix + "bytesrejected_total", topic="m-requests") == len(frame)
    assert delta(m, prefix + "bytesrejected_total") == len(frame)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "auto.offset.reset": "earliest"})
    try:
        consumer.assign([("m-requests", 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 20 and time.monotonic() < deadline:
            got += consumer.poll(0.5)
    finally:
        consumer.close()
    m = scrape(broker.metrics_port)
    assert delta(m, prefix + "totalfetchrequests_total", topic="m-requests") >= 1
    assert delta(m, prefix + "failedfetchrequests_total", topic="m-requests") == 0


def test_fetched_bytes_and_request_counts(broker):
    create_topic(broker.bootstrap, "m-fetch", 1)
    produce(broker.bootstrap, "m-fetch", 40)
    before = scrape(broker.metrics_port)
    with KafkaConnection("127.0.0.1", broker.port) as c:
        for _ in range(3):
            c.call(METADATA, 12, request(METADATA, topics=None))
        resp = c.call(FETCH, 12, request(FETCH, max_wait_ms=0, min_bytes=0, topics=[
            FetchTopic(topic="m-fetch", partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                   partition_max_bytes=1 << 20)])]))
    got = len(resp.responses[0].partitions[0].records)
    assert got == segment_bytes(broker.data_dir, "m-fetch") > 0
    m = scrape(broker.metrics_port)
    assert value(m, "kafka_server_brokertopicmetrics_bytesout_total", topic="m-fetch") == got
    assert (value(m, "kafka_server_brokertopicmetrics_bytesout_total")
            - value(before, "kafka_server_brokertopicmetrics_bytesout_total")) == got
    assert (value(m, "kafka_network_requestmetrics_requests_total", request="Metadata", version="12")
            - (value(before, "kafka_network_requestmetrics_requests_total", request="Metadata", version="12") or 0)) == 3
    # a consumer's fetch is FetchConsumer, as Kafka names it (a follower's is FetchFollower)
    assert (value(m, "kafka_network_requestmetrics_requests_total", request="FetchConsumer", version="12")
            - (value(before, "kafka_network_requestmetrics_requests_total", request="FetchConsumer", version="12")
               or 0)) == 1
    assert value(m, "kafka_network_requestmetrics_requests_total", request="Fetch", version="12") is None


def test_large_and_long_polling_fetches_are_counted_once(broker):
    """A fetch of 64 KiB and more leaves through sendfile after the handler returned, and a long
    poll answers later: both are counted once, with their whole time."""
    create_topic(broker.bootstrap, "m-big", 1)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.size": 1 << 20}) as p:
        for i in range(300):
            p.send("m-big", os.urandom(1000), partition=0)
        p.flush(30)
    size = segment_bytes(broker.data_dir, "m-big")
    assert size > 300_000
    before = scrape(broker.metrics_port)

    def fetch(c, offset, max_wait_ms=0, min_bytes=0):
        return c.call(FETCH, 12, request(FETCH, max_wait_ms=max_wait_ms, min_bytes=min_bytes, topics=[
            FetchTopic(topic="m-big", partitions=[FetchPartition(partition=0, fetch_offset=offset,
                                                                 partition_max_bytes=1 << 22)])]))
    with KafkaConnection("127.0.0.1", broker.port) as c:
        got = len(fetch(c, 0).responses[0].partitions[0].records)
        t = time.monotonic()
        empty = fetch(c, 300, max_wait_ms=300, min_bytes=1)  # at the log end: waits out max_wait_ms
        waited = time.monotonic() - t
    assert got == size and len(empty.responses[0].partitions[0].records) == 0 and waited >= 0.29
    m = scrape(broker.metrics_port)

    def delta(name, **labels):
        return value(m, name, **labels) - (value(before, name, **labels) or 0)
    assert delta("kafka_server_brokertopicmetrics_bytesout_total", topic="m-big") == size
    assert delta("kafka_server_brokertopicmetrics_bytesout_total") == size
    assert delta("kafka_network_requestmetrics_totaltimems_count", request="FetchConsumer") == 2
    assert delta("kafka_network_requestmetrics_totaltimems_sum", request="FetchConsumer") >= 290
    hist = "kafka_network_requestmetrics_totaltimems_histogram"
    assert delta(hist + "_bucket", request="FetchConsumer", le="250") <= 1
    assert delta(hist + "_bucket", request="FetchConsumer", le="+Inf") == 2
    assert delta(hist + "_count", request="FetchConsumer") == 2


def test_consumer_lag_is_log_end_minus_committed(broker):
    create_topic(broker.bootstrap, "m-lag", 2)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i in range(30):
            p.send("m-lag", b"x%d" % i, partition=0)
        for i in range(12):
            p.send("m-lag", b"y%d" % i, partition=1)
        p.flush(30)
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lagging"})
    try:
        c.assign([("m-lag", 0), ("m-lag", 1)])
        c.commit(offsets={("m-lag", 0): 7, ("m-lag", 1): 12})
    finally:
        c.close(autocommit=False)
    m = scrape(broker.metrics_port)
    assert value(m, "kafka_log_log_logendoffset", topic="m-lag", partition="0") == 30
    assert value(m, "kafka_consumergroup_current_offset", consumergroup="lagging", topic="m-lag", partition="0") == 7
    assert value(m, "kafka_consumergroup_lag", consumergroup="lagging", topic="m-lag", partition="0") == 30 - 7
    assert value(m, "kafka_consumergroup_lag", consumergroup="lagging", topic="m-lag", partition="1") == 0
    assert value(m, "kafka_consumergroup_members", consumergroup="lagging") == 0
    assert value(m, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert value(m, "kafka_coordinator_group_groupmetadatamanager_numgroupsempty") >= 1
    assert value(m, "kafka_coordinator_group_groupmetadatamanager_numoffsets") >= 2
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.send("m-lag", b"z", partition=1).result(30)
    m = scrape(broker.metrics_port)
    assert value(m, "kafka_consumergroup_lag", consumergroup="lagging", topic="m-lag", partition="1") == 1


def test_every_metric_served_is_documented(broker):
    from _kcutil import SOURCE_ROOT

    docs = Path(SOURCE_ROOT, "docs", "tools.md").read_text()
    _status, _headers, body = http_get(broker.metrics_port, "/metrics")
    _samples, types = parse_exposition(body)
    assert len(types) >= 26  # a single node: no cluster-only families
    undocumented = [f for f in types if f"`{f}`" not in docs]
    assert not undocumented, f"metrics missing from docs/tools.md: {undocumented}"


def test_healthz_and_the_http_surface(broker):
    status, headers, body = http_get(broker.metrics_port, "/healthz")
    assert (status, body) == (200, "ok\n")
    assert http_get(broker.metrics_port, "/healthz", method="HEAD")[:1] == (200,)
    assert http_get(broker.metrics_port, "/nothing")[0] == 404
    status, headers, _body = http_get(broker.metrics_port, "/metrics", method="POST")
    assert status == 405 and headers["Allow"] == "GET, HEAD"
    # one kept-alive connection answers several scrapes, as Prometheus uses it
    with socket.create_connection(("127.0.0.1", broker.metrics_port), timeout=10) as s:
        f = s.makefile("rb")
        for _ in range(3):
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert f.readline() == b"HTTP/1.1 200 OK\r\n"
            headers = {}
            while (line := f.readline()) != b"\r\n":
                k, _sep, v = line.decode().partition(":")
                headers[k.lower()] = v.strip()
            assert f.read(int(headers["content-length"])) == b"ok\n"
        # garbage gets a 400 and the connection closes; the broker goes on
        s.sendall(b"NONSENSE\r\n\r\n")
        assert f.readline().startswith(b"HTTP/1.1 400 ")
    assert http_get(broker.metrics_port, "/healthz")[0] == 200


def test_healthz_says_why_a_broker_is_not_serving(tmp_path):
    """The broker's own parts in this process: /healthz answers 503 with the reason before the
    Kafka listener serves, 200 while it does, 503 once it is closed, and 503 once the storage
    is shut down."""
    import asyncio

    from broker_client import start_single_node
    from kafkacore.broker.metrics import BrokerMetrics
    from kafkacore.broker.metrics_http import MetricsServer, health
    from kafkacore.broker.server import SocketServer, bind_listener

    async def get(port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /healthz HTTP/1.0\r\n\r\n")
        data = await reader.read()
        writer.close()
        head, _sep, body = data.decode().partition("\r\n\r\n")
        return int(head.split(" ")[1]), body

    async def main():
        broker = await start_single_node(tmp_path / "d")
        server = SocketServer(broker)
        metrics = MetricsServer(BrokerMetrics(broker), lambda: health(broker, server))
        _host, port = await metrics.start(bind_listener("127.0.0.1", 0))
        seen = [await get(port)]
        await server.start("127.0.0.1", 0)
        seen.append(await get(port))
        await server.stop()
        seen.append(await get(port))
        await server.start("127.0.0.1", 0)
        broker.shutdown()
        seen.append(await get(port))
        await server.stop()
        await metrics.stop()
        return seen

    assert asyncio.run(main()) == [(503, "the Kafka listener is not serving\n"), (200, "ok\n"),
                                   (503, "the Kafka listener is not serving\n"), (503, "the storage is closed\n")]


def test_the_idle_share_is_the_event_loops_time_waiting_in_its_selector():
    """What the idle-percent gauges report (broker/loop_idle.py): a loop that waits 0.3 s and
    is then blocked 0.3 s was idle for the wait only."""
    import asyncio
    from time import perf_counter

    from kafkacore.broker.loop_idle import LoopIdle

    async def main():
        t0 = perf_counter()
        idle = LoopIdle(asyncio.get_running_loop())
        assert idle.watching
        await asyncio.sleep(0.3)  # the loop waits in select()
        time.sleep(0.3)  # the loop is busy (blocked)
        return idle.mean_since_start(), idle.recent(), perf_counter() - t0

    mean, recent, elapsed = asyncio.run(main())
    assert 0.29 <= mean * elapsed <= elapsed - 0.29
    assert recent == pytest.approx(mean, abs=0.01)  # the first window runs from the start


def test_prometheus_scrapes_what_was_produced(broker, tmp_path):
    prom = Prometheus(tmp_path, [f"127.0.0.1:{broker.metrics_port}"])
    try:
        create_topic(broker.bootstrap, "m-prom", 2)
        produce(broker.bootstrap, "m-prom", 123)
        on_disk = segment_bytes(broker.data_dir, "m-prom")
        want = {
            'kafka_server_brokertopicmetrics_messagesin_total{topic="m-prom"}': 123,
            'kafka_server_brokertopicmetrics_bytesin_total{topic="m-prom"}': on_disk,
            'sum(kafka_log_log_size{topic="m-prom"})': on_disk,
            'sum(kafka_log_log_logendoffset{topic="m-prom"})': 123,
            'up{job="kafkacore"}': 1,
        }
        targets = prom.wait_ready()
        assert [(t["health"], t["lastError"]) for t in targets] == [("up", "")]
        deadline = time.monotonic() + 30
        while (got := {q: prom.value(q) for q in want}) != want and time.monotonic() < deadline:
            time.sleep(0.5)
        assert got == want, f"Prometheus scraped {got}, want {want}"
        # the histograms parsed as histograms: a quantile over Produce's buckets is a number
        q = prom.value('histogram_quantile(0.5, sum by (le) (kafka_network_requestmetrics_totaltimems_histogram_bucket'
                       '{request="Produce"}))')
        assert q is not None and 0 < q <= 30000
        # the percentile gauges as panels written for the JMX exporter's Kafka rules query them
        # (docs/tools.md names their sources), in ms: FetchConsumer's top one holds a long poll
        # that waited out its 300 ms at the log end of an empty topic
        create_topic(broker.bootstrap, "m-prom-wait", 1)
        with KafkaConnection("127.0.0.1", broker.port) as c:
            t = time.monotonic()
            c.call(FETCH, 12, request(FETCH, max_wait_ms=300, min_bytes=1, topics=[
                FetchTopic(topic="m-prom-wait", partitions=[FetchPartition(partition=0, fetch_offset=0,
                                                                           partition_max_bytes=1024)])]))
            assert time.monotonic() - t >= 0.29
        panels = {
            "p50": 'kafka_network_requestmetrics_totaltimems{quantile="0.50",request="Produce"}',
            "p99": 'kafka_network_requestmetrics_totaltimems{quantile="0.99",request="Produce"}',
            "p999": 'kafka_network_requestmetrics_totaltimems{quantile="0.999",request="Produce"}',
            "avg": 'avg(kafka_network_requestmetrics_totaltimems{quantile="0.99"})',
            "count": 'kafka_network_requestmetrics_totaltimems_count{request="Produce"}',
            "fetch_p999": 'kafka_network_requestmetrics_totaltimems{quantile="0.999",request="FetchConsumer"}',
        }
        deadline = time.monotonic() + 30
        while ((got := {k: prom.value(q) for k, q in panels.items()})["fetch_p999"] or 0) < 250 \
                and time.monotonic() < deadline:
            time.sleep(0.5)
        assert all(v is not None for v in got.values()), got
        assert 0 < got["p50"] <= got["p99"] <= got["p999"] <= 30000, got
        assert got["count"] > 0 and got["avg"] > 0, got
        assert 250 <= got["fetch_p999"] <= 30000, got  # ms: the long poll, in seconds, would be 0.3
    finally:
        prom.stop()


def test_percentiles_are_interpolated_within_the_buckets():
    """The quantile gauges' arithmetic, on counts whose quantiles are known exactly."""
    import math

    from kafkacore.broker.metrics import TIME_BUCKETS_MS, bucket_quantile

    counts = [0] * (len(TIME_BUCKETS_MS) + 1)
    assert math.isnan(bucket_quantile(0.5, counts))
    i1, i2 = TIME_BUCKETS_MS.index(1.0), TIME_BUCKETS_MS.index(500.0)
    counts[i1] = 90  # 90 requests in (0.5, 1] ms
    counts[i2] = 10  # 10 long polls in (250, 500] ms
    assert bucket_quantile(0.45, counts) == pytest.approx(0.75)  # half-way through (0.5, 1]
    assert bucket_quantile(0.90, counts) == pytest.approx(1.0)
    assert bucket_quantile(0.95, counts) == pytest.approx(375.0)  # ms, not seconds
    counts[-1] = 1  # beyond the last bound: the highest finite bound, as histogram_quantile says
    assert bucket_quantile(0.999, counts) == TIME_BUCKETS_MS[-1]


def test_log_format_json_makes_every_line_a_json_object(broker):
    lines = [ln for ln in broker.output().splitlines() if ln.strip()]
    assert len(lines) > 3
    records = [json.loads(ln) for ln in lines]  # every line, stdout's start line and stderr's log
    for r in records:
        assert {"ts", "level", "logger", "message"} <= set(r), r
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["ts"]), r
    assert any("listening on 127.0.0.1:%d" % broker.port in r["message"] for r in records)
    assert any(f"metrics on http://127.0.0.1:{broker.metrics_port}/metrics" in r["message"] for r in records)
    assert {r["level"] for r in records} <= {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}
    # an exception's text rides in the same object
    from kafkacore.broker.main import JsonFormatter

    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        rec = logging.getLogger("t").makeRecord("t", logging.ERROR, __file__, 1, "failed %s", ("x",),
                                                sys.exc_info())
    out = JsonFormatter().format(rec)
    assert "\n" not in out
    obj = json.loads(out)
    assert obj["message"] == "failed x" and obj["level"] == "ERROR" and obj["logger"] == "t"
    assert obj["exception"].startswith("Traceback") and "ValueError: boom\nsecond line" in obj["exception"]


@pytest.mark.parametrize("setting, message", [
    ("metrics.port=abc", "kafkacore: bad configuration: metrics.port='abc': expected an integer"),
    ("metrics.port=70000", "kafkacore: bad configuration: metrics.port='70000': must be between 0 and 65535"),
    ("metrics.port=-1", "kafkacore: bad configuration: metrics.port='-1': must be between 0 and 65535"),
])
def test_a_bad_metrics_port_is_one_line(tmp_path, setting, message):
    r = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--port", str(free_port()),
                        "--data-dir", str(tmp_path / "d"), "--set", setting],
                       capture_output=True, text=True, timeout=60, cwd=Path(__file__).resolve().parents[2])
    assert (r.returncode, r.stderr, r.stdout) == (2, message + "\n", "")
    assert not (tmp_path / "d").exists()


def test_a_metrics_port_in_use_or_equal_to_the_listener_is_one_line(tmp_path):
    root = Path(__file__).resolve().parents[2]
    port = free_port()
    r = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--port", str(port), "--data-dir",
                        str(tmp_path / "d"), "--set", f"metrics.port={port}"],
                       capture_output=True, text=True, timeout=60, cwd=root)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == (f"kafkacore: bad configuration: metrics.port={port}: the Kafka listener's port; "
                        "metrics need a port of their own\n")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "kafkacore", "serve", "--port", str(port), "--data-dir",
                            str(tmp_path / "d"), "--set", f"metrics.port={taken}"],
                           capture_output=True, text=True, timeout=60, cwd=root)
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith(f"kafkacore: cannot serve metrics on 127.0.0.1:{taken} (metrics.port): ")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "d").exists()  # refused before the data directory was made


def test_percentiles_cover_about_the_last_five_minutes():
    """Scrapes keep window starts; requests older than QUANTILE_WINDOW_S leave the percentiles,
    and a name idle for the whole window keeps those of all its requests."""
    from kafkacore.broker.metrics import MARK_EVERY_S, QUANTILE_WINDOW_S, RequestCounters

    r = RequestCounters("Produce", 9)
    assert all(v != v for _q, v in r.recent_quantiles(1000.0))  # NaN: nothing timed; a window start
    for _ in range(100):
        r.observe(9, 0.3)  # fast ones, (0.25, 0.5] ms
    fast = dict(r.recent_quantiles(1000.0 + MARK_EVERY_S))  # a second window start
    assert 0.25 < fast["0.50"] <= fast["0.999"] <= 0.5
    for _ in range(10):
        r.observe(9, 400.0)  # slow ones, (250, 500] ms
    mixed = dict(r.recent_quantiles(1000.0 + 2 * MARK_EVERY_S))
    assert mixed["0.50"] <= 0.5 and 250 < mixed["0.95"] <= 500
    # the first window start too old: from the second one on, only the slow ones
    late = dict(r.recent_quantiles(1000.0 + MARK_EVERY_S + QUANTILE_WINDOW_S))
    assert 250 < late["0.50"] <= late["0.999"] <= 500
    # nothing new for a whole window: all of them again, not nothing
    idle = dict(r.recent_quantiles(1000.0 + 3 * QUANTILE_WINDOW_S))
    assert idle == mixed
    assert len(r.marks) <= QUANTILE_WINDOW_S / MARK_EVERY_S + 1
