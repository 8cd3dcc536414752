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

/* Block sizes for the interleaved streams: long blocks for big buffers, short ones for
 * the tail, single stream below that. */
#define LONG_BLOCK 8192
#define SHORT_BLOCK 256
static uint32_t zeros_long[4][256];
static uint32_t zeros_short[4][256];

/* Carry-less-multiply folding: moving a 16-byte block D bytes further along the message
 * keeps the CRC if its low and high halves are multiplied by two constants that depend on D:
 * reflect32(x^(8D+31) mod P) and reflect32(x^(8D-33) mod P) (P the Castagnoli polynomial
 * 0x1EDC6F41 in normal form). The exponents were found and checked against the bitwise CRC;
 * the C tests check the result against the table-driven path. */
enum { FOLD_16, FOLD_32, FOLD_48, FOLD_64, FOLD_128, FOLD_192, FOLD_256, FOLD_COUNT };
static const unsigned fold_bytes[FOLD_COUNT] = {16, 32, 48, 64, 128, 192, 256};
static uint64_t fold_lo[FOLD_COUNT], fold_hi[FOLD_COUNT];

/* The mixed kernel (crc32 instruction and VPCLMULQDQ folding at once, on different execution
 * units) works in chunks: a fold region of 128 * steps bytes, then three crc32 streams of
 * 40 * steps bytes each. Its constants depend on the stream length L:
 *   next:   fold 16-byte lanes by 128 + 3L bytes (last fold block -> next chunk's first);
 *   end:    fold by 3L bytes (the fold region's last 16 bytes -> the chunk's last 16);
 *   shift1, shift2: advance a finished CRC over L and 2L zero bytes, as
 *           crc32_u64(0, clmul(crc, reflect32(x^(8n-33) mod P))). */
#define MIXED_FOLD_STEP 128 /* four 32-byte accumulators */
#ifndef MIXED_CRC_WORDS
#define MIXED_CRC_WORDS 5 /* 8-byte words per stream per step */
#endif
#define MIXED_STREAM_STEP (8 * MIXED_CRC_WORDS)
typedef struct {
    size_t steps, stream, chunk;
    uint64_t next_lo, next_hi, end_lo, end_hi, shift1, shift2;
} mixed_cfg;
static const size_t mixed_steps[] = {64, 16, 4}; /* chunks of 15872, 3968, 992 bytes */
#define MIXED_CFGS (sizeof mixed_steps / sizeof mixed_steps[0])
static mixed_cfg mixed[MIXED_CFGS];

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
#define KC_VPCLMUL256_TARGET __attribute__((target("avx2,vpclmulqdq,pclmul,sse4.2")))
#define KC_PCLMUL_TARGET __attribute__((target("pclmul,sse4.2")))
#define KC_SSE42_TARGET __attribute__((target("sse4.2")))

/* Every kernel below takes and returns the raw register (no pre/post inversion), accepts
 * any length (NULL with 0) and any alignment: the folding kernels hand what is too short
 * for them, and what is left after folding, to the 8-byte crc32 loop. */

/* The last bytes: one crc32 instruction per 8 bytes, then per byte. */
KC_SSE42_TARGET static inline uint64_t crc32_tail(uint64_t reg, const unsigned char *p, size_t len) {
    while (len >= 8) {
        reg = _mm_crc32_u64(reg, load_u64(p));
        p += 8;
        len -= 8;
    }
    while (len--) reg = _mm_crc32_u8((uint32_t)reg, *p++);
    return reg;
}

/* The CRC of a 16-byte block from register 0: the reduction of every folding kernel. */
KC_SSE42_TARGET static inline uint64_t crc32_of_block(__m128i r) {
    uint64_t out = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
    return _mm_crc32_u64(out, (uint64_t)_mm_extract_epi64(r, 1));
}

/* Today's SSE4.2 path (and the fallback of the folding kernels for short buffers): three
 * interleaved crc32 streams over 8 KiB blocks, then 256-byte blocks, then one stream. */
KC_SSE42_TARGET static uint32_t kernel_sse42(uint32_t crc_reg, const unsigned char *p, size_t len) {
    uint64_t reg = crc_reg;
    while (len && ((uintptr_t)p & 7)) {
        reg = _mm_crc32_u8((uint32_t)reg, *p++);
        len--;
    }
    reg = hw_interleave(reg, &p, &len, LONG_BLOCK, zeros_long);
    reg = hw_interleave(reg, &p, &len, SHORT_BLOCK, zeros_short);
    return (uint32_t)crc32_tail(reg, p, len);
}

KC_PCLMUL_TARGET static inline __m128i fold128(__m128i x, int i) {
    __m128i k = _mm_set_epi64x((long long)fold_hi[i], (long long)fold_lo[i]);
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* x folded onto `next`, which lies the constant's distance further along the message. */
KC_PCLMUL_TARGET static inline __m128i fold128_k(__m128i x, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

KC_PCLMUL_TARGET static inline __m128i const128(int i) {
    return _mm_set_epi64x((long long)fold_hi[i], (long long)fold_lo[i]);
}

KC_PCLMUL_TARGET static inline __m128i load128(const unsigned char *p) {
    return _mm_loadu_si128((const __m128i *)(const void *)p);
}

/* PCLMULQDQ on 128-bit registers: eight accumulators, 128 bytes a step. */
#define PCLMUL_MIN_BYTES 64
KC_PCLMUL_TARGET static uint32_t kernel_pclmul(uint32_t crc_reg, const unsigned char *p, size_t len) {
    if (len < PCLMUL_MIN_BYTES) return kernel_sse42(crc_reg, p, len);
    __m128i x0 = _mm_xor_si128(load128(p), _mm_cvtsi32_si128((int)crc_reg));
    if (len >= 128) {
        __m128i x1 = load128(p + 16), x2 = load128(p + 32), x3 = load128(p + 48);
        __m128i x4 = load128(p + 64), x5 = load128(p + 80), x6 = load128(p + 96), x7 = load128(p + 112);
        p += 128;
        len -= 128;
        __m128i k = const128(FOLD_128);
        while (len >= 128) {
            x0 = fold128_k(x0, k, load128(p));
            x1 = fold128_k(x1, k, load128(p + 16));
            x2 = fold128_k(x2, k, load128(p + 32));
            x3 = fold128_k(x3, k, load128(p + 48));
            x4 = fold128_k(x4, k, load128(p + 64));
            x5 = fold128_k(x5, k, load128(p + 80));
            x6 = fold128_k(x6, k, load128(p + 96));
            x7 = fold128_k(x7, k, load128(p + 112));
            p += 128;
            len -= 128;
        }
        /* A tree: x0..x3 lie 64 bytes before x4..x7, then 32, then 16. */
        k = const128(FOLD_64);
        x4 = fold128_k(x0, k, x4);
        x5 = fold128_k(x1, k, x5);
        x6 = fold128_k(x2, k, x6);
        x7 = fold128_k(x3, k, x7);
        k = const128(FOLD_32);
        x6 = fold128_k(x4, k, x6);
        x7 = fold128_k(x5, k, x7);
        x0 = fold128_k(x6, const128(FOLD_16), x7);
    } else {
        p += 16;
        len -= 16;
    }
    __m128i k16 = const128(FOLD_16);
    while (len >= 16) {
        x0 = fold128_k(x0, k16, load128(p));
        p += 16;
        len -= 16;
    }
    return (uint32_t)crc32_tail(crc32_of_block(x0), p, len);
}

KC_VPCLMUL256_TARGET static inline __m256i fold256_k(__m256i x, __m256i k, __m256i next) {
    return _mm256_xor_si256(
        _mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)), next);
}

KC_VPCLMUL256_TARGET static inline __m256i const256(int i) {
    return _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)fold_hi[i], (long long)fold_lo[i]));
}

KC_VPCLMUL256_TARGET static inline __m256i load256(const unsigned char *p) {
    return _mm256_loadu_si256((const __m256i *)(const void *)p);
}

/* VPCLMULQDQ on 256-bit registers (AVX2, no AVX-512): eight accumulators, 256 bytes a
 * step, each register two independent 16-byte lanes. */
#define VPCLMUL256_MIN_BYTES 64
KC_VPCLMUL256_TARGET static uint32_t kernel_vpclmul256(uint32_t crc_reg, const unsigned char *p, size_t len) {
    if (len < VPCLMUL256_MIN_BYTES) return kernel_sse42(crc_reg, p, len);
    __m256i x0 = _mm256_xor_si256(load256(p), _mm256_castsi128_si256(_mm_cvtsi32_si128((int)crc_reg)));
    if (len >= 256) {
        __m256i x1 = load256(p + 32), x2 = load256(p + 64), x3 = load256(p + 96);
        __m256i x4 = load256(p + 128), x5 = load256(p + 160), x6 = load256(p + 192), x7 = load256(p + 224);
        p += 256;
        len -= 256;
        __m256i k = const256(FOLD_256);
        while (len >= 256) {
            x0 = fold256_k(x0, k, load256(p));
            x1 = fold256_k(x1, k, load256(p + 32));
            x2 = fold256_k(x2, k, load256(p + 64));
            x3 = fold256_k(x3, k, load256(p + 96));
            x4 = fold256_k(x4, k, load256(p + 128));
            x5 = fold256_k(x5, k, load256(p + 160));
            x6 = fold256_k(x6, k, load256(p + 192));
            x7 = fold256_k(x7, k, load256(p + 224));
            p += 256;
            len -= 256;
        }
        /* A tree: x0..x3 lie 128 bytes before x4..x7, then 64, then 32. */
        k = const256(FOLD_128);
        x4 = fold256_k(x0, k, x4);
        x5 = fold256_k(x1, k, x5);
        x6 = fold256_k(x2, k, x6);
        x7 = fold256_k(x3, k, x7);
        k = const256(FOLD_64);
        x6 = fold256_k(x4, k, x6);
        x7 = fold256_k(x5, k, x7);
        x0 = fold256_k(x6, const256(FOLD_32), x7);
    } else {
        p += 32;
        len -= 32;
    }
    __m256i k32 = const256(FOLD_32);
    while (len >= 32) {
        x0 = fold256_k(x0, k32, load256(p));
        p += 32;
        len -= 32;
    }
    /* The low lane lies 16 bytes before the high one. */
    __m128i r = _mm_xor_si128(fold128(_mm256_castsi256_si128(x0), FOLD_16), _mm256_extracti128_si256(x0, 1));
    return (uint32_t)crc32_tail(crc32_of_block(r), p, len);
}

/* Advances a finished (raw) CRC over the zero bytes the constant was made for. */
KC_PCLMUL_TARGET static inline uint64_t crc_shift(uint64_t crc, uint64_t k) {
    __m128i prod = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)crc), _mm_cvtsi64_si128((long long)k), 0x00);
    return _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

/* Mixed: each step folds 128 bytes in four 256-bit accumulators and runs five crc32
 * instructions on each of three streams further along the chunk; the folding (VPCLMULQDQ,
 * vector units) and the crc32 instructions (an integer unit) proceed in parallel. At a
 * chunk's end the three streams' CRCs are advanced to the next chunk's start and XORed into
 * its first bytes, and the accumulators fold straight over the streams' bytes into the next
 * fold region, so nothing is reduced until the last chunk. What is left goes to the plain
 * folding kernel. */
KC_VPCLMUL256_TARGET static uint32_t kernel_mixed256(uint32_t crc_reg, const unsigned char *p, size_t len) {
    size_t c = 0;
    while (c < MIXED_CFGS && len < mixed[c].chunk + 32) c++;
    if (c == MIXED_CFGS) return kernel_vpclmul256(crc_reg, p, len);
    /* 32-byte aligned loads are measurably faster (none straddles two cache lines). */
    size_t head = (size_t)(-(uintptr_t)p & 31);
    crc_reg = (uint32_t)crc32_tail(crc_reg, p, head);
    p += head;
    len -= head;
    __m256i x0 = _mm256_xor_si256(load256(p), _mm256_castsi128_si256(_mm_cvtsi32_si128((int)crc_reg)));
    __m256i x1 = load256(p + 32), x2 = load256(p + 64), x3 = load256(p + 96);
    const __m256i k128 = const256(FOLD_128);
    uint64_t r0, r1, r2;
    const mixed_cfg *cfg;
    for (;;) {
        cfg = &mixed[c];
        const size_t L = cfg->stream;
        const unsigned char *f = p + MIXED_FOLD_STEP;
        const unsigned char *s = p + MIXED_FOLD_STEP * cfg->steps;
        r0 = r1 = r2 = 0;
        for (size_t i = 1; i < cfg->steps; i++) {
            x0 = fold256_k(x0, k128, load256(f));
            x1 = fold256_k(x1, k128, load256(f + 32));
            x2 = fold256_k(x2, k128, load256(f + 64));
            x3 = fold256_k(x3, k128, load256(f + 96));
            f += MIXED_FOLD_STEP;
            for (int w = 0; w < MIXED_CRC_WORDS; w++) {
                r0 = _mm_crc32_u64(r0, load_u64(s + 8 * w));
                r1 = _mm_crc32_u64(r1, load_u64(s + L + 8 * w));
                r2 = _mm_crc32_u64(r2, load_u64(s + 2 * L + 8 * w));
            }
            s += MIXED_STREAM_STEP;
        }
        for (int w = 0; w < MIXED_CRC_WORDS; w++) {
            r0 = _mm_crc32_u64(r0, load_u64(s + 8 * w));
            r1 = _mm_crc32_u64(r1, load_u64(s + L + 8 * w));
            r2 = _mm_crc32_u64(r2, load_u64(s + 2 * L + 8 * w));
        }
        p += cfg->chunk;
        len -= cfg->chunk;
        while (c < MIXED_CFGS && len < mixed[c].chunk) c++;
        if (c == MIXED_CFGS) break;
        /* On to the next chunk: its first 128 bytes take the accumulators (folded over the
         * streams) and, in the first four bytes, the streams' CRCs advanced to that point. */
        uint64_t t = crc_shift(r0, cfg->shift2) ^ crc_shift(r1, cfg->shift1) ^ r2;
        const __m256i kn = _mm256_broadcastsi128_si256(_mm_set_epi64x((long long)cfg->next_hi, (long long)cfg->next_lo));
        x0 = fold256_k(x0, kn, _mm256_xor_si256(load256(p), _mm256_castsi128_si256(_mm_cvtsi32_si128((int)(uint32_t)t))));
        x1 = fold256_k(x1, kn, load256(p + 32));
        x2 = fold256_k(x2, kn, load256(p + 64));
        x3 = fold256_k(x3, kn, load256(p + 96));
    }
    /* The last chunk: the accumulators (x0, x1 lie 64 bytes before x2, x3) reduce to the
     * fold region's last 16 bytes, which then fold over the streams to the chunk's end. */
    const __m256i k64 = const256(FOLD_64);
    x2 = fold256_k(x0, k64, x2);
    x3 = fold256_k(x1, k64, x3);
    x3 = fold256_k(x2, const256(FOLD_32), x3);
    __m128i r = _mm_xor_si128(fold128(_mm256_castsi256_si128(x3), FOLD_16), _mm256_extracti128_si256(x3, 1));
    __m128i ke = _mm_set_epi64x((long long)cfg->end_hi, (long long)cfg->end_lo);
    r = _mm_xor_si128(_mm_clmulepi64_si128(r, ke, 0x00), _mm_clmulepi64_si128(r, ke, 0x11));
    uint64_t reg = crc32_of_block(r) ^ crc_shift(r0, cfg->shift2) ^ crc_shift(r1, cfg->shift1) ^ r2;
    return kernel_vpclmul256((uint32_t)reg, p, len);
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
    *pp = p;
    *plen = len;
    return crc32_of_block(r);
}

/* The kernel's minimum; measured faster than the 3-way crc32 path from there up. */
#define VPCLMUL_MIN_BYTES 256

KC_AVX512_TARGET static uint32_t kernel_avx512(uint32_t crc_reg, const unsigned char *p, size_t len) {
    uint64_t reg = crc_reg;
    while (len && ((uintptr_t)p & 7)) {
        reg = _mm_crc32_u8((uint32_t)reg, *p++);
        len--;
    }
    if (len < VPCLMUL_MIN_BYTES) return kernel_sse42((uint32_t)reg, p, len);
    reg = vpclmul_fold(reg, &p, &len);
    return (uint32_t)crc32_tail(reg, p, len);
}
#endif

/* The portable kernel, in the raw-register form of the others. */
static uint32_t kernel_sw(uint32_t crc_reg, const unsigned char *p, size_t len) {
    return ~kc_crc32c_sw(~crc_reg, p, len);
}

typedef uint32_t (*crc_kernel)(uint32_t, const unsigned char *, size_t);

static const char *const impl_names[KC_CRC32C_IMPL_COUNT] = {"sw", "sse4.2", "pclmul", "vpclmul256", "mixed256", "avx512"};
static crc_kernel kernels[KC_CRC32C_IMPL_COUNT];
static int impl_available[KC_CRC32C_IMPL_COUNT];
static int impl_best = KC_CRC32C_IMPL_SW; /* the fastest one the CPU has */
static int impl_active = KC_CRC32C_IMPL_SW;
static crc_kernel active_kernel = kernel_sw;

static void detect_impls(void) {
    for (int i = 0; i < KC_CRC32C_IMPL_COUNT; i++) {
        kernels[i] = kernel_sw;
        impl_available[i] = 0;
    }
    impl_available[KC_CRC32C_IMPL_SW] = 1;
#ifdef KC_HAVE_X86_HW
    kernels[KC_CRC32C_IMPL_SSE42] = kernel_sse42;
    kernels[KC_CRC32C_IMPL_PCLMUL] = kernel_pclmul;
    kernels[KC_CRC32C_IMPL_VPCLMUL256] = kernel_vpclmul256;
    kernels[KC_CRC32C_IMPL_MIXED256] = kernel_mixed256;
    kernels[KC_CRC32C_IMPL_AVX512] = kernel_avx512;
    __builtin_cpu_init();
    int sse42 = __builtin_cpu_supports("sse4.2") != 0;
    int pclmul = sse42 && __builtin_cpu_supports("pclmul");
    int vpclmul = pclmul && __builtin_cpu_supports("vpclmulqdq");
    impl_available[KC_CRC32C_IMPL_SSE42] = sse42;
    impl_available[KC_CRC32C_IMPL_PCLMUL] = pclmul;
    impl_available[KC_CRC32C_IMPL_VPCLMUL256] = vpclmul && __builtin_cpu_supports("avx2");
    impl_available[KC_CRC32C_IMPL_MIXED256] = impl_available[KC_CRC32C_IMPL_VPCLMUL256];
    impl_available[KC_CRC32C_IMPL_AVX512] = vpclmul && __builtin_cpu_supports("avx512f");
#endif
    impl_best = KC_CRC32C_IMPL_SW;
    for (int i = KC_CRC32C_IMPL_COUNT - 1; i > 0; i--) {
        if (impl_available[i] && i != KC_CRC32C_IMPL_PCLMUL) {
            impl_best = i;
            break;
        }
    }
}

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
    for (size_t i = 0; i < MIXED_CFGS; i++) {
        mixed_cfg *m = &mixed[i];
        m->steps = mixed_steps[i];
        m->stream = MIXED_STREAM_STEP * m->steps;
        m->chunk = MIXED_FOLD_STEP * m->steps + 3 * m->stream;
        unsigned next = (unsigned)(MIXED_FOLD_STEP + 3 * m->stream), end = (unsigned)(3 * m->stream);
        m->next_lo = reflect32(xpow_mod_p(8 * next + 31));
        m->next_hi = reflect32(xpow_mod_p(8 * next - 33));
        m->end_lo = reflect32(xpow_mod_p(8 * end + 31));
        m->end_hi = reflect32(xpow_mod_p(8 * end - 33));
        m->shift1 = reflect32(xpow_mod_p(8 * (unsigned)m->stream - 33));
        m->shift2 = reflect32(xpow_mod_p(16 * (unsigned)m->stream - 33));
    }
    detect_impls();
    impl_active = impl_best;
    /* Environment overrides, to measure or test another path on this machine:
     * KAFKACORE_CRC32C_IMPL=sw|sse4.2|pclmul|vpclmul256|avx512 (ignored when the CPU lacks
     * it), and the older KAFKACORE_CRC32C_NO_AVX512 (the 3-way crc32 path instead of AVX-512). */
    const char *want = getenv("KAFKACORE_CRC32C_IMPL");
    if (want && *want) {
        for (int i = 0; i < KC_CRC32C_IMPL_COUNT; i++)
            if (strcmp(want, impl_names[i]) == 0 && impl_available[i]) impl_active = i;
    }
    if (impl_active == KC_CRC32C_IMPL_AVX512 && getenv("KAFKACORE_CRC32C_NO_AVX512"))
        impl_active = KC_CRC32C_IMPL_SSE42;
    active_kernel = kernels[impl_active];
    tables_ready = 1;
}

int kc_crc32c_avx512_available(void) {
    if (!tables_ready) kc_crc32c_init();
    return impl_active == KC_CRC32C_IMPL_AVX512;
}

int kc_crc32c_hw_available(void) {
    if (!tables_ready) kc_crc32c_init();
    return impl_available[KC_CRC32C_IMPL_SSE42];
}

int kc_crc32c_impl_available(int impl) {
    if (!tables_ready) kc_crc32c_init();
    return impl >= 0 && impl < KC_CRC32C_IMPL_COUNT && impl_available[impl];
}

int kc_crc32c_impl(void) {
    if (!tables_ready) kc_crc32c_init();
    return impl_active;
}

int kc_crc32c_set_impl(int impl) {
    if (!kc_crc32c_impl_available(impl)) return -1;
    impl_active = impl;
    active_kernel = kernels[impl];
    return 0;
}

const char *kc_crc32c_impl_name(int impl) {
    return impl >= 0 && impl < KC_CRC32C_IMPL_COUNT ? impl_names[impl] : "?";
}

uint32_t kc_crc32c_with(int impl, uint32_t crc, const void *data, size_t len) {
    if (!kc_crc32c_impl_available(impl)) impl = KC_CRC32C_IMPL_SW;
    return ~kernels[impl](~crc, (const unsigned char *)data, len);
}

uint32_t kc_crc32c_hw(uint32_t crc, const void *data, size_t len) {
    if (!tables_ready) kc_crc32c_init();
    return ~kernels[impl_active == KC_CRC32C_IMPL_SW ? impl_best : impl_active](~crc, (const unsigned char *)data,
                                                                                len);
}

uint32_t kc_crc32c(uint32_t crc, const void *data, size_t len) {
    if (!tables_ready) kc_crc32c_init();
    return ~active_kernel(~crc, (const unsigned char *)data, len);
}
