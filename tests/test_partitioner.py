"""murmur2 and the default key -> partition mapping, against Kafka's vectors and kafka-python."""
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkacore
from kafkacore import partitioner
from kafkacore.partitioner import murmur2_py, partition_for_key_py, partitions_for_keys_py

from _kcutil import INT32_MAX, examples, native_module, requires_native

native_m2 = native_module("murmur2")

# Kafka's UtilsTest.testMurmur2 (keys are the UTF-8 bytes of the strings).
KAFKA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

IMPLS = {"selected": kafkacore.murmur2, "twin": murmur2_py}

partition_counts = st.one_of(st.integers(1, 64), st.integers(1, INT32_MAX), st.sampled_from([1, 2, 3, INT32_MAX]))


def expected_partition(key, n):
    if key is None:
        return -1
    if isinstance(key, str):
        key = key.encode("utf-8")
    return (murmur2_py(key) & 0x7FFFFFFF) % n


@pytest.mark.parametrize("impl", list(IMPLS))
@pytest.mark.parametrize("key,expected", KAFKA_VECTORS, ids=[k.decode()[:12] for k, _ in KAFKA_VECTORS])
def test_kafka_vectors(impl, key, expected):
    fn = IMPLS[impl]
    assert fn(key) == expected
    assert fn(bytearray(key)) == expected
    assert fn(memoryview(b"##" + key + b"##")[2:-2]) == expected
    assert fn(np.frombuffer(key, dtype=np.uint8)) == expected


def test_module_reports_its_implementation():
    assert (kafkacore.murmur2 is murmur2_py) == (partitioner._native is None)


def test_empty_key():
    # h = seed ^ 0, then only the final avalanche
    assert kafkacore.murmur2(b"") == murmur2_py(b"")
    assert -(1 << 31) <= kafkacore.murmur2(b"") < (1 << 31)


@pytest.mark.parametrize("key,expected", KAFKA_VECTORS, ids=[k.decode()[:12] for k, _ in KAFKA_VECTORS])
def test_partition_for_key_vectors(key, expected):
    for n in (1, 2, 3, 7, 16, 100, 1000, INT32_MAX):
        assert kafkacore.partition_for_key(key, n) == (expected & 0x7FFFFFFF) % n


@settings(max_examples=examples(500, 200))
@given(key=st.binary(max_size=300), n=partition_counts)
def test_partition_for_key_definition(key, n):
    p = kafkacore.partition_for_key(key, n)
    assert p == (kafkacore.murmur2(key) & 0x7FFFFFFF) % n
    assert 0 <= p < n


@settings(max_examples=examples(500, 200))
@given(key=st.binary(max_size=300), n=partition_counts)
def test_matches_kafka_python(key, n):
    from kafka.partitioner.default import murmur2 as kp_murmur2

    theirs = kp_murmur2(bytearray(key))  # unsigned 32-bit
    assert kafkacore.murmur2(key) & 0xFFFFFFFF == theirs
    assert kafkacore.partition_for_key(key, n) == (theirs & 0x7FFFFFFF) % n


def test_result_is_signed_32_bit():
    values = [kafkacore.murmur2(bytes([i]) * i) for i in range(64)]
    assert all(-(1 << 31) <= v < (1 << 31) for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


@pytest.mark.parametrize("bad", ["abc", 5, None, 1.0])
def test_murmur2_rejects_non_bytes(bad):
    # str must be encoded by the caller; an int is not a key (bytes(5) would be five NULs).
    with pytest.raises(TypeError):
        kafkacore.murmur2(bad)


def test_partition_for_key_rejects_str():
    with pytest.raises(TypeError):
        kafkacore.partition_for_key("abc", 3)


@pytest.mark.parametrize("fn", ["partition_for_key", "partitions_for_keys"])
@pytest.mark.parametrize("n,exc", [
    (0, ValueError), (-1, ValueError), (2**31, ValueError), (-(2**31), ValueError), (2**64, ValueError),
    ("3", TypeError), (3.0, TypeError), (None, TypeError), (True, TypeError),
])
def test_bad_num_partitions(fn, n, exc):
    call = getattr(kafkacore, fn)
    arg = b"key" if fn == "partition_for_key" else [b"key", None]
    with pytest.raises(exc):
        call(arg, n)


@pytest.mark.parametrize("n", [np.int32(7), np.int64(7), np.uint16(7)])
def test_numpy_integer_partition_counts(n):
    assert kafkacore.partition_for_key(b"foobar", n) == (-790332482 & 0x7FFFFFFF) % 7
    assert list(kafkacore.partitions_for_keys([b"foobar"], n)) == [(-790332482 & 0x7FFFFFFF) % 7]


optional_keys = st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60)


@settings(max_examples=examples(300, 100))
@given(keys=optional_keys, n=partition_counts)
def test_partitions_for_keys_list_and_tuple(keys, n):
    expected = [expected_partition(k, n) for k in keys]
    for form in (keys, tuple(keys)):
        out = kafkacore.partitions_for_keys(form, n)
        assert isinstance(out, np.ndarray)
        assert out.dtype == np.int32
        assert out.tolist() == expected


def test_partitions_for_keys_mixed_key_types():
    keys = [b"foobar", bytearray(b"foobar"), memoryview(b"foobar"), "foobar", None, b""]
    out = kafkacore.partitions_for_keys(keys, 10)
    p = (-790332482 & 0x7FFFFFFF) % 10
    assert out.tolist() == [p, p, p, p, -1, expected_partition(b"", 10)]


def test_partitions_for_keys_empty():
    for keys in ([], (), pa.array([], pa.binary()), pa.array([], pa.string())):
        out = kafkacore.partitions_for_keys(keys, 5)
        assert out.dtype == np.int32 and out.shape == (0,)


ARROW_TYPES = [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()]


@settings(max_examples=examples(200, 60))
@given(
    keys=optional_keys,
    typ=st.sampled_from(ARROW_TYPES),
    n=partition_counts,
    start=st.integers(0, 60),
    length=st.integers(0, 60),
)
def test_partitions_for_keys_arrow(keys, typ, n, start, length):
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        pykeys = [None if k is None else k.decode("latin-1") for k in keys]
    else:
        pykeys = keys
    arr = pa.array(pykeys, typ)
    out = kafkacore.partitions_for_keys(arr, n)
    assert out.dtype == np.int32
    assert out.tolist() == [expected_partition(k, n) for k in pykeys]
    # A slice has a non-zero offset into the same buffers (and a sliced validity bitmap).
    sliced = arr.slice(start, length)
    assert kafkacore.partitions_for_keys(sliced, n).tolist() == [
        expected_partition(k, n) for k in pykeys[start:start + length]
    ]


def test_partitions_for_keys_arrow_nulls_and_slices_fixed():
    arr = pa.array([b"21", None, b"foobar", b"", None, b"abc", b"a-little-bit-long-string"], pa.binary())
    n = 12
    exp = [expected_partition(k, n) for k in arr.to_pylist()]
    assert kafkacore.partitions_for_keys(arr, n).tolist() == exp
    assert exp[1] == exp[4] == -1
    for start in range(len(arr)):
        for stop in range(start, len(arr) + 1):
            got = kafkacore.partitions_for_keys(arr.slice(start, stop - start), n).tolist()
            assert got == exp[start:stop], (start, stop)


def test_partitions_for_keys_all_null_and_all_empty_arrow():
    assert kafkacore.partitions_for_keys(pa.nulls(5, pa.binary()), 3).tolist() == [-1] * 5
    empty = expected_partition(b"", 3)
    assert kafkacore.partitions_for_keys(pa.array([b""] * 4, pa.binary()), 3).tolist() == [empty] * 4


def test_partitions_for_keys_chunked_array():
    chunked = pa.chunked_array([pa.array([b"21", None]), pa.array([], pa.binary()), pa.array([b"foobar"])])
    assert kafkacore.partitions_for_keys(chunked, 9).tolist() == [
        expected_partition(b"21", 9), -1, expected_partition(b"foobar", 9)]


def test_string_array_uses_utf8():
    arr = pa.array(["héllo", "日本", None], pa.string())
    assert kafkacore.partitions_for_keys(arr, 1000).tolist() == [
        expected_partition("héllo".encode(), 1000), expected_partition("日本".encode(), 1000), -1]


@requires_native("murmur2")
@settings(max_examples=examples(500))
@given(key=st.binary(max_size=500), n=partition_counts)
def test_native_matches_twin(key, n):
    assert native_m2.murmur2(key) == murmur2_py(key)
    assert native_m2.partition_for_key(key, n) == partition_for_key_py(key, n)


@requires_native("murmur2")
@settings(max_examples=examples(200))
@given(keys=optional_keys, n=partition_counts, typ=st.sampled_from([pa.binary(), pa.large_binary()]))
def test_native_bulk_matches_twin(keys, n, typ):
    assert native_m2.partitions_for_keys(keys, n).tolist() == partitions_for_keys_py(keys, n).tolist()
    arr = pa.array(keys, typ)
    assert native_m2.partitions_for_keys(arr, n).tolist() == partitions_for_keys_py(arr, n).tolist()
