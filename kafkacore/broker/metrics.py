"""The broker's metrics, for ``/metrics`` (metrics_http.py) in Prometheus' text exposition
format 0.0.4, with Kafka's names as the JMX exporter's Kafka rules (``kafka-2_0_0.yml`` in
prometheus/jmx_exporter's example configs) turn Kafka's MBeans into Prometheus names: the MBean
``kafka.server:type=BrokerTopicMetrics,name=MessagesInPerSec,topic=T`` becomes
``kafka_server_brokertopicmetrics_messagesin_total{topic="T"}``. docs/tools.md lists them all.

Two kinds, so the request path pays for nothing it does not need:

- counters, kept by the request path as plain int increments on objects made once (no locks: the
  broker counts on its event loop; the replica fetchers too). ``KafkaServer.metrics`` is None when
  ``metrics.port`` is not set, and the request path then only tests that;
- gauges (log sizes, partition counts, groups, consumer lag), computed at scrape time by walking
  the broker's own structures, never maintained on the request path. The request-time
  percentiles too: from the request path's bucket counts, at scrape time (RequestCounters).
"""
from __future__ import annotations

import os
import resource
import time
from bisect import bisect_left
from collections import deque
from time import perf_counter

from ..errors import MessageTooLargeError, RecordListTooLargeError
from ..protocol.api_table import ApiKey
from .fetch_session import FetchSessionCache


# Upper bounds (ms) of the request time histogram buckets; +Inf is added. From well under a
# millisecond (a produce to the page cache) to a long-poll fetch (fetch.max.wait.ms, 500 ms by
# default) and a JoinGroup waiting out a rebalance (seconds).
TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
                   10000.0, 30000.0)
_LE = tuple(f"{b:g}" for b in TIME_BUCKETS_MS) + ("+Inf",)

# The percentiles Kafka's Yammer histograms expose (50thPercentile ... 999thPercentile), as the
# JMX exporter's kafka-2_0_0.yml rule labels them: quantile="0.$N" from the attribute's digits.
QUANTILES = (("0.50", 0.50), ("0.75", 0.75), ("0.95", 0.95), ("0.98", 0.98), ("0.99", 0.99), ("0.999", 0.999))
# Kafka's histograms sample into an exponentially decaying reservoir biased to the last ~5
# minutes; the quantiles here are over the requests of about the last QUANTILE_WINDOW_S seconds.
QUANTILE_WINDOW_S = 300.0
# A scrape keeps the bucket counts it saw as a window start at most this often, bounding the
# marks kept to QUANTILE_WINDOW_S / MARK_EVERY_S per request name whatever the scrape rate.
MARK_EVERY_S = 5.0


# Kafka's BrokerState value while serving (RunningAsBroker in ZooKeeper mode, RUNNING in KRaft):
# metrics are served only by a broker that has started, and stop with it
BROKER_STATE_RUNNING = 3
REJECTED_FOR_SIZE = frozenset((MessageTooLargeError.code, RecordListTooLargeError.code))


class TopicCounters:
    """Kafka's BrokerTopicMetrics of one topic (or of all topics: the broker's totals)."""

    __slots__ = ("messages_in", "bytes_in", "bytes_out", "bytes_rejected", "total_produce_requests",
                 "failed_produce_requests", "total_fetch_requests", "failed_fetch_requests")

    def __init__(self):
        self.messages_in = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.bytes_rejected = 0
        self.total_produce_requests = 0  # per partition of a Produce request, as Kafka counts them
        self.failed_produce_requests = 0
        self.total_fetch_requests = 0  # per partition of a Fetch response
        self.failed_fetch_requests = 0


class RequestCounters:
    """Kafka's RequestMetrics of one request name: RequestsPerSec by version, TotalTimeMs."""

    __slots__ = ("name", "by_version", "buckets", "sum_ms", "count", "marks")

    def __init__(self, name, max_version):
        self.name = name
        self.by_version = [0] * (max_version + 1)
        self.buckets = [0] * (len(TIME_BUCKETS_MS) + 1)  # per bucket, not cumulative; the last is +Inf
        self.sum_ms = 0.0
        self.count = 0
        # (monotonic time, bucket counts then) taken by scrapes, oldest first: the window's start
        # is the newest mark at least QUANTILE_WINDOW_S old (the broker's start before any)
        self.marks = deque()

    def recent_quantiles(self, now):
        """The QUANTILES of the request times of about the last QUANTILE_WINDOW_S seconds, in ms,
        interpolated within the buckets (as histogram_quantile does); of all requests since the
        start when none came in the window (a Yammer reservoir, too, keeps its samples while no
        new ones come). Scrape time only: the request path keeps just its bucket increments."""
        marks = self.marks
        while len(marks) > 1 and marks[1][0] <= now - QUANTILE_WINDOW_S:
            marks.popleft()
        current = tuple(self.buckets)
        counts = current
        if marks:
            start = marks[0][1]
            window = tuple(c - s for c, s in zip(current, start))
            if any(window):
                counts = window
        if not marks or now - marks[-1][0] >= MARK_EVERY_S:
            marks.append((now, current))
        return [(label, bucket_quantile(q, counts)) for label, q in QUANTILES]

    def observe(self, version, ms):
        self.count += 1
        self.sum_ms += ms
        self.by_version[version] += 1
        self.buckets[bisect_left(TIME_BUCKETS_MS, ms)] += 1


def bucket_quantile(q, counts):
    """The q-quantile (0 < q < 1) of times counted per TIME_BUCKETS_MS bucket (``counts``: not
    cumulative, the last one +Inf), linearly interpolated within its bucket; the highest finite
    bound for the +Inf bucket; NaN for no times at all (Prometheus' summaries say NaN too)."""
    total = sum(counts)
    if not total:
        return float("nan")
    rank = q * total
    below = 0
    for i, n in enumerate(counts):
        if n and below + n >= rank:
            if i == len(TIME_BUCKETS_MS):
                return TIME_BUCKETS_MS[-1]
            lower = TIME_BUCKETS_MS[i - 1] if i else 0.0
            return lower + (TIME_BUCKETS_MS[i] - lower) * (rank - below) / n
        below += n
    return TIME_BUCKETS_MS[-1]


def _fetch_replica_id(request, version):
    if version >= 15:
        state = request.replica_state
        return state.replica_id if state is not None else -1
    return request.replica_id


class BrokerMetrics:
    def __init__(self, broker):
        from .handlers import HANDLERS

        self.broker = broker
        self.all_topics = TopicCounters()
        self.topics: dict[str, TopicCounters] = {}
        self.replication_bytes_in = 0
        self.replication_bytes_out = 0
        self.requests = [None] * (max(HANDLERS) + 1)  # by API key
        for key, entry in HANDLERS.items():
            self.requests[key] = RequestCounters(entry.name, entry.max_version)
        fetch = HANDLERS[ApiKey.FETCH]
        self.requests[ApiKey.FETCH] = RequestCounters("FetchConsumer", fetch.max_version)
        self.fetch_follower = RequestCounters("FetchFollower", fetch.max_version)
        self.started = _process_start_time()
        self.loop_idle = None  # a LoopIdle once watch_loop ran

    def watch_loop(self, loop):
        """Times the event loop's waits, for the idle-percent gauges (broker/loop_idle.py)."""
        from .loop_idle import LoopIdle

        idle = LoopIdle(loop)
        self.loop_idle = idle if idle.watching else None

    # -- the request path ---------------------------------------------------------------------
    def topic(self, name) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def produced(self, topic, records, nbytes):
        """A batch appended by Produce (Kafka's MessagesInPerSec, BytesInPerSec: records and
        the batch's bytes as received)."""
        t = self.topics.get(topic)
        if t is None:
            t = self.topic(topic)
        t.messages_in += records
        t.bytes_in += nbytes
        a = self.all_topics
        a.messages_in += records
        a.bytes_in += nbytes

    def produce_request(self, topic, error_code, records):
        """One partition of a Produce request answered (TotalProduceRequestsPerSec, and
        FailedProduceRequestsPerSec when refused); a batch refused for its size counts its bytes
        as rejected (BytesRejectedPerSec)."""
        for t in (self.topic(topic), self.all_topics):
            t.total_produce_requests += 1
            if error_code:
                t.failed_produce_requests += 1
                if error_code in REJECTED_FOR_SIZE and records is not None:
                    t.bytes_rejected += len(records)

    def request_done(self, api_key, version, request, response, t0):
        """A request answered (its response written to the socket, or none for acks=0), t0 its
        perf_counter() on arrival. ``response``: the response object when known (a Fetch's
        record bytes are counted from it), None when it was already encoded (and counted)."""
        ms = (perf_counter() - t0) * 1000.0
        if api_key == ApiKey.FETCH:
            follower = _fetch_replica_id(request, version) >= 0
            if response is not None:
                self._fetch_bytes(response, follower)
            (self.fetch_follower if follower else self.requests[ApiKey.FETCH]).observe(version, ms)
            return
        self.requests[api_key].observe(version, ms)

    def fetch_response(self, request, version, response):
        """A Fetch response about to be sent (whose time is counted when the send ends)."""
        self._fetch_bytes(response, _fetch_replica_id(request, version) >= 0)

    def _fetch_bytes(self, response, follower):
        """BytesOutPerSec (consumers, by topic) or ReplicationBytesOutPerSec (followers), from
        the record bytes of the response, as Kafka counts them."""
        total = 0
        topics = response.responses
        a = self.all_topics
        for t in topics:
            counters = self.topic(t.topic)
            n = len(t.partitions)
            failed = sum(1 for p in t.partitions if p.error_code)
            counters.total_fetch_requests += n
            counters.failed_fetch_requests += failed
            a.total_fetch_requests += n
            a.failed_fetch_requests += failed
        if follower:
            for t in topics:
                for p in t.partitions:
                    r = p.records
                    if r is not None:
                        total += len(r)
            self.replication_bytes_out += total
            return
        for t in topics:
            n = 0
            for p in t.partitions:
                r = p.records
                if r is not None:
                    n += len(r)
            if n:
                self.topic(t.topic).bytes_out += n
                total += n
        self.all_topics.bytes_out += total

    # -- scrape time -------------------------------------------------------------------------------
    def render(self) -> str:
        out = _Exposition()
        self._render_topic_counters(out)
        self._render_requests(out)
        self._render_logs(out)
        self._render_replicas(out)
        self._render_partitions(out)
        self._render_fetch_sessions(out)
        self._render_connections(out)
        self._render_controller(out)
        self._render_network(out)
        out.gauge("kafka_server_kafkaserver_brokerstate", BROKER_STATE_RUNNING,
                  "3 (RUNNING) while the broker serves; Kafka's BrokerState "
                  "(kafka.server:type=KafkaServer,name=BrokerState)")
        self._render_groups(out)
        self._render_share_coordinator(out)
        self._render_share(out)
        self._render_topics_exporter(out)
        self._render_quotas(out)
        self._render_process(out)
        return out.text()

    def _render_topic_counters(self, out):
        broker = self.broker
        for name in [n for n in self.topics if n not in broker.topics]:
            del self.topics[name]  # a deleted topic's metrics go with it, as Kafka removes them
        topics = sorted(self.topics.items())
        for attr, metric, mbean, what in (
                ("messages_in", "messagesin", "MessagesInPerSec", "records appended by Produce"),
                ("bytes_in", "bytesin", "BytesInPerSec", "bytes of record batches appended by Produce"),
                ("bytes_out", "bytesout", "BytesOutPerSec", "bytes of records sent to consumers"),
                ("bytes_rejected", "bytesrejected", "BytesRejectedPerSec",
                 "bytes of record batches refused for their size (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE)"),
                ("total_produce_requests", "totalproducerequests", "TotalProduceRequestsPerSec",
                 "partitions of Produce requests answered"),
                ("failed_produce_requests", "failedproducerequests", "FailedProduceRequestsPerSec",
                 "partitions of Produce requests answered with an error"),
                ("total_fetch_requests", "totalfetchrequests", "TotalFetchRequestsPerSec",
                 "partitions of Fetch responses (consumers and followers)"),
                ("failed_fetch_requests", "failedfetchrequests", "FailedFetchRequestsPerSec",
                 "partitions of Fetch responses with an error")):
            name = f"kafka_server_brokertopicmetrics_{metric}_total"
            out.family(name, "counter", f"{what}; without a topic label: all topics "
                                        f"(kafka.server:type=BrokerTopicMetrics,name={mbean})")
            out.sample(name, (), getattr(self.all_topics, attr))
            for topic, counters in topics:
                out.sample(name, (("topic", topic),), getattr(counters, attr))
        out.counter("kafka_server_brokertopicmetrics_replicationbytesin_total", self.replication_bytes_in,
                    "bytes of record batches appended by this broker's replica fetchers "
                    "(kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesInPerSec)")
        out.counter("kafka_server_brokertopicmetrics_replicationbytesout_total", self.replication_bytes_out,
                    "bytes of records sent to followers "
                    "(kafka.server:type=BrokerTopicMetrics,name=ReplicationBytesOutPerSec)")

    def _render_requests(self, out):
        used = [r for r in self.requests if r is not None and r.count]
        if self.fetch_follower.count:
            used.append(self.fetch_follower)
        used.sort(key=lambda r: r.name)
        name = "kafka_network_requestmetrics_requests_total"
        out.family(name, "counter", "requests answered, by request name and version "
                                    "(kafka.network:type=RequestMetrics,name=RequestsPerSec)")
        for r in used:
            for version, n in enumerate(r.by_version):
                if n:
                    out.sample(name, (("request", r.name), ("version", str(version))), n)
        # Kafka's TotalTimeMs as the JMX exporter's rules serve it: the percentile attributes as
        # gauges with a quantile label, the Count as its own family. Typed gauge as it types
        # them, not summary: Prometheus 3 normalises a summary's quantile values ("0.50" to
        # "0.5", its 3.0 migration guide), which panels written for the exporter would miss. The buckets are served too, as a
        # histogram under a name of its own (one family cannot be both).
        name = "kafka_network_requestmetrics_totaltimems"
        out.family(name, "gauge", "milliseconds from a request's arrival to its response written to the "
                                  "socket, percentiles of about the last 5 minutes' requests "
                                  "(kafka.network:type=RequestMetrics,name=TotalTimeMs, *thPercentile)")
        now = time.monotonic()
        for r in used:
            labels = (("request", r.name),)
            for label, ms in r.recent_quantiles(now):
                out.sample(name, labels + (("quantile", label),), ms)
        out.family(name + "_count", "counter", "requests timed since the broker started "
                                               "(kafka.network:type=RequestMetrics,name=TotalTimeMs, Count)")
        for r in used:
            out.sample(name + "_count", (("request", r.name),), r.count)
        out.family(name + "_sum", "counter", "milliseconds of the requests timed since the broker started "
                                             "(kafka.network:type=RequestMetrics,name=TotalTimeMs: Mean x Count)")
        for r in used:
            out.sample(name + "_sum", (("request", r.name),), r.sum_ms)
        name = "kafka_network_requestmetrics_totaltimems_histogram"
        out.family(name, "histogram", "milliseconds from a request's arrival to its response written to the "
                                      "socket, in buckets since the broker started "
                                      "(kafka.network:type=RequestMetrics,name=TotalTimeMs)")
        for r in used:
            labels = (("request", r.name),)
            cumulative = 0
            for le, n in zip(_LE, r.buckets):
                cumulative += n
                out.sample(name + "_bucket", labels + (("le", le),), cumulative)
            out.sample(name + "_sum", labels, r.sum_ms)
            out.sample(name + "_count", labels, r.count)

    def _render_logs(self, out):
        logs = sorted(self.broker.log_manager._open_logs().items())
        rows = []
        for (topic, partition), lg in logs:
            segments = lg.segments
            rows.append(((("topic", topic), ("partition", str(partition))), sum(s.size for s in segments),
                         len(segments), lg.log_start_offset, lg.log_end_offset))
        for i, metric, mbean, what in ((1, "size", "Size", "bytes of the partition's segment files"),
                                       (2, "numlogsegments", "NumLogSegments", "segments of the partition's log"),
                                       (3, "logstartoffset", "LogStartOffset", "first offset of the partition's log"),
                                       (4, "logendoffset", "LogEndOffset", "offset the next record appended gets")):
            name = f"kafka_log_log_{metric}"
            out.family(name, "gauge", f"{what} (kafka.log:type=Log,name={mbean})")
            for row in rows:
                out.sample(name, row[0], row[i])

    def _render_replicas(self, out):
        rm = self.broker.replica_manager
        parts = list(rm.partitions.values())
        partitions = len(parts)
        leaders = under = under_min = 0
        for p in parts:
            if p.is_leader:
                leaders += 1
                isr = len(p.isr)
                if isr < len(p.replicas):
                    under += 1
                if isr < p.log.config.min_insync_replicas:
                    under_min += 1
        prefix = "kafka_server_replicamanager_"
        out.gauge(prefix + "partitioncount", partitions, "partitions with a replica on this broker "
                  "(kafka.server:type=ReplicaManager,name=PartitionCount)")
        out.gauge(prefix + "leadercount", leaders, "partitions this broker leads "
                  "(kafka.server:type=ReplicaManager,name=LeaderCount)")
        out.gauge(prefix + "underreplicatedpartitions", under, "partitions led here whose ISR is smaller than "
                  "their replica set (kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions)")
        out.gauge(prefix + "underminisrpartitioncount", under_min, "partitions led here whose ISR is below "
                  "min.insync.replicas (kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount)")
        out.counter(prefix + "isrshrinks_total", rm.isr_shrinks, "ISR changes of partitions led here that "
                    "removed replicas (kafka.server:type=ReplicaManager,name=IsrShrinksPerSec)")
        out.counter(prefix + "isrexpands_total", rm.isr_expands, "ISR changes of partitions led here that "
                    "added replicas (kafka.server:type=ReplicaManager,name=IsrExpandsPerSec)")

    def _render_partitions(self, out):
        """Kafka's per-partition gauges (kafka.cluster:type=Partition,name=N,topic=T,partition=P),
        for every replica on this broker, with Kafka's rules: the counts and the ISR checks are
        the leader's (0 on a follower); LastStableOffsetLag is the high watermark minus the LSO."""
        rows = []
        for p in sorted(self.broker.replica_manager.partitions.values(), key=lambda p: (p.topic, p.partition)):
            lg = p.log
            labels = (("topic", p.topic), ("partition", str(p.partition)))
            if p.is_leader:
                isr, replicas, min_isr = len(p.isr), len(p.replicas), lg.config.min_insync_replicas
                values = (isr, replicas, int(isr < replicas), int(isr < min_isr), int(isr == min_isr))
            else:
                values = (0, 0, 0, 0, 0)
            rows.append((labels, values + (max(lg.high_watermark - lg.last_stable_offset, 0),)))
        for i, (metric, mbean, what) in enumerate((
                ("insyncreplicascount", "InSyncReplicasCount", "the ISR's size, on the leader (0 on a follower)"),
                ("replicascount", "ReplicasCount", "the replica set's size, on the leader (0 on a follower)"),
                ("underreplicated", "UnderReplicated", "1 on the leader while the ISR is smaller than the replica set"),
                ("underminisr", "UnderMinIsr", "1 on the leader while the ISR is below min.insync.replicas"),
                ("atminisr", "AtMinIsr", "1 on the leader while the ISR's size equals min.insync.replicas"),
                ("laststableoffsetlag", "LastStableOffsetLag",
                 "high watermark minus last stable offset: records held back by open transactions"))):
            name = "kafka_cluster_partition_" + metric
            out.family(name, "gauge", f"{what} (kafka.cluster:type=Partition,name={mbean})")
            for labels, values in rows:
                out.sample(name, labels, values[i])

    def _render_network(self, out):
        """The event loop's idle share (it is the network thread and the request handler:
        broker/loop_idle.py) and the unclean elections of the controller; the connections per
        listener are _render_connections'."""
        idle = self.loop_idle
        if idle is not None:
            out.gauge("kafka_network_socketserver_networkprocessoravgidle_percent", idle.recent(),
                      "share (0-1) of the last 30-60 s the event loop waited for work "
                      "(kafka.network:type=SocketServer,name=NetworkProcessorAvgIdlePercent)")
            out.gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidle_percent", idle.mean_since_start(),
                      "share (0-1) of the time since the start the event loop, which runs the handlers, waited for "
                      "work (kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent MeanRate)")
        out.counter("kafka_controller_controllerstats_uncleanleaderelections_total",
                    self.broker.cluster.unclean_leader_elections(),
                    "leaders this broker's controller elected from outside the ISR "
                    "(kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec)")

    def _render_fetch_sessions(self, out):
        cache = FetchSessionCache.of_broker(self.broker)
        sessions = list(cache.sessions.values()) if cache is not None else []
        prefix = "kafka_server_fetchsessioncache_"
        out.gauge(prefix + "numincrementalfetchsessions", len(sessions), "incremental fetch sessions (KIP-227) "
                  "this broker holds (kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions)")
        out.gauge(prefix + "numincrementalfetchpartitionscached", sum(len(s.partitions) for s in sessions),
                  "partitions held in those sessions "
                  "(kafka.server:type=FetchSessionCache,name=NumIncrementalFetchPartitionsCached)")
        out.counter(prefix + "incrementalfetchsessionevictions_total", cache.evictions if cache is not None else 0,
                    "sessions evicted to make room for new ones "
                    "(kafka.server:type=FetchSessionCache,name=IncrementalFetchSessionEvictionsPerSec)")

    def _render_connections(self, out):
        quotas = self.broker.connection_quotas
        if quotas is None:
            return
        name = "kafka_server_socket_server_metrics_connection_count"
        out.family(name, "gauge", "open connections of a listener, counted as max.connections counts them "
                   "(kafka.server:type=socket-server-metrics,listener=L,networkProcessor=N connection-count, "
                   "summed over the processors)")
        for listener, count in sorted(quotas.by_listener.items()):
            out.sample(name, (("listener", listener),), count)

    def _render_controller(self, out):
        prefix = "kafka_controller_kafkacontroller_"
        # a single node is its own controller (a cluster of one): dashboards and the usual
        # sum(activecontrollercount) != 1 alert work unchanged
        active, offline, topic_count, partition_count = self.broker.cluster.controller_gauges()
        out.gauge(prefix + "activecontrollercount", int(active), "1 on the broker that is the cluster's "
                  "controller, else 0 (kafka.controller:type=KafkaController,name=ActiveControllerCount)")
        out.gauge(prefix + "offlinepartitionscount", offline,
                  "partitions without a leader that could be elected; reported by the active controller "
                  "(kafka.controller:type=KafkaController,name=OfflinePartitionsCount)")
        out.gauge(prefix + "globaltopiccount", topic_count,
                  "topics in the cluster; reported by the active controller "
                  "(kafka.controller:type=KafkaController,name=GlobalTopicCount)")
        out.gauge(prefix + "globalpartitioncount", partition_count,
                  "partitions in the cluster; reported by the active controller "
                  "(kafka.controller:type=KafkaController,name=GlobalPartitionCount)")

    def _render_groups(self, out):
        from ..coordinator import consumer_group as cg
        from ..coordinator import group as g
        from ..coordinator import share_group as sg

        broker = self.broker
        coordinator = broker.group_coordinator
        groups = sorted((gid, grp) for gid, grp in coordinator.groups.items() if grp.state != g.DEAD)
        by_state = dict.fromkeys(g.STATES, 0)  # classic groups (Kafka's NumGroups<State>)
        consumer_by_state = dict.fromkeys(cg.STATES, 0)
        share_by_state = dict.fromkeys(sg.STATES, 0)
        offsets = 0
        for _gid, grp in groups:
            if grp.group_type == cg.GROUP_TYPE:
                consumer_by_state[grp.state] += 1
            elif grp.group_type == sg.GROUP_TYPE:
                share_by_state[grp.state] += 1
            else:
                by_state[grp.state] += 1
            offsets += len(grp.offsets)
        prefix = "kafka_coordinator_group_groupmetadatamanager_"
        mbean = "kafka.coordinator.group:type=GroupMetadataManager,name="
        out.gauge(prefix + "numgroups", len(groups), f"consumer groups this broker coordinates ({mbean}NumGroups)")
        for state in g.STATES:
            out.gauge(prefix + "numgroups" + state.lower(), by_state[state],
                      f"groups coordinated here in state {state} ({mbean}NumGroups{state})")
        out.gauge(prefix + "numoffsets", offsets, f"committed offsets held by this coordinator ({mbean}NumOffsets)")
        family = "kafka_server_groupcoordinatormetrics_consumergroupcount"
        out.family(family, "gauge", "KIP-848 consumer groups coordinated here by state "
                                    "(kafka.server:type=group-coordinator-metrics,name=consumer-group-count,state=...)")
        for state in cg.STATES:
            out.sample(family, (("state", state.lower()),), consumer_by_state[state])
        family = "kafka_server_groupcoordinatormetrics_sharegroupcount"
        out.family(family, "gauge", "KIP-932 share groups coordinated here by state "
                                    "(kafka.server:type=group-coordinator-metrics,name=share-group-count,state=...)")
        for state in sg.STATES:
            out.sample(family, (("state", state.lower()),), share_by_state[state])
        out.counter("kafka_server_groupcoordinatormetrics_consumergrouprebalance_total",
                    coordinator.consumer.rebalances,
                    "new target assignments of the KIP-848 consumer groups coordinated here "
                    "(kafka.server:type=group-coordinator-metrics,name=consumer-group-rebalance-count)")
        out.counter("kafka_server_groupcoordinatormetrics_sharegrouprebalance_total", coordinator.share.rebalances,
                    "new target assignments of the share groups coordinated here "
                    "(kafka.server:type=group-coordinator-metrics,name=share-group-rebalance-count)")

        # kafka_exporter's names and labels (danielqsj/kafka_exporter), for the groups coordinated here
        lag_rows = []
        get_log = broker.log_manager.logs.get
        for gid, grp in groups:
            for (topic, partition), om in sorted(grp.offsets.items()):
                lg = get_log((topic, partition))
                if lg is None:
                    continue  # no replica of the partition on this broker
                labels = (("consumergroup", gid), ("partition", str(partition)), ("topic", topic))
                lag_rows.append((labels, om.offset, max(lg.high_watermark - om.offset, 0)))
        out.family("kafka_consumergroup_current_offset", "gauge",
                   "the group's committed offset of the partition (kafka_exporter's name)")
        for labels, offset, _lag in lag_rows:
            out.sample("kafka_consumergroup_current_offset", labels, offset)
        out.family("kafka_consumergroup_lag", "gauge",
                   "records between the group's committed offset and the partition's high watermark, "
                   "at least 0 (kafka_exporter's name)")
        for labels, _offset, lag in lag_rows:
            out.sample("kafka_consumergroup_lag", labels, lag)
        sums = {}
        for labels, offset, lag in lag_rows:
            key = (labels[0], labels[2])  # consumergroup, topic
            o, g = sums.get(key, (0, 0))
            sums[key] = (o + offset, g + lag)
        out.family("kafka_consumergroup_current_offset_sum", "gauge",
                   "the group's committed offsets of the topic's partitions, summed (kafka_exporter's name)")
        for key, (offset, _lag) in sorted(sums.items()):
            out.sample("kafka_consumergroup_current_offset_sum", key, offset)
        out.family("kafka_consumergroup_lag_sum", "gauge",
                   "the group's lag over the topic's partitions, summed (kafka_exporter's name)")
        for key, (_offset, lag) in sorted(sums.items()):
            out.sample("kafka_consumergroup_lag_sum", key, lag)
        out.family("kafka_consumergroup_members", "gauge", "members of the group (kafka_exporter's name)")
        for gid, grp in groups:
            out.sample("kafka_consumergroup_members", (("consumergroup", gid),), len(grp.members))

    def _render_share_coordinator(self, out):
        """KIP-932's share coordinator (Kafka's share-coordinator-metrics group)."""
        sc = self.broker.share_coordinator
        prefix, mbean = "kafka_server_sharecoordinatormetrics_", "kafka.server:type=share-coordinator-metrics,name="
        out.counter(prefix + "write_total", sc.metrics["writes"],
                    f"share-state writes this coordinator stored ({mbean}write-total)")
        out.counter(prefix + "snapshot_total", sc.metrics["snapshots"],
                    "ShareSnapshot records written (first writes, initializations, every "
                    "share.coordinator.snapshot.update.records.per.snapshot updates)")
        out.counter(prefix + "fenced_total", sc.metrics["fenced"],
                    "share-state requests refused for an older state or leader epoch")
        out.gauge(prefix + "sharepartitions", len(sc.states),
                  "share partitions whose state this broker's share coordinator holds")

    def _render_share(self, out):
        """KIP-932 share partitions led here: records acquired, redelivered, archived, acknowledged
        by type, acquisition locks expired, and in flight per share partition."""
        mgr = self.broker.share_partition_manager
        out.counter("kafkacore_share_records_acquired_total", mgr.acquired_records,
                    "records handed out by ShareFetch (first deliveries and redeliveries)")
        out.counter("kafkacore_share_records_redelivered_total", mgr.redelivered_records,
                    "records handed out again (a delivery count above 1)")
        out.counter("kafkacore_share_records_archived_total", mgr.archived_records,
                    "records archived: rejected, or released or expired at group.share.delivery.count.limit")
        family = "kafka_server_sharegroupmetrics_recordacknowledgement_total"
        out.family(family, "counter", "records acknowledged, by type (kafka.server:type=share-group-metrics,"
                                      "name=record-acknowledgement-count,ack-type=...)")
        for ack_type, n in sorted(mgr.acknowledged_records.items()):
            out.sample(family, (("ack_type", ack_type),), n)
        out.counter("kafka_server_sharepartitionmetrics_acquisitionlocktimeout_total", mgr.lock_timeouts,
                    "records whose acquisition lock expired before an acknowledgement "
                    "(kafka.server:type=SharePartitionMetrics,name=AcquisitionLockTimeoutPerSec)")
        family = "kafka_server_sharepartitionmetrics_inflightmessagecount"
        out.family(family, "gauge", "records in flight (between the SPSO and the SPEO) per share partition "
                                    "(kafka.server:type=SharePartitionMetrics,name=InFlightMessageCount)")
        for (group, topic, partition), sp in sorted(mgr.partitions.items()):
            out.sample(family, (("group", group), ("partition", str(partition)), ("topic", topic)),
                       sp.in_flight_records)

    def _render_topics_exporter(self, out):
        """kafka_exporter's cluster and topic metrics (danielqsj/kafka_exporter), each series from
        one broker of the cluster: a partition's from its leader (its offsets, replicas and ISR
        as the leader holds them), the brokers and the topics' partition counts from the active
        controller (from its metadata cache: what a Metadata request would have told the exporter)."""
        broker = self.broker
        active = broker.cluster.controller_gauges()[0]
        cache = broker.metadata_cache
        out.family("kafka_brokers", "gauge", "live brokers of the cluster; from the active controller "
                                             "(kafka_exporter's name)")
        if active:
            out.sample("kafka_brokers", (), len(cache.live_brokers()))
        out.family("kafka_broker_info", "gauge", "1 per live broker, its id and address; from the active "
                                                 "controller (kafka_exporter's name)")
        if active:
            for b in cache.live_brokers():
                out.sample("kafka_broker_info", (("address", f"{b.host}:{b.port}"), ("id", str(b.node_id))), 1)
        out.family("kafka_topic_partitions", "gauge", "partitions of the topic; from the active controller "
                                                      "(kafka_exporter's name)")
        if active:
            for topic, count in sorted(cache.topics().items()):
                out.sample("kafka_topic_partitions", (("topic", topic),), count)
        rows = []
        local = broker.node_id
        for p in sorted(broker.replica_manager.partitions.values(), key=lambda p: (p.topic, p.partition)):
            if not p.is_leader:
                continue
            isr, replicas = len(p.isr), len(p.replicas)
            rows.append(((("partition", str(p.partition)), ("topic", p.topic)),
                         (p.log.high_watermark, p.log.log_start_offset, local, replicas, isr,
                          int(bool(p.replicas) and p.replicas[0] == local), int(isr < replicas))))
        for i, (metric, what) in enumerate((
                ("current_offset", "the partition's high watermark (the newest offset a consumer can read)"),
                ("oldest_offset", "the partition's log start offset"),
                ("leader", "the partition's leader"),
                ("replicas", "replicas of the partition"),
                ("in_sync_replica", "replicas in the partition's ISR"),
                ("leader_is_preferred", "1 while the preferred replica (the first) leads the partition"),
                ("under_replicated_partition", "1 while the ISR is smaller than the replica set"))):
            name = "kafka_topic_partition_" + metric
            out.family(name, "gauge", f"{what}; from its leader (kafka_exporter's name)")
            for labels, values in rows:
                out.sample(name, labels, values[i])

    def _render_quotas(self, out):
        """Kafka's per-entity quota metrics (kafka.server:type=Produce|Fetch|Request|ControllerMutation,
        user=U,client-id=C), named as the JMX exporter's quota rules name them: kafka_server_quota_
        and the attribute, with ``resource`` the type; one sample per entity with a quota, its
        user and client id "" for a level the entity does not have."""
        managers = self.broker.quotas
        now = time.monotonic()
        rows = []  # (family, kind, sensor, value)
        for kind, manager, attr in (("Produce", managers.produce, "byte-rate"),
                                        ("Fetch", managers.fetch, "byte-rate"),
                                        ("Request", managers.request, "request-time"),
                                        ("ControllerMutation", managers.controller_mutation, "mutation-rate")):
            for sensor in manager.sensors():
                with manager.lock:
                    rate = sensor.rate.measure(now)[0]
                    throttle = sensor.throttle.measure(now)
                rows.append((attr, kind, sensor, rate))
                rows.append(("throttle-time", kind, sensor, throttle))
                if sensor.bucket is not None:
                    rows.append(("tokens", kind, sensor, sensor.tokens(now)))
        for attr, what in (("byte-rate", "bytes per second produced (Produce: request bytes) or fetched (Fetch: "
                                         "response record bytes) over the quota window"),
                           ("request-time", "percent of one request-handler thread used over the quota window"),
                           ("mutation-rate", "partitions created or deleted per second over the quota window"),
                           ("tokens", "tokens left in the controller mutation token bucket (KIP-599)"),
                           ("throttle-time", "mean throttle time given, ms, over the quota window (NaN: none)")):
            selected = [r for r in rows if r[0] == attr]
            if not selected:
                continue
            name = "kafka_server_quota_" + attr.replace("-", "_")
            out.family(name, "gauge", f"{what} (kafka.server:type=<resource>,user=<user>,client-id=<client id> "
                                      f"{attr})")
            for _attr, kind, sensor, value in selected:
                out.sample(name, (("resource", kind), ("user", sensor.user), ("clientid", sensor.client_id)),
                           value)

    def _render_process(self, out):
        """The process collector's standard names, as Prometheus' client libraries export them."""
        ru = resource.getrusage(resource.RUSAGE_SELF)
        out.counter("process_cpu_seconds_total", ru.ru_utime + ru.ru_stime, "user and system CPU time of the broker")
        out.gauge("process_start_time_seconds", self.started, "when the broker process started, seconds since "
                  "the epoch")
        try:
            with open("/proc/self/statm") as f:
                rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            out.gauge("process_resident_memory_bytes", rss, "resident memory of the broker")
        except (OSError, ValueError, IndexError):
            pass
        try:
            fds = len(os.listdir("/proc/self/fd"))
            out.gauge("process_open_fds", fds, "open file descriptors of the broker")
            out.gauge("process_max_fds", resource.getrlimit(resource.RLIMIT_NOFILE)[0],
                      "the broker's limit of open file descriptors")
        except OSError:
            pass
        io = _proc_io()
        if io is not None:
            # Kafka's LinuxIoMetricsCollector reads the same file
            out.gauge("kafka_server_kafkaserver_linux_disk_read_bytes", io.get("read_bytes", 0),
                      "bytes the broker process caused to be read from storage, /proc/self/io read_bytes "
                      "(kafka.server:type=KafkaServer,name=linux-disk-read-bytes)")
            out.gauge("kafka_server_kafkaserver_linux_disk_write_bytes", io.get("write_bytes", 0),
                      "bytes the broker process caused to be written to storage, /proc/self/io write_bytes "
                      "(kafka.server:type=KafkaServer,name=linux-disk-write-bytes)")


def _proc_io() -> dict | None:
    """/proc/self/io's counters, None where it cannot be read (not Linux, no permission)."""
    try:
        with open("/proc/self/io") as f:
            return {k: int(v) for k, _sep, v in (line.partition(":") for line in f) if v.strip()}
    except (OSError, ValueError):
        return None


def _process_start_time() -> float:
    """From /proc (the process' start in clock ticks after boot, and the boot time); now where
    there is no /proc."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(v) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if v in (float("inf"), float("-inf")):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


class _Exposition:
    """Prometheus text format 0.0.4: ``# HELP`` and ``# TYPE`` before each family's samples,
    label values escaped (backslash, double quote, newline)."""

    __slots__ = ("lines",)

    def __init__(self):
        self.lines = []

    def family(self, name, kind, help_text):
        self.lines.append(f"# HELP {name} {_escape_help(help_text)}")
        self.lines.append(f"# TYPE {name} {kind}")

    def sample(self, name, labels, value):
        if labels:
            inner = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in labels)
            self.lines.append(f"{name}{{{inner}}} {format_value(value)}")
        else:
            self.lines.append(f"{name} {format_value(value)}")

    def gauge(self, name, value, help_text):
        self.family(name, "gauge", help_text)
        self.sample(name, (), value)

    def counter(self, name, value, help_text):
        self.family(name, "counter", help_text)
        self.sample(name, (), value)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"
