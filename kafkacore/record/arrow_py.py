"""Pure-Python twin of the native ``decode_to_arrow``: one Python object per record, then
pyarrow builds the columns. Used to check the native decoder and when extensions are off.

pyarrow (and the schema module, which needs it) is imported on the first call, so importing
kafkacore.record with the twins doesn't load it."""
from .batch_py import ABORTED, CONTROL_ABORT, MARKER, AbortedFilter, control_type, iter_batches
from .errors import CorruptRecordError


def decode_to_arrow(buf, topic=None, partition=None, check_crcs=True,
                    aborted=None) -> "pyarrow.RecordBatch":  # noqa: F821
    import pyarrow as pa

    from .arrow_schema import HEADERS_TYPE, SPARK_KAFKA_SCHEMA, constant_columns

    txn = None if aborted is None else AbortedFilter(aborted)
    keys, values, offsets, timestamps, ts_types, headers = [], [], [], [], [], []
    for batch in iter_batches(buf):
        if batch.count < 0:
            raise CorruptRecordError("negative record count", batch.position)
        if check_crcs:
            batch.validate(records=False)
        if txn is not None:
            verdict = txn.batch(batch)
            if verdict == MARKER and control_type(batch) == CONTROL_ABORT:
                txn.end(batch.producer_id)
            if verdict == ABORTED:
                continue  # CRC checked above; never decompressed
        if batch.is_control:
            continue
        ts_type = batch.timestamp_type
        for rec in batch:
            keys.append(rec.key)
            values.append(rec.value)
            offsets.append(rec.offset)
            timestamps.append(rec.timestamp_ms)
            ts_types.append(ts_type)
            headers.append([{"key": k, "value": v} for k, v in rec.headers] if rec.headers else None)
    n = len(offsets)
    topic_col, part_col = constant_columns(topic, partition, n)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(keys, pa.binary()),
            pa.array(values, pa.binary()),
            topic_col,
            part_col,
            pa.array(offsets, pa.int64()),
            pa.array(timestamps, pa.int64()).view(pa.timestamp("ms")),
            pa.array(ts_types, pa.int32()),
            pa.array(headers, HEADERS_TYPE),
        ],
        schema=SPARK_KAFKA_SCHEMA,
    )


def decode_segments_to_arrow(segments, check_crcs=True):
    """Twin of the native ``decode_segments_to_arrow``: each (buf, topic, partition, aborted)
    segment decoded as ``decode_to_arrow`` decodes it, the batches concatenated; returns
    (batch, [rows of each segment])."""
    import pyarrow as pa

    from .arrow_schema import empty_batch

    batches = [decode_to_arrow(buf, topic, partition, check_crcs, aborted)
               for buf, topic, partition, aborted in segments]
    counts = [b.num_rows for b in batches]
    if not batches:
        return empty_batch(), counts
    if len(batches) == 1:
        return batches[0], counts
    table = pa.Table.from_batches(batches)
    return pa.RecordBatch.from_arrays([col.combine_chunks() for col in table.columns], schema=table.schema), counts
