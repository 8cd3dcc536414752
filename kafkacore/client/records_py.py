"""The consumer's record decoder in pure Python: the twin of decode_records / ConsumerRecord
in bindings/consumer_records.pxi (kafkacore._ext.records)."""
from __future__ import annotations

from ..record import CorruptRecordError
from ..record.batch_py import ABORTED, CONTROL_ABORT, MARKER, AbortedFilter, control_type, iter_batches


class ConsumerRecord:
    """One consumed record: topic, partition, offset, timestamp_ms, timestamp_type, key,
    value, headers (a list of (str, bytes-or-None))."""

    __slots__ = ("topic", "partition", "offset", "timestamp_ms", "timestamp_type", "key", "value", "headers")

    def __init__(self, topic, partition, offset, timestamp_ms, timestamp_type, key, value, headers):
        self.topic, self.partition, self.offset = topic, partition, offset
        self.timestamp_ms, self.timestamp_type = timestamp_ms, timestamp_type
        self.key, self.value, self.headers = key, value, headers

    def __eq__(self, other):
        if not isinstance(other, ConsumerRecord):
            return NotImplemented
        return all(getattr(self, s) == getattr(other, s) for s in self.__slots__ if s != "timestamp_type")

    __hash__ = None

    def __repr__(self):
        return (f"ConsumerRecord(topic={self.topic!r}, partition={self.partition}, offset={self.offset}, "
                f"timestamp_ms={self.timestamp_ms}, key={self.key!r}, value={self.value!r}, headers={self.headers!r})")


def decode_records(buf, topic, partition, min_offset=0, check_crcs=True, aborted=None):
    """(records at min_offset or later, offset after the last whole batch or -1, error): a
    corrupt batch raises CorruptRecordError when it is the first, else ends the records and
    comes back as ``error``. ``aborted``: the Fetch response's aborted transactions
    (read_committed; None reads uncommitted), see batch_py.AbortedFilter."""
    out = []
    txn = None if aborted is None else AbortedFilter(aborted)
    try:
        return _decode(buf, topic, partition, min_offset, check_crcs, out, txn)
    except _Partial as p:
        return p.args


class _Partial(Exception):
    pass


def _decode(buf, topic, partition, min_offset, check_crcs, out, txn):
    next_offset = -1
    try:
        for batch in iter_batches(buf):
            verdict = 0 if txn is None else txn.batch(batch)
            good = len(out)
            try:
                if verdict == MARKER:
                    # Read even before min_offset: an ABORT marker ends its producer's aborted range.
                    if check_crcs:
                        batch.validate(records=False)
                    if control_type(batch) == CONTROL_ABORT:
                        txn.end(batch.producer_id)
                    next_offset = batch.next_offset
                    continue
                if batch.next_offset <= min_offset:
                    next_offset = batch.next_offset
                    continue
                batch.validate(records=False) if check_crcs else None
                if not batch.is_control and verdict != ABORTED:  # an aborted batch: CRC checked, not decoded
                    ts_type = batch.timestamp_type
                    for r in batch:
                        if r.offset >= min_offset:
                            out.append(ConsumerRecord(topic, partition, r.offset, r.timestamp_ms, ts_type, r.key,
                                                      r.value, list(r.headers)))
            except CorruptRecordError as e:
                err = CorruptRecordError(f"{topic}-{partition} offset {batch.base_offset}: {e.reason}", e.position)
                if good:
                    del out[good:]
                    raise _Partial(out, next_offset, err) from None
                raise err from None
            next_offset = batch.next_offset
    except CorruptRecordError as e:
        if e.reason.startswith(f"{topic}-{partition}"):
            raise
        err = CorruptRecordError(f"{topic}-{partition}: malformed batch after offset {next_offset}: {e.reason}",
                                 e.position)
        if out:
            raise _Partial(out, next_offset, err) from None
        raise err from None
    return out, next_offset, None
