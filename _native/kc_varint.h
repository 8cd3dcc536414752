/* Zigzag varints as used in Kafka record format v2 (protobuf-style base-128, little-endian
 * groups, zigzag-mapped signed values). Reads are bounded by an explicit end pointer and
 * report failure instead of reading past it. */
#ifndef KC_VARINT_H
#define KC_VARINT_H
#include <stddef.h>
#include <stdint.h>

#define KC_VARLONG_MAX_BYTES 10
#define KC_VARINT_MAX_BYTES 5

static inline uint64_t kc_zigzag64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t kc_unzigzag64(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

static inline size_t kc_uvarint_size(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}
static inline size_t kc_varlong_size(int64_t v) { return kc_uvarint_size(kc_zigzag64(v)); }

/* Writes v, returns the number of bytes written (at most 10). */
static inline size_t kc_write_uvarint(uint8_t *dst, uint64_t v) {
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}
static inline size_t kc_write_varlong(uint8_t *dst, int64_t v) { return kc_write_uvarint(dst, kc_zigzag64(v)); }

/* Reads an unsigned varint of at most max_bytes from [p, end). Returns bytes consumed, or 0
 * when the input ends first or the value runs longer than max_bytes. */
static inline size_t kc_read_uvarint(const uint8_t *p, const uint8_t *end, size_t max_bytes, uint64_t *out) {
    if (p < end && !(*p & 0x80)) { /* most record fields are small: one byte */
        *out = *p;
        return 1;
    }
    uint64_t v = 0;
    size_t i = 0;
    while (i < max_bytes) {
        if (p + i >= end) return 0;
        uint8_t b = p[i];
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        i++;
        if (!(b & 0x80)) {
            *out = v;
            return i;
        }
    }
    return 0;
}

/* Signed 64-bit (Kafka's varlong). */
static inline size_t kc_read_varlong(const uint8_t *p, const uint8_t *end, int64_t *out) {
    uint64_t u;
    size_t n = kc_read_uvarint(p, end, KC_VARLONG_MAX_BYTES, &u);
    if (n) *out = kc_unzigzag64(u);
    return n;
}

/* Signed 32-bit (Kafka's varint): at most 5 bytes and the value must fit an int32. */
static inline size_t kc_read_varint(const uint8_t *p, const uint8_t *end, int32_t *out) {
    uint64_t u;
    size_t n = kc_read_uvarint(p, end, KC_VARINT_MAX_BYTES, &u);
    if (!n || u > 0xffffffffu) return 0;
    *out = (int32_t)kc_unzigzag64(u);
    return n;
}
#endif
