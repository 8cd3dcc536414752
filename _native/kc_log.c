#define _POSIX_C_SOURCE 200809L
#include "kc_log.h"
#include "kc_crc32c.h"
#include "kc_record.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>

/* ---- index search ---------------------------------------------------------------------- */

long kc_offset_index_lookup(const uint8_t *index, size_t entries, int32_t target) {
    /* Invariant: entries below lo are <= target, entries at hi and above are > target. */
    size_t lo = 0, hi = entries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kc_be32(index + mid * KC_OFFSET_INDEX_ENTRY) <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

long kc_offset_index_lookup_position(const uint8_t *index, size_t entries, int32_t position) {
    size_t lo = 0, hi = entries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kc_be32(index + mid * KC_OFFSET_INDEX_ENTRY + 4) <= position)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

long kc_time_index_lookup(const uint8_t *index, size_t entries, int64_t target) {
    size_t lo = 0, hi = entries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kc_be64(index + mid * KC_TIME_INDEX_ENTRY) <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

int kc_offset_index_sane(const uint8_t *index, size_t entries, int64_t log_size) {
    int64_t prev_off = -1, prev_pos = -1;
    for (size_t i = 0; i < entries; i++) {
        int32_t off = kc_be32(index + i * KC_OFFSET_INDEX_ENTRY);
        int32_t pos = kc_be32(index + i * KC_OFFSET_INDEX_ENTRY + 4);
        if (off <= prev_off || pos <= prev_pos || pos >= log_size) return 0;
        prev_off = off;
        prev_pos = pos;
    }
    return 1;
}

int kc_time_index_sane(const uint8_t *index, size_t entries) {
    int64_t prev_ts = INT64_MIN, prev_off = -1;
    for (size_t i = 0; i < entries; i++) {
        int64_t ts = kc_be64(index + i * KC_TIME_INDEX_ENTRY);
        int32_t off = kc_be32(index + i * KC_TIME_INDEX_ENTRY + 8);
        if ((i > 0 && ts <= prev_ts) || off < prev_off || off < 0) return 0;
        prev_ts = ts;
        prev_off = off;
    }
    return 1;
}

/* ---- append: validate and stamp -------------------------------------------------------- */

static int check_uncompressed_records(const uint8_t *p, const uint8_t *end, int32_t count, size_t *err_at,
                                      const char **err) {
    const uint8_t *start = p;
    for (int32_t i = 0; i < count; i++) {
        kc_record r;
        if (p >= end) {
            *err_at = (size_t)(p - start);
            *err = "batch holds fewer records than its record count";
            return KC_INVALID;
        }
        if (kc_record_parse_inline(p, end, &r, err) != KC_OK) {
            *err_at = (size_t)(p - start);
            return KC_INVALID;
        }
        if (r.offset_delta != i) {
            *err_at = (size_t)(p - start);
            *err = "record offset deltas are not consecutive from 0";
            return KC_INVALID;
        }
        p = r.end;
    }
    if (p != end) {
        *err_at = (size_t)(p - start);
        *err = "batch has bytes left after its last record";
        return KC_INVALID;
    }
    return KC_OK;
}

int kc_log_validate(const uint8_t *p, size_t len, int64_t max_batch_bytes, int allow_control, kc_append_info *info) {
    memset(info, 0, sizeof(*info));
    info->max_timestamp = KC_NO_TIMESTAMP;
    info->max_timestamp_delta = 0;
    info->producer_id = -1;
    info->producer_epoch = -1;
    info->base_sequence = -1;
    info->last_sequence = -1;
    if (len == 0) {
        info->err = "no record batches";
        return KC_INVALID;
    }
    size_t pos = 0;
    while (pos < len) {
        kc_batch_header h;
        size_t total = 0;
        const char *err = NULL;
        info->err_at = pos;
        int st = kc_batch_frame(p + pos, len - pos, &h, &total, &err);
        if (st == KC_TRUNCATED) {
            info->err = "records end inside a batch (truncated)";
            return KC_CORRUPT;
        }
        if (st != KC_OK) {
            info->err = err;
            return KC_CORRUPT;
        }
        if ((int64_t)total > max_batch_bytes) {
            info->err = "batch is larger than max.message.bytes";
            return KC_TOO_LARGE;
        }
        if (!kc_batch_crc_ok(p + pos, total, &h)) {
            info->err = "CRC-32C of the batch does not match its contents";
            return KC_CORRUPT;
        }
        if (h.records_count <= 0 || h.last_offset_delta < 0 || (int64_t)h.last_offset_delta + 1 != h.records_count) {
            info->err = "inconsistent batch offset range and record count";
            return KC_INVALID;
        }
        if ((h.attributes & KC_ATTR_COMPRESSION_MASK) > 4) {
            info->err = "unknown compression codec (Kafka defines ids 0 to 4)";
            return KC_CORRUPT;
        }
        if ((h.attributes & KC_ATTR_CONTROL) && !allow_control) {
            info->err = "clients may not write control batches";
            return KC_INVALID;
        }
        if ((h.attributes & KC_ATTR_COMPRESSION_MASK) == 0) {
            size_t at = 0;
            st = check_uncompressed_records(p + pos + KC_RECORD_BATCH_OVERHEAD, p + pos + total, h.records_count, &at,
                                            &info->err);
            if (st != KC_OK) {
                info->err_at = pos + KC_RECORD_BATCH_OVERHEAD + at;
                return st;
            }
        }
        if (info->batches == 0) {
            info->producer_id = h.producer_id;
            info->producer_epoch = h.producer_epoch;
            info->base_sequence = h.base_sequence;
            info->attributes = h.attributes;
        }
        info->last_sequence = h.base_sequence < 0 ? -1
                                                  : (int32_t)(((int64_t)h.base_sequence + h.last_offset_delta) % 2147483648LL);
        if (h.max_timestamp > info->max_timestamp) {
            info->max_timestamp = h.max_timestamp;
            info->max_timestamp_delta = info->records + h.last_offset_delta;
        }
        if (h.attributes & KC_ATTR_TRANSACTIONAL) info->is_transactional = 1;
        if (h.attributes & KC_ATTR_CONTROL) info->has_control = 1;
        info->records += h.records_count;
        info->batches++;
        pos += total;
    }
    info->bytes = (int64_t)len;
    info->err = NULL;
    return KC_OK;
}

int64_t kc_log_assign_offsets(uint8_t *p, size_t len, int64_t first_offset, int32_t leader_epoch,
                              int64_t log_append_time) {
    size_t pos = 0;
    int64_t next = first_offset;
    while (pos + KC_RECORD_BATCH_OVERHEAD <= len) {
        uint8_t *b = p + pos;
        int32_t blen = kc_be32(b + KC_LENGTH_OFFSET);
        if (blen < KC_RECORD_BATCH_OVERHEAD - KC_LOG_OVERHEAD || (size_t)blen + KC_LOG_OVERHEAD > len - pos) break;
        size_t total = (size_t)blen + KC_LOG_OVERHEAD;
        kc_put_be64(b + KC_BASE_OFFSET_OFFSET, next);
        kc_put_be32(b + KC_PARTITION_LEADER_EPOCH_OFFSET, leader_epoch);
        if (log_append_time >= 0) {
            int16_t attrs = kc_be16(b + KC_ATTRIBUTES_OFFSET);
            kc_put_be16(b + KC_ATTRIBUTES_OFFSET, (int16_t)(attrs | KC_ATTR_TIMESTAMP_TYPE));
            kc_put_be64(b + KC_MAX_TIMESTAMP_OFFSET, log_append_time);
            uint32_t crc = kc_crc32c(0, b + KC_ATTRIBUTES_OFFSET, total - KC_ATTRIBUTES_OFFSET);
            kc_put_be32(b + KC_CRC_OFFSET, (int32_t)crc);
        }
        next += (int64_t)kc_be32(b + KC_LAST_OFFSET_DELTA_OFFSET) + 1;
        pos += total;
    }
    return next;
}

/* ---- segment scan (recovery and index building) ---------------------------------------- */

int kc_log_scan(kc_scan *s, const uint8_t *buf, size_t len, size_t *consumed) {
    size_t pos = 0;
    *consumed = 0;
    s->err = NULL;
    while (pos < len) {
        kc_batch_header h;
        size_t total = 0;
        const char *err = NULL;
        int st = kc_batch_frame(buf + pos, len - pos, &h, &total, &err);
        if (st == KC_TRUNCATED) return KC_TRUNCATED;
        if (st != KC_OK) {
            s->err = err;
            return KC_CORRUPT;
        }
        if (s->check_crc && !kc_batch_crc_ok(buf + pos, total, &h)) {
            s->err = "CRC-32C of the batch does not match its contents";
            return KC_CORRUPT;
        }
        if (h.last_offset_delta < 0 || h.base_offset < s->base_offset ||
            h.base_offset > INT64_MAX - h.last_offset_delta) {
            s->err = "batch offsets are out of range for the segment";
            return KC_CORRUPT;
        }
        int64_t last = h.base_offset + h.last_offset_delta;
        if (h.base_offset < s->next_offset) {
            s->err = "batch offsets go backwards";
            return KC_CORRUPT;
        }
        if (last - s->base_offset > INT32_MAX) {
            s->err = "batch offset does not fit the segment's 32-bit relative offsets";
            return KC_CORRUPT;
        }
        int64_t position = s->position;
        if (position > INT32_MAX) {
            s->err = "batch lies beyond the 2 GiB a segment's index can address";
            return KC_CORRUPT;
        }
        /* Kafka's rule (LogSegment.append and recover): an entry for this batch when more than
         * index.interval.bytes lie between the last entry's batch and this one. */
        int want_index = position - s->last_index_position > s->index_interval;
        int64_t max_ts = s->max_timestamp, max_off = s->offset_of_max_timestamp;
        if (h.max_timestamp > max_ts) {
            max_ts = h.max_timestamp;
            max_off = last;
        }
        int want_time = want_index && max_ts > s->last_time_index_timestamp;
        if (want_index && (s->offset_count >= s->offset_capacity || (want_time && s->time_count >= s->time_capacity)))
            return KC_INDEX_FULL;
        s->max_timestamp = max_ts;
        s->offset_of_max_timestamp = max_off;
        if (want_index) {
            uint8_t *e = s->offset_entries + s->offset_count * KC_OFFSET_INDEX_ENTRY;
            kc_put_be32(e, (int32_t)(last - s->base_offset));
            kc_put_be32(e + 4, (int32_t)position);
            s->offset_count++;
            s->last_index_position = position;
            if (want_time) {
                uint8_t *t = s->time_entries + s->time_count * KC_TIME_INDEX_ENTRY;
                kc_put_be64(t, max_ts);
                kc_put_be32(t + 8, (int32_t)(max_off - s->base_offset));
                s->time_count++;
                s->last_time_index_timestamp = max_ts;
            }
        }
        s->next_offset = last + 1;
        s->position += (int64_t)total;
        s->batches++;
        pos += total;
        *consumed = pos;
    }
    return KC_OK;
}

/* ---- header walk over a file ----------------------------------------------------------- */

static ssize_t pread_full(int fd, uint8_t *dst, size_t n, int64_t off) {
    for (;;) {
        ssize_t r = pread(fd, dst, n, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        return r;
    }
}

int kc_log_seek(int fd, int64_t start, int64_t end, int mode, int64_t target, uint8_t *scratch,
                size_t scratch_len, kc_seek_result *r) {
    /* Header bytes a mode needs: up to lastOffsetDelta, or up to maxTimestamp. */
    const size_t need = mode == KC_SEEK_TIMESTAMP ? (size_t)KC_MAX_TIMESTAMP_OFFSET + 8
                                                  : (size_t)KC_LAST_OFFSET_DELTA_OFFSET + 4;
    if (scratch_len < 64) return KC_IO_ERROR;
    int64_t pos = start, buf_pos = start;
    size_t have = 0;
    int first = 1;
    while (pos < end) {
        if (pos < buf_pos || pos + (int64_t)need > buf_pos + (int64_t)have) {
            int64_t want = end - pos;
            size_t n = want < (int64_t)scratch_len ? (size_t)want : scratch_len;
            ssize_t got = pread_full(fd, scratch, n, pos);
            if (got < 0) return KC_IO_ERROR;
            buf_pos = pos;
            have = (size_t)got;
            if (have < KC_LOG_OVERHEAD) break; /* a partial header at the end: no more batches */
        }
        const uint8_t *b = scratch + (pos - buf_pos);
        size_t avail = have - (size_t)(pos - buf_pos);
        int32_t blen = kc_be32(b + KC_LENGTH_OFFSET);
        if (blen < KC_RECORD_BATCH_OVERHEAD - KC_LOG_OVERHEAD) return KC_CORRUPT;
        int64_t total = (int64_t)blen + KC_LOG_OVERHEAD;
        if (pos + total > end) break; /* an incomplete batch: the slice ends before it */
        if (mode == KC_SEEK_BOUNDARY) {
            if (pos + total > target) {
                r->position = first ? pos + total : pos;
                return KC_OK;
            }
        } else {
            if (avail < need) return KC_NOT_FOUND; /* the file ends inside this header */
            if (avail > KC_MAGIC_OFFSET && b[KC_MAGIC_OFFSET] != 2) return KC_CORRUPT;
            int64_t base = kc_be64(b);
            int32_t delta = kc_be32(b + KC_LAST_OFFSET_DELTA_OFFSET);
            if (delta < 0 || base > INT64_MAX - delta) return KC_CORRUPT;
            int64_t last = base + delta;
            int64_t max_ts = mode == KC_SEEK_TIMESTAMP ? kc_be64(b + KC_MAX_TIMESTAMP_OFFSET) : 0;
            if ((mode == KC_SEEK_OFFSET && last >= target) || (mode == KC_SEEK_TIMESTAMP && max_ts >= target)) {
                r->position = pos;
                r->base_offset = base;
                r->last_offset = last;
                r->max_timestamp = max_ts;
                r->size = (int32_t)(total > INT32_MAX ? INT32_MAX : total);
                return KC_OK;
            }
        }
        pos += total;
        first = 0;
    }
    if (mode == KC_SEEK_BOUNDARY && !first) {
        r->position = pos;
        return KC_OK;
    }
    return KC_NOT_FOUND;
}
