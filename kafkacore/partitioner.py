"""Kafka's murmur2 and the default partition choice for keyed records.

Identical to the Java client: ``Utils.murmur2`` and ``Utils.toPositive(murmur2(key)) %
numPartitions`` (BuiltInPartitioner.partitionForKey).

numpy is imported on first use of ``partitions_for_keys`` only: the broker never calls it, and
importing numpy with the package would cost every process ~16 MB of RSS."""
import sys

from ._loader import load_native

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2_py(key) -> int:
    """Pure-Python twin of Kafka's murmur2; returns a signed 32-bit int."""
    if isinstance(key, str):
        raise TypeError("murmur2 takes bytes; encode str keys first")
    data = memoryview(key).tobytes()  # any buffer; TypeError for ints (bytes(5) would be 5 zeros)
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    tail = data[n4 * 4 :]
    if rest == 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def _is_numpy_integer(x) -> bool:
    # A numpy scalar can only exist once numpy is imported, so there is nothing to import here.
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)


def _check_partitions(num_partitions) -> int:
    if isinstance(num_partitions, bool) or not (isinstance(num_partitions, int) or _is_numpy_integer(num_partitions)):
        raise TypeError("num_partitions must be an int")
    if not 0 < num_partitions <= 0x7FFFFFFF:
        raise ValueError(f"num_partitions must be between 1 and 2^31-1, got {num_partitions}")
    return int(num_partitions)


def partition_for_key_py(key, num_partitions: int) -> int:
    n = _check_partitions(num_partitions)
    return (murmur2_py(key) & 0x7FFFFFFF) % n


def partitions_for_keys_py(keys, num_partitions: int) -> "numpy.ndarray":  # noqa: F821
    """Bulk twin: an int32 array, -1 where a key is None (Kafka picks a sticky partition for
    records without a key; that choice belongs to the producer)."""
    n = _check_partitions(num_partitions)
    import numpy as np
    if hasattr(keys, "to_pylist"):  # pyarrow arrays
        keys = keys.to_pylist()
    out = np.empty(len(keys), dtype=np.int32)
    for i, k in enumerate(keys):
        if k is None:
            out[i] = -1
        else:
            if isinstance(k, str):
                k = k.encode()
            out[i] = (murmur2_py(k) & 0x7FFFFFFF) % n
    return out


_native = load_native("murmur2")

if _native is not None:
    murmur2 = _native.murmur2
    partition_for_key = _native.partition_for_key
    partitions_for_keys = _native.partitions_for_keys
else:
    murmur2, partition_for_key, partitions_for_keys = murmur2_py, partition_for_key_py, partitions_for_keys_py
