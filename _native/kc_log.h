/* Storage hot paths: validating a produced batch and stamping its offsets in place, scanning a
 * segment (recovery, index rebuild), binary search of the mmapped offset and time indexes, and
 * the batch-header walk that turns an index position into an exact batch position.
 *
 * Formats (Kafka's OffsetIndex / TimeIndex): an offset index entry is 8 bytes, relative offset
 * int32 + file position int32; a time index entry is 12 bytes, timestamp int64 + relative offset
 * int32; all big-endian. Relative offsets are from the segment's base offset. */
#ifndef KC_LOG_H
#define KC_LOG_H
#include <stddef.h>
#include <stdint.h>

#define KC_OFFSET_INDEX_ENTRY 8
#define KC_TIME_INDEX_ENTRY 12
#define KC_NO_TIMESTAMP (-1)

/* Extra statuses beside kc_status (kc_record.h). */
#define KC_INVALID 5    /* CRC-valid but inconsistent batch: Kafka's INVALID_RECORD */
#define KC_INDEX_FULL 6 /* kc_log_scan: the output index buffers are full */
#define KC_NOT_FOUND 7
#define KC_IO_ERROR 8

/* Slot of the last entry whose relative offset is <= target, or -1 when every entry is above it
 * (or there are none). Entries are sorted by offset, as Kafka writes them. */
long kc_offset_index_lookup(const uint8_t *index, size_t entries, int32_t target);
/* Slot of the last entry whose file position is <= position, or -1. */
long kc_offset_index_lookup_position(const uint8_t *index, size_t entries, int32_t position);
/* Slot of the last entry whose timestamp is <= target, or -1. */
long kc_time_index_lookup(const uint8_t *index, size_t entries, int64_t target);
/* 1 when offsets (and positions) strictly increase and lie in range; the sanity check on open. */
int kc_offset_index_sane(const uint8_t *index, size_t entries, int64_t log_size);
int kc_time_index_sane(const uint8_t *index, size_t entries);

/* What a produce request's records hold, filled by kc_log_validate. */
typedef struct {
    int32_t batches;
    int64_t records;
    int64_t bytes;
    int64_t max_timestamp;       /* largest batch maxTimestamp, KC_NO_TIMESTAMP when none */
    int64_t max_timestamp_delta; /* last offset of the batch holding it, relative to the first */
    int64_t producer_id;         /* of the first batch */
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t last_sequence; /* of the last batch: base sequence + last offset delta (wrapping) */
    int16_t attributes;    /* of the first batch */
    int is_transactional;
    int has_control;
    size_t err_at; /* byte position of the failure */
    const char *err;
} kc_append_info;

/* Checks every batch in [p, p+len): framing, magic 2, size <= max_batch_bytes (KC_TOO_LARGE),
 * CRC (KC_CORRUPT), count consistent with the offset range, and for uncompressed batches
 * records that parse, fill the batch exactly and carry offset deltas 0..count-1 (KC_INVALID).
 * Control batches are KC_INVALID unless allow_control. Reads nothing outside the input. */
int kc_log_validate(const uint8_t *p, size_t len, int64_t max_batch_bytes, int allow_control, kc_append_info *info);

/* Stamps baseOffset (consecutive from first_offset) and partitionLeaderEpoch into each batch of
 * validated input; neither is covered by the CRC. With log_append_time >= 0 the batches become
 * LogAppendTime: timestamp-type bit set, maxTimestamp = log_append_time, CRC recomputed.
 * Returns the offset after the last record. */
int64_t kc_log_assign_offsets(uint8_t *p, size_t len, int64_t first_offset, int32_t leader_epoch,
                              int64_t log_append_time);

/* Running state of a scan over one segment's log file, carried across chunks. */
typedef struct {
    int64_t base_offset;    /* the segment's base offset */
    int64_t index_interval; /* index.interval.bytes */
    int check_crc;
    int64_t position;            /* file position of the next batch (in/out) */
    int64_t last_index_position; /* position of the last offset index entry (0 to start) */
    int64_t next_offset;         /* offset after the last batch; batches may not go below it */
    int64_t max_timestamp;       /* largest maxTimestamp so far, KC_NO_TIMESTAMP to start */
    int64_t offset_of_max_timestamp;
    int64_t last_time_index_timestamp; /* KC_NO_TIMESTAMP to start */
    int64_t batches;
    uint8_t *offset_entries; /* out: index entries in file format */
    size_t offset_capacity, offset_count;
    uint8_t *time_entries;
    size_t time_capacity, time_count;
    const char *err;
} kc_scan;

/* Walks whole batches of buf (which holds the file from s->position on), checking each and
 * appending the index entries Kafka's LogSegment would write, by the same rule whether the batch
 * arrives by append or by recovery. *consumed is the length of the valid batches walked.
 * KC_OK: all of buf; KC_TRUNCATED: buf ends inside a batch; KC_CORRUPT: the batch at *consumed
 * is invalid (s->err); KC_INDEX_FULL: an output buffer filled, the batch at *consumed not taken. */
int kc_log_scan(kc_scan *s, const uint8_t *buf, size_t len, size_t *consumed);

/* The batch-header walk behind every lookup, over a file with pread. */
enum kc_seek_mode {
    KC_SEEK_OFFSET = 0,    /* first batch whose last offset >= target */
    KC_SEEK_TIMESTAMP = 1, /* first batch whose maxTimestamp >= target */
    KC_SEEK_BOUNDARY = 2,  /* end of the last batch ending at or before position target, but at
                            * least the end of the first batch (the "one whole batch" rule) */
};
typedef struct {
    int64_t position; /* of the batch found (for BOUNDARY: the end position) */
    int64_t base_offset;
    int64_t last_offset;
    int64_t max_timestamp;
    int32_t size; /* whole batch, log overhead included */
} kc_seek_result;

/* Walks batch headers of fd from start up to end (exclusive). KC_OK with *r filled,
 * KC_NOT_FOUND when no batch qualifies before end, KC_CORRUPT for a header that cannot be a
 * batch, KC_IO_ERROR when pread fails. scratch (>= 64 bytes) is the read buffer. */
int kc_log_seek(int fd, int64_t start, int64_t end, int mode, int64_t target, uint8_t *scratch,
                size_t scratch_len, kc_seek_result *r);

#endif
