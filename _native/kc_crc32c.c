/* CRC-32C with a run-time choice between the SSE4.2 crc32 instruction and a portable
 * slicing-by-8 table walk.
 *
 * The hardware path runs three independent CRC streams over adjacent blocks so that the
 * 3-cycle latency of the crc32 instruction is hidden (one instruction retires per cycle),
 * then merges the three partial CRCs. Merging needs "advance this CRC register over N zero
 * bytes", which is linear over GF(2): it is precomputed as four 256-entry tables per block
 * size. */
#include "kc_crc32c.h"
#include <stdlib.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t sw_table[8][256];
static int tables_ready = 0;
static int use_hw = 0;

/* Block sizes for the interleaved streams: long blocks for big buffers, short ones for
 * the tail, single stream below that. */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256
static uint32_t zeros_long[4][256];
static uint32_t zeros_short[4][256];
static int use_vpclmul = 0;

/* Carry-less-multiply folding: moving a 16-byte block D bytes further along the message
 * keeps the CRC if its low and high halves are multiplied by two constants that depend on D:
 * reflect32(x^(8D+31) mod P) and reflect32(x^(8D-33) mod P) (P the Castagnoli polynomial
 * 0x1EDC6F41 in normal form). The exponents were found and checked against the bitwise CRC;
 * the C tests check the result against the table-driven path. */
enum { FOLD_16, FOLD_32, FOLD_48, FOLD_64, FOLD_128, FOLD_192, FOLD_256, FOLD_COUNT };
static const unsigned fold_bytes[FOLD_COUNT] = {16, 32, 48, 64, 128, 192, 256};
static uint64_t fold_lo[FOLD_COUNT], fold_hi[FOLD_COUNT];

static uint32_t xpow_mod_p(unsigned e) {
    uint64_t r = 1;
    for (unsigned i = 0; i < e; i++) {
        r <<= 1;
        if (r & (1ull << 32)) r ^= (1ull << 32) | 0x1EDC6F41ull;
    }
    return (uint32_t)r;
}

static uint32_t reflect32(uint32_t v) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
    return r;
}

static inline uint32_t load_le32(const unsigned char *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

/* Raw register update (no pre/post inversion) over n zero bytes, one bit at a time.
 * Only used while building tables. */
static uint32_t advance_zeros_slow(uint32_t reg, size_t n) {
    for (size_t i = 0; i < n; i++) {
        for (int b = 0; b < 8; b++) reg = (reg >> 1) ^ (POLY & (0u - (reg & 1u)));
    }
    return reg;
}

static void build_zeros_table(uint32_t table[4][256], size_t n) {
    /* The operator is linear, so it is fixed by its value on the 32 basis vectors. */
    uint32_t basis[32];
    for (int bit = 0; bit < 32; bit++) basis[bit] = advance_zeros_slow(1u << bit, n);
    for (int k = 0; k < 4; k++) {
        for (int v = 0; v < 256; v++) {
            uint32_t r = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1 << b)) r ^= basis[k * 8 + b];
            table[k][v] = r;
        }
    }
}

static inline uint32_t shift_by_table(uint32_t table[4][256], uint32_t reg) {
    return table[0][reg & 0xff] ^ table[1][(reg >> 8) & 0xff] ^ table[2][(reg >> 16) & 0xff] ^
           table[3][reg >> 24];
}

uint32_t kc_crc32c_sw(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    uint32_t reg = ~crc;
    if (!tables_ready) kc_crc32c_init();
    while (len && ((uintptr_t)p & 7)) {
        reg = (reg >> 8) ^ sw_table[0][(reg ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint32_t lo = load_le32(p) ^ reg;
        uint32_t hi = load_le32(p + 4);
        reg = sw_table[7][lo & 0xff] ^ sw_table[6][(lo >> 8) & 0xff] ^ sw_table[5][(lo >> 16) & 0xff] ^
              sw_table[4][lo >> 24] ^ sw_table[3][hi & 0xff] ^ sw_table[2][(hi >> 8) & 0xff] ^
              sw_table[1][(hi >> 16) & 0xff] ^ sw_table[0][hi >> 24];
        p += 8;
        len -= 8;
    }
    while (len--) reg = (reg >> 8) ^ sw_table[0][(reg ^ *p++) & 0xff];
    return ~reg;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KC_HAVE_X86_HW 1
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static inline uint64_t load_u64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8); /* memcpy: unaligned loads without undefined behaviour */
    return v;
}

/* Three streams over blocks of `block` bytes each; returns the advanced register. */
__attribute__((target("sse4.2"))) static inline uint64_t hw_interleave(uint64_t reg,
                                                                       const unsigned char **pp,
                                                                       size_t *plen, size_t block,
                                                                       uint32_t table[4][256]) {
    const unsigned char *p = *pp;
    size_t len = *plen;
    while (len >= 3 * block) {
        uint64_t r0 = reg, r1 = 0, r2 = 0;
        const unsigned char *end = p + block;
        do {
            r0 = _mm_crc32_u64(r0, load_u64(p));
            r1 = _mm_crc32_u64(r1, load_u64(p + block));
            r2 = _mm_crc32_u64(r2, load_u64(p + 2 * block));
            p += 8;
        } while (p < end);
        /* crc(A||B||C) = shift(shift(rA, |B|) ^ rB, |C|) ^ rC */
        reg = shift_by_table(table, (uint32_t)r0) ^ r1;
        reg = shift_by_table(table, (uint32_t)reg) ^ r2;
        p += 2 * block;
        len -= 3 * block;
    }
    *pp = p;
    *plen = len;
    return reg;
}

#include <immintrin.h>

#define KC_AVX512_TARGET __attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2")))

KC_AVX512_TARGET static inline __m128i fold128(__m128i x, int i) {
    __m128i k = _mm_set_epi64x((long long)fold_hi[i], (long long)fold_lo[i]);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

KC_AVX512_TARGET static inline __m512i fold512(__m512i x, __m512i k, __m512i next) {
    /* 0x96: three-way XOR */
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     next, 0x96);
}

KC_AVX512_TARGET static inline __m512i fold_const512(int i) {
    return _mm512_broadcast_i32x4(_mm_set_epi64x((long long)fold_hi[i], (long long)fold_lo[i]));
}

/* Folds 256 bytes per step in four 64-byte accumulators (16 independent 16-byte lanes),
 * then reduces to one 16-byte block whose CRC, from register 0, is the CRC of everything
 * folded; the register's start value is XORed into the first bytes (the CRC is linear).
 * Needs len >= 256; returns the raw register after the folded part, and pp and plen
 * describe what is left (< 64 bytes). */
KC_AVX512_TARGET static uint64_t vpclmul_fold(uint64_t reg, const unsigned char **pp, size_t *plen) {
    const unsigned char *p = *pp;
    size_t len = *plen;
    __m512i x0 = _mm512_loadu_si512((const void *)p);
    __m512i x1 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i x2 = _mm512_loadu_si512((const void *)(p + 128));
    __m512i x3 = _mm512_loadu_si512((const void *)(p + 192));
    x0 = _mm512_xor_si512(x0, _mm512_castsi128_si512(_mm_cvtsi32_si128((int)(uint32_t)reg)));
    p += 256;
    len -= 256;
    __m512i k256 = fold_const512(FOLD_256);
    while (len >= 256) {
        x0 = fold512(x0, k256, _mm512_loadu_si512((const void *)p));
        x1 = fold512(x1, k256, _mm512_loadu_si512((const void *)(p + 64)));
        x2 = fold512(x2, k256, _mm512_loadu_si512((const void *)(p + 128)));
        x3 = fold512(x3, k256, _mm512_loadu_si512((const void *)(p + 192)));
        p += 256;
        len -= 256;
    }
    /* x0 lies 192 bytes before x3, x1 128, x2 64. */
    __m512i k192 = fold_const512(FOLD_192), k128 = fold_const512(FOLD_128), k64 = fold_const512(FOLD_64);
    __m512i acc = fold512(x0, k192, x3);
    acc = fold512(x1, k128, acc);
    acc = fold512(x2, k64, acc);
    while (len >= 64) {
        acc = fold512(acc, k64, _mm512_loadu_si512((const void *)p));
        p += 64;
        len -= 64;
    }
    /* The four 16-byte lanes of acc, lane 0 first in the message. */
    __m128i l0 = _mm512_extracti32x4_epi32(acc, 0), l1 = _mm512_extracti32x4_epi32(acc, 1);
    __m128i l2 = _mm512_extracti32x4_epi32(acc, 2), l3 = _mm512_extracti32x4_epi32(acc, 3);
    __m128i r = _mm_xor_si128(l3, fold128(l0, FOLD_48));
    r = _mm_xor_si128(r, fold128(l1, FOLD_32));
    r = _mm_xor_si128(r, fold128(l2, FOLD_16));
    uint64_t out = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
    out = _mm_crc32_u64(out, (uint64_t)_mm_extract_epi64(r, 1));
    *pp = p;
    *plen = len;
    return out;
}

/* The kernel's minimum; measured faster than the 3-way crc32 path from there up. */
#define VPCLMUL_MIN_BYTES 256

__attribute__((target("sse4.2"))) uint32_t kc_crc32c_hw(uint32_t crc, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    uint64_t reg = (uint32_t)~crc;
    if (!tables_ready) kc_crc32c_init();
    while (len && ((uintptr_t)p & 7)) {
        reg = _mm_crc32_u8((uint32_t)reg, *p++);
        len--;
    }
    if (use_vpclmul && len >= VPCLMUL_MIN_BYTES) reg = vpclmul_fold(reg, &p, &len);
    reg = hw_interleave(reg, &p, &len, LONG_BLOCK, zeros_long);
    reg = hw_interleave(reg, &p, &len, SHORT_BLOCK, zeros_short);
    while (len >= 8) {
        reg = _mm_crc32_u64(reg, load_u64(p));
        p += 8;
        len -= 8;
    }
    while (len--) reg = _mm_crc32_u8((uint32_t)reg, *p++);
    return ~(uint32_t)reg;
}
#else
uint32_t kc_crc32c_hw(uint32_t crc, const void *data, size_t len) { return kc_crc32c_sw(crc, data, len); }
#endif

void kc_crc32c_init(void) {
    if (tables_ready) return;
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        sw_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = sw_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = (c >> 8) ^ sw_table[0][c & 0xff];
            sw_table[t][n] = c;
        }
    }
    build_zeros_table(zeros_long, LONG_BLOCK);
    build_zeros_table(zeros_short, SHORT_BLOCK);
    for (int i = 0; i < FOLD_COUNT; i++) {
        fold_lo[i] = reflect32(xpow_mod_p(8 * fold_bytes[i] + 31));
        fold_hi[i] = reflect32(xpow_mod_p(8 * fold_bytes[i] - 33));
    }
#ifdef KC_HAVE_X86_HW
    __builtin_cpu_init();
    use_hw = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    use_vpclmul = use_hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
                  __builtin_cpu_supports("pclmul");
    if (getenv("KAFKACORE_CRC32C_NO_AVX512")) use_vpclmul = 0; /* to measure or test the other path */
#endif
    tables_ready = 1;
}

int kc_crc32c_avx512_available(void) {
    if (!tables_ready) kc_crc32c_init();
    return use_vpclmul;
}

int kc_crc32c_hw_available(void) {
    if (!tables_ready) kc_crc32c_init();
    return use_hw;
}

uint32_t kc_crc32c(uint32_t crc, const void *data, size_t len) {
    if (!tables_ready) kc_crc32c_init();
    return use_hw ? kc_crc32c_hw(crc, data, len) : kc_crc32c_sw(crc, data, len);
}
