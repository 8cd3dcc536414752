#include "kc_append.h"

#include <stdlib.h>
#include <string.h>

#include "kc_pool.h"
#include "kc_record.h"

int kc_batch_grow(kc_buf *b, size_t extra, size_t size_hint, int *pooled) {
    if (b->external || extra > SIZE_MAX / 8 - b->len || b->cap > SIZE_MAX / 8) return -1;
    size_t need = b->len + extra;
    if (need < KC_POOL_MIN_CACHED && !*pooled) return kc_buf_reserve(b, extra);
    size_t want = b->cap * 2;
    if (size_hint > want) want = size_hint < b->cap * 4 ? size_hint : b->cap * 4;
    if (want < need) want = need;
    size_t got;
    uint8_t *p = (uint8_t *)kc_pool_alloc(want, &got);
    if (p == NULL) return -1;
    if (b->len) memcpy(p, b->data, b->len);
    if (*pooled)
        kc_pool_free(b->data, b->cap);
    else
        free(b->data);
    b->data = p;
    b->cap = got;
    *pooled = 1;
    return 0;
}

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
        if (s->len + size > (size_t)INT32_MAX) return j - i;                 /* refused */
        if (s->cap - s->len < size) {
            kc_buf b = {s->buf, s->len, s->cap, 0};
            if (!s->grow || kc_batch_grow(&b, size, s->size_hint, &s->pooled)) return j - i;
            s->buf = b.data;
            s->cap = b.cap;
        }
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

static int listed(const int32_t *order, int32_t n_order, int32_t p) {
    for (int32_t k = 0; k < n_order; k++)
        if (order[k] == p) return 1;
    return 0;
}

int64_t kc_append_sticky_runs(kc_append_state *states, int32_t n_states, int32_t n, int32_t *partition,
                              int64_t *buffered, int64_t *sticky_used, uint32_t *rand_state,
                              const kc_value_column *col, int64_t i, int64_t end, const int64_t *timestamps,
                              int64_t now, int32_t *order, int32_t *n_order, int *stop) {
    int32_t p = *partition;
    int64_t j = i;
    *stop = KC_APPEND_CALLER;
    if (p < 0 || p >= n_states || states[p].buf == NULL) return 0;
    for (;;) {
        kc_append_state *s = &states[p];
        s->buffered = *buffered;
        s->sticky_used = *sticky_used;
        int64_t k = kc_append_run(s, col, j, end, timestamps, now, stop);
        *buffered = s->buffered;
        *sticky_used = s->sticky_used;
        if (k > 0 && !listed(order, *n_order, p)) order[(*n_order)++] = p;
        j += k;
        if (*stop != KC_APPEND_STICKY) break;
        p = kc_sticky_next(rand_state, p, n);
        *partition = p;
        *sticky_used = 0;
        if (p >= n_states || states[p].buf == NULL) {
            *stop = KC_APPEND_SWITCHED;
            break;
        }
    }
    return j - i;
}
