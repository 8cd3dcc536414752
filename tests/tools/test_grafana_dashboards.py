"""Two widely used Kafka Grafana dashboards, every panel's query run against a kafkacore broker
scraped by a real Prometheus (tests/_prometheus.py), with the dashboards' template variables
resolved as Grafana resolves them (through Prometheus: ``query_result`` and ``label_values``,
the variable's regex, "All").

The dashboards are Strimzi's (github strimzi/strimzi-kafka-operator at commit
8541da1e336bdcda9647aeacfbc2048e57580a52):
- ``packaging/examples/metrics/grafana-dashboards/strimzi-kafka.json`` ("Strimzi Kafka"): the
  brokers behind the JMX exporter, with the rules of ``packaging/examples/metrics/kafka-metrics.yaml``;
- ``packaging/examples/metrics/grafana-dashboards/strimzi-kafka-exporter.json`` ("Strimzi Kafka
  Exporter"): topics and consumer lag from kafka_exporter (danielqsj/kafka_exporter).
The queries below are theirs, character for character (one with its leading spaces trimmed);
docs/tools.md lists them panel by panel.
Their filters want the labels Strimzi's PodMonitor gives a broker pod (``namespace``,
``kubernetes_pod_name``, ``strimzi_io_*``, and the operator's ``pod``, ``container``): the
Prometheus here adds to the target the ones docs/tools.md's scrape configuration gives.

A broker with traffic (a producer and a consumer group running through the checks) and a group
with a known lag; every panel answers with data, and with the right value where it can be known.
Panels fed by Kubernetes (cAdvisor, kubelet) or the JVM have nothing to show on kafkacore and are
expected empty (docs/tools.md says why)."""
import re
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/broker_client.py

from _prometheus import Prometheus  # noqa: E402
from broker_client import BrokerProcess, free_port  # noqa: E402

def documented_pod_labels():
    """The labels docs/tools.md ("Grafana dashboards") tells a user to give the first broker's
    target: what Strimzi's PodMonitor (packaging/examples/metrics/prometheus-install/pod-monitors/
    kafka-resources-metrics.yaml) and the Prometheus operator put on a broker pod's samples."""
    from _kcutil import SOURCE_ROOT

    docs = Path(SOURCE_ROOT, "docs", "tools.md").read_text()
    section = docs[docs.index("### Grafana dashboards"):]
    block = section[section.index("```yaml"):section.index("```", section.index("```yaml") + 3)]
    flow = re.search(r"labels: \{(.*?)\}", block, re.S).group(1)
    return dict(item.strip().split(": ", 1) for item in flow.split(","))


# (name, query, regex, include All, All's value): each dashboard's templating, in its order
STRIMZI_KAFKA_VARIABLES = [
    ('kubernetes_namespace', 'query_result(kafka_server_replicamanager_leadercount)', '/.*namespace="([^"]*).*/',
     False, None),
    ('strimzi_cluster_name', 'query_result(kafka_server_replicamanager_leadercount{namespace="$kubernetes_namespace"})',
     '/.*strimzi_io_cluster="([^"]*).*/', False, None),
    ('kafka_broker', 'query_result(kafka_server_replicamanager_leadercount{namespace="$kubernetes_namespace",'
     'strimzi_io_cluster="$strimzi_cluster_name"})', '/.*pod_name="$strimzi_cluster_name-([^"]*).*/', True, '.*'),
    ('kafka_topic', 'query_result(kafka_cluster_partition_replicascount{namespace="$kubernetes_namespace",'
     'strimzi_io_cluster="$strimzi_cluster_name",kubernetes_pod_name=~"$strimzi_cluster_name-$kafka_broker"})',
     '/.*topic="([^"]*).*/', True, '.+'),
    ('kafka_partition', 'query_result(kafka_log_log_size{namespace="$kubernetes_namespace",'
     'strimzi_io_cluster="$strimzi_cluster_name",kubernetes_pod_name=~"$strimzi_cluster_name-$kafka_broker",'
     'topic=~"$kafka_topic"})', '/.*partition="([^"]*).*/', True, '.*'),
]
STRIMZI_EXPORTER_VARIABLES = [
    ('kubernetes_namespace', 'query_result(kafka_broker_info)', '/.*namespace="([^"]*).*/', False, None),
    ('strimzi_cluster_name', 'query_result(kafka_broker_info{namespace="$kubernetes_namespace"})',
     '/.*strimzi_io_cluster="([^"]*).*/', False, None),
    ('consumergroup', 'label_values(kafka_consumergroup_current_offset{namespace="$kubernetes_namespace",'
     'strimzi_io_cluster="$strimzi_cluster_name"}, consumergroup)', None, True, None),
    ('topic', 'label_values(kafka_topic_partition_current_offset{namespace="$kubernetes_namespace",'
     'strimzi_io_cluster="$strimzi_cluster_name"}, topic)', None, True, '.*'),
]

# What each query must answer (check_panel): "data" (some series), ">0" (every series above 0:
# under traffic), "==N" / "==partitions" / "==topics" (every series), "percent" (0 < v <= 100),
# "empty" (not applicable on kafkacore: docs/tools.md)
_SEL = 'namespace="$kubernetes_namespace",strimzi_io_cluster="$strimzi_cluster_name"'
_TOPICS = (_SEL + ',topic=~"$kafka_topic",topic!="",kubernetes_pod_name=~"$strimzi_cluster_name-$kafka_broker"')
_POD = _SEL + ',kubernetes_pod_name=~"$strimzi_cluster_name-$kafka_broker"'
_JVM = ('namespace="$kubernetes_namespace",kubernetes_pod_name=~"$strimzi_cluster_name-$kafka_broker",'
        'strimzi_io_name="$strimzi_cluster_name-kafka"')
STRIMZI_KAFKA_PANELS = [
    ('Brokers Online', 'count(kafka_server_replicamanager_leadercount{' + _SEL + '})', "==1"),
    ('Active Controllers', 'sum(kafka_controller_kafkacontroller_activecontrollercount{' + _SEL + '})', "==1"),
    ('Unclean Leader Election Rate',
     'sum(irate(kafka_controller_controllerstats_uncleanleaderelections_total{' + _SEL + '}[5m]))', "==0"),
    ('Online Replicas', 'sum(kafka_server_replicamanager_partitioncount{' + _SEL + '})', "==partitions"),
    ('Under Replicated Partitions', 'sum(kafka_server_replicamanager_underreplicatedpartitions{' + _SEL + '})', "==0"),
    # one replica each and min.insync.replicas=1: every partition is at its minimum ISR
    ('Partitions at minimum ISR', 'sum(kafka_cluster_partition_atminisr{' + _SEL + '})', "==partitions"),
    ('Partitions under minimum ISR', 'sum(kafka_cluster_partition_underminisr{' + _SEL + '})', "==0"),
    ('Offline Partitions Count', 'sum(kafka_controller_kafkacontroller_offlinepartitionscount{' + _SEL + '})', "==0"),
    ('Memory Usage', 'sum(container_memory_usage_bytes{namespace="$kubernetes_namespace",'
     'pod=~"$strimzi_cluster_name-$kafka_broker",container="kafka"}) by (pod)', "empty"),
    ('CPU Usage', 'sum(rate(container_cpu_usage_seconds_total{namespace="$kubernetes_namespace",'
     'pod=~"$strimzi_cluster_name-$kafka_broker",container="kafka"}[5m])) by (pod)', "empty"),
    ('Available Disk Space', 'sum(kubelet_volume_stats_available_bytes{namespace="$kubernetes_namespace",'
     'persistentvolumeclaim=~"data(-[0-9]+)?-$strimzi_cluster_name-$kafka_broker", '
     'persistentvolumeclaim!~".*zookeeper(-[0-9]+)?$"}) by (persistentvolumeclaim)', "empty"),
    ('Open File Descriptors', 'sum(process_open_fds{namespace="$kubernetes_namespace",'
     'kubernetes_pod_name=~"$strimzi_cluster_name-$kafka_broker",container="kafka"}) by (kubernetes_pod_name)', ">0"),
    ('JVM Memory Used', 'sum(jvm_memory_used_bytes{' + _JVM + '}) by (kubernetes_pod_name)', "empty"),
    ('JVM GC Time', 'sum(rate(jvm_gc_collection_seconds_sum{' + _JVM + '}[5m])) by (kubernetes_pod_name)', "empty"),
    ('JVM GC Count', 'sum(rate(jvm_gc_collection_seconds_count{' + _JVM + '}[5m])) by (kubernetes_pod_name)',
     "empty"),
    ('JVM Thread Count', 'sum(jvm_threads_current{' + _JVM + '}) by (kubernetes_pod_name)', "empty"),
    ('Total Incoming Byte Rate', 'sum(irate(kafka_server_brokertopicmetrics_bytesin_total{' + _TOPICS + '}[5m]))',
     ">0"),
    ('Total Outgoing Byte Rate', 'sum(irate(kafka_server_brokertopicmetrics_bytesout_total{' + _TOPICS + '}[5m]))',
     ">0"),
    ('Incoming Messages Rate', 'sum(irate(kafka_server_brokertopicmetrics_messagesin_total{' + _TOPICS + '}[5m]))',
     ">0"),
    ('Total Produce Request Rate',
     'sum(irate(kafka_server_brokertopicmetrics_totalproducerequests_total{' + _TOPICS + '}[5m]))', ">0"),
    ('Byte Rate', 'sum(irate(kafka_server_brokertopicmetrics_bytesin_total{' + _TOPICS + '}[5m]))', ">0"),
    ('Byte Rate', 'sum(irate(kafka_server_brokertopicmetrics_bytesout_total{' + _TOPICS + '}[5m]))', ">0"),
    ('Messages In Per Second', 'sum(irate(kafka_server_brokertopicmetrics_messagesin_total{' + _TOPICS + '}[5m]))',
     ">0"),
    ('Produce Request Rate',
     'sum(irate(kafka_server_brokertopicmetrics_totalproducerequests_total{' + _TOPICS + '}[5m]))', ">0"),
    ('Produce Request Rate',
     'sum(irate(kafka_server_brokertopicmetrics_failedproducerequests_total{' + _TOPICS + '}[5m]))', "==0"),
    ('Fetch Request Rate',
     'sum(irate(kafka_server_brokertopicmetrics_totalfetchrequests_total{' + _TOPICS + '}[5m]))', ">0"),
    ('Fetch Request Rate',
     'sum(irate(kafka_server_brokertopicmetrics_failedfetchrequests_total{' + _TOPICS + '}[5m]))', "==0"),
    ('Network Processor Avg Idle Percent',
     'sum(kafka_network_socketserver_networkprocessoravgidle_percent{' + _POD + '}*100) by (kubernetes_pod_name)',
     "percent"),
    ('Request Handler Avg Idle Percent',
     'sum(kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent{' + _POD + '}*100) '
     'by (kubernetes_pod_name)', "percent"),
    # /proc/self/io: what reached the block layer (0 on a tmpfs, or between two flushes)
    ('Disk Writes', 'sum(irate(kafka_server_kafkaserver_linux_disk_write_bytes{' + _POD + '}[5m])) '
     'by (kubernetes_pod_name)', "data"),
    ('Disk Reads', 'sum(irate(kafka_server_kafkaserver_linux_disk_read_bytes{' + _POD + '}[5m])) '
     'by (kubernetes_pod_name)', "data"),
    ('Connection Count per Listener', 'sum(kafka_server_socket_server_metrics_connection_count{' + _POD + '}) '
     'by (kubernetes_pod_name, listener)', ">0"),
    ('Log Size', 'kafka_log_log_size{' + _POD + ',topic=~"$kafka_topic",partition=~"$kafka_partition"}', "data"),
]
STRIMZI_EXPORTER_PANELS = [
    ('Topics', 'count(kafka_topic_partitions{topic=~"$topic", namespace=~"$kubernetes_namespace"})', "==topics"),
    ('Partitions', 'sum(kafka_topic_partitions{topic=~"$topic", namespace=~"$kubernetes_namespace"})',
     "==partitions"),
    ('Replicas', 'sum(kafka_topic_partition_replicas{topic=~"$topic", namespace="$kubernetes_namespace"})',
     "==partitions"),
    ('In Sync Replicas', 'sum(kafka_topic_partition_in_sync_replica{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"})', "==partitions"),
    ('Under Replicated Partitions', 'sum(kafka_topic_partition_under_replicated_partition{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"})', "==0"),
    ('Partitions at minimum ISR', 'sum(kafka_cluster_partition_atminisr{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"})', "==partitions"),
    ('Partitions under minimum ISR', 'sum(kafka_cluster_partition_underminisr{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"})', "==0"),
    ('Partitions not on preferred node', 'sum(kafka_topic_partition_leader_is_preferred{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"} < bool 1)', "==0"),
    ('Messages in per second', 'sum(rate(kafka_topic_partition_current_offset{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"}[5m])) by (topic)', "data"),
    ('Messages consumed per second', 'sum(delta(kafka_consumergroup_current_offset{consumergroup=~"$consumergroup",'
     'topic=~"$topic", namespace=~"$kubernetes_namespace"}[5m])/300) by (consumergroup, topic)', "data"),
    ('Lag by  Consumer Group', 'sum(kafka_consumergroup_lag{consumergroup=~"$consumergroup",topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"}) by (consumergroup, topic)', "data"),
    ('Consumer Group Offsets', 'sum(kafka_consumergroup_current_offset{consumergroup=~"$consumergroup",'
     'topic=~"$topic", namespace=~"$kubernetes_namespace"}) by (consumergroup,partition,topic)', "data"),
    ('Consumer Group Lag', 'sum(kafka_consumergroup_lag{consumergroup=~"$consumergroup",topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"}) by (consumergroup,partition,topic)', "data"),
    ('Number of Partitions', 'sum(kafka_topic_partitions{topic=~"$topic", namespace=~"$kubernetes_namespace"}) '
     'by (topic)', "data"),
    ('Latest Offsets', 'sum(kafka_topic_partition_current_offset{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"}) by (partition,topic)', "data"),
    ('Oldest Offsets', 'sum(kafka_topic_partition_oldest_offset{topic=~"$topic", '
     'namespace=~"$kubernetes_namespace"}) by (partition,topic)', "==0"),
]

TRAFFIC, LAGGING = "dash-traffic", "dash-lag"
LAG_COMMITS = {0: (30, 7), 1: (12, 12)}  # partition: (records produced, offset committed)


# -- Grafana's template variables --------------------------------------------------------------
_REGEX_SPECIALS = set("\\^$.|?*+()[]{}")


def _regex_escape(value):
    """Grafana's escaping of a value for a PromQL regex match (a backslash, doubled for the
    PromQL string)."""
    return "".join("\\\\" + c if c in _REGEX_SPECIALS else c for c in value)


def interpolate(text, values):
    for name in sorted(values, key=len, reverse=True):  # $kafka_broker before a shorter $kafka...
        text = text.replace("$" + name, values[name])
    return text


def _series_text(result):
    """A query_result row as Grafana writes it for the variable's regex: name{labels} value time."""
    metric = dict(result["metric"])
    name = metric.pop("__name__", "")
    labels = ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items()))
    t, v = result["value"]
    return f"{name}{{{labels}}} {v} {int(float(t) * 1000)}"


def resolve_variables(prom, variables):
    """{name: substitution}, as Grafana fills a dashboard's variables: each query run, the regex's
    first group kept, the first value chosen, or "All" (the variable's All value, else every
    value as one regex)."""
    values = {}
    for name, query, regex, include_all, all_value in variables:
        q = interpolate(query, values)
        if q.startswith("query_result("):
            texts = [_series_text(r) for r in prom.query(q[len("query_result("):-1])]
        else:
            assert q.startswith("label_values("), q
            selector, label = q[len("label_values("):-1].rsplit(",", 1)
            texts = [r["metric"][label.strip()] for r in prom.query(selector) if label.strip() in r["metric"]]
        found = []
        for text in texts:
            if regex:
                m = re.search(interpolate(regex.strip("/"), values), text)
                if m is None:
                    continue
                text = m.group(1)
            if text not in found:
                found.append(text)
        assert found, f"the dashboard's variable ${name} has no value ({q})"
        if include_all:
            values[name] = all_value if all_value is not None else "(" + "|".join(map(_regex_escape, found)) + ")"
        else:
            values[name] = found[0]
    return values


def check_panel(spec, result, known):
    """None when the query's result meets ``spec``, else what is wrong."""
    got = [float(r["value"][1]) for r in result]
    if spec == "empty":
        return None if not got else f"want no data (not applicable), got {got}"
    if not got:
        return "no data"
    if spec == "data":
        return None
    if spec == ">0":
        return None if all(v > 0 for v in got) else f"want > 0, got {got}"
    if spec == "percent":
        return None if all(0 < v <= 100 for v in got) else f"want a percentage, got {got}"
    want = float(known.get(spec[2:], spec[2:]))
    return None if all(v == want for v in got) else f"want {want}, got {got}"


# -- the broker, its traffic and the Prometheus, for the module ------------------------------------
class Traffic:
    """A producer writing to TRAFFIC and a consumer group reading it, until stopped."""

    def __init__(self, bootstrap):
        from confluent_kafka import Consumer, Producer

        self.stop = threading.Event()
        self.produced = self.consumed = 0
        self.errors = []
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "dash-live",
                                  "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500})
        self.consumer.subscribe([TRAFFIC])
        self.threads = [threading.Thread(target=self._produce, daemon=True),
                        threading.Thread(target=self._consume, daemon=True)]
        for t in self.threads:
            t.start()

    def _produce(self):
        try:
            while not self.stop.is_set():
                for i in range(20):
                    self.producer.produce(TRAFFIC, b"v%d" % self.produced, key=b"k%d" % i)
                    self.produced += 1
                self.producer.poll(0)
                self.stop.wait(0.05)
            self.producer.flush(30)
            self.producer = None
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def _consume(self):
        try:
            while not self.stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    self.consumed += 1
            self.consumer.close()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)
        assert not self.errors, self.errors


@pytest.fixture(scope="module")
def dashboard_env(tmp_path_factory):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    d = tmp_path_factory.mktemp("dashboards")
    broker = BrokerProcess(d / "data", settings={"metrics.port": str(free_port())})
    broker.start()
    prom = traffic = None
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for f in admin.create_topics([NewTopic(TRAFFIC, 3, 1), NewTopic(LAGGING, 2, 1)],
                                     operation_timeout=20).values():
            f.result(30)
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for partition, (n, _committed) in LAG_COMMITS.items():
            for i in range(n):
                p.produce(LAGGING, b"x%d" % i, partition=partition)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dash-lagging",
                      "enable.auto.commit": False})
        c.commit(offsets=[TopicPartition(LAGGING, part, off) for part, (_n, off) in LAG_COMMITS.items()],
                 asynchronous=False)
        c.close()
        traffic = Traffic(broker.bootstrap)
        labels = documented_pod_labels()
        assert labels["kubernetes_pod_name"] == labels["pod"] == "local-kafka-1"  # broker 1
        prom = Prometheus(d, [f"127.0.0.1:{broker.settings['metrics.port']}"], labels=labels)
        prom.wait_ready()
        metadata = admin.list_topics(timeout=20)
        known = {"topics": len(metadata.topics),
                 "partitions": sum(len(t.partitions) for t in metadata.topics.values())}
        del admin, p, c  # no client outlives the broker
        yield broker, prom, traffic, known
    finally:
        if traffic is not None:
            traffic.close()
        if prom is not None:
            prom.stop()
        assert broker.stop() == 0, broker.output()


def _run_panels(prom, variables, panels, known, timeout=30.0):
    """{(title, query): result} once every panel meets its check (rates need a few scrapes of
    traffic), or fails with every panel still wrong."""
    deadline = time.monotonic() + timeout
    while True:
        values = resolve_variables(prom, variables)
        results, wrong = {}, []
        for title, query, spec in panels:
            q = interpolate(query, values)
            assert "$" not in q.replace("$\"", ""), f"{title}: a variable left in {q}"
            results[(title, query)] = result = prom.query(q)
            problem = check_panel(spec, result, known)
            if problem is not None:
                wrong.append(f"{title}: {problem}\n    {q}")
        if not wrong:
            return results, values
        if time.monotonic() > deadline:
            pytest.fail("panels without the data they should show:\n" + "\n".join(wrong), pytrace=False)
        time.sleep(1.0)


def test_every_panel_of_both_dashboards(dashboard_env):
    """One test for both dashboards, sharing one broker and one Prometheus."""
    _broker, prom, traffic, known = dashboard_env
    check_strimzi_kafka(prom, known)
    check_strimzi_kafka_exporter(prom, traffic, known)


def check_strimzi_kafka(prom, known):
    results, values = _run_panels(prom, STRIMZI_KAFKA_VARIABLES, STRIMZI_KAFKA_PANELS, known)
    assert values["kubernetes_namespace"] == "kafkacore" and values["strimzi_cluster_name"] == "local"
    assert values["kafka_broker"] == ".*"  # All
    by_title = {title: result for (title, _q), result in results.items()}
    listeners = {r["metric"]["listener"]: float(r["value"][1]) for r in by_title["Connection Count per Listener"]}
    assert list(listeners) == ["PLAINTEXT"] and listeners["PLAINTEXT"] >= 2  # the producer's, the consumer's
    sizes = {(r["metric"]["topic"], r["metric"]["partition"]) for r in by_title["Log Size"]}
    assert len(sizes) == known["partitions"] and (LAGGING, "1") in sizes


def check_strimzi_kafka_exporter(prom, traffic, known):
    results, values = _run_panels(prom, STRIMZI_EXPORTER_VARIABLES, STRIMZI_EXPORTER_PANELS, known)
    assert set(values["consumergroup"].strip("()").split("|")) == {"dash-lagging", "dash-live"}  # All
    rows = {title: {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in result}
            for (title, _q), result in results.items()}
    # the lag of the group that stopped: what was produced minus what it committed
    lag = {p: n - committed for p, (n, committed) in LAG_COMMITS.items()}
    for p, (n, committed) in LAG_COMMITS.items():
        key = (("consumergroup", "dash-lagging"), ("partition", str(p)), ("topic", LAGGING))
        assert rows["Consumer Group Lag"][key] == lag[p]
        assert rows["Consumer Group Offsets"][key] == committed
        assert rows["Latest Offsets"][(("partition", str(p)), ("topic", LAGGING))] == n
    assert rows["Lag by  Consumer Group"][(("consumergroup", "dash-lagging"), ("topic", LAGGING))] == sum(lag.values())
    assert rows["Number of Partitions"][(("topic", TRAFFIC),)] == 3
    assert rows["Number of Partitions"][(("topic", LAGGING),)] == 2
    # the running group and producer: their topic's offsets move
    assert rows["Messages in per second"][(("topic", TRAFFIC),)] > 0
    deadline = time.monotonic() + 30
    consumed = 'sum(delta(kafka_consumergroup_current_offset{consumergroup="dash-live"}[5m])/300)'
    while not (prom.value(consumed) or 0) > 0:
        assert time.monotonic() < deadline, "the running group's committed offsets never moved"
        time.sleep(1)
    assert traffic.produced > 0 and traffic.consumed > 0
