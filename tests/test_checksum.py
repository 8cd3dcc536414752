"""CRC-32C: published vectors, chaining, buffer types, and native against the twin."""
import array
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kafkacore
from kafkacore import checksum
from kafkacore.checksum import crc32c_py

from _kcutil import by_mode, examples, native_module, random_bytes, requires_native

native_crc = native_module("crc")

# (data, crc): Kafka's Crc32CTest, then RFC 3720 B.4 (iSCSI) test vectors.
VECTORS = [
    (b"", 0),
    (b"123456789", 0xE3069283),
    (b"Some String", 608512271),
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
]

IMPLS = {"selected": kafkacore.crc32c, "twin": crc32c_py}
if native_crc is not None:
    IMPLS["native-software"] = native_crc.crc32c_software

# Sizes around the native code's internal boundaries: 8-byte words, the 3 x 256 and
# 3 x 8192 interleaved blocks, the 64 KiB GIL-release threshold.
BOUNDARY_SIZES = sorted({
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 23, 24, 25, 63, 64, 65,
    255, 256, 257, 511, 512, 513, 767, 768, 769, 775, 776, 1023, 1024, 1025, 1536, 1543, 2311,
    8191, 8192, 8193, 16384, 24575, 24576, 24577, 24583, 24576 + 768, 24576 + 767, 49152, 49152 + 769,
    65535, 65536, 65537, 73728 + 7, 100_003,
})


@pytest.mark.parametrize("impl", list(IMPLS), ids=list(IMPLS))
@pytest.mark.parametrize("data,expected", VECTORS, ids=[f"vec{i}" for i in range(len(VECTORS))])
def test_published_vectors(impl, data, expected):
    assert IMPLS[impl](data) == expected


def test_module_reports_its_implementation():
    # The public function is the compiled one exactly when the extensions are in use.
    assert (kafkacore.crc32c is crc32c_py) == (checksum._native is None)
    assert kafkacore.crc32c is checksum.crc32c


@pytest.mark.parametrize("data,expected", VECTORS[1:], ids=[f"vec{i}" for i in range(1, len(VECTORS))])
def test_chaining_vectors(data, expected):
    for cut in range(len(data) + 1):
        assert kafkacore.crc32c(data[cut:], kafkacore.crc32c(data[:cut])) == expected


def test_empty_data_keeps_the_running_crc():
    for crc in (0, 1, 0xE3069283, 0xFFFFFFFF, 0x80000000):
        assert kafkacore.crc32c(b"", crc) == crc
        assert kafkacore.crc32c(b"", crc=crc) == crc


def test_result_is_unsigned_32_bit():
    # 0xE3069283 has the top bit set: it must not come back negative.
    assert kafkacore.crc32c(b"123456789") == 0xE3069283 > 0
    assert isinstance(kafkacore.crc32c(b"x"), int)


@settings(max_examples=examples(300, 100))
@given(data=st.binary(max_size=2000), cuts=st.lists(st.integers(0, 2000), max_size=4))
def test_chaining_any_split(data, cuts):
    whole = kafkacore.crc32c(data)
    points = sorted({min(c, len(data)) for c in cuts} | {0, len(data)})
    crc = 0
    for a, b in zip(points, points[1:]):
        crc = kafkacore.crc32c(data[a:b], crc)
    assert crc == whole


def _buffer_forms(data: bytes):
    arr = np.frombuffer(data, dtype=np.uint8).copy()
    padded = b"\xAA" * 7 + data + b"\x55" * 5
    forms = {
        "bytes": data,
        "bytearray": bytearray(data),
        "memoryview": memoryview(data),
        "readonly-memoryview-slice": memoryview(padded)[7:7 + len(data)],
        "bytearray-memoryview-slice": memoryview(bytearray(padded))[7:7 + len(data)],
        "numpy-uint8": arr,
        "numpy-slice": np.frombuffer(padded, dtype=np.uint8)[7:7 + len(data)],
    }
    if len(data) % 4 == 0:
        forms["numpy-uint32"] = np.frombuffer(data, dtype=np.uint32).copy()
    if data and len(data) % 8 == 0:
        forms["numpy-2d"] = np.frombuffer(data, dtype=np.uint8).reshape(-1, 8).copy()
    forms["array-B"] = array.array("B", data)
    return forms


@pytest.mark.parametrize("size", [0, 8, 64, 1000, 4096, 70_000])
def test_every_buffer_type(size):
    data = random_bytes(size, seed=size)
    expected = crc32c_py(data)
    for name, buf in _buffer_forms(data).items():
        assert kafkacore.crc32c(buf) == expected, name
        assert kafkacore.crc32c(buf, 0x12345678) == crc32c_py(data, 0x12345678), name


def test_empty_two_dimensional_array():
    # An empty C-contiguous buffer is still a buffer: its CRC is the running value.
    empty = np.empty((0, 8), dtype=np.uint8)
    assert kafkacore.crc32c(empty) == 0
    assert kafkacore.crc32c(empty, 0xE3069283) == 0xE3069283


def test_unaligned_memoryview_slices():
    base = random_bytes(3000, seed=7)
    for start in range(0, 9):
        for length in (0, 1, 7, 8, 9, 255, 777, 2000):
            view = memoryview(base)[start:start + length]
            assert kafkacore.crc32c(view) == crc32c_py(base[start:start + length]), (start, length)


def test_non_contiguous_buffer_is_rejected():
    # A strided view must not be silently checksummed as if it were contiguous memory.
    arr = np.arange(64, dtype=np.uint8)[::2]
    with pytest.raises((BufferError, TypeError, ValueError)):
        kafkacore.crc32c(arr)


@pytest.mark.parametrize("bad", ["123456789", 12345, None, 1.5])
def test_non_buffers_are_rejected(bad):
    with pytest.raises(TypeError):
        kafkacore.crc32c(bad)


@requires_native("crc")
def test_native_boundary_sizes_match_twin():
    for size in BOUNDARY_SIZES:
        data = random_bytes(size + 8, seed=size)
        for start in (0, 1, 3, 7):
            chunk = memoryview(data)[start:start + size]
            expected = crc32c_py(chunk)
            assert native_crc.crc32c(chunk) == expected, (size, start)
            assert native_crc.crc32c_software(chunk) == expected, (size, start)
            assert native_crc.crc32c(chunk, 0xDEADBEEF) == crc32c_py(chunk, 0xDEADBEEF), (size, start)


@requires_native("crc")
def test_native_large_buffer_matches_twin():
    data = random_bytes(3 * 1024 * 1024 + 13, seed=99)
    expected = crc32c_py(data)
    assert native_crc.crc32c(data) == expected
    assert native_crc.crc32c_software(data) == expected
    assert native_crc.crc32c(memoryview(data)[5:], crc32c_py(data[:5])) == expected


@requires_native("crc")
@settings(max_examples=examples(500))
@given(data=st.binary(max_size=4096), crc=st.integers(0, 0xFFFFFFFF), start=st.integers(0, 7))
def test_native_matches_twin(data, crc, start):
    view = memoryview(data)[min(start, len(data)):]
    expected = crc32c_py(view, crc)
    assert native_crc.crc32c(view, crc) == expected
    assert native_crc.crc32c_software(view, crc) == expected


@requires_native("crc")
@settings(max_examples=examples(40))
@given(size=st.sampled_from(BOUNDARY_SIZES), extra=st.integers(-8, 8), seed=st.integers(0, 2**32))
def test_native_matches_twin_near_block_boundaries(size, extra, seed):
    data = random_bytes(max(0, size + extra), seed)
    assert native_crc.crc32c(data) == crc32c_py(data)


def test_hardware_flag_is_a_bool():
    if native_crc is None:
        pytest.skip("native crc module not in use")
    assert native_crc.hardware_available() in (True, False)


try:
    import google_crc32c
except ImportError:  # an optional cross-check (the "bench" extra installs it)
    google_crc32c = None


@pytest.mark.skipif(google_crc32c is None, reason="google-crc32c not installed")
class TestAgainstGoogleCrc32c:
    google = google_crc32c

    @settings(max_examples=examples(300, 100))
    @given(data=st.binary(max_size=by_mode(20000, 3000)))
    def test_random_data(self, data):
        assert kafkacore.crc32c(data) == self.google.value(data)

    def test_boundary_sizes(self):
        sizes = BOUNDARY_SIZES if by_mode(True, False) else [s for s in BOUNDARY_SIZES if s <= 25000]
        for size in sizes:
            data = random_bytes(size + 3, seed=size)
            for start in (0, 3):
                chunk = data[start:start + size]
                assert kafkacore.crc32c(chunk) == self.google.value(chunk), (size, start)

    @settings(max_examples=examples(100))
    @given(a=st.binary(max_size=500), b=st.binary(max_size=500))
    def test_chaining(self, a, b):
        assert kafkacore.crc32c(b, kafkacore.crc32c(a)) == self.google.extend(self.google.value(a), b)


# ---------------------------------------------------------------------------------------
# Every native implementation (kc_crc32c.h: sw, sse4.2, pclmul, vpclmul256, mixed256,
# avx512), whichever the CPU's features select, forced one at a time so the fallbacks stay
# tested on a machine that would not choose them.

try:
    import crc32c as crc32c_pkg
except ImportError:  # optional cross-check (the "bench" extra installs it)
    crc32c_pkg = None

IMPL_NAMES = native_crc.implementations() if native_crc is not None else []
# the folding kernels' block sizes and the mixed kernel's chunks (992, 3968, 15872 bytes,
# + up to 31 bytes of alignment), alone and in runs
FOLD_SIZES = sorted({n + d for n in (16, 32, 64, 128, 256, 512, 992 + 32, 2 * 992 + 32, 3968 + 32,
                                     3968 + 992 + 32, 15872 + 32, 2 * 15872 + 3968 + 992 + 32)
                     for d in (-33, -32, -31, -17, -16, -15, -9, -8, -7, -1, 0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33)
                     if n + d >= 0})


def _peer_values(data, crc=0):
    """The CRC by each installed CRC-32C package (for a cross-check beyond the twin)."""
    out = {}
    if crc32c_pkg is not None:
        out["crc32c"] = crc32c_pkg.crc32c(data, crc) if crc else crc32c_pkg.crc32c(data)
    if google_crc32c is not None:
        out["google-crc32c"] = google_crc32c.extend(crc, data) if crc else google_crc32c.value(data)
    return out


@requires_native("crc")
def test_implementations_are_reported():
    assert IMPL_NAMES[0] == "sw"
    assert native_crc.implementation() in IMPL_NAMES
    if native_crc.hardware_available():
        assert "sse4.2" in IMPL_NAMES
    with pytest.raises(ValueError):
        native_crc._crc32c_with("no-such-kernel", b"x")
    for name in ("sw", "sse4.2", "pclmul", "vpclmul256", "mixed256", "avx512"):
        if name not in IMPL_NAMES:
            with pytest.raises(ValueError, match="not available"):
                native_crc._set_implementation(name)


@requires_native("crc")
def test_implementations_every_fold_boundary_and_offset():
    # the twin's value once per (size, start), every implementation against it
    base = random_bytes(2 * 15872 + 3968 + 992 + 32 + 33 + 64, seed=31)
    for size in FOLD_SIZES:
        for start in ((0, 1, 5, 8, 13, 16, 31, 32, 33, 48, 63) if size <= 1100 else (0, 13, 48)):
            chunk = memoryview(base)[start:start + size]
            want = crc32c_py(chunk, 0x0BADF00D)
            for impl in IMPL_NAMES:
                assert native_crc._crc32c_with(impl, chunk, 0x0BADF00D) == want, (impl, size, start)


@requires_native("crc")
@pytest.mark.parametrize("impl", IMPL_NAMES)
@settings(max_examples=examples(150))
@given(data=st.binary(max_size=6000), start=st.integers(0, 63), cut=st.integers(0, 6000),
       crc=st.integers(0, 0xFFFFFFFF))
def test_implementation_random_lengths_offsets_and_continuation(impl, data, start, cut, crc):
    view = memoryview(data)[min(start, len(data)):]
    want = crc32c_py(view, crc)
    assert native_crc._crc32c_with(impl, view, crc) == want
    cut = min(cut, len(view))
    assert native_crc._crc32c_with(impl, view[cut:], native_crc._crc32c_with(impl, view[:cut], crc)) == want
    for peer, value in _peer_values(bytes(view), crc).items():
        assert value == want, peer


@requires_native("crc")
def test_implementations_one_mebibyte_plus_odd():
    data = random_bytes((1 << 20) + 4099, seed=5)
    for start in (0, 37):
        view = memoryview(data)[start:]
        want = crc32c_py(view)
        for peer, value in _peer_values(bytes(view)).items():
            assert value == want, peer
        for impl in IMPL_NAMES:
            assert native_crc._crc32c_with(impl, view) == want, (impl, start)
            for s in (3, 16):  # other misalignments: against the software path (checked above)
                assert native_crc._crc32c_with(impl, view[s:]) == native_crc._crc32c_with("sw", view[s:]), (impl, s)


@requires_native("crc")
@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_forced_dispatch(impl):
    # crc32c() itself (the dispatch through kc_crc32c) on each implementation in turn
    data = random_bytes(70_001, seed=3)
    previous = native_crc._set_implementation(impl)
    try:
        assert native_crc.implementation() == impl
        assert native_crc.crc32c(b"123456789") == 0xE3069283
        assert native_crc.crc32c(data) == crc32c_py(data)
        assert native_crc.crc32c(memoryview(data)[1:4097], 7) == crc32c_py(data[1:4097], 7)
    finally:
        native_crc._set_implementation(previous)
    assert native_crc.implementation() == previous


@requires_native("crc")
def test_environment_forces_the_fallback():
    # KAFKACORE_CRC32C_IMPL picks the implementation at import (here: the SSE4.2 one, or the
    # software one on a CPU without it); an unavailable name leaves the CPU's choice.
    import subprocess
    import sys

    code = "from kafkacore._ext import crc; print(crc.implementation(), crc.crc32c(b'123456789'))"
    want = "sse4.2" if "sse4.2" in IMPL_NAMES else native_crc.implementation()
    for name, expected in (("sse4.2", want), ("sw", "sw"), ("no-such", native_crc.implementation())):
        env = dict(os.environ, KAFKACORE_CRC32C_IMPL=name)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split() == [expected, str(0xE3069283)], (name, out.stdout, out.stderr)
