"""CRC-32C (Castagnoli), the checksum of Kafka record batches v2."""
from ._loader import load_native

_POLY = 0x82F63B78


def _make_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def crc32c_py(data, crc: int = 0) -> int:
    """Pure-Python twin: byte-at-a-time table walk. Slow and obviously correct."""
    table = _TABLE
    reg = ~crc & 0xFFFFFFFF
    mv = memoryview(data)
    if not mv.c_contiguous:  # as the native path (a simple buffer request) does
        raise BufferError("crc32c needs a contiguous buffer")
    if mv.nbytes == 0:
        return crc & 0xFFFFFFFF
    if mv.ndim != 1 or mv.format != "B":
        mv = mv.cast("B")
    for b in mv:
        reg = (reg >> 8) ^ table[(reg ^ b) & 0xFF]
    return ~reg & 0xFFFFFFFF


_native = load_native("crc")

if _native is not None:
    crc32c = _native.crc32c
else:
    crc32c = crc32c_py
crc32c.__doc__ = """crc32c(data, crc=0) -> int

CRC-32C of any buffer (bytes, bytearray, memoryview, numpy array...), unsigned. Pass a
previous result as ``crc`` to continue over more data."""
