#include "kc_columns.h"
#include "kc_utf8.h"
#include "kc_varint.h"
#include <stdlib.h>

static int push_i32(kc_buf *b, int32_t v) { return kc_buf_append(b, &v, sizeof v); }

int kc_columns_init(kc_columns *c) {
    memset(c, 0, sizeof *c);
    /* Offsets buffers start with their leading 0. */
    if (push_i32(&c->key_offsets, 0) || push_i32(&c->value_offsets, 0) || push_i32(&c->header_list_offsets, 0) ||
        push_i32(&c->header_key_offsets, 0) || push_i32(&c->header_value_offsets, 0)) {
        kc_columns_free(c);
        return KC_NOMEM;
    }
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

static inline int32_t last_i32(const kc_buf *b) {
    int32_t v;
    memcpy(&v, b->data + b->len - sizeof v, sizeof v);
    return v;
}
static inline void put_i32(kc_buf *b, int32_t v) {
    memcpy(b->data + b->len, &v, sizeof v);
    b->len += sizeof v;
}
static inline void put_i64(kc_buf *b, int64_t v) {
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
        int st = kc_header_next(&p, r->end, &k, &kl, &v, &vl, err);
        if (st) return st;
        if (!kc_utf8_valid(k, (size_t)kl)) {
            *err = "header key is not valid UTF-8";
            return KC_CORRUPT;
        }
        put_bytes(&c->header_key_data, k, (size_t)kl);
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

int kc_columns_add_batch(kc_columns *c, const uint8_t *records, const uint8_t *end, const kc_batch_header *h,
                         size_t *err_at, const char **err) {
    const uint8_t *p = records;
    size_t section = (size_t)(end - records);
    int32_t count = h->records_count;
    *err_at = 0;
    if (count < 0) {
        *err = "negative record count";
        return KC_CORRUPT;
    }
    /* A record takes at least 7 bytes, which bounds what a hostile count can make us reserve. */
    if ((size_t)count > section / 7 + 1) {
        *err = "record count is larger than the records section can hold";
        return KC_CORRUPT;
    }
    size_t n = (size_t)count;
    if (kc_buf_reserve(&c->key_offsets, n * 4) || kc_buf_reserve(&c->value_offsets, n * 4) ||
        kc_buf_reserve(&c->key_data, section) || kc_buf_reserve(&c->value_data, section) ||
        kc_buf_reserve(&c->offsets, n * 8) || kc_buf_reserve(&c->timestamps, n * 8) ||
        kc_buf_reserve(&c->timestamp_types, n * 4) || kc_buf_reserve(&c->header_list_offsets, n * 4) ||
        bitmap_reserve(&c->key_validity, c->rows + count) || bitmap_reserve(&c->value_validity, c->rows + count) ||
        bitmap_reserve(&c->header_list_validity, c->rows + count))
        return KC_NOMEM;
    if ((int64_t)c->key_data.len + (int64_t)section > ARROW_MAX_OFFSET ||
        (int64_t)c->value_data.len + (int64_t)section > ARROW_MAX_OFFSET) {
        *err = "key or value column exceeds 2 GiB; decode the input in smaller pieces";
        return KC_TOO_LARGE;
    }
    int log_append = (h->attributes & KC_ATTR_TIMESTAMP_TYPE) != 0;
    int32_t ts_type = log_append ? 1 : 0;
    for (int32_t i = 0; i < count; i++) {
        kc_record r;
        if (p >= end) {
            *err_at = (size_t)(p - records);
            *err = "batch holds fewer records than its record count";
            return KC_CORRUPT;
        }
        int st = kc_record_parse(p, end, &r, err);
        if (st) {
            *err_at = (size_t)(p - records);
            return st;
        }
        int64_t row = c->rows;
        if (r.key) {
            put_bytes(&c->key_data, r.key, (size_t)r.key_len);
            bitmap_set(&c->key_validity, row);
        } else {
            c->key_nulls++;
        }
        put_i32(&c->key_offsets, (int32_t)c->key_data.len);
        if (r.value) {
            put_bytes(&c->value_data, r.value, (size_t)r.value_len);
            bitmap_set(&c->value_validity, row);
        } else {
            c->value_nulls++;
        }
        put_i32(&c->value_offsets, (int32_t)c->value_data.len);
        /* Unsigned arithmetic: hostile deltas wrap instead of overflowing a signed int. */
        put_i64(&c->offsets, (int64_t)((uint64_t)h->base_offset + (uint64_t)(int64_t)r.offset_delta));
        put_i64(&c->timestamps,
                log_append ? h->max_timestamp : (int64_t)((uint64_t)h->base_timestamp + (uint64_t)r.timestamp_delta));
        put_i32(&c->timestamp_types, ts_type);
        if (r.headers_count > 0) {
            st = add_headers(c, &r, err);
            if (st) {
                *err_at = (size_t)(p - records);
                return st;
            }
            bitmap_set(&c->header_list_validity, row);
        } else {
            c->header_list_nulls++;
        }
        put_i32(&c->header_list_offsets, (int32_t)c->headers);
        c->rows++;
        p = r.end;
    }
    if (p != end) {
        *err_at = (size_t)(p - records);
        *err = "batch has bytes left after its last record";
        return KC_CORRUPT;
    }
    return KC_OK;
}
