/* Decodes the records of v2 batches straight into Arrow-layout column buffers (offsets,
 * data and validity bitmaps), the layout of Spark's Kafka source: key, value, offset,
 * timestamp, timestampType, headers list<struct<key string, value binary>>. */
#ifndef KC_COLUMNS_H
#define KC_COLUMNS_H
#include "kc_buffer.h"
#include "kc_record.h"

typedef struct {
    int64_t rows;
    kc_buf key_offsets, key_data, key_validity; /* int32 offsets (rows+1), bytes, bitmap */
    kc_buf value_offsets, value_data, value_validity;
    kc_buf offsets;         /* int64 */
    kc_buf timestamps;      /* int64 milliseconds */
    kc_buf timestamp_types; /* int32: 0 CreateTime, 1 LogAppendTime */
    kc_buf header_list_offsets, header_list_validity; /* null when a record has no headers, as Spark does */
    int64_t headers;                                  /* total header entries */
    kc_buf header_key_offsets, header_key_data;
    kc_buf header_value_offsets, header_value_data, header_value_validity;
    int64_t key_nulls, value_nulls, header_list_nulls, header_value_nulls;
} kc_columns;

/* Zeroes c. Buffers may then be given caller-owned memory with kc_buf_adopt before
 * kc_columns_start writes the leading zero of every offsets buffer. */
void kc_columns_init(kc_columns *c);
int kc_columns_start(kc_columns *c);
void kc_columns_free(kc_columns *c);

/* Reserves room for `rows` more records whose keys and values total at most `data_bytes`,
 * so that kc_columns_add_batch does not grow the fixed-width columns again. */
int kc_columns_reserve(kc_columns *c, int64_t rows, size_t data_bytes);

/* Appends every record of one (decompressed) records section. h supplies base offset,
 * timestamps, the timestamp type and the record count. On failure *err_at is the byte
 * offset inside [records, end) and *err the reason; rows of this batch may be partially
 * appended (callers discard the whole result on error). */
int kc_columns_add_batch(kc_columns *c, const uint8_t *records, const uint8_t *end, const kc_batch_header *h,
                         size_t *err_at, const char **err);

/* The same, also extending *crc (a CRC-32C in progress) over [records, end) as the records
 * are decoded, while they are still in L2 cache. *crc covers all of [records, end) on return,
 * error or not, so the caller can give a CRC mismatch precedence over a record error. */
int kc_columns_add_batch_crc(kc_columns *c, const uint8_t *records, const uint8_t *end, const kc_batch_header *h,
                             uint32_t *crc, size_t *err_at, const char **err);
#endif
