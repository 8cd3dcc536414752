# cython: language_level=3
"""Kafka's murmur2 and key -> partition mapping; the bulk form loops in C."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.list cimport PyList_GET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t
import numpy as np
cimport numpy as cnp

from native cimport kc_murmur2, kc_partition_for_hash

cnp.import_array()


cdef int32_t _check_partitions(object num_partitions) except -1:
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, np.integer)):
        raise TypeError("num_partitions must be an int")
    if not 0 < num_partitions <= 0x7FFFFFFF:
        raise ValueError(f"num_partitions must be between 1 and 2^31-1, got {num_partitions}")
    return <int32_t>num_partitions


cdef inline int32_t _hash_obj(object key) except? -1:
    cdef Py_buffer view
    cdef int32_t h
    if PyBytes_CheckExact(key):
        return kc_murmur2(PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key))
    if isinstance(key, str):
        key = (<str>key).encode("utf-8")
        return kc_murmur2(PyBytes_AS_STRING(key), <size_t>PyBytes_GET_SIZE(key))
    PyObject_GetBuffer(key, &view, PyBUF_SIMPLE)
    h = kc_murmur2(view.buf, <size_t>view.len)
    PyBuffer_Release(&view)
    return h


def murmur2(key):
    """murmur2(key) -> int: Kafka's Utils.murmur2 of a bytes-like key, signed 32-bit."""
    if isinstance(key, str):
        raise TypeError("murmur2 takes bytes; encode str keys first")
    return _hash_obj(key)


def partition_for_key(key, num_partitions):
    """(murmur2(key) & 0x7fffffff) % num_partitions, as Kafka's default partitioner."""
    cdef int32_t n = _check_partitions(num_partitions)
    if isinstance(key, str):
        raise TypeError("partition_for_key takes bytes; encode str keys first")
    return kc_partition_for_hash(_hash_obj(key), n)


def _arrow_partitions(keys, int32_t n):
    import pyarrow as pa
    if isinstance(keys, pa.ChunkedArray):
        return np.concatenate([_arrow_partitions(c, n) for c in keys.chunks]) if keys.num_chunks \
            else np.empty(0, np.int32)
    t = keys.type
    if not (pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t)
            or pa.types.is_large_string(t)):
        raise TypeError(f"keys must be a binary or string Arrow array, not {t}")
    large = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    cdef Py_ssize_t length = len(keys), i
    cdef cnp.ndarray[cnp.int32_t, ndim=1] out = np.empty(length, dtype=np.int32)
    if length == 0:
        return out
    bufs = keys.buffers()
    valid = np.asarray(keys.is_valid()) if keys.null_count else None
    offs = np.frombuffer(bufs[1], dtype=np.int64 if large else np.int32)[keys.offset:keys.offset + length + 1]
    offs64 = offs.astype(np.int64)
    data = bufs[2]
    cdef const uint8_t[::1] dview = np.frombuffer(data, dtype=np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    cdef const int64_t[::1] o = offs64
    cdef const uint8_t *base = &dview[0]
    cdef int32_t *optr = <int32_t *>cnp.PyArray_DATA(out)
    with nogil:
        for i in range(length):
            optr[i] = kc_partition_for_hash(kc_murmur2(base + o[i], <size_t>(o[i + 1] - o[i])), n)
    if valid is not None:
        out[~valid] = -1
    return out


def partitions_for_keys(keys, num_partitions):
    """partitions_for_keys(keys, num_partitions) -> numpy.ndarray[int32]

    Bulk partition choice for a list/tuple of bytes keys or a pyarrow binary/string array.
    A None key gives -1 (records without a key get a sticky partition from the producer).
    str keys are encoded as UTF-8, as Kafka's StringSerializer does."""
    cdef int32_t n = _check_partitions(num_partitions)
    if hasattr(keys, "buffers") or type(keys).__name__ == "ChunkedArray":
        return _arrow_partitions(keys, n)
    if not isinstance(keys, (list, tuple)):
        keys = list(keys)
    cdef Py_ssize_t length = len(keys), i
    cdef cnp.ndarray[cnp.int32_t, ndim=1] out = np.empty(length, dtype=np.int32)
    cdef int32_t *optr = <int32_t *>cnp.PyArray_DATA(out)
    cdef bint is_list = isinstance(keys, list)
    cdef PyObject *item
    cdef object key
    for i in range(length):
        item = PyList_GET_ITEM(keys, i) if is_list else PyTuple_GET_ITEM(keys, i)
        if PyBytes_CheckExact(<object>item):
            optr[i] = kc_partition_for_hash(
                kc_murmur2(PyBytes_AS_STRING(<object>item), <size_t>PyBytes_GET_SIZE(<object>item)), n)
        elif <object>item is None:
            optr[i] = -1
        else:
            key = <object>item
            optr[i] = kc_partition_for_hash(_hash_obj(key), n)
    return out
