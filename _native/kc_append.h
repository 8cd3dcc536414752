/* The producer accumulator's bulk append: a run of values from one column (fixed-width bytes,
 * as numpy "S" arrays hold them, or an Arrow binary array) appended, without keys or headers,
 * to the open batch of one partition, under the accumulator's rules (batch.size, buffer.memory,
 * the sticky partitioner's byte budget). It reads and writes only the memory it is given, so
 * the caller can run it without the GIL while other threads use the accumulator's other
 * batches; it stops at the first record that needs the caller (a new batch, a refused record,
 * more room in the buffer) and the caller appends that one the ordinary way. */
#ifndef KC_APPEND_H
#define KC_APPEND_H
#include <stddef.h>
#include <stdint.h>

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
    uint8_t *buf;           /* the batch's buffer: records go at buf + len, never past cap */
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
} kc_append_state;

enum kc_append_stop {
    KC_APPEND_END = 0,      /* every record of the run was appended */
    KC_APPEND_SEAL = 1,     /* the last record appended filled the batch: seal it */
    KC_APPEND_STICKY = 2,   /* the sticky partition's budget is spent: choose another */
    KC_APPEND_CALLER = 3,   /* the next record is the caller's to append (see above) */
};

/* Appends records [i, end) of `col` while the rules let it, with timestamps[j] (or `now` when
 * timestamps is NULL). Returns the number appended; *stop says why it stopped. The order of
 * the checks is the accumulator's for one record, so a run builds the bytes one-record appends
 * would. */
int64_t kc_append_run(kc_append_state *s, const kc_value_column *col, int64_t i, int64_t end,
                      const int64_t *timestamps, int64_t now, int *stop);

#endif
