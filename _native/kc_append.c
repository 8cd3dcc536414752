#include "kc_append.h"

#include "kc_record.h"

/* Value j of the column: its bytes and length (-1: null). 0 when the Arrow offsets are
 * malformed or point into a missing data buffer (the caller's own read reports them). */
static inline int column_value(const kc_value_column *col, int64_t j, const uint8_t **ptr, int32_t *len) {
    if (col->off32 == NULL && col->off64 == NULL) {
        *ptr = col->data + j * (int64_t)col->width;
        *len = col->width;
        return 1;
    }
    int64_t at = col->offset + j;
    if (col->validity != NULL && !((col->validity[at >> 3] >> (at & 7)) & 1)) {
        *ptr = NULL;
        *len = -1;
        return 1;
    }
    int64_t a = col->off32 ? col->off32[at] : col->off64[at];
    int64_t b = col->off32 ? col->off32[at + 1] : col->off64[at + 1];
    if (b < a || b - a > INT32_MAX || (col->data == NULL && b > a)) return 0;
    static const uint8_t empty[1] = {0};
    *ptr = col->data != NULL ? col->data + a : empty;
    *len = (int32_t)(b - a);
    return 1;
}

int64_t kc_append_run(kc_append_state *s, const kc_value_column *col, int64_t i, int64_t end,
                      const int64_t *timestamps, int64_t now, int *stop) {
    int64_t j = i;
    *stop = KC_APPEND_CALLER;
    if (s->count < 1) return 0; /* the first record of a batch sets its base: the caller's */
    while (j < end) {
        const uint8_t *value;
        int32_t value_len;
        if (!column_value(col, j, &value, &value_len)) return j - i;
        int64_t estimate = s->record_overhead + (value_len > 0 ? value_len : 0);
        if (estimate > s->max_estimate) return j - i;                        /* too large: refused */
        if (s->len + (size_t)estimate > s->limit) return j - i;              /* a new batch */
        if (s->buffered && s->buffered + estimate > s->buffer_memory) return j - i; /* no memory */
        if (s->count == INT32_MAX) return j - i;
        int64_t ts = timestamps ? timestamps[j] : now;
        /* unsigned: a hostile timestamp wraps as Java's long arithmetic does, never overflows */
        int64_t delta = (int64_t)((uint64_t)ts - (uint64_t)s->base_ts);
        size_t size = kc_record_encoded_size(delta, s->count, -1, value_len, NULL, 0);
        if (s->len + size > (size_t)INT32_MAX || s->cap - s->len < size) return j - i; /* grow */
        s->len += kc_record_encode(s->buf + s->len, delta, s->count, NULL, -1, value, value_len, NULL, 0);
        if (ts > s->max_ts) s->max_ts = ts;
        s->count++;
        if (s->len > s->reserved) {
            s->buffered += (int64_t)(s->len - s->reserved);
            s->reserved = s->len;
        }
        j++;
        if (s->len >= s->limit) {
            *stop = KC_APPEND_SEAL;
            return j - i;
        }
        if (s->sticky_bytes > 0) {
            s->sticky_used += estimate;
            if (s->sticky_used >= s->sticky_bytes) {
                *stop = KC_APPEND_STICKY;
                return j - i;
            }
        }
    }
    *stop = KC_APPEND_END;
    return j - i;
}
