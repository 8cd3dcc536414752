"""Coverage-guided fuzzing (atheris/libFuzzer) of the record decoders with hostile bytes.

Every input goes through iter_batches, batch iteration, validate() and decode_to_arrow, and
through the read_committed paths (iter_batches, decode_to_arrow and the consumer's
decode_records with an aborted-transaction list taken from the input's last bytes);
the only exception allowed out is CorruptRecordError. It also goes through the storage
engine's native paths: produce validation (only Kafka's CORRUPT_MESSAGE, INVALID_RECORD and
MESSAGE_TOO_LARGE may come out), offset stamping of what passed, the recovery scan, the index
searches and the header walk over a file holding the bytes. Anything else, or a crash of the
native code, is a finding. The seed corpus is valid batches of every codec, so libFuzzer's
mutations start from well-formed framing and reach the record-level parsers.

    python ci/fuzz_decoders.py [-max_total_time=60] [-runs=N] [corpus_dir ...]
"""
import atexit
import os
import shutil
import sys
import tempfile

import atheris

with atheris.instrument_imports(include=["kafkacore"]):
    from kafkacore.record import CorruptRecordError, decode_to_arrow, iter_batches
    from kafkacore.record import RecordBatchBuilder
    from kafkacore.record.control import end_txn_marker_batch
    from kafkacore.client.consumer import decode_records
    from kafkacore.errors import CorruptMessageError, InvalidRecordError, MessageTooLargeError
    from kafkacore.storage._hot import hot

_FILE = os.memfd_create("kc_fuzz_log")


def exercise_storage(data: bytes) -> None:
    try:
        hot.validate_records(data, 1 << 20, False)
    except (CorruptMessageError, InvalidRecordError, MessageTooLargeError):
        pass
    else:
        buf = bytearray(data)
        hot.assign_offsets(buf, 1000, 3, 1_700_000_000_000)
        hot.validate_records(buf, 1 << 20, False)  # stamping keeps a valid batch valid
    for interval in (0, 64):
        scanner = hot.SegmentScanner(0, interval, True)
        status, consumed, _o, _t = scanner.scan(data)
        assert 0 <= consumed <= len(data) and status in (0, 1, 2), (status, consumed)
    n = len(data)
    hot.offset_index_lookup(data, n // 8, 5)
    hot.offset_index_lookup_position(data, n // 8, 100)
    hot.time_index_lookup(data, n // 12, 1 << 40)
    hot.offset_index_sane(data, n // 8, n)
    hot.time_index_sane(data, n // 12)
    os.ftruncate(_FILE, 0)
    os.pwrite(_FILE, data, 0)
    for mode, target in ((hot.SEEK_OFFSET, 3), (hot.SEEK_TIMESTAMP, 0), (hot.SEEK_BOUNDARY, n // 2)):
        try:
            hot.seek(_FILE, 0, n, mode, target)
        except CorruptRecordError:
            pass


def aborted_list(data: bytes) -> list:
    """Up to 4 (producer_id, first_offset) pairs from the input's tail, so the fuzzer steers
    them too: small producer ids (those of the seeds), offsets small or any int64."""
    n = data[-1] % 5 if data else 0
    out = []
    for i in range(n):
        chunk = data[-2 - 9 * (i + 1):-2 - 9 * i] if len(data) >= 2 + 9 * (i + 1) else b"\x00" * 9
        first = int.from_bytes(chunk[1:], "big", signed=True)
        out.append((chunk[0] % 12 - 1, first if chunk[0] & 0x80 else first % 64))
    return out


def exercise(data: bytes) -> None:
    exercise_storage(data)
    aborted = aborted_list(data)
    try:
        for batch in iter_batches(data, aborted):
            batch.aborted
    except CorruptRecordError:
        pass
    for check in (True, False):
        try:
            decode_to_arrow(data, check_crcs=check, aborted=aborted).validate(full=True)
        except CorruptRecordError:
            pass
        try:
            decode_records(data, "t", 0, 0, check, aborted)
        except CorruptRecordError:
            pass
    try:
        for batch in iter_batches(data):
            for rec in batch:
                rec.key, rec.value, rec.headers
            batch.validate()
    except CorruptRecordError:
        pass
    for check in (True, False):
        try:
            decode_to_arrow(data, topic="t", partition=0, check_crcs=check).validate(full=True)
        except CorruptRecordError:
            pass


def seeds():
    out = []
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        b = RecordBatchBuilder(compression=codec, base_offset=7, producer_id=3)
        b.append(b"value", key=b"key", timestamp_ms=1_700_000_000_000, headers=[("h", b"v"), ("n", None)])
        b.append(None, timestamp_ms=1_600_000_000_000)
        b.extend([b"x" * 40, b""], keys=[None, b"k2"], timestamps_ms=[5, 6])
        out.append(b.build())
    b = RecordBatchBuilder(control=True, transactional=True, producer_id=9)
    b.append(b"\x00\x00\x00\x00", key=b"\x00\x00\x00\x01", timestamp_ms=1)
    out.append(b.build())
    out.append(out[0] + out[3] + out[0][:30])
    # a read_committed buffer: producer 3 aborts a compressed batch, producer 9 commits
    parts = []
    for pid, base, codec in ((3, 0, "zstd"), (9, 2, "none"), (3, 4, "lz4")):
        b = RecordBatchBuilder(compression=codec, base_offset=base)
        b.set_producer_state(pid, 0, 0, transactional=True)
        b.extend([b"a", b"b"], timestamps_ms=[1, 2])
        parts.append(b.build())
    parts.append(end_txn_marker_batch(3, 0, 0, False, 1, base_offset=6))
    parts.append(end_txn_marker_batch(9, 0, 0, True, 1, base_offset=7))
    out.append(b"".join(parts) + bytes([4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]))  # tail: aborted [(3, 0)]
    return out


def main():
    args = list(sys.argv)
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = tempfile.mkdtemp(prefix="kc_fuzz_corpus_")
        atexit.register(shutil.rmtree, corpus, True)
        for i, s in enumerate(seeds()):
            with open(os.path.join(corpus, f"seed{i}"), "wb") as f:
                f.write(s)
        args.append(corpus)
    for s in seeds():  # the seeds themselves must decode
        exercise(s)
    atheris.Setup(args, exercise)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
