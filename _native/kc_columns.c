#include "kc_columns.h"
#include "kc_crc32c.h"
#include "kc_utf8.h"
#include "kc_varint.h"
#include <stdlib.h>

static int push_i32(kc_buf *b, int32_t v) { return kc_buf_append(b, &v, sizeof v); }

void kc_columns_init(kc_columns *c) { memset(c, 0, sizeof *c); }

int kc_columns_start(kc_columns *c) {
    /* Offsets buffers start with their leading 0. */
    if (push_i32(&c->key_offsets, 0) || push_i32(&c->value_offsets, 0) || push_i32(&c->header_list_offsets, 0) ||
        push_i32(&c->header_key_offsets, 0) || push_i32(&c->header_value_offsets, 0))
        return KC_NOMEM;
    return KC_OK;
}

void kc_columns_free(kc_columns *c) {
    kc_buf *all[] = {&c->key_offsets,         &c->key_data,           &c->key_validity,
                     &c->value_offsets,       &c->value_data,         &c->value_validity,
                     &c->offsets,             &c->timestamps,         &c->timestamp_types,
                     &c->header_list_offsets, &c->header_list_validity, &c->header_key_offsets,
                     &c->header_key_data,     &c->header_value_offsets, &c->header_value_data,
                     &c->header_value_validity};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) kc_buf_free(all[i]);
}

/* Grows a validity bitmap so that bit `count-1` exists; new bytes start all-null. */
static int bitmap_reserve(kc_buf *b, int64_t count) {
    size_t need = (size_t)((count + 7) / 8);
    if (need <= b->len) return 0;
    size_t extra = need - b->len;
    if (kc_buf_reserve(b, extra)) return -1;
    memset(b->data + b->len, 0, extra);
    b->len = need;
    return 0;
}
static inline void bitmap_set(kc_buf *b, int64_t i) { b->data[i >> 3] |= (uint8_t)(1u << (i & 7)); }

static inline void put_i32(kc_buf *b, int32_t v) {
    memcpy(b->data + b->len, &v, sizeof v);
    b->len += sizeof v;
}
static inline void put_bytes(kc_buf *b, const uint8_t *p, size_t n) {
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
}

#define ARROW_MAX_OFFSET 0x7fffffffLL

static int add_headers(kc_columns *c, const kc_record *r, const char **err) {
    const uint8_t *p = r->headers;
    size_t span = (size_t)(r->end - r->headers);
    size_t n = (size_t)r->headers_count;
    if (kc_buf_reserve(&c->header_key_offsets, n * 4) || kc_buf_reserve(&c->header_value_offsets, n * 4) ||
        kc_buf_reserve(&c->header_key_data, span) || kc_buf_reserve(&c->header_value_data, span) ||
        bitmap_reserve(&c->header_value_validity, c->headers + r->headers_count))
        return KC_NOMEM;
    if ((int64_t)c->header_key_data.len + (int64_t)span > ARROW_MAX_OFFSET ||
        (int64_t)c->header_value_data.len + (int64_t)span > ARROW_MAX_OFFSET) {
        *err = "header column exceeds 2 GiB; decode the input in smaller pieces";
        return KC_TOO_LARGE;
    }
    for (int32_t i = 0; i < r->headers_count; i++) {
        const uint8_t *k, *v;
        int32_t kl, vl;
        int st = kc_header_next_inline(&p, r->end, &k, &kl, &v, &vl, err);
        if (st) return st;
        if (kc_utf8_valid(k, (size_t)kl)) {
            put_bytes(&c->header_key_data, k, (size_t)kl);
        } else {
            /* Kafka's readers decode header keys leniently (U+FFFD for ill-formed bytes); an
             * Arrow string column must hold valid UTF-8, so store the repaired key. */
            if (kc_buf_reserve(&c->header_key_data, 3 * (size_t)kl)) return KC_NOMEM;
            if ((int64_t)c->header_key_data.len + 3 * (int64_t)kl + (int64_t)span > ARROW_MAX_OFFSET) {
                *err = "header column exceeds 2 GiB; decode the input in smaller pieces";
                return KC_TOO_LARGE;
            }
            c->header_key_data.len += kc_utf8_repair(k, (size_t)kl, c->header_key_data.data + c->header_key_data.len);
        }
        put_i32(&c->header_key_offsets, (int32_t)c->header_key_data.len);
        if (v) {
            put_bytes(&c->header_value_data, v, (size_t)vl);
            bitmap_set(&c->header_value_validity, c->headers);
        } else {
            c->header_value_nulls++;
        }
        put_i32(&c->header_value_offsets, (int32_t)c->header_value_data.len);
        c->headers++;
    }
    if (c->headers > ARROW_MAX_OFFSET) {
        *err = "more than 2^31-1 headers; decode the input in smaller pieces";
        return KC_TOO_LARGE;
    }
    return KC_OK;
}

/* Room for validity bits up to row `rows_total - 1`: new rows may start inside the
 * partly filled last byte, so the need is counted from the total, not per batch. */
static int bitmap_capacity(kc_buf *b, int64_t rows_total) {
    size_t need = (size_t)((rows_total + 7) / 8);
    return need > b->len ? kc_buf_reserve(b, need - b->len) : 0;
}

int kc_columns_reserve(kc_columns *c, int64_t rows, size_t data_bytes) {
    if (rows < 0 || (uint64_t)rows > SIZE_MAX / 8 - 1) return KC_NOMEM;
    size_t n = (size_t)rows;
    int64_t total = c->rows + rows;
    if (kc_buf_reserve(&c->key_offsets, n * 4) || kc_buf_reserve(&c->value_offsets, n * 4) ||
        kc_buf_reserve(&c->key_data, data_bytes) || kc_buf_reserve(&c->value_data, data_bytes) ||
        kc_buf_reserve(&c->offsets, n * 8) || kc_buf_reserve(&c->timestamps, n * 8) ||
        kc_buf_reserve(&c->timestamp_types, n * 4) || kc_buf_reserve(&c->header_list_offsets, n * 4) ||
        bitmap_capacity(&c->key_validity, total) || bitmap_capacity(&c->value_validity, total) ||
        bitmap_capacity(&c->header_list_validity, total))
        return KC_NOMEM;
    return KC_OK;
}

int kc_columns_add_batch(kc_columns *c, const uint8_t *records, const uint8_t *end, const kc_batch_header *h,
                         size_t *err_at, const char **err) {
    return kc_columns_add_batch_crc(c, records, end, h, NULL, err_at, err);
}

static int add_records(kc_columns *c, const uint8_t **pp, const uint8_t *end, const kc_batch_header *h,
                       uint32_t *crc, const uint8_t **crc_done, const char **err);

/* Bytes decoded between CRC updates: large enough for the CRC's long interleaved blocks
 * (measured: 8 KiB chunks cost 40% more), small enough to still be in L2 cache. */
#define CRC_CHUNK (256 * 1024)

int kc_columns_add_batch_crc(kc_columns *c, const uint8_t *records, const uint8_t *end, const kc_batch_header *h,
                             uint32_t *crc, size_t *err_at, const char **err) {
    const uint8_t *p = records;
    const uint8_t *crc_done = records;
    int status = add_records(c, &p, end, h, crc, &crc_done, err);
    if (crc) *crc = kc_crc32c(*crc, crc_done, (size_t)(end - crc_done));
    *err_at = (size_t)(p - records);
    return status;
}

static int add_records(kc_columns *c, const uint8_t **pp, const uint8_t *end, const kc_batch_header *h,
                       uint32_t *crc, const uint8_t **crc_done, const char **err) {
    const uint8_t *records = *pp;
    const uint8_t *p = records;
    size_t section = (size_t)(end - records);
    int32_t count = h->records_count;
    if (count < 0) {
        *err = "negative record count";
        return KC_CORRUPT;
    }
    /* A record takes at least 7 bytes: a hostile count can't make us reserve more than the
     * section could hold; the loop below reports the shortfall like any other. */
    int32_t reserve_rows = (size_t)count > section / 7 + 1 ? (int32_t)(section / 7 + 1) : count;
    if (kc_columns_reserve(c, reserve_rows, section) || bitmap_reserve(&c->key_validity, c->rows + reserve_rows) ||
        bitmap_reserve(&c->value_validity, c->rows + reserve_rows) ||
        bitmap_reserve(&c->header_list_validity, c->rows + reserve_rows))
        return KC_NOMEM;
    if ((int64_t)c->key_data.len + (int64_t)section > ARROW_MAX_OFFSET ||
        (int64_t)c->value_data.len + (int64_t)section > ARROW_MAX_OFFSET) {
        *err = "key or value column exceeds 2 GiB; decode the input in smaller pieces";
        return KC_TOO_LARGE;
    }
    int log_append = (h->attributes & KC_ATTR_TIMESTAMP_TYPE) != 0;
    int32_t ts_type = log_append ? 1 : 0;
    /* Write cursors live in locals for the whole batch: stores through uint8_t pointers
     * would otherwise force the compiler to reload every buffer's length per record. */
    uint8_t *key_data = c->key_data.data, *value_data = c->value_data.data;
    size_t key_len = c->key_data.len, value_len = c->value_data.len;
    uint8_t *key_valid = c->key_validity.data, *value_valid = c->value_validity.data;
    uint8_t *hdr_valid = c->header_list_validity.data;
    uint8_t *key_off = c->key_offsets.data + c->key_offsets.len;
    uint8_t *value_off = c->value_offsets.data + c->value_offsets.len;
    uint8_t *offs = c->offsets.data + c->offsets.len;
    uint8_t *tss = c->timestamps.data + c->timestamps.len;
    uint8_t *types = c->timestamp_types.data + c->timestamp_types.len;
    uint8_t *hdr_off = c->header_list_offsets.data + c->header_list_offsets.len;
    int64_t row = c->rows, key_nulls = 0, value_nulls = 0, hdr_nulls = 0;
    int status = KC_OK;
    int32_t i;
    for (i = 0; i < count; i++) {
        kc_record r;
        if (p >= end) {
            *err = "batch holds fewer records than its record count";
            status = KC_CORRUPT;
            break;
        }
        if ((status = kc_record_parse_inline(p, end, &r, err)) != KC_OK) break;
        if (r.key) {
            if (r.key_len) memcpy(key_data + key_len, r.key, (size_t)r.key_len);
            key_len += (size_t)r.key_len;
            key_valid[row >> 3] |= (uint8_t)(1u << (row & 7));
        } else {
            key_nulls++;
        }
        int32_t o32 = (int32_t)key_len;
        memcpy(key_off, &o32, 4);
        key_off += 4;
        if (r.value) {
            if (r.value_len) memcpy(value_data + value_len, r.value, (size_t)r.value_len);
            value_len += (size_t)r.value_len;
            value_valid[row >> 3] |= (uint8_t)(1u << (row & 7));
        } else {
            value_nulls++;
        }
        o32 = (int32_t)value_len;
        memcpy(value_off, &o32, 4);
        value_off += 4;
        /* Unsigned arithmetic: hostile deltas wrap instead of overflowing a signed int. */
        int64_t v64 = (int64_t)((uint64_t)h->base_offset + (uint64_t)(int64_t)r.offset_delta);
        memcpy(offs, &v64, 8);
        offs += 8;
        v64 = log_append ? h->max_timestamp : (int64_t)((uint64_t)h->base_timestamp + (uint64_t)r.timestamp_delta);
        memcpy(tss, &v64, 8);
        tss += 8;
        memcpy(types, &ts_type, 4);
        types += 4;
        if (r.headers_count > 0) {
            if ((status = add_headers(c, &r, err)) != KC_OK) break;
            hdr_valid[row >> 3] |= (uint8_t)(1u << (row & 7));
        } else {
            hdr_nulls++;
        }
        o32 = (int32_t)c->headers;
        memcpy(hdr_off, &o32, 4);
        hdr_off += 4;
        row++;
        p = r.end;
        if (crc && (size_t)(p - *crc_done) >= CRC_CHUNK) {
            *crc = kc_crc32c(*crc, *crc_done, (size_t)(p - *crc_done));
            *crc_done = p;
        }
    }
    /* Publish what was written (also on error, so buffers stay consistent for free()). */
    c->key_data.len = key_len;
    c->value_data.len = value_len;
    c->key_offsets.len = (size_t)(key_off - c->key_offsets.data);
    c->value_offsets.len = (size_t)(value_off - c->value_offsets.data);
    c->offsets.len = (size_t)(offs - c->offsets.data);
    c->timestamps.len = (size_t)(tss - c->timestamps.data);
    c->timestamp_types.len = (size_t)(types - c->timestamp_types.data);
    c->header_list_offsets.len = (size_t)(hdr_off - c->header_list_offsets.data);
    c->rows = row;
    c->key_nulls += key_nulls;
    c->value_nulls += value_nulls;
    c->header_list_nulls += hdr_nulls;
    *pp = p;
    if (status != KC_OK) return status;
    if (p != end) {
        *err = "batch has bytes left after its last record";
        return KC_CORRUPT;
    }
    return KC_OK;
}
