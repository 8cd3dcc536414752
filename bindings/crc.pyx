# cython: language_level=3
"""CRC-32C over any buffer, with the GIL released for large inputs."""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from libc.stdint cimport uint32_t
from native cimport kc_crc32c_init, kc_crc32c, kc_crc32c_sw, kc_crc32c_hw_available, kc_crc32c_avx512_available

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
    """True when long buffers take the AVX-512 VPCLMULQDQ folding path."""
    return bool(kc_crc32c_avx512_available())
