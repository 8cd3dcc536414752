# Declarations of the plain-C99 core in _native/.
from libc.stdint cimport uint8_t, uint32_t, int16_t, int32_t, int64_t, int8_t

cdef extern from "kc_crc32c.h" nogil:
    void kc_crc32c_init()
    uint32_t kc_crc32c(uint32_t crc, const void *data, size_t length)
    uint32_t kc_crc32c_sw(uint32_t crc, const void *data, size_t length)
    int kc_crc32c_hw_available()
    int kc_crc32c_avx512_available()
    int kc_crc32c_impl_available(int impl)
    int kc_crc32c_impl()
    int kc_crc32c_set_impl(int impl)
    const char *kc_crc32c_impl_name(int impl)
    uint32_t kc_crc32c_with(int impl, uint32_t crc, const void *data, size_t length)
    enum:
        KC_CRC32C_IMPL_COUNT

cdef extern from "kc_murmur2.h" nogil:
    int32_t kc_murmur2(const void *data, size_t length)
    int32_t kc_partition_for_hash(int32_t h, int32_t num_partitions)

cdef extern from "kc_buffer.h" nogil:
    ctypedef struct kc_buf:
        uint8_t *data
        size_t len
        size_t cap
        int external
    void kc_buf_adopt(kc_buf *b, uint8_t *data, size_t cap)
    int kc_buf_reserve(kc_buf *b, size_t extra)
    int kc_buf_append(kc_buf *b, const void *src, size_t n)
    void kc_buf_free(kc_buf *b)
    uint8_t *kc_buf_release(kc_buf *b)

cdef extern from "kc_utf8.h" nogil:
    int kc_utf8_valid(const uint8_t *p, size_t n)

cdef extern from "kc_record.h" nogil:
    enum:
        KC_RECORD_BATCH_OVERHEAD
        KC_LOG_OVERHEAD
        KC_ATTRIBUTES_OFFSET
        KC_ATTR_TIMESTAMP_TYPE
        KC_ATTR_TRANSACTIONAL
        KC_ATTR_CONTROL
        KC_OK
        KC_TRUNCATED
        KC_CORRUPT
        KC_NOMEM
        KC_TOO_LARGE
    ctypedef struct kc_batch_header:
        int64_t base_offset
        int32_t batch_length
        int32_t partition_leader_epoch
        int8_t magic
        uint32_t crc
        int16_t attributes
        int32_t last_offset_delta
        int64_t base_timestamp
        int64_t max_timestamp
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int32_t records_count
    ctypedef struct kc_record:
        int64_t timestamp_delta
        int32_t offset_delta
        const uint8_t *key
        int32_t key_len
        const uint8_t *value
        int32_t value_len
        int32_t headers_count
        const uint8_t *headers
        const uint8_t *end
    ctypedef struct kc_header_in:
        const uint8_t *key
        int32_t key_len
        const uint8_t *value
        int32_t value_len
    int kc_batch_frame(const uint8_t *p, size_t length, kc_batch_header *h, size_t *total, const char **err)
    int kc_batch_crc_ok(const uint8_t *batch, size_t total, const kc_batch_header *h)
    int kc_record_parse(const uint8_t *p, const uint8_t *end, kc_record *r, const char **err)
    int kc_record_parse_inline(const uint8_t *p, const uint8_t *end, kc_record *r, const char **err)
    int kc_header_next_inline(const uint8_t **pp, const uint8_t *end, const uint8_t **key, int32_t *key_len,
                              const uint8_t **value, int32_t *value_len, const char **err)
    int kc_header_next(const uint8_t **pp, const uint8_t *end, const uint8_t **key, int32_t *key_len,
                       const uint8_t **value, int32_t *value_len, const char **err)
    int kc_records_check(const uint8_t *p, const uint8_t *end, int32_t count, int32_t last_offset_delta,
                         size_t *err_at, const char **err)
    size_t kc_record_encoded_size(int64_t timestamp_delta, int32_t offset_delta, int32_t key_len,
                                  int32_t value_len, const kc_header_in *headers, int32_t n_headers)
    size_t kc_record_encode(uint8_t *dst, int64_t timestamp_delta, int32_t offset_delta, const uint8_t *key,
                            int32_t key_len, const uint8_t *value, int32_t value_len,
                            const kc_header_in *headers, int32_t n_headers)
    void kc_batch_write_header(uint8_t *batch, size_t total, const kc_batch_header *h)
    enum:
        KC_CONTROL_ABORT
        KC_CONTROL_COMMIT
        KC_CONTROL_NONE
        KC_TXN_KEEP
        KC_TXN_ABORTED
        KC_TXN_MARKER
    int kc_control_type(const uint8_t *records, const uint8_t *end, int32_t count, int *type, const char **err)
    ctypedef struct kc_aborted_txn:
        int64_t producer_id
        int64_t first_offset
    ctypedef struct kc_aborted:
        size_t count
        size_t n_pids
    int kc_aborted_init(kc_aborted *a, const kc_aborted_txn *txns, size_t count)
    void kc_aborted_free(kc_aborted *a)
    int kc_aborted_batch(kc_aborted *a, const kc_batch_header *h)
    void kc_aborted_end(kc_aborted *a, int64_t producer_id)

cdef extern from "kc_append.h" nogil:
    ctypedef struct kc_value_column:
        const uint8_t *data
        const int32_t *off32
        const int64_t *off64
        const uint8_t *validity
        int64_t offset
        int32_t width
    ctypedef struct kc_append_state:
        uint8_t *buf
        size_t len, cap
        int32_t count
        int64_t base_ts, max_ts
        size_t limit, reserved
        int64_t buffered, buffer_memory, max_estimate, record_overhead, sticky_used, sticky_bytes
        int grow, pooled
        size_t size_hint
    enum:
        KC_APPEND_END
        KC_APPEND_SEAL
        KC_APPEND_STICKY
        KC_APPEND_CALLER
        KC_APPEND_SWITCHED
    int64_t kc_append_run(kc_append_state *s, const kc_value_column *col, int64_t i, int64_t end,
                          const int64_t *timestamps, int64_t now, int *stop)
    int kc_batch_grow(kc_buf *b, size_t extra, size_t size_hint, int *pooled)
    uint32_t kc_xorshift32(uint32_t *state)
    int32_t kc_sticky_next(uint32_t *state, int32_t current, int32_t n)
    int64_t kc_append_sticky_runs(kc_append_state *states, int32_t n_states, int32_t n, int32_t *partition,
                                  int64_t *buffered, int64_t *sticky_used, uint32_t *rand_state,
                                  const kc_value_column *col, int64_t i, int64_t end, const int64_t *timestamps,
                                  int64_t now, int32_t *order, int32_t *n_order, int *stop)

cdef extern from "kc_columns.h" nogil:
    ctypedef struct kc_columns:
        int64_t rows
        kc_buf key_offsets, key_data, key_validity
        kc_buf value_offsets, value_data, value_validity
        kc_buf offsets, timestamps, timestamp_types
        kc_buf header_list_offsets, header_list_validity
        int64_t headers
        kc_buf header_key_offsets, header_key_data
        kc_buf header_value_offsets, header_value_data, header_value_validity
        int64_t key_nulls, value_nulls, header_list_nulls, header_value_nulls
    void kc_columns_init(kc_columns *c)
    int kc_columns_start(kc_columns *c)
    void kc_columns_free(kc_columns *c)
    int kc_columns_reserve(kc_columns *c, int64_t rows, size_t data_bytes)
    int kc_columns_add_batch_crc(kc_columns *c, const uint8_t *records, const uint8_t *end,
                                 const kc_batch_header *h, uint32_t *crc, size_t *err_at, const char **err)
    int kc_columns_add_batch(kc_columns *c, const uint8_t *records, const uint8_t *end,
                             const kc_batch_header *h, size_t *err_at, const char **err)

cdef extern from "kc_pool.h" nogil:
    enum: KC_POOL_MIN_CACHED
    void *kc_pool_alloc(size_t size, size_t *cap)
    void kc_pool_free(void *p, size_t cap)
    void kc_pool_clear()
    size_t kc_pool_cached_bytes()
    size_t kc_pool_set_limit(size_t nbytes)

cdef extern from "kc_log.h" nogil:
    enum:
        KC_OFFSET_INDEX_ENTRY
        KC_TIME_INDEX_ENTRY
        KC_INVALID
        KC_INDEX_FULL
        KC_NOT_FOUND
        KC_IO_ERROR
        KC_SEEK_OFFSET
        KC_SEEK_TIMESTAMP
        KC_SEEK_BOUNDARY
    long kc_offset_index_lookup(const uint8_t *index, size_t entries, int32_t target)
    long kc_offset_index_lookup_position(const uint8_t *index, size_t entries, int32_t position)
    long kc_time_index_lookup(const uint8_t *index, size_t entries, int64_t target)
    int kc_offset_index_sane(const uint8_t *index, size_t entries, int64_t log_size)
    int kc_time_index_sane(const uint8_t *index, size_t entries)
    ctypedef struct kc_append_info:
        int32_t batches
        int64_t records
        int64_t bytes
        int64_t max_timestamp
        int64_t max_timestamp_delta
        int64_t producer_id
        int16_t producer_epoch
        int32_t base_sequence
        int32_t last_sequence
        int16_t attributes
        int is_transactional
        int has_control
        size_t err_at
        const char *err
    int kc_log_validate(const uint8_t *p, size_t length, int64_t max_batch_bytes, int allow_control,
                        kc_append_info *info)
    int64_t kc_log_assign_offsets(uint8_t *p, size_t length, int64_t first_offset, int32_t leader_epoch,
                                  int64_t log_append_time)
    ctypedef struct kc_scan:
        int64_t base_offset
        int64_t index_interval
        int check_crc
        int64_t position
        int64_t last_index_position
        int64_t next_offset
        int64_t max_timestamp
        int64_t offset_of_max_timestamp
        int64_t last_time_index_timestamp
        int64_t batches
        uint8_t *offset_entries
        size_t offset_capacity, offset_count
        uint8_t *time_entries
        size_t time_capacity, time_count
        const char *err
    int kc_log_scan(kc_scan *s, const uint8_t *buf, size_t length, size_t *consumed)
    ctypedef struct kc_seek_result:
        int64_t position
        int64_t base_offset
        int64_t last_offset
        int64_t max_timestamp
        int32_t size
    int kc_log_seek(int fd, int64_t start, int64_t end, int mode, int64_t target, uint8_t *scratch,
                    size_t scratch_len, kc_seek_result *r)
