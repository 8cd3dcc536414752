# cython: language_level=3
"""CRC-32C over any buffer, with the GIL released for large inputs."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t
from native cimport (kc_crc32c_init, kc_crc32c, kc_crc32c_sw, kc_crc32c_hw_available, kc_crc32c_avx512_available,
                    kc_crc32c_impl_available, kc_crc32c_impl, kc_crc32c_set_impl, kc_crc32c_impl_name,
                    kc_crc32c_with, KC_CRC32C_IMPL_COUNT)

kc_crc32c_init()

# Below this size releasing and re-taking the GIL costs more than the CRC itself.
cdef enum:
    GIL_RELEASE_BYTES = 65536


def crc32c(data, unsigned long long crc=0):
    """crc32c(data, crc=0) -> int: CRC-32C (Castagnoli) of a buffer, unsigned."""
    cdef Py_buffer view
    cdef uint32_t result
    if crc > 0xFFFFFFFF:
        raise ValueError("crc must be an unsigned 32-bit value")
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        if view.len >= GIL_RELEASE_BYTES:
            with nogil:
                result = kc_crc32c(<uint32_t>crc, view.buf, <size_t>view.len)
        else:
            result = kc_crc32c(<uint32_t>crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return result


def crc32c_software(data, unsigned long long crc=0):
    """The portable slicing-by-8 path (tests compare it with the hardware one)."""
    cdef Py_buffer view
    cdef uint32_t result
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            result = kc_crc32c_sw(<uint32_t>crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return result


def hardware_available():
    """True when the SSE4.2 crc32 instruction is used."""
    return bool(kc_crc32c_hw_available())


def avx512_available():
    """True when the AVX-512 VPCLMULQDQ folding path is the one in use."""
    return bool(kc_crc32c_avx512_available())


def implementations():
    """The implementations this CPU can run, in kc_crc32c.h's order (the fastest is last
    but one or last): names as KAFKACORE_CRC32C_IMPL takes them."""
    return [kc_crc32c_impl_name(i).decode() for i in range(KC_CRC32C_IMPL_COUNT) if kc_crc32c_impl_available(i)]


def implementation():
    """The implementation crc32c() uses: chosen at import from the CPU's features, or
    KAFKACORE_CRC32C_IMPL, or _set_implementation()."""
    return kc_crc32c_impl_name(kc_crc32c_impl()).decode()


cdef int _impl_index(str name) except -1:
    for i in range(KC_CRC32C_IMPL_COUNT):
        if kc_crc32c_impl_name(i).decode() == name:
            if not kc_crc32c_impl_available(i):
                raise ValueError(f"crc32c implementation {name!r} is not available on this CPU")
            return i
    raise ValueError(f"unknown crc32c implementation {name!r}")


def _set_implementation(str name):
    """Tests and benchmarks: make crc32c() (of this module only: the records and storage
    modules have their own copy of the dispatch) use another implementation. Returns the
    previous one's name. Not safe while other threads compute CRCs."""
    previous = implementation()
    kc_crc32c_set_impl(_impl_index(name))
    return previous


def _crc32c_with(str name, data, unsigned long long crc=0):
    """crc32c through the named implementation, whatever the one in use."""
    cdef Py_buffer view
    cdef uint32_t result
    cdef int impl = _impl_index(name)
    if crc > 0xFFFFFFFF:
        raise ValueError("crc must be an unsigned 32-bit value")
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            result = kc_crc32c_with(impl, <uint32_t>crc, view.buf, <size_t>view.len)
    finally:
        PyBuffer_Release(&view)
    return result
