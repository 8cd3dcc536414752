# cython: language_level=3
"""Kafka's murmur2 and key -> partition mapping; the bulk form loops in C.

numpy is imported on the first partitions_for_keys call, not with the module: importing
kafkacore (the broker does) must not load it. Output arrays are written through the buffer
protocol, so no numpy C API (cimport numpy / import_array) is needed."""
import sys

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.list cimport PyList_GET_ITEM
from cpython.tuple cimport PyTuple_GET_ITEM
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t

from native cimport kc_murmur2, kc_partition_for_hash

cdef object _np = None  # numpy, once partitions_for_keys has needed it


cdef object _numpy():
    global _np
    if _np is None:
        import numpy
        _np = numpy
    return _np


cdef int32_t *_int32_data(object arr) except NULL:
    """The data of an int32 array made here by np.empty (C-contiguous, aligned, and referenced
    only by the caller, so its memory stays put while the caller holds it)."""
    cdef Py_buffer view
    PyObject_GetBuffer(arr, &view, PyBUF_WRITABLE)
    cdef int32_t *data = <int32_t *>view.buf
    PyBuffer_Release(&view)
    return data


cdef bint _is_numpy_integer(object x) except -1:
    # A numpy scalar can only exist once numpy is imported, so there is nothing to import here.
    np = sys.modules.get("numpy")
    return np is not None and isinstance(x, np.integer)


cdef int32_t _check_partitions(object num_partitions) except -1:
    if isinstance(num_partitions, bool) or not (isinstance(num_partitions, int) or _is_numpy_integer(num_partitions)):
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
    np = _numpy()
    if isinstance(keys, pa.ChunkedArray):
        return np.concatenate([_arrow_partitions(c, n) for c in keys.chunks]) if keys.num_chunks \
            else np.empty(0, np.int32)
    t = keys.type
    if not (pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t)
            or pa.types.is_large_string(t)):
        raise TypeError(f"keys must be a binary or string Arrow array, not {t}")
    large = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    cdef Py_ssize_t length = len(keys), i
    out = np.empty(length, dtype=np.int32)
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
    cdef int32_t *optr = _int32_data(out)
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
    cdef Py_ssize_t length = len(keys)
    np = _numpy()
    out = np.empty(length, dtype=np.int32)
    if length == 0:
        return out
    cdef int32_t *optr = _int32_data(out)
    if isinstance(keys, list):
        _fill_from_list(keys, length, n, optr)
    else:
        _fill_from_tuple(keys, length, n, optr)
    return out


# The loop of partitions_for_keys, one per sequence kind: separate functions get registers
# of their own and no per-key list/tuple test (measurably faster than one shared loop).
# ``key`` holds a strong reference while a non-bytes key is hashed (a buffer export could
# run code that drops it from the list).
cdef int _fill_from_list(object keys, Py_ssize_t length, int32_t n, int32_t *optr) except -1:
    cdef Py_ssize_t i
    cdef PyObject *item
    cdef object key
    for i in range(length):
        item = PyList_GET_ITEM(keys, i)
        if PyBytes_CheckExact(<object>item):
            optr[i] = kc_partition_for_hash(
                kc_murmur2(PyBytes_AS_STRING(<object>item), <size_t>PyBytes_GET_SIZE(<object>item)), n)
        elif <object>item is None:
            optr[i] = -1
        else:
            key = <object>item
            optr[i] = kc_partition_for_hash(_hash_obj(key), n)
    return 0


cdef int _fill_from_tuple(object keys, Py_ssize_t length, int32_t n, int32_t *optr) except -1:
    cdef Py_ssize_t i
    cdef PyObject *item
    cdef object key
    for i in range(length):
        item = PyTuple_GET_ITEM(keys, i)
        if PyBytes_CheckExact(<object>item):
            optr[i] = kc_partition_for_hash(
                kc_murmur2(PyBytes_AS_STRING(<object>item), <size_t>PyBytes_GET_SIZE(<object>item)), n)
        elif <object>item is None:
            optr[i] = -1
        else:
            key = <object>item
            optr[i] = kc_partition_for_hash(_hash_obj(key), n)
    return 0
