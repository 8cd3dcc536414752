"""Exactly-once consume-transform-produce under SIGKILL (issue 15): a processor
(tests/eos_processor.py, confluent-kafka) reads topic A read_committed, writes the transformed
records to B and commits its offsets in the same transaction; it is SIGKILLed at random moments
and restarted (the new instance fences the old one, whose open transaction is aborted) for a
bounded time, then left to finish. B, read_committed, must be exactly the transformed A: every
record once, in order per partition.

KAFKACORE_EOS_LOOP_SECONDS (default 20) bounds the kill loop; KAFKACORE_EOS_SEED replays one.
bench/ has no soak of it: run this test with a larger bound for one."""
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from broker_client import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
PROCESSOR = str(Path(__file__).resolve().parent / "eos_processor.py")
PARTITIONS = 2
RECORDS = 3000


def _spawn(broker, env=None):
    return subprocess.Popen([sys.executable, PROCESSOR, broker.bootstrap, "eos-a", "eos-b", "eos-group", "eos-txn",
                             str(PARTITIONS)], env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _read(bootstrap, topic, isolation):
    c = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                                  "isolation.level": isolation, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False, "enable.partition.eof": True})
    try:
        c.assign([confluent_kafka.TopicPartition(topic, q, 0) for q in range(PARTITIONS)])
        out, eof = {q: [] for q in range(PARTITIONS)}, set()
        while len(eof) < PARTITIONS:
            m = c.poll(30)
            assert m is not None, "no end of partition within 30 s"
            if m.error():
                eof.add(m.partition())
                continue
            out[m.partition()].append(m.value())
        return out
    finally:
        c.close()


def test_consume_transform_produce_is_exactly_once_under_sigkill(tmp_path):
    seconds = float(os.environ.get("KAFKACORE_EOS_LOOP_SECONDS", "20"))
    seed = int(os.environ.get("KAFKACORE_EOS_SEED", str(random.randrange(1 << 30))))
    rnd = random.Random(seed)
    b = BrokerProcess(tmp_path / "data", settings={"num.partitions": str(PARTITIONS),
                                                   "transaction.state.log.num.partitions": "2",
                                                   "offsets.topic.num.partitions": "2"})
    b.start()
    try:
        plain = confluent_kafka.Producer({"bootstrap.servers": b.bootstrap})
        # the input arrives over the whole kill loop, so every instance has work when it is killed
        feeder_stop = threading.Event()

        def feed():
            for i in range(RECORDS):
                plain.produce("eos-a", b"%d:%d" % (i % PARTITIONS, i), partition=i % PARTITIONS)
                plain.poll(0)
                if not feeder_stop.is_set():
                    time.sleep(seconds / RECORDS)  # pacing: the input is spread over the loop
            plain.flush(30)
        feeder = threading.Thread(target=feed)
        feeder.start()
        kills = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            proc = _spawn(b)
            time.sleep(rnd.uniform(0.3, 2.5))  # pacing: the instance runs a random while, then dies
            if proc.poll() is not None:
                pytest.fail(f"the processor exited by itself ({proc.returncode}): {proc.stderr.read().decode()}")
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
        feeder_stop.set()
        feeder.join(60)
        assert plain.flush(30) == 0
        proc = _spawn(b, {"EOS_EXIT_AT_END": "1"})
        try:
            _out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            _out, err = proc.communicate()
            pytest.fail(f"the last processor did not finish in 120 s (seed {seed}): {err.decode()[-2000:]}")
        assert proc.returncode == 0, err.decode()
        source = _read(b.bootstrap, "eos-a", "read_committed")
        output = _read(b.bootstrap, "eos-b", "read_committed")
        everything = _read(b.bootstrap, "eos-b", "read_uncommitted")
        print(f"[eos] {kills} kills in {seconds:.0f} s (seed {seed}); "
              f"{sum(len(v) for v in everything.values()) - RECORDS} aborted records in eos-b")
        for q in range(PARTITIONS):
            assert output[q] == [b"x" + v for v in source[q]], f"partition {q} (seed {seed})"
        assert sum(len(v) for v in output.values()) == RECORDS
    finally:
        b.stop()
