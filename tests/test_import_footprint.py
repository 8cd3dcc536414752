"""Importing kafkacore (what the broker process does) must not load numpy or pyarrow.

They cost ~16 MB and ~27 MB of RSS and the broker never uses them, so they are imported on
first use of partitions_for_keys / decode_to_arrow / SPARK_KAFKA_SCHEMA instead. Each mode
is checked in a fresh interpreter (this process has long since imported both), which then
uses those APIs to show that the lazy imports still deliver the same results. Likewise kazoo's
client, threading handler and recipes load only where a ZooKeeper client is made (about 1.4 MiB
of a single-node broker's RSS, which already has ssl through asyncio)."""
import importlib.machinery
import os
import subprocess
import sys
import textwrap

import pytest

import kafkacore

PKG_DIR = os.path.dirname(os.path.abspath(kafkacore.__file__))
EXTENSIONS = ("crc", "murmur2", "records", "storage")


def _extensions_built():
    ext_dir = os.path.join(PKG_DIR, "_ext")
    return all(
        any(os.path.exists(os.path.join(ext_dir, name + suffix)) for suffix in importlib.machinery.EXTENSION_SUFFIXES)
        for name in EXTENSIONS
    )


CHILD = textwrap.dedent(
    r"""
    import sys

    mode = sys.argv[1]
    import kafkacore
    import kafkacore.record
    import kafkacore.storage
    import kafkacore.broker.server
    import kafkacore.broker.kafka_server
    from kafkacore.record import RecordBatchBuilder, decode_to_arrow

    assert kafkacore.native_extensions() is (mode == "native"), kafkacore.native_extensions()
    assert "SPARK_KAFKA_SCHEMA" in dir(kafkacore.record)  # listed without being built
    heavy = [m for m in ("numpy", "pyarrow") if m in sys.modules]
    assert not heavy, f"imported at import time: {heavy}"
    # a single-node broker (its replica manager included) needs nothing of kazoo: it loads
    # where a ZooKeeper client is made (kafkacore/cluster)
    import kafkacore.replication.replica_manager
    zk = sorted(m for m in sys.modules if m == "kazoo" or m.startswith("kazoo."))
    assert not zk, f"imported without a ZooKeeper client: {zk}"

    # First uses, with numpy and pyarrow not yet loaded: the lazy imports happen here.
    keys = [b"21", None, "abc", bytearray(b"foobar")]
    parts = kafkacore.partitions_for_keys(keys, 64)
    import numpy as np

    assert type(parts) is np.ndarray and parts.dtype == np.int32 and parts.shape == (4,), parts
    expected = [kafkacore.partition_for_key(b"21", 64), -1, kafkacore.partition_for_key(b"abc", 64),
                kafkacore.partition_for_key(b"foobar", 64)]
    assert parts.tolist() == expected, (parts.tolist(), expected)
    assert kafkacore.partitions_for_keys([], 3).dtype == np.int32
    assert kafkacore.partitions_for_keys([b"21"], np.int32(64)).tolist() == expected[:1]

    b = RecordBatchBuilder(base_offset=5)
    b.append(b"v0", key=b"k0", timestamp_ms=1000, headers=[("h", b"x")])
    b.extend([b"v1", b"v2"], keys=[None, b"k2"], timestamps_ms=[1001, 1002])
    data = b.build()
    assert "pyarrow" not in sys.modules, "building records imported pyarrow"
    table = decode_to_arrow(data, topic="t", partition=2)
    import pyarrow as pa

    assert isinstance(table, pa.RecordBatch), type(table)
    from kafkacore.record import SPARK_KAFKA_SCHEMA

    assert SPARK_KAFKA_SCHEMA is kafkacore.record.SPARK_KAFKA_SCHEMA
    assert table.schema.equals(SPARK_KAFKA_SCHEMA)
    assert table.column("offset").to_pylist() == [5, 6, 7]
    assert table.column("key").to_pylist() == [b"k0", None, b"k2"]
    assert table.column("value").to_pylist() == [b"v0", b"v1", b"v2"]
    assert table.column("topic").to_pylist() == ["t"] * 3
    assert table.column("partition").to_pylist() == [2] * 3
    assert table.column("headers").to_pylist() == [[{"key": "h", "value": b"x"}], None, None]

    # Now that numpy and pyarrow are loaded, their inputs are still taken as before.
    b = RecordBatchBuilder()
    b.extend([b"a", b"b", b"c"], timestamps_ms=np.array([7, 8, 9], dtype=np.uint32))
    assert decode_to_arrow(b.build()).column("timestamp").cast(pa.int64()).to_pylist() == [7, 8, 9]
    arrow_keys = pa.array([b"21", None, b"abc", b"foobar"], pa.binary())
    assert kafkacore.partitions_for_keys(arrow_keys, 64).tolist() == expected
    print("ok", mode)
    """
)


@pytest.mark.parametrize("mode", ["native", "twins"])
def test_import_does_not_load_numpy_or_pyarrow(mode):
    env = dict(os.environ)
    env.pop("KAFKACORE_NO_EXTENSIONS", None)
    env.pop("KAFKACORE_REQUIRE_EXTENSIONS", None)
    if mode == "native":
        if not _extensions_built():
            pytest.skip("the native extensions are not built")
        env["KAFKACORE_REQUIRE_EXTENSIONS"] = "1"
    else:
        env["KAFKACORE_NO_EXTENSIONS"] = "1"
    # The child imports the same kafkacore as this process (the checkout, or a scratch copy).
    root = os.path.dirname(PKG_DIR)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout.strip().endswith(f"ok {mode}")
