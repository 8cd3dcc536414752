/* Kafka record batch format v2 (magic 2): header layout, record parse and encode.
 * Layout facts from Kafka's DefaultRecordBatch / DefaultRecord documentation. Every read
 * takes an end pointer and fails with an error code and message rather than reading past it. */
#ifndef KC_RECORD_H
#define KC_RECORD_H
#include <stddef.h>
#include <stdint.h>

/* Byte offsets of the batch header fields. */
#define KC_BASE_OFFSET_OFFSET 0
#define KC_LENGTH_OFFSET 8
#define KC_PARTITION_LEADER_EPOCH_OFFSET 12
#define KC_MAGIC_OFFSET 16
#define KC_CRC_OFFSET 17
#define KC_ATTRIBUTES_OFFSET 21
#define KC_LAST_OFFSET_DELTA_OFFSET 23
#define KC_BASE_TIMESTAMP_OFFSET 27
#define KC_MAX_TIMESTAMP_OFFSET 35
#define KC_PRODUCER_ID_OFFSET 43
#define KC_PRODUCER_EPOCH_OFFSET 51
#define KC_BASE_SEQUENCE_OFFSET 53
#define KC_RECORDS_COUNT_OFFSET 57
#define KC_RECORD_BATCH_OVERHEAD 61
#define KC_LOG_OVERHEAD 12 /* baseOffset + batchLength: the part batchLength does not count */

#define KC_ATTR_COMPRESSION_MASK 0x07
#define KC_ATTR_TIMESTAMP_TYPE 0x08
#define KC_ATTR_TRANSACTIONAL 0x10
#define KC_ATTR_CONTROL 0x20
#define KC_ATTR_DELETE_HORIZON 0x40

enum kc_status {
    KC_OK = 0,
    KC_TRUNCATED = 1, /* the input ends inside a batch: not an error for a reader of a log tail */
    KC_CORRUPT = 2,
    KC_NOMEM = 3,
    KC_TOO_LARGE = 4,
};

static inline int64_t kc_be64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static inline int32_t kc_be32(const uint8_t *p) {
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
static inline int16_t kc_be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | (uint16_t)p[1]); }
static inline void kc_put_be64(uint8_t *p, int64_t v) {
    uint64_t u = (uint64_t)v;
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)u;
        u >>= 8;
    }
}
static inline void kc_put_be32(uint8_t *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (uint8_t)(u >> 24);
    p[1] = (uint8_t)(u >> 16);
    p[2] = (uint8_t)(u >> 8);
    p[3] = (uint8_t)u;
}
static inline void kc_put_be16(uint8_t *p, int16_t v) {
    uint16_t u = (uint16_t)v;
    p[0] = (uint8_t)(u >> 8);
    p[1] = (uint8_t)u;
}

typedef struct {
    int64_t base_offset;
    int32_t batch_length; /* bytes after the length field */
    int32_t partition_leader_epoch;
    int8_t magic;
    uint32_t crc;
    int16_t attributes;
    int32_t last_offset_delta;
    int64_t base_timestamp;
    int64_t max_timestamp;
    int64_t producer_id;
    int16_t producer_epoch;
    int32_t base_sequence;
    int32_t records_count;
} kc_batch_header;

/* Frames the batch at the start of [p, p+len). On KC_OK fills *h and *total (whole batch
 * size). KC_TRUNCATED when fewer bytes than the batch needs are present; KC_CORRUPT with
 * *err for a length below the v2 minimum or a magic other than 2. */
int kc_batch_frame(const uint8_t *p, size_t len, kc_batch_header *h, size_t *total, const char **err);

/* Checks the CRC-32C over attributes..end against the stored one. */
int kc_batch_crc_ok(const uint8_t *batch, size_t total, const kc_batch_header *h);

typedef struct {
    int64_t timestamp_delta;
    int32_t offset_delta;
    const uint8_t *key; /* NULL for a null key */
    int32_t key_len;
    const uint8_t *value; /* NULL for a null value */
    int32_t value_len;
    int32_t headers_count;
    const uint8_t *headers; /* first header's bytes */
    const uint8_t *end;     /* one past this record */
} kc_record;

/* Parses one record at [p, end). On KC_OK fills *r (pointers into the input) and the
 * headers are known to be well formed. */
int kc_record_parse(const uint8_t *p, const uint8_t *end, kc_record *r, const char **err);

/* Steps through one header of a parsed record; value NULL means a null header value. */
int kc_header_next(const uint8_t **pp, const uint8_t *end, const uint8_t **key, int32_t *key_len,
                   const uint8_t **value, int32_t *value_len, const char **err);

/* Walks `count` records in [p, end) and checks that they exactly fill it, that offset deltas
 * fit below last_offset_delta+1. On failure *err_at is the offset inside [p,end). */
int kc_records_check(const uint8_t *p, const uint8_t *end, int32_t count, int32_t last_offset_delta,
                     size_t *err_at, const char **err);

typedef struct {
    const uint8_t *key;
    int32_t key_len; /* bytes of the UTF-8 key */
    const uint8_t *value;
    int32_t value_len; /* -1: null */
} kc_header_in;

/* Size of the encoded record including its length prefix. key_len/value_len -1 mean null. */
size_t kc_record_encoded_size(int64_t timestamp_delta, int32_t offset_delta, int32_t key_len,
                              int32_t value_len, const kc_header_in *headers, int32_t n_headers);
/* Writes the record (with its length prefix) at dst, which must hold encoded_size bytes. */
size_t kc_record_encode(uint8_t *dst, int64_t timestamp_delta, int32_t offset_delta, const uint8_t *key,
                        int32_t key_len, const uint8_t *value, int32_t value_len, const kc_header_in *headers,
                        int32_t n_headers);

/* Fills the 61-byte header, then the CRC over [21, total). */
void kc_batch_write_header(uint8_t *batch, size_t total, const kc_batch_header *h);

/* ---- Read-committed reading (KIP-98; docs/transactions.md 9.2) ----
 * Kafka's consumer rules (the Java client's CompletedFetch): batches are walked in offset
 * order; for each batch with a producer id, every aborted transaction of the Fetch response
 * whose first offset is at or below the batch's last offset makes its producer "aborting";
 * an ABORT marker (control batch) of that producer ends it; a transactional data batch of an
 * aborting producer belongs to an aborted transaction and its records are dropped. */

/* ControlRecordType, the int16 at byte 2 of a control record's key. */
#define KC_CONTROL_ABORT 0
#define KC_CONTROL_COMMIT 1
#define KC_CONTROL_NONE (-1) /* a control batch without records: it ends nothing */

/* The control record type of a control batch: the key of its first record, [records, end)
 * being its (decompressed) records section and count its record count. The key must hold at
 * least 4 bytes with a non-negative version (newer versions may append fields); other types
 * than ABORT and COMMIT are returned as read. KC_CORRUPT with *err otherwise. */
int kc_control_type(const uint8_t *records, const uint8_t *end, int32_t count, int *type, const char **err);

typedef struct {
    int64_t producer_id;
    int64_t first_offset;
} kc_aborted_txn; /* one entry of a Fetch response's aborted_transactions */

typedef struct {
    kc_aborted_txn *txns; /* sorted by first_offset; owned */
    size_t count;
    size_t next;     /* txns[next..] have not been reached yet */
    int64_t *pids;   /* the distinct producer ids of txns, sorted; owned */
    uint8_t *active; /* active[i]: pids[i] is inside an aborted transaction */
    size_t n_pids;
} kc_aborted;

/* What kc_aborted_batch says about a batch. */
#define KC_TXN_KEEP 0    /* read it as read_uncommitted would (control batches still give no records) */
#define KC_TXN_ABORTED 1 /* a transactional data batch of an aborted transaction: drop its records */
#define KC_TXN_MARKER 2  /* a control batch with a producer id: read its type (kc_control_type) and
                          * call kc_aborted_end on ABORT; it gives no records */

/* Copies and sorts the list. KC_OK or KC_NOMEM (then *a holds nothing to free). */
int kc_aborted_init(kc_aborted *a, const kc_aborted_txn *txns, size_t count);
void kc_aborted_free(kc_aborted *a);
/* The verdict for the next batch in offset order, from its header alone. */
int kc_aborted_batch(kc_aborted *a, const kc_batch_header *h);
/* An ABORT marker of producer_id: its aborted transaction ends here. */
void kc_aborted_end(kc_aborted *a, int64_t producer_id);

/* Inline bodies of kc_header_next / kc_record_parse, for decode loops in other files. */
#include "kc_varint.h"
static inline int kc_header_next_inline(const uint8_t **pp, const uint8_t *end, const uint8_t **key, int32_t *key_len,
                   const uint8_t **value, int32_t *value_len, const char **err) {
    const uint8_t *p = *pp;
    int32_t klen, vlen;
    size_t n = kc_read_varint(p, end, &klen);
    if (!n) goto bad_varint;
    p += n;
    if (klen < 0) {
        *err = "header key is null or has a negative length";
        return KC_CORRUPT;
    }
    if ((size_t)(end - p) < (size_t)klen) goto overrun;
    *key = p;
    *key_len = klen;
    p += klen;
    n = kc_read_varint(p, end, &vlen);
    if (!n) goto bad_varint;
    p += n;
    if (vlen < -1) {
        *err = "header value has a negative length";
        return KC_CORRUPT;
    }
    if (vlen >= 0) {
        if ((size_t)(end - p) < (size_t)vlen) goto overrun;
        *value = p;
        p += vlen;
    } else {
        *value = NULL;
    }
    *value_len = vlen;
    *pp = p;
    return KC_OK;
bad_varint:
    *err = "header varint is truncated or too long";
    return KC_CORRUPT;
overrun:
    *err = "header runs past the end of its record";
    return KC_CORRUPT;
}

static inline int kc_record_parse_inline(const uint8_t *p, const uint8_t *end, kc_record *r, const char **err) {
    int32_t length;
    size_t n = kc_read_varint(p, end, &length);
    if (!n) {
        *err = "record length varint is truncated or too long";
        return KC_CORRUPT;
    }
    p += n;
    if (length < 1 || (size_t)(end - p) < (size_t)length) {
        *err = "record length is out of bounds";
        return KC_CORRUPT;
    }
    const uint8_t *rend = p + length;
    p += 1; /* record attributes: unused in v2 */
    if (!(n = kc_read_varlong(p, rend, &r->timestamp_delta))) goto bad_varint;
    p += n;
    if (!(n = kc_read_varint(p, rend, &r->offset_delta))) goto bad_varint;
    p += n;
    if (!(n = kc_read_varint(p, rend, &r->key_len))) goto bad_varint;
    p += n;
    if (r->key_len < -1) goto bad_len;
    if (r->key_len >= 0) {
        if ((size_t)(rend - p) < (size_t)r->key_len) goto overrun;
        r->key = p;
        p += r->key_len;
    } else {
        r->key = NULL;
    }
    if (!(n = kc_read_varint(p, rend, &r->value_len))) goto bad_varint;
    p += n;
    if (r->value_len < -1) goto bad_len;
    if (r->value_len >= 0) {
        if ((size_t)(rend - p) < (size_t)r->value_len) goto overrun;
        r->value = p;
        p += r->value_len;
    } else {
        r->value = NULL;
    }
    if (!(n = kc_read_varint(p, rend, &r->headers_count))) goto bad_varint;
    p += n;
    if (r->headers_count < 0) {
        *err = "record has a negative header count";
        return KC_CORRUPT;
    }
    r->headers = p;
    for (int32_t i = 0; i < r->headers_count; i++) {
        const uint8_t *k, *v;
        int32_t kl, vl;
        int st = kc_header_next_inline(&p, rend, &k, &kl, &v, &vl, err);
        if (st) return st;
    }
    if (p != rend) {
        *err = "record has bytes left after its last field";
        return KC_CORRUPT;
    }
    r->end = rend;
    return KC_OK;
bad_varint:
    *err = "record field varint is truncated or too long";
    return KC_CORRUPT;
bad_len:
    *err = "record key or value has a negative length other than -1";
    return KC_CORRUPT;
overrun:
    *err = "record key or value runs past the end of the record";
    return KC_CORRUPT;
}

#endif
