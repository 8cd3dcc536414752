/* The producer accumulator's bulk append: a run of values from one column (fixed-width bytes,
 * as numpy "S" arrays hold them, or an Arrow binary array) appended, without keys or headers,
 * to the open batch of one partition, under the accumulator's rules (batch.size, buffer.memory,
 * the sticky partitioner's byte budget). It reads and writes only the memory it is given, so
 * the caller can run it without the GIL while other threads use the accumulator's other
 * batches; it stops at the first record that needs the caller (a new batch, a refused record,
 * more room in a buffer it may not grow) and the caller appends that one the ordinary way. */
#ifndef KC_APPEND_H
#define KC_APPEND_H
#include <stddef.h>
#include <stdint.h>

#include "kc_buffer.h"

/* A column of values: fixed-width items of `width` bytes (off32 and off64 NULL), or an Arrow
 * binary array (off32) / large binary array (off64) with its offset and optional validity
 * bitmap (a null value is a record with a null value). */
typedef struct {
    const uint8_t *data;
    const int32_t *off32;
    const int64_t *off64;
    const uint8_t *validity;
    int64_t offset;
    int32_t width;
} kc_value_column;

/* The open batch and the accumulator's limits, read and updated by kc_append_run. */
typedef struct {
    uint8_t *buf;           /* the batch's buffer: records go at buf + len, never past cap
                             * (buf and cap change when the run grows it) */
    size_t len, cap;
    int32_t count;          /* records in the batch: at least 1 (base_ts is set by the first) */
    int64_t base_ts, max_ts;
    size_t limit;           /* the batch's size limit (batch.size) */
    size_t reserved;        /* bytes of buffer.memory the batch holds */
    int64_t buffered;       /* bytes of buffer.memory in use */
    int64_t buffer_memory;
    int64_t max_estimate;   /* the largest record estimate the accumulator takes */
    int64_t record_overhead;/* a record's estimated framing beyond its value */
    int64_t sticky_used;    /* bytes sent to the sticky partition since it was chosen */
    int64_t sticky_bytes;   /* 0: no switching on bytes (a key, or an explicit partition) */
    int grow;               /* 0: stop when buf is full; 1: grow it as kc_batch_grow does */
    int pooled;             /* (kc_batch_grow's) buf is a block of the block cache */
    size_t size_hint;       /* (kc_batch_grow's) the size the batch is expected to reach */
} kc_append_state;

/* Makes room for `extra` more bytes in a producer batch's buffer (not external). Below
 * KC_POOL_MIN_CACHED bytes from malloc; past it, blocks of the block cache (kc_pool.c), growing 4x
 * at a time up to size_hint (then 2x): a producer's batches then reuse mapped memory (fresh pages
 * cost a fault and a clear each, and free() hands big blocks back to the kernel), and a batch is
 * moved twice on its way to 1 MB, not at every doubling. *pooled says whose the memory is (and
 * becomes 1 once it is the pool's). 0, or -1 when out of memory (b unchanged). */
int kc_batch_grow(kc_buf *b, size_t extra, size_t size_hint, int *pooled);

enum kc_append_stop {
    KC_APPEND_END = 0,      /* every record of the run was appended */
    KC_APPEND_SEAL = 1,     /* the last record appended filled the batch: seal it */
    KC_APPEND_STICKY = 2,   /* the sticky partition's budget is spent: choose another */
    KC_APPEND_CALLER = 3,   /* the next record is the caller's to append (see above) */
    KC_APPEND_SWITCHED = 4, /* switched to a sticky partition with no batch to fill: the
                             * caller opens one with the next record */
};

/* Appends records [i, end) of `col` while the rules let it, with timestamps[j] (or `now` when
 * timestamps is NULL). Returns the number appended; *stop says why it stopped. The order of
 * the checks is the accumulator's for one record, so a run builds the bytes one-record appends
 * would. */
int64_t kc_append_run(kc_append_state *s, const kc_value_column *col, int64_t i, int64_t end,
                      const int64_t *timestamps, int64_t now, int *stop);

/* The sticky partitioner's generator (xorshift32: a spread, not secrecy): the next value of
 * *state, which must not be 0. */
static inline uint32_t kc_xorshift32(uint32_t *state) {
    uint32_t x = *state;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

/* KIP-480/794: null-key records go on to another of the n partitions, chosen at random. */
static inline int32_t kc_sticky_next(uint32_t *state, int32_t current, int32_t n) {
    if (n <= 1) return current;
    int32_t p = (int32_t)(kc_xorshift32(state) % (uint32_t)(n - 1));
    return p < current ? p : p + 1;
}

/* kc_append_run across the sticky partitioner's switches, so that a column of null-key records
 * spread over a topic's partitions is appended in one call: states[q] (q < n_states) is the
 * open batch of partition q of the topic's n (buf NULL: none the run may fill). From partition
 * *partition on, appends as kc_append_run does; when the sticky budget is spent, chooses the next
 * partition as the one-record path does (kc_sticky_next on *rand_state) and goes on in its
 * batch. *buffered (buffer.memory in use) and *sticky_used (the topic's budget spent) are kept
 * here, not in the states. Each partition appended to is listed once in order[] (n_states long),
 * in the order first appended to; *n_order counts them. Stops as kc_append_run does, or with
 * KC_APPEND_SWITCHED when the partition chosen has no batch to fill. */
int64_t kc_append_sticky_runs(kc_append_state *states, int32_t n_states, int32_t n, int32_t *partition,
                              int64_t *buffered, int64_t *sticky_used, uint32_t *rand_state,
                              const kc_value_column *col, int64_t i, int64_t end, const int64_t *timestamps,
                              int64_t now, int32_t *order, int32_t *n_order, int *stop);

#endif
