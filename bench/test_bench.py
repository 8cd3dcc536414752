"""pytest-benchmark versions of the main paths, for trend tracking and --benchmark-compare.

    .venv/bin/python -m pytest bench/ --benchmark-only
    .venv/bin/python -m pytest bench/ --benchmark-only --benchmark-group-by=group

Each kafkacore benchmark sits in a group with its peer so the comparison shows up side by
side. bench_native.py is the script with the targets; these reuse its data generators and
keep the workloads small (one batch, 100k keys) so the whole file runs in seconds.
"""
import pytest

import bench_native as bn  # also puts the repository root on sys.path

import kafkacore
from kafkacore.record import RecordBatchBuilder, decode_to_arrow, iter_batches

VALUES = bn.make_values(bn.RECORDS_PER_BATCH)
TSS = bn.make_timestamps(bn.RECORDS_PER_BATCH)
READ_BUF = b"".join(bn.build_batches(RecordBatchBuilder, VALUES, TSS, 10))
READ_RECORDS = 10 * len(VALUES)
KEYS = bn.make_keys(100_000)
CRC_BUF = bytes(range(256)) * 4096  # 1 MiB
NO_HEADERS = []

# kafka-python's protocol modules use deprecated importlib.resources calls when imported
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files:DeprecationWarning")


def _aiokafka_builder():
    from aiokafka.record._crecords import DefaultRecordBatchBuilder

    return DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                     producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)


# --- crc32c -------------------------------------------------------------------------------


@pytest.mark.benchmark(group="crc32c 1 MiB")
def test_crc32c_kafkacore(benchmark):
    import google_crc32c

    assert benchmark(kafkacore.crc32c, CRC_BUF) == google_crc32c.value(CRC_BUF)


@pytest.mark.benchmark(group="crc32c 1 MiB")
def test_crc32c_google(benchmark):
    import google_crc32c

    benchmark(google_crc32c.value, CRC_BUF)


# --- partitioning -------------------------------------------------------------------------


@pytest.mark.benchmark(group="partition 100k keys")
def test_partitions_for_keys_kafkacore(benchmark):
    out = benchmark(kafkacore.partitions_for_keys, KEYS, bn.NUM_PARTITIONS)
    assert len(out) == len(KEYS)


@pytest.mark.benchmark(group="partition 100k keys")
def test_partitions_kafka_python_loop(benchmark):
    from kafka.partitioner.default import murmur2

    def loop(keys, n):
        return [(murmur2(k) & 0x7FFFFFFF) % n for k in keys]

    out = benchmark.pedantic(loop, (KEYS, bn.NUM_PARTITIONS), rounds=3, iterations=1)
    assert out[:1000] == kafkacore.partitions_for_keys(KEYS[:1000], bn.NUM_PARTITIONS).tolist()


# --- building one batch of 1000 x 100 B ---------------------------------------------------


def _kafkacore_append():
    b = RecordBatchBuilder()
    app = b.append
    for i in range(len(VALUES)):
        app(VALUES[i], None, TSS[i])
    return b.build()


def _kafkacore_extend():
    b = RecordBatchBuilder()
    b.extend(VALUES, None, TSS)
    return b.build()


def _aiokafka_append():
    b = _aiokafka_builder()
    app = b.append
    for i in range(len(VALUES)):
        app(i, TSS[i], None, VALUES[i], NO_HEADERS)
    return b.build()


@pytest.mark.benchmark(group="build 1000 x 100 B")
def test_build_append_kafkacore(benchmark):
    assert benchmark(_kafkacore_append) == _kafkacore_extend()


@pytest.mark.benchmark(group="build 1000 x 100 B")
def test_build_extend_kafkacore(benchmark):
    benchmark(_kafkacore_extend)


@pytest.mark.benchmark(group="build 1000 x 100 B")
def test_build_append_aiokafka(benchmark):
    benchmark(_aiokafka_append)


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
@pytest.mark.benchmark(group="build 1000 x 100 B compressed")
def test_build_compressed_kafkacore(benchmark, codec):
    def build():
        b = RecordBatchBuilder(compression=codec)
        b.extend(VALUES, None, TSS)
        return b.build()

    benchmark(build)


# --- reading 10 x 1000 x 100 B ------------------------------------------------------------


def _kafkacore_iterate(buf):
    n = 0
    for batch in iter_batches(buf):
        for rec in batch:
            rec.value
            n += 1
    return n


def _aiokafka_iterate(buf):
    from aiokafka.record._crecords import MemoryRecords

    n = 0
    mr = MemoryRecords(buf)
    while mr.has_next():
        for rec in mr.next_batch():
            rec.value
            n += 1
    return n


@pytest.mark.benchmark(group="read 10 x 1000 x 100 B")
def test_iterate_kafkacore(benchmark):
    assert benchmark(_kafkacore_iterate, READ_BUF) == READ_RECORDS


@pytest.mark.benchmark(group="read 10 x 1000 x 100 B")
def test_iterate_aiokafka(benchmark):
    assert benchmark(_aiokafka_iterate, READ_BUF) == READ_RECORDS


@pytest.mark.benchmark(group="read 10 x 1000 x 100 B")
def test_decode_to_arrow_kafkacore(benchmark):
    assert benchmark(decode_to_arrow, READ_BUF).num_rows == READ_RECORDS


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
@pytest.mark.benchmark(group="read 10 x 1000 x 100 B compressed")
def test_decode_compressed_kafkacore(benchmark, codec):
    buf = b"".join(bn.build_batches(RecordBatchBuilder, VALUES, TSS, 10, compression=codec))
    assert benchmark(decode_to_arrow, buf).num_rows == READ_RECORDS
