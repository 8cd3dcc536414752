#include "kc_record.h"
#include "kc_crc32c.h"
#include "kc_varint.h"
#include <stdlib.h>
#include <string.h>

int kc_batch_frame(const uint8_t *p, size_t len, kc_batch_header *h, size_t *total, const char **err) {
    if (len < KC_LOG_OVERHEAD) return KC_TRUNCATED;
    int32_t blen = kc_be32(p + KC_LENGTH_OFFSET);
    if (blen < KC_RECORD_BATCH_OVERHEAD - KC_LOG_OVERHEAD) {
        *err = "batch length is less than the record batch v2 overhead";
        return KC_CORRUPT;
    }
    /* The magic byte sits before the end of the minimal header; check it as soon as it is
     * present so that a log of another format is reported, not mistaken for a short read. */
    if (len > KC_MAGIC_OFFSET && p[KC_MAGIC_OFFSET] != 2) {
        *err = "unsupported magic (only record batch v2 is supported)";
        return KC_CORRUPT;
    }
    size_t t = (size_t)blen + KC_LOG_OVERHEAD;
    if (len < t) return KC_TRUNCATED;
    h->base_offset = kc_be64(p + KC_BASE_OFFSET_OFFSET);
    h->batch_length = blen;
    h->partition_leader_epoch = kc_be32(p + KC_PARTITION_LEADER_EPOCH_OFFSET);
    h->magic = (int8_t)p[KC_MAGIC_OFFSET];
    h->crc = (uint32_t)kc_be32(p + KC_CRC_OFFSET);
    h->attributes = kc_be16(p + KC_ATTRIBUTES_OFFSET);
    h->last_offset_delta = kc_be32(p + KC_LAST_OFFSET_DELTA_OFFSET);
    h->base_timestamp = kc_be64(p + KC_BASE_TIMESTAMP_OFFSET);
    h->max_timestamp = kc_be64(p + KC_MAX_TIMESTAMP_OFFSET);
    h->producer_id = kc_be64(p + KC_PRODUCER_ID_OFFSET);
    h->producer_epoch = kc_be16(p + KC_PRODUCER_EPOCH_OFFSET);
    h->base_sequence = kc_be32(p + KC_BASE_SEQUENCE_OFFSET);
    h->records_count = kc_be32(p + KC_RECORDS_COUNT_OFFSET);
    *total = t;
    return KC_OK;
}

int kc_batch_crc_ok(const uint8_t *batch, size_t total, const kc_batch_header *h) {
    return kc_crc32c(0, batch + KC_ATTRIBUTES_OFFSET, total - KC_ATTRIBUTES_OFFSET) == h->crc;
}

int kc_header_next(const uint8_t **pp, const uint8_t *end, const uint8_t **key, int32_t *key_len,
                   const uint8_t **value, int32_t *value_len, const char **err) {
    return kc_header_next_inline(pp, end, key, key_len, value, value_len, err);
}

int kc_record_parse(const uint8_t *p, const uint8_t *end, kc_record *r, const char **err) {
    return kc_record_parse_inline(p, end, r, err);
}

int kc_records_check(const uint8_t *p, const uint8_t *end, int32_t count, int32_t last_offset_delta,
                     size_t *err_at, const char **err) {
    const uint8_t *start = p;
    if (count < 0) {
        *err_at = 0;
        *err = "negative record count";
        return KC_CORRUPT;
    }
    for (int32_t i = 0; i < count; i++) {
        kc_record r;
        if (p >= end) {
            *err_at = (size_t)(p - start);
            *err = "batch holds fewer records than its record count";
            return KC_CORRUPT;
        }
        int st = kc_record_parse(p, end, &r, err);
        if (st) {
            *err_at = (size_t)(p - start);
            return st;
        }
        if (r.offset_delta < 0 || r.offset_delta > last_offset_delta) {
            *err_at = (size_t)(p - start);
            *err = "record offset delta is outside the batch's offset range";
            return KC_CORRUPT;
        }
        p = r.end;
    }
    if (p != end) {
        *err_at = (size_t)(p - start);
        *err = "batch has bytes left after its last record";
        return KC_CORRUPT;
    }
    return KC_OK;
}

static inline size_t record_body_size(int64_t timestamp_delta, int32_t offset_delta, int32_t key_len,
                                      int32_t value_len, const kc_header_in *headers, int32_t n_headers) {
    size_t body = 1 + kc_varlong_size(timestamp_delta) + kc_varlong_size(offset_delta) +
                  kc_varlong_size(key_len) + (key_len > 0 ? (size_t)key_len : 0) + kc_varlong_size(value_len) +
                  (value_len > 0 ? (size_t)value_len : 0) + kc_varlong_size(n_headers);
    for (int32_t i = 0; i < n_headers; i++) {
        /* Header keys are never null in Kafka; a negative length counts as empty here so
         * that a caller's mistake cannot wrap the size. */
        int32_t kl = headers[i].key_len > 0 ? headers[i].key_len : 0;
        body += kc_varlong_size(kl) + (size_t)kl +
                kc_varlong_size(headers[i].value_len) + (headers[i].value_len > 0 ? (size_t)headers[i].value_len : 0);
    }
    return body;
}

size_t kc_record_encoded_size(int64_t timestamp_delta, int32_t offset_delta, int32_t key_len,
                              int32_t value_len, const kc_header_in *headers, int32_t n_headers) {
    size_t body = record_body_size(timestamp_delta, offset_delta, key_len, value_len, headers, n_headers);
    return kc_varlong_size((int64_t)body) + body;
}

size_t kc_record_encode(uint8_t *dst, int64_t timestamp_delta, int32_t offset_delta, const uint8_t *key,
                        int32_t key_len, const uint8_t *value, int32_t value_len, const kc_header_in *headers,
                        int32_t n_headers) {
    size_t body = record_body_size(timestamp_delta, offset_delta, key_len, value_len, headers, n_headers);
    uint8_t *p = dst;
    p += kc_write_varlong(p, (int64_t)body);
    *p++ = 0; /* attributes */
    p += kc_write_varlong(p, timestamp_delta);
    p += kc_write_varlong(p, offset_delta);
    p += kc_write_varlong(p, key_len);
    if (key_len > 0) {
        memcpy(p, key, (size_t)key_len);
        p += key_len;
    }
    p += kc_write_varlong(p, value_len);
    if (value_len > 0) {
        memcpy(p, value, (size_t)value_len);
        p += value_len;
    }
    p += kc_write_varlong(p, n_headers);
    for (int32_t i = 0; i < n_headers; i++) {
        int32_t kl = headers[i].key_len > 0 ? headers[i].key_len : 0;
        p += kc_write_varlong(p, kl);
        if (kl) {
            memcpy(p, headers[i].key, (size_t)kl);
            p += kl;
        }
        p += kc_write_varlong(p, headers[i].value_len);
        if (headers[i].value_len > 0) {
            memcpy(p, headers[i].value, (size_t)headers[i].value_len);
            p += headers[i].value_len;
        }
    }
    return (size_t)(p - dst);
}

void kc_batch_write_header(uint8_t *batch, size_t total, const kc_batch_header *h) {
    kc_put_be64(batch + KC_BASE_OFFSET_OFFSET, h->base_offset);
    kc_put_be32(batch + KC_LENGTH_OFFSET, (int32_t)(total - KC_LOG_OVERHEAD));
    kc_put_be32(batch + KC_PARTITION_LEADER_EPOCH_OFFSET, h->partition_leader_epoch);
    batch[KC_MAGIC_OFFSET] = 2;
    kc_put_be16(batch + KC_ATTRIBUTES_OFFSET, h->attributes);
    kc_put_be32(batch + KC_LAST_OFFSET_DELTA_OFFSET, h->last_offset_delta);
    kc_put_be64(batch + KC_BASE_TIMESTAMP_OFFSET, h->base_timestamp);
    kc_put_be64(batch + KC_MAX_TIMESTAMP_OFFSET, h->max_timestamp);
    kc_put_be64(batch + KC_PRODUCER_ID_OFFSET, h->producer_id);
    kc_put_be16(batch + KC_PRODUCER_EPOCH_OFFSET, h->producer_epoch);
    kc_put_be32(batch + KC_BASE_SEQUENCE_OFFSET, h->base_sequence);
    kc_put_be32(batch + KC_RECORDS_COUNT_OFFSET, h->records_count);
    uint32_t crc = kc_crc32c(0, batch + KC_ATTRIBUTES_OFFSET, total - KC_ATTRIBUTES_OFFSET);
    kc_put_be32(batch + KC_CRC_OFFSET, (int32_t)crc);
}

int kc_control_type(const uint8_t *records, const uint8_t *end, int32_t count, int *type, const char **err) {
    kc_record r;
    if (count < 0) {
        *err = "negative record count";
        return KC_CORRUPT;
    }
    if (count == 0) { /* Kafka: a marker without records ends nothing */
        *type = KC_CONTROL_NONE;
        return KC_OK;
    }
    if (records >= end) {
        *err = "batch holds fewer records than its record count";
        return KC_CORRUPT;
    }
    int st = kc_record_parse_inline(records, end, &r, err);
    if (st) return st;
    if (r.key == NULL || r.key_len < 4) {
        *err = "control record key is null or shorter than 4 bytes";
        return KC_CORRUPT;
    }
    if (kc_be16(r.key) < 0) {
        *err = "control record key has a negative version";
        return KC_CORRUPT;
    }
    *type = kc_be16(r.key + 2);
    return KC_OK;
}

static int cmp_txn_first_offset(const void *x, const void *y) {
    const kc_aborted_txn *a = x, *b = y;
    return (a->first_offset > b->first_offset) - (a->first_offset < b->first_offset);
}

static int cmp_i64(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

int kc_aborted_init(kc_aborted *a, const kc_aborted_txn *txns, size_t count) {
    memset(a, 0, sizeof *a);
    if (count == 0) return KC_OK; /* nothing aborted: only markers are looked at */
    if (count > SIZE_MAX / sizeof(kc_aborted_txn)) return KC_NOMEM;
    a->txns = malloc(count * sizeof(kc_aborted_txn));
    a->pids = malloc(count * sizeof(int64_t));
    a->active = calloc(count, 1);
    if (!a->txns || !a->pids || !a->active) {
        kc_aborted_free(a);
        return KC_NOMEM;
    }
    memcpy(a->txns, txns, count * sizeof(kc_aborted_txn));
    qsort(a->txns, count, sizeof(kc_aborted_txn), cmp_txn_first_offset);
    a->count = count;
    /* The producer ids, sorted and unique: a fixed table, so the active set never grows. */
    for (size_t i = 0; i < count; i++) a->pids[i] = txns[i].producer_id;
    qsort(a->pids, count, sizeof(int64_t), cmp_i64);
    size_t n = 1;
    for (size_t i = 1; i < count; i++)
        if (a->pids[i] != a->pids[n - 1]) a->pids[n++] = a->pids[i];
    a->n_pids = n;
    return KC_OK;
}

void kc_aborted_free(kc_aborted *a) {
    free(a->txns);
    free(a->pids);
    free(a->active);
    memset(a, 0, sizeof *a);
}

/* Index of producer_id in a->pids, or n_pids when absent. */
static size_t pid_index(const kc_aborted *a, int64_t producer_id) {
    size_t lo = 0, hi = a->n_pids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a->pids[mid] < producer_id) lo = mid + 1;
        else hi = mid;
    }
    return lo < a->n_pids && a->pids[lo] == producer_id ? lo : a->n_pids;
}

int kc_aborted_batch(kc_aborted *a, const kc_batch_header *h) {
    if (h->producer_id < 0) return KC_TXN_KEEP; /* Kafka's hasProducerId(): no transaction */
    /* Two's-complement wrap as Java's long arithmetic, without signed-overflow UB. */
    int64_t last = (int64_t)((uint64_t)h->base_offset + (uint64_t)(int64_t)h->last_offset_delta);
    while (a->next < a->count && a->txns[a->next].first_offset <= last) {
        size_t i = pid_index(a, a->txns[a->next].producer_id);
        if (i < a->n_pids) a->active[i] = 1; /* always found: pids holds every listed id */
        a->next++;
    }
    if (h->attributes & KC_ATTR_CONTROL) return KC_TXN_MARKER;
    if (!(h->attributes & KC_ATTR_TRANSACTIONAL) || a->n_pids == 0) return KC_TXN_KEEP;
    size_t i = pid_index(a, h->producer_id);
    return i < a->n_pids && a->active[i] ? KC_TXN_ABORTED : KC_TXN_KEEP;
}

void kc_aborted_end(kc_aborted *a, int64_t producer_id) {
    size_t i = pid_index(a, producer_id);
    if (i < a->n_pids) a->active[i] = 0;
}
