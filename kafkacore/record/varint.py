"""Zigzag varints of record format v2, in plain Python (the twins' helpers)."""
from .errors import CorruptRecordError


def size_of_varlong(value: int) -> int:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    n = 1
    while u >= 0x80:
        u >>= 7
        n += 1
    return n


def write_varlong(out: bytearray, value: int) -> None:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def read_varlong(buf, pos: int, end: int, max_bytes: int = 10):
    """(value, new_pos); CorruptRecordError when truncated or longer than max_bytes."""
    u = 0
    shift = 0
    for i in range(max_bytes):
        if pos + i >= end:
            break
        b = buf[pos + i]
        u |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            u &= 0xFFFFFFFFFFFFFFFF
            return (u >> 1) ^ -(u & 1), pos + i + 1
    raise CorruptRecordError("varint is truncated or too long", pos)


def read_varint(buf, pos: int, end: int):
    """A 32-bit varint: at most 5 bytes, and the zigzag value must fit 32 bits."""
    u = 0
    shift = 0
    for i in range(5):
        if pos + i >= end:
            break
        b = buf[pos + i]
        u |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            if u > 0xFFFFFFFF:
                break
            return (u >> 1) ^ -(u & 1), pos + i + 1
    raise CorruptRecordError("varint is truncated or too long", pos)
