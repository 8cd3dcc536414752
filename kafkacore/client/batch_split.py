"""Splitting a batch the broker refused as too large into smaller ones that it takes.

kafkacore's producer builds batches of up to batch.size = 1000000 bytes (librdkafka's default),
which a topic with a smaller ``max.message.bytes`` (MESSAGE_TOO_LARGE) or ``segment.bytes``
(RECORD_LIST_TOO_LARGE) refuses. Java's producer splits a batch refused with MESSAGE_TOO_LARGE
and sends its records again (its Sender's split and re-enqueue); kafkacore does the same for
both errors, since both mean "smaller would do". A refused batch becomes two of about half its
bytes, in record order; a part refused again is split again, down to single records, whose
refusal is the records' error. The records' handles and callbacks follow their parts: a
record's offset is the one its part was written at.

With idempotence the parts keep the refused batch's sequence numbers (part two starts where
part one ends), so the partition's later batches, refused as out of order meanwhile, fit in
after them unchanged. The topic's batches are sealed at half the refused size from then on, so
a producer pays for the discovery once, not on every batch.
"""
from __future__ import annotations

from ..record import RecordBatchBuilder, iter_batches

MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE = 10, 18
SPLIT_ERRORS = frozenset((MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE))


def _record_size(rec) -> int:
    size = len(rec.value or b"") + len(rec.key or b"")
    for hk, hv in rec.headers or ():
        size += len(hk) + len(hv or b"")
    return size + 8


def split_batch(batch, compression: str) -> list:
    """The refused (built) ``batch`` as two new open batches, in order, holding its records
    (at least one each, about half the bytes each); ``batch.result`` completes once both
    results have. The caller gives them producer state and builds them."""
    records = [rec for b in iter_batches(batch.data) for rec in b]
    if len(records) < 2:
        raise ValueError("a batch of one record cannot be split")
    sizes = [_record_size(r) for r in records]
    half, acc, cut = sum(sizes) / 2, 0, 1
    for i, s in enumerate(sizes[:-1]):
        acc += s
        cut = i + 1
        if acc >= half:
            break
    results = batch.result.split([cut, len(records) - cut])
    out = []
    for piece, result in zip((records[:cut], records[cut:]), results):
        part = type(batch)(batch.topic, batch.partition, RecordBatchBuilder(compression), batch.created_ms,
                           batch.limit)
        for rec in piece:
            part.builder.append(rec.value, rec.key, rec.timestamp_ms, rec.headers or None)
        part.count = len(piece)
        part.result = result
        part.size = part.builder.size_in_bytes
        out.append(part)
    # the refused batch's share of buffer.memory moves to its first part (released with it)
    out[0].reserved, batch.reserved = batch.reserved, 0
    return out
