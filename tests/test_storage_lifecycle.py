"""Storage engine edge cases found in review: appends that cannot fit a segment's index,
unknown codecs, recompression growing a batch past max.message.bytes, topic configs across a
restart, logs used after close or deletion, and what a clean shutdown must have flushed."""
import os
import struct

import pytest

from kafkacore import crc32c
from kafkacore.errors import (CorruptMessageError, KafkaError, KafkaStorageError, MessageTooLargeError,
                              RecordListTooLargeError)
from kafkacore.record import RecordBatchBuilder, iter_batches
from kafkacore.storage import Log, LogConfig, LogManager

BASE_TS = 1_700_000_000_000


def batch(n=1, size=20, codec="none", key=b"k", ts=BASE_TS):
    b = RecordBatchBuilder(compression=codec)
    for i in range(n):
        b.append(b"v" * size, key=key + b"%d" % i, timestamp_ms=ts + i)
    return b.build()


def dir_state(path):
    return {name: open(os.path.join(path, name), "rb").read() for name in sorted(os.listdir(path))}


def test_append_needing_more_index_entries_than_a_segment_holds_is_rejected_cleanly(tmp_path):
    # 24-byte offset index = 3 entries; interval 0 = an entry for every batch after the first
    cfg = LogConfig({"segment.index.bytes": "24", "index.interval.bytes": "0"})
    lg = Log(str(tmp_path / "t-0"), cfg)
    lg.append(batch(1))
    before = lg.read_batches_bytes()
    with pytest.raises(RecordListTooLargeError):
        lg.append(b"".join(batch(1) for _ in range(8)))
    assert lg.log_end_offset == 1 and lg.read_batches_bytes() == before
    info = lg.append(batch(2))  # the log goes on, offsets contiguous
    assert (info.first_offset, info.last_offset) == (1, 2)
    lg.close()
    again = Log(str(tmp_path / "t-0"), cfg, clean_shutdown=False)
    assert [b.base_offset for b in iter_batches(again.read_batches_bytes())] == [0, 1]
    again.close()


def test_batch_with_an_unknown_codec_is_corrupt(tmp_path):
    lg = Log(str(tmp_path / "t-0"), LogConfig())
    b = bytearray(batch(2))
    attrs = struct.unpack_from(">h", b, 21)[0]
    for codec in (5, 6, 7):
        struct.pack_into(">h", b, 21, (attrs & ~7) | codec)
        struct.pack_into(">I", b, 17, crc32c(bytes(b[21:])))
        with pytest.raises(CorruptMessageError, match="unknown compression codec"):
            lg.append(bytes(b))
    assert lg.log_end_offset == 0 and lg.size_in_bytes == 0
    lg.close()


def test_recompression_that_grows_a_batch_past_max_message_bytes_is_rejected(tmp_path):
    produced = batch(200, size=500, codec="zstd")  # compresses to far below its raw size
    limit = len(produced) + 100
    lg = Log(str(tmp_path / "t-0"), LogConfig({"compression.type": "uncompressed", "max.message.bytes": limit}))
    with pytest.raises(MessageTooLargeError):
        lg.append(produced)
    assert lg.log_end_offset == 0
    lg.close()


def test_topic_configs_survive_a_restart(tmp_path):
    m = LogManager(str(tmp_path), background=False)
    m.create_log("events", 0, {"cleanup.policy": "compact", "segment.bytes": "300"})
    m.shutdown()
    m = LogManager(str(tmp_path), background=False)
    lg = m.get_log("events", 0)
    assert lg.config.compact and lg.config.segment_bytes == 300
    # explicit overrides on an existing log are applied, and stored
    lg = m.get_or_create_log("events", 0, {"retention.ms": "1000"})
    assert lg.config.retention_ms == 1000 and lg.config.compact
    m.shutdown()
    m = LogManager(str(tmp_path), background=False)
    assert m.get_log("events", 0).config.retention_ms == 1000
    m.delete_log("events", 0)
    assert "events" not in m.topic_overrides
    m.shutdown()


def test_bad_topic_override_stores_nothing(tmp_path):
    m = LogManager(str(tmp_path), background=False)
    with pytest.raises(KafkaError, match="segment.bytes"):
        m.create_log("events", 0, {"segment.bytes": "lots"})
    assert m.get_log("events", 0) is None and m.topic_overrides == {}
    m.shutdown()


def test_closed_or_deleted_log_raises_kafka_errors(tmp_path):
    m = LogManager(str(tmp_path), background=False)
    lg = m.create_log("t", 0, {"index.interval.bytes": "100"})
    for _ in range(20):
        lg.append(batch(3))
    m.delete_log("t", 0)
    for call in (lambda: lg.read(30, 1000), lambda: lg.offset_for_timestamp(BASE_TS),
                 lambda: lg.append(batch(1)), lambda: lg.delete_records(5)):
        with pytest.raises(KafkaStorageError):
            call()
    assert lg.delete_old_segments(now=BASE_TS * 2) == 0
    m.shutdown()


def test_close_flushes_rolled_segments_whose_background_flush_never_ran(tmp_path):
    m = LogManager(str(tmp_path), LogConfig({"segment.bytes": "400"}), background=True,
                   flush_check_interval_ms=3_600_000)
    lg = m.get_or_create_log("t", 0)
    m.scheduler.shutdown()  # rolls from now on cannot be flushed in the background
    for _ in range(10):
        lg.append(batch(3))
    assert len(lg.segments) > 2
    m.shutdown()
    # a clean shutdown says everything is on disk: the recovery point is the log end
    text = open(tmp_path / "recovery-point-offset-checkpoint").read().split("\n")
    assert text[2] == f"t 0 {lg.log_end_offset}"
    again = LogManager(str(tmp_path), background=False)
    assert again.had_clean_shutdown and again.get_log("t", 0).log_end_offset == 30
    again.shutdown()


def test_rejected_append_leaves_the_directory_byte_identical(tmp_path):
    cfg = LogConfig({"segment.index.bytes": "24", "index.interval.bytes": "0"})
    lg = Log(str(tmp_path / "t-0"), cfg)
    lg.append(batch(1))
    lg.flush()
    before = dir_state(lg.dir)
    with pytest.raises(RecordListTooLargeError):
        lg.append(b"".join(batch(1) for _ in range(8)))
    assert dir_state(lg.dir) == before
    lg.close()
