/* Self-contained tests for the kafkacore C core (the _native sources). No framework: every failed
 * check prints one line starting with "FAIL", informational lines start with "#", and the
 * last line is "N passed, N failed". Exit status is non-zero when any check failed.
 *
 * Build (see ci/native_sanitize.sh):
 *   cc -std=c99 -I_native _native/kc_*.c _native/tests/test_native.c -o test_native
 * (every kc_*.c file of _native)
 *
 * The robustness section uses a fixed-seed xorshift PRNG so runs are reproducible; set
 * KC_TEST_SEED to another integer to explore different inputs. */
#define _POSIX_C_SOURCE 200809L /* mkstemp, pread, ftruncate for the log tests */
#include "kc_append.h"
#include "kc_buffer.h"
#include "kc_columns.h"
#include "kc_crc32c.h"
#include "kc_log.h"
#include "kc_murmur2.h"
#include "kc_pool.h"
#include "kc_record.h"
#include "kc_utf8.h"
#include "kc_varint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* Check machinery */

static long g_pass = 0, g_fail = 0;

#define CHECK(cond)                                                                  \
    do {                                                                             \
        if (cond) {                                                                  \
            g_pass++;                                                                \
        } else {                                                                     \
            g_fail++;                                                                \
            printf("FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);                   \
        }                                                                            \
    } while (0)

/* CHECKF(cond, fmt, args...): like CHECK, with context appended to the failure line. */
#define CHECKF(cond, ...)                                                            \
    do {                                                                             \
        if (cond) {                                                                  \
            g_pass++;                                                                \
        } else {                                                                     \
            g_fail++;                                                                \
            printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                   \
            printf(__VA_ARGS__);                                                     \
            printf("\n");                                                            \
        }                                                                            \
    } while (0)

/* ------------------------------------------------------------------------------------ */
/* Deterministic PRNG (xorshift64*) */

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;

static uint64_t rnd64(void) {
    uint64_t x = g_rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    g_rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}
/* Uniform-ish in [0, n); n > 0. */
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd64() % n); }
static void rnd_fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rnd64() >> 56);
}

static void *xmalloc(size_t n) {
    /* Exactly n bytes so that AddressSanitizer sees any read past the end; malloc(0) may
     * return NULL, in which case a 1-byte block stands in (nothing is read from it). */
    void *p = malloc(n);
    if (!p && n == 0) p = malloc(1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static int32_t get_i32(const kc_buf *b, size_t idx) {
    int32_t v;
    memcpy(&v, b->data + idx * 4, 4);
    return v;
}
static int64_t get_i64(const kc_buf *b, size_t idx) {
    int64_t v;
    memcpy(&v, b->data + idx * 8, 8);
    return v;
}
static int get_bit(const kc_buf *b, int64_t i) { return (b->data[i >> 3] >> (i & 7)) & 1; }

/* kc_columns_init + kc_columns_start with malloc-grown buffers. */
static int columns_new(kc_columns *c) {
    kc_columns_init(c);
    int st = kc_columns_start(c);
    if (st != KC_OK) kc_columns_free(c);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* CRC-32C */

/* Independent reference: one bit at a time over the reflected polynomial. */
static uint32_t ref_crc32c(uint32_t crc, const uint8_t *p, size_t n) {
    uint32_t reg = ~crc;
    for (size_t i = 0; i < n; i++) {
        reg ^= p[i];
        for (int b = 0; b < 8; b++) reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
    }
    return ~reg;
}

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

static void crc_known_vectors(const char *name, crc_fn f) {
    const char *s1 = "123456789";
    const char *s2 = "Some String";
    uint8_t zeros[32], ones[32];
    memset(zeros, 0x00, sizeof zeros);
    memset(ones, 0xFF, sizeof ones);
    uint8_t inc[32], dec[32];
    for (int i = 0; i < 32; i++) {
        inc[i] = (uint8_t)i;
        dec[i] = (uint8_t)(31 - i);
    }
    uint32_t v;
    v = f(0, s1, strlen(s1));
    CHECKF(v == 0xE3069283u, "%s(\"123456789\") = 0x%08X", name, (unsigned)v);
    v = f(0, s2, strlen(s2));
    CHECKF(v == 608512271u, "%s(\"Some String\") = %u", name, (unsigned)v);
    v = f(0, "", 0);
    CHECKF(v == 0u, "%s(empty) = 0x%08X", name, (unsigned)v);
    v = f(0, NULL, 0);
    CHECKF(v == 0u, "%s(NULL, 0) = 0x%08X", name, (unsigned)v);
    v = f(0, zeros, 32);
    CHECKF(v == 0x8A9136AAu, "%s(32 x 0x00) = 0x%08X", name, (unsigned)v);
    v = f(0, ones, 32);
    CHECKF(v == 0x62A8AB43u, "%s(32 x 0xFF) = 0x%08X", name, (unsigned)v);
    /* RFC 3720 B.4: incrementing and decrementing 32-byte sequences. */
    v = f(0, inc, 32);
    CHECKF(v == 0x46DD794Eu, "%s(00..1F) = 0x%08X", name, (unsigned)v);
    v = f(0, dec, 32);
    CHECKF(v == 0x113FDB5Cu, "%s(1F..00) = 0x%08X", name, (unsigned)v);
}

static void test_crc32c(void) {
    kc_crc32c_init();
    kc_crc32c_init(); /* idempotent */
    int hw = kc_crc32c_hw_available();
    printf("# crc32c: SSE4.2 path %s\n", hw ? "available (hw and sw both tested)" : "NOT available (sw only)");

    /* The reference itself must match the published vectors. */
    CHECK(ref_crc32c(0, (const uint8_t *)"123456789", 9) == 0xE3069283u);

    crc_known_vectors("kc_crc32c_sw", kc_crc32c_sw);
    crc_known_vectors("kc_crc32c", kc_crc32c);
    if (hw) crc_known_vectors("kc_crc32c_hw", kc_crc32c_hw);

    const size_t maxlen = 70000;
    uint8_t *buf = xmalloc(maxlen + 8);
    rnd_fill(buf, maxlen + 8);

    /* Lengths: every length up to 1100 (covers the single-stream tail, the 3 x 256 short
     * interleave boundary at 768 and two short rounds at 1536 is covered below), and
     * neighbourhoods of the block boundaries, plus random lengths up to 70000. */
    size_t lens[4096];
    size_t nl = 0;
    for (size_t l = 0; l <= 1100; l++) lens[nl++] = l;
    const size_t centres[] = {1536, 2304, 3 * 8192, 3 * 8192 + 3 * 256, 3 * 8192 + 8, 2 * 3 * 8192,
                              2 * 3 * 8192 + 3 * 256, 8192, 65536, maxlen - 16};
    for (size_t c = 0; c < sizeof centres / sizeof centres[0]; c++)
        for (int d = -12; d <= 12; d++) lens[nl++] = (size_t)((long)centres[c] + d);
    for (int i = 0; i < 150; i++) lens[nl++] = rnd_below((uint32_t)maxlen + 1);
    lens[nl++] = maxlen;

    long mismatches = 0;
    for (size_t i = 0; i < nl; i++) {
        size_t len = lens[i];
        if (len > maxlen) continue;
        for (size_t off = 0; off < 8; off++) {
            /* An exact-size copy so that ASan sees over-reads, at a chosen misalignment. */
            uint8_t *blk = xmalloc(len + off);
            memcpy(blk + off, buf + off, len);
            const uint8_t *d = blk + off;
            uint32_t want = ref_crc32c(0, d, len);
            uint32_t s = kc_crc32c_sw(0, d, len);
            uint32_t a = kc_crc32c(0, d, len);
            uint32_t h = hw ? kc_crc32c_hw(0, d, len) : want;
            int ok = s == want && a == want && h == want;
            if (!ok && mismatches++ < 20)
                CHECKF(ok, "len %zu off %zu: ref %08X sw %08X hw %08X dispatch %08X", len, off, (unsigned)want,
                       (unsigned)s, (unsigned)h, (unsigned)a);
            free(blk);
        }
    }
    CHECKF(mismatches == 0, "%ld (length, offset) pairs where hw/sw/reference disagree", mismatches);

    /* Chaining: crc(a||b) == crc(crc(a), b), for splits around every interesting boundary. */
    long chain_bad = 0;
    for (int i = 0; i < 300; i++) {
        size_t len = rnd_below(i < 200 ? 3000 : (uint32_t)maxlen + 1);
        size_t cut = len ? rnd_below((uint32_t)len + 1) : 0;
        size_t off = rnd_below(8);
        const uint8_t *d = buf + off;
        uint32_t whole = ref_crc32c(0, d, len);
        uint32_t s = kc_crc32c_sw(kc_crc32c_sw(0, d, cut), d + cut, len - cut);
        uint32_t a = kc_crc32c(kc_crc32c(0, d, cut), d + cut, len - cut);
        uint32_t h = hw ? kc_crc32c_hw(kc_crc32c_hw(0, d, cut), d + cut, len - cut) : whole;
        /* Mixed: start in software, finish in hardware. */
        uint32_t m = hw ? kc_crc32c_hw(kc_crc32c_sw(0, d, cut), d + cut, len - cut) : whole;
        if (!(s == whole && a == whole && h == whole && m == whole)) {
            chain_bad++;
            if (chain_bad <= 10)
                CHECKF(0, "chain len %zu cut %zu: whole %08X sw %08X hw %08X dispatch %08X mixed %08X", len, cut,
                       (unsigned)whole, (unsigned)s, (unsigned)h, (unsigned)a, (unsigned)m);
        }
    }
    CHECKF(chain_bad == 0, "%ld chained CRCs differ from the one-shot CRC", chain_bad);
    /* Byte at a time equals one shot. */
    {
        uint32_t c = 0;
        for (size_t i = 0; i < 1000; i++) c = kc_crc32c(c, buf + i, 1);
        CHECK(c == kc_crc32c(0, buf, 1000));
    }
    free(buf);
}

/* Every implementation the CPU can run (kc_crc32c_with), whichever one kc_crc32c uses:
 * every length 0..1024 at every offset 0..63 (exact-size copies, so ASan sees over-reads),
 * the neighbourhoods of the folding kernels' block and chunk sizes, continuation, and a
 * 1 MiB + odd buffer, all against the bitwise reference. */
static void test_crc32c_impls(void) {
    kc_crc32c_init();
    int impls[KC_CRC32C_IMPL_COUNT], ni = 0;
    for (int i = 0; i < KC_CRC32C_IMPL_COUNT; i++) {
        if (kc_crc32c_impl_available(i)) impls[ni++] = i;
        printf("# crc32c impl %-10s %s%s\n", kc_crc32c_impl_name(i), kc_crc32c_impl_available(i) ? "available" : "not available",
               i == kc_crc32c_impl() ? " (in use)" : "");
    }
    CHECK(kc_crc32c_impl_available(KC_CRC32C_IMPL_SW));
    CHECK(!kc_crc32c_impl_available(-1) && !kc_crc32c_impl_available(KC_CRC32C_IMPL_COUNT));
    CHECK(kc_crc32c_set_impl(KC_CRC32C_IMPL_COUNT) == -1);

    const size_t big = (1u << 20) + 13;
    uint8_t *buf = xmalloc(big + 64);
    rnd_fill(buf, big + 64);

    /* Reference for every prefix length of buf (the raw register, one byte at a time). */
    uint32_t prefix[1025];
    {
        uint32_t reg = ~0u;
        prefix[0] = 0;
        for (size_t i = 0; i < 1024; i++) {
            reg ^= buf[i];
            for (int b = 0; b < 8; b++) reg = (reg >> 1) ^ (0x82F63B78u & (0u - (reg & 1u)));
            prefix[i + 1] = ~reg;
        }
    }
    CHECK(prefix[1024] == ref_crc32c(0, buf, 1024));
    long bad[KC_CRC32C_IMPL_COUNT] = {0};
    uint8_t *blk = xmalloc(1024 + 64);
    for (size_t len = 0; len <= 1024; len++) {
        for (size_t off = 0; off < 64; off++) {
            /* exact-size block: len + off bytes, data at off */
            uint8_t *b = xmalloc(len + off);
            memcpy(b + off, buf, len);
            for (int k = 0; k < ni; k++) {
                uint32_t got = kc_crc32c_with(impls[k], 0, b + off, len);
                if (got != prefix[len] && bad[impls[k]]++ < 5)
                    CHECKF(0, "%s len %zu off %zu: %08X want %08X", kc_crc32c_impl_name(impls[k]), len, off,
                           (unsigned)got, (unsigned)prefix[len]);
            }
            free(b);
        }
    }
    free(blk);
    for (int k = 0; k < ni; k++)
        CHECKF(bad[impls[k]] == 0, "%s: %ld of 1025 x 64 (length, offset) pairs wrong", kc_crc32c_impl_name(impls[k]),
               bad[impls[k]]);

    /* Around the block sizes: 16/32/64/128/256-byte folds, the mixed kernel's chunks
     * (992, 3968, 15872 bytes, + 32 for its alignment) and runs of several chunks. */
    const size_t centres[] = {1024, 2048, 992 + 32, 2 * 992 + 32, 3968 + 32, 3968 + 992 + 32, 15872 + 32,
                              2 * 15872 + 3968 + 992 + 32, 65536, 100000};
    long bad2 = 0;
    for (size_t c = 0; c < sizeof centres / sizeof centres[0]; c++) {
        for (long d = -40; d <= 40; d += (d > -3 && d < 3) ? 1 : 7) {
            size_t len = (size_t)((long)centres[c] + d);
            for (size_t off = 0; off < 64; off += 13) {
                uint8_t *b = xmalloc(len + off);
                memcpy(b + off, buf + 7, len);
                uint32_t want = ref_crc32c(0x5EED1234u, b + off, len);
                for (int k = 0; k < ni; k++) {
                    uint32_t got = kc_crc32c_with(impls[k], 0x5EED1234u, b + off, len);
                    if (got != want && bad2++ < 10)
                        CHECKF(0, "%s len %zu off %zu: %08X want %08X", kc_crc32c_impl_name(impls[k]), len, off,
                               (unsigned)got, (unsigned)want);
                }
                free(b);
            }
        }
    }
    CHECKF(bad2 == 0, "%ld wrong CRCs near block boundaries", bad2);

    /* Continuation: crc(a || b) == crc(crc(a), b), mixing implementations. */
    long bad3 = 0;
    for (int i = 0; i < 400; i++) {
        size_t len = rnd_below(i < 300 ? 5000 : 200000);
        size_t cut = len ? rnd_below((uint32_t)len + 1) : 0;
        const uint8_t *d = buf + rnd_below(64);
        uint32_t whole = ref_crc32c(0, d, len);
        for (int k = 0; k < ni; k++) {
            int other = impls[rnd_below((uint32_t)ni)];
            uint32_t got = kc_crc32c_with(other, kc_crc32c_with(impls[k], 0, d, cut), d + cut, len - cut);
            if (got != whole && bad3++ < 10)
                CHECKF(0, "%s then %s: len %zu cut %zu: %08X want %08X", kc_crc32c_impl_name(impls[k]),
                       kc_crc32c_impl_name(other), len, cut, (unsigned)got, (unsigned)whole);
        }
    }
    CHECKF(bad3 == 0, "%ld continued CRCs wrong", bad3);

    /* 1 MiB + 13 at a few offsets, and kc_crc32c under each forced implementation. */
    int active = kc_crc32c_impl();
    for (size_t off = 0; off < 64; off += 21) {
        uint32_t want = ref_crc32c(0, buf + off, big);
        for (int k = 0; k < ni; k++) {
            uint32_t got = kc_crc32c_with(impls[k], 0, buf + off, big);
            CHECKF(got == want, "%s 1 MiB + 13 off %zu: %08X want %08X", kc_crc32c_impl_name(impls[k]), off,
                   (unsigned)got, (unsigned)want);
            CHECK(kc_crc32c_set_impl(impls[k]) == 0 && kc_crc32c_impl() == impls[k]);
            CHECK(kc_crc32c(0, buf + off, big) == want);
            CHECK(kc_crc32c(0, "123456789", 9) == 0xE3069283u);
        }
    }
    CHECK(kc_crc32c_set_impl(active) == 0);
    free(buf);
}

/* ------------------------------------------------------------------------------------ */
/* murmur2 */

static void test_murmur2(void) {
    static const struct {
        const char *s;
        int32_t h;
    } v[] = {
        {"21", -973932308},
        {"foobar", -790332482},
        {"a-little-bit-long-string", -985981536},
        {"a-little-bit-longer-string", -1486304829},
        {"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
        {"abc", 479470107},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        /* Exact-size copy: no terminating NUL for the hash to wander into. */
        size_t n = strlen(v[i].s);
        uint8_t *p = xmalloc(n);
        memcpy(p, v[i].s, n);
        int32_t h = kc_murmur2(p, n);
        CHECKF(h == v[i].h, "murmur2(\"%s\") = %d, want %d", v[i].s, (int)h, (int)v[i].h);
        free(p);
    }
    /* Partitioner helper: sign bit masked, never negative. */
    CHECK(kc_partition_for_hash(-973932308, 10) == (int32_t)(((uint32_t)-973932308 & 0x7fffffffu) % 10u));
    CHECK(kc_partition_for_hash(INT32_MIN, 7) == 0);
    CHECK(kc_partition_for_hash(-1, 1000) == (int32_t)(0x7fffffffu % 1000u));
    for (int i = 0; i < 1000; i++) {
        int32_t p = kc_partition_for_hash((int32_t)(uint32_t)rnd64(), 13);
        if (p < 0 || p >= 13) {
            CHECKF(0, "partition %d out of range", (int)p);
            break;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* varints */

static void test_varint(void) {
    static const struct {
        int64_t v;
        size_t size;
        uint8_t first;
    } known[] = {
        {0, 1, 0x00},  {-1, 1, 0x01}, {1, 1, 0x02},  {63, 1, 0x7E},   {-64, 1, 0x7F},
        {64, 2, 0x80}, {-65, 2, 0x81}, {8191, 2, 0xFE}, {-8192, 2, 0xFF}, {8192, 3, 0x80},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        uint8_t b[KC_VARLONG_MAX_BYTES];
        size_t n = kc_write_varlong(b, known[i].v);
        CHECKF(n == known[i].size && b[0] == known[i].first, "varlong %lld: size %zu first 0x%02X",
               (long long)known[i].v, n, b[0]);
        CHECK(kc_varlong_size(known[i].v) == known[i].size);
    }
    {
        uint8_t b[KC_VARLONG_MAX_BYTES];
        size_t n = kc_write_varlong(b, 64);
        CHECK(n == 2 && b[0] == 0x80 && b[1] == 0x01);
        n = kc_write_varlong(b, -65);
        CHECK(n == 2 && b[0] == 0x81 && b[1] == 0x01);
    }

    static const int64_t edges64[] = {0,
                                      -1,
                                      1,
                                      63,
                                      64,
                                      -64,
                                      -65,
                                      127,
                                      128,
                                      -128,
                                      8191,
                                      8192,
                                      -8193,
                                      INT32_MAX,
                                      INT32_MIN,
                                      (int64_t)INT32_MAX + 1,
                                      (int64_t)INT32_MIN - 1,
                                      INT64_MAX,
                                      INT64_MIN,
                                      INT64_MAX - 1,
                                      INT64_MIN + 1,
                                      ((int64_t)1 << 62),
                                      -((int64_t)1 << 62)};
    for (size_t i = 0; i < sizeof edges64 / sizeof edges64[0]; i++) {
        int64_t v = edges64[i];
        uint8_t *b = xmalloc(KC_VARLONG_MAX_BYTES);
        size_t n = kc_write_varlong(b, v);
        CHECKF(n >= 1 && n <= KC_VARLONG_MAX_BYTES && n == kc_varlong_size(v), "varlong %lld wrote %zu bytes",
               (long long)v, n);
        /* Exact-size copy of the encoding for the read. */
        uint8_t *e = xmalloc(n);
        memcpy(e, b, n);
        int64_t out = 0;
        size_t r = kc_read_varlong(e, e + n, &out);
        CHECKF(r == n && out == v, "varlong %lld: read %zu bytes -> %lld", (long long)v, r, (long long)out);
        /* Every proper prefix is truncated. */
        for (size_t k = 0; k < n; k++) {
            int64_t junk = 12345;
            CHECKF(kc_read_varlong(e, e + k, &junk) == 0 && junk == 12345, "varlong %lld prefix %zu accepted",
                   (long long)v, k);
        }
        /* int32 reads: accepted exactly when the value fits. */
        int32_t o32 = 0;
        size_t r32 = kc_read_varint(e, e + n, &o32);
        if (v >= INT32_MIN && v <= INT32_MAX) {
            CHECKF(r32 == n && o32 == (int32_t)v, "varint %lld: read %zu -> %d", (long long)v, r32, (int)o32);
            CHECK(n <= KC_VARINT_MAX_BYTES);
        } else {
            CHECKF(r32 == 0, "varint read accepted out-of-range %lld (%zu bytes)", (long long)v, r32);
        }
        free(e);
        free(b);
    }
    /* Sizes at every 7-bit boundary of the unsigned form. */
    for (int k = 1; k < 64; k++) {
        uint64_t u = (uint64_t)1 << k;
        CHECK(kc_uvarint_size(u - 1) == (size_t)((k + 6) / 7));
        CHECK(kc_uvarint_size(u) == (size_t)(k / 7 + 1));
    }
    CHECK(kc_uvarint_size(UINT64_MAX) == 10);
    CHECK(kc_varlong_size(INT64_MIN) == 10);
    CHECK(kc_varlong_size(INT32_MIN) == 5);
    CHECK(kc_varlong_size(INT32_MAX) == 5);

    /* Empty input. */
    {
        uint8_t one = 0;
        int64_t o = 0;
        int32_t o32 = 0;
        CHECK(kc_read_varlong(&one, &one, &o) == 0);
        CHECK(kc_read_varint(&one, &one, &o32) == 0);
    }
    /* Over-long: an 11-byte varlong and a 6-byte varint are rejected, even when the value
     * would be small. */
    {
        uint8_t b11[11];
        memset(b11, 0x80, 10);
        b11[10] = 0x00;
        int64_t o = 0;
        CHECK(kc_read_varlong(b11, b11 + 11, &o) == 0);
        uint8_t b10[10];
        memset(b10, 0xFF, 9);
        b10[9] = 0x01; /* 10 bytes: the longest legal varlong, unsigned 2^64-1 = zigzag(INT64_MIN) */
        CHECK(kc_read_varlong(b10, b10 + 10, &o) == 10 && o == INT64_MIN);
        memset(b10, 0x80, 9); /* unsigned 2^63 = zigzag(2^62) */
        CHECK(kc_read_varlong(b10, b10 + 10, &o) == 10 && o == ((int64_t)1 << 62));
        uint8_t b6[6] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x00};
        int32_t o32 = 0;
        CHECK(kc_read_varint(b6, b6 + 6, &o32) == 0);
        uint8_t b5[5] = {0x80, 0x80, 0x80, 0x80, 0x00}; /* 5 bytes, non-minimal zero: accepted */
        CHECK(kc_read_varint(b5, b5 + 5, &o32) == 5 && o32 == 0);
    }
    /* varint whose unsigned value needs more than 32 bits is rejected. */
    {
        uint8_t b[5] = {0x80, 0x80, 0x80, 0x80, 0x10}; /* 2^32 */
        int32_t o32 = 0;
        CHECK(kc_read_varint(b, b + 5, &o32) == 0);
        uint8_t m[5] = {0xFF, 0xFF, 0xFF, 0xFF, 0x0F}; /* 2^32-1 -> zigzag INT32_MIN */
        CHECK(kc_read_varint(m, m + 5, &o32) == 5 && o32 == INT32_MIN);
        uint8_t x[5] = {0xFF, 0xFF, 0xFF, 0xFF, 0x7F};
        CHECK(kc_read_varint(x, x + 5, &o32) == 0);
    }
    /* Random round trips. */
    for (int i = 0; i < 20000; i++) {
        int64_t v = (int64_t)(rnd64() >> rnd_below(64));
        if (rnd64() & 1) v = -v - 1;
        uint8_t b[KC_VARLONG_MAX_BYTES];
        size_t n = kc_write_varlong(b, v);
        int64_t out = 0;
        size_t r = kc_read_varlong(b, b + n, &out);
        if (!(r == n && out == v && n == kc_varlong_size(v))) {
            CHECKF(0, "random varlong %lld round trip: n %zu r %zu out %lld", (long long)v, n, r, (long long)out);
            break;
        }
    }
}

/* ------------------------------------------------------------------------------------ */
/* Records and batches */

typedef struct {
    int64_t ts_delta;
    int32_t off_delta;
    const uint8_t *key;
    int32_t key_len; /* -1 null */
    const uint8_t *value;
    int32_t value_len; /* -1 null */
    const kc_header_in *headers;
    int32_t n_headers;
} rec_spec;

static size_t spec_size(const rec_spec *s) {
    return kc_record_encoded_size(s->ts_delta, s->off_delta, s->key_len, s->value_len, s->headers, s->n_headers);
}
static size_t spec_encode(uint8_t *dst, const rec_spec *s) {
    return kc_record_encode(dst, s->ts_delta, s->off_delta, s->key, s->key_len, s->value, s->value_len, s->headers,
                            s->n_headers);
}

/* Builds a v2 batch of exactly the needed size (malloc'd). records_count comes from n,
 * everything else from *h. */
static uint8_t *build_batch(const rec_spec *recs, int n, const kc_batch_header *h, size_t *out_len) {
    size_t total = KC_RECORD_BATCH_OVERHEAD;
    for (int i = 0; i < n; i++) total += spec_size(&recs[i]);
    uint8_t *b = xmalloc(total);
    size_t pos = KC_RECORD_BATCH_OVERHEAD;
    int encode_ok = 1;
    for (int i = 0; i < n; i++) {
        size_t want = spec_size(&recs[i]);
        size_t got = spec_encode(b + pos, &recs[i]);
        if (got != want) encode_ok = 0;
        pos += got;
    }
    CHECKF(encode_ok && pos == total, "record encode size mismatch: wrote %zu, predicted %zu", pos, total);
    kc_batch_header hh = *h;
    hh.records_count = n;
    kc_batch_write_header(b, total, &hh);
    *out_len = total;
    return b;
}

static int bytes_eq(const uint8_t *a, int32_t alen, const uint8_t *b, int32_t blen) {
    if (alen != blen) return 0;
    if (alen <= 0) return 1;
    return memcmp(a, b, (size_t)alen) == 0;
}

static void check_record_roundtrip(const rec_spec *s) {
    size_t sz = spec_size(s);
    uint8_t *buf = xmalloc(sz);
    size_t w = spec_encode(buf, s);
    CHECKF(w == sz, "encode wrote %zu, size said %zu", w, sz);
    kc_record r;
    const char *err = NULL;
    int st = kc_record_parse(buf, buf + w, &r, &err);
    CHECKF(st == KC_OK, "parse status %d (%s)", st, err ? err : "");
    if (st == KC_OK) {
        CHECK(r.end == buf + w);
        CHECK(r.timestamp_delta == s->ts_delta);
        CHECK(r.offset_delta == s->off_delta);
        CHECK(r.key_len == s->key_len);
        CHECK((r.key == NULL) == (s->key_len < 0));
        CHECK(bytes_eq(r.key, r.key_len, s->key, s->key_len));
        CHECK(r.value_len == s->value_len);
        CHECK((r.value == NULL) == (s->value_len < 0));
        CHECK(bytes_eq(r.value, r.value_len, s->value, s->value_len));
        CHECK(r.headers_count == s->n_headers);
        const uint8_t *p = r.headers;
        for (int32_t i = 0; i < r.headers_count; i++) {
            const uint8_t *k, *v;
            int32_t kl, vl;
            st = kc_header_next(&p, r.end, &k, &kl, &v, &vl, &err);
            CHECKF(st == KC_OK, "header %d: %d", (int)i, st);
            if (st) break;
            CHECK(bytes_eq(k, kl, s->headers[i].key, s->headers[i].key_len));
            CHECK(vl == s->headers[i].value_len);
            CHECK((v == NULL) == (s->headers[i].value_len < 0));
            CHECK(bytes_eq(v, vl, s->headers[i].value, s->headers[i].value_len));
        }
        CHECK(p == r.end);
    }
    /* Every truncation of the record is rejected (never read past the end). */
    for (size_t k = 0; k < w; k++) {
        uint8_t *t = xmalloc(k);
        memcpy(t, buf, k);
        err = NULL;
        st = kc_record_parse(t, t + k, &r, &err);
        CHECKF(st == KC_CORRUPT && err != NULL, "record truncated to %zu of %zu: status %d", k, w, st);
        free(t);
    }
    free(buf);
}

#define U8(s) ((const uint8_t *)(s))

/* The fixed five-record batch used by several tests. */
static const kc_header_in H1[] = {{U8("h1"), 2, U8("x"), 1}, {U8("h2"), 2, NULL, -1}};
static const kc_header_in H3[] = {{U8(""), 0, U8(""), 0}};
static const kc_header_in H4[] = {{U8("\xC3\xBC"), 2, U8("bin\0\xff"), 5}};
static const rec_spec FIVE[5] = {
    {0, 0, U8("k0"), 2, U8("v0"), 2, NULL, 0},
    {5, 1, NULL, -1, U8("hello"), 5, H1, 2},
    {-3, 2, U8(""), 0, NULL, -1, NULL, 0},
    {1000000, 3, U8("key3"), 4, U8(""), 0, H3, 1},
    {(int64_t)1 << 40, 4, NULL, -1, NULL, -1, H4, 1},
};
static const kc_batch_header FIVE_HDR = {
    .base_offset = 1000,
    .partition_leader_epoch = 7,
    .magic = 2,
    .attributes = 0,
    .last_offset_delta = 4,
    .base_timestamp = 1700000000000LL,
    .max_timestamp = 1700000000000LL + ((int64_t)1 << 40),
    .producer_id = 42,
    .producer_epoch = 3,
    .base_sequence = 100,
};

static void test_records(void) {
    /* Single-record round trips. */
    static const kc_header_in hn[] = {{U8("a"), 1, NULL, -1}, {U8("bb"), 2, U8("val"), 3}, {U8(""), 0, NULL, -1}};
    uint8_t big[300];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)i;
    const rec_spec singles[] = {
        {0, 0, NULL, -1, NULL, -1, NULL, 0},                /* null key, null value */
        {0, 0, U8("k"), 1, U8(""), 0, NULL, 0},             /* empty value */
        {0, 0, U8(""), 0, U8("v"), 1, NULL, 0},             /* empty key */
        {-1, 7, U8("key"), 3, U8("value"), 5, hn, 3},       /* headers with null values */
        {INT64_MAX, INT32_MAX, NULL, -1, big, 300, NULL, 0}, /* extremes, 2-byte length prefix */
        {INT64_MIN, 0, big, 200, NULL, -1, hn, 1},
    };
    for (size_t i = 0; i < sizeof singles / sizeof singles[0]; i++) check_record_roundtrip(&singles[i]);
    for (int i = 0; i < 5; i++) check_record_roundtrip(&FIVE[i]);

    /* Hand-checked encoding of the smallest record: null key, null value, no headers. */
    {
        uint8_t b[16];
        size_t n = kc_record_encode(b, 0, 0, NULL, -1, NULL, -1, NULL, 0);
        const uint8_t want[] = {0x0C, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00};
        CHECK(n == sizeof want && memcmp(b, want, n) == 0);
    }
    /* Malformed single records. */
    {
        kc_record r;
        const char *err = NULL;
        /* key length -2 */
        uint8_t bad_key[] = {0x0C, 0x00, 0x00, 0x00, 0x03, 0x01, 0x00};
        CHECK(kc_record_parse(bad_key, bad_key + sizeof bad_key, &r, &err) == KC_CORRUPT);
        /* negative header count */
        uint8_t bad_hc[] = {0x0C, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01};
        CHECK(kc_record_parse(bad_hc, bad_hc + sizeof bad_hc, &r, &err) == KC_CORRUPT);
        /* record length 0 */
        uint8_t zero_len[] = {0x00, 0x00};
        CHECK(kc_record_parse(zero_len, zero_len + sizeof zero_len, &r, &err) == KC_CORRUPT);
        /* negative record length */
        uint8_t neg_len[] = {0x01, 0x00};
        CHECK(kc_record_parse(neg_len, neg_len + sizeof neg_len, &r, &err) == KC_CORRUPT);
        /* length says 7 body bytes but the fields use 6: a trailing byte inside the record */
        uint8_t trailing[] = {0x0E, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00};
        CHECK(kc_record_parse(trailing, trailing + sizeof trailing, &r, &err) == KC_CORRUPT);
        /* key length runs past the record (but not past the buffer) */
        uint8_t over[] = {0x0C, 0x00, 0x00, 0x00, 0x04, 0x01, 0x00, 0x41, 0x41};
        CHECK(kc_record_parse(over, over + sizeof over, &r, &err) == KC_CORRUPT);
        /* header with a null key */
        uint8_t hnull[] = {0x10, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x01, 0x01};
        CHECK(kc_record_parse(hnull, hnull + sizeof hnull, &r, &err) == KC_CORRUPT);
        /* header value length -2 */
        uint8_t hv[] = {0x10, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x03};
        CHECK(kc_record_parse(hv, hv + sizeof hv, &r, &err) == KC_CORRUPT);
        /* the same with value length -1 is fine */
        uint8_t hok[] = {0x10, 0x00, 0x00, 0x00, 0x01, 0x01, 0x02, 0x00, 0x01};
        CHECK(kc_record_parse(hok, hok + sizeof hok, &r, &err) == KC_OK && r.headers_count == 1);
        /* header count says 2 but only one header fits */
        uint8_t hc2[] = {0x10, 0x00, 0x00, 0x00, 0x01, 0x01, 0x04, 0x00, 0x01};
        CHECK(kc_record_parse(hc2, hc2 + sizeof hc2, &r, &err) == KC_CORRUPT);
    }

    /* Batch header: write, frame, CRC. */
    size_t len;
    uint8_t *b = build_batch(FIVE, 5, &FIVE_HDR, &len);
    kc_batch_header h;
    memset(&h, 0, sizeof h);
    size_t total = 0;
    const char *err = NULL;
    int st = kc_batch_frame(b, len, &h, &total, &err);
    CHECKF(st == KC_OK, "frame: %d %s", st, err ? err : "");
    CHECK(total == len);
    CHECK(h.base_offset == 1000);
    CHECK(h.batch_length == (int32_t)(len - KC_LOG_OVERHEAD));
    CHECK(h.partition_leader_epoch == 7);
    CHECK(h.magic == 2);
    CHECK(h.attributes == 0);
    CHECK(h.last_offset_delta == 4);
    CHECK(h.base_timestamp == FIVE_HDR.base_timestamp);
    CHECK(h.max_timestamp == FIVE_HDR.max_timestamp);
    CHECK(h.producer_id == 42);
    CHECK(h.producer_epoch == 3);
    CHECK(h.base_sequence == 100);
    CHECK(h.records_count == 5);
    CHECK(kc_batch_crc_ok(b, total, &h));
    CHECK(h.crc == kc_crc32c(0, b + KC_ATTRIBUTES_OFFSET, len - KC_ATTRIBUTES_OFFSET));
    CHECK(b[KC_MAGIC_OFFSET] == 2);
    CHECK(kc_be32(b + KC_LENGTH_OFFSET) == (int32_t)(len - 12));

    /* A flipped bit anywhere in the CRC-covered area (or in the CRC) breaks the CRC. */
    {
        long missed = 0;
        for (size_t i = KC_CRC_OFFSET; i < len; i++) {
            b[i] ^= 0x10;
            kc_batch_header h2;
            size_t t2;
            if (kc_batch_frame(b, len, &h2, &t2, &err) == KC_OK && t2 == len && kc_batch_crc_ok(b, t2, &h2))
                missed++;
            b[i] ^= 0x10;
        }
        CHECKF(missed == 0, "%ld single-bit flips not detected by the CRC", missed);
        /* Bytes before the CRC are not covered (base offset, length handled by frame, epoch). */
        b[KC_PARTITION_LEADER_EPOCH_OFFSET] ^= 0xFF;
        kc_batch_header h2;
        size_t t2;
        CHECK(kc_batch_frame(b, len, &h2, &t2, &err) == KC_OK && kc_batch_crc_ok(b, t2, &h2));
        b[KC_PARTITION_LEADER_EPOCH_OFFSET] ^= 0xFF;
    }

    /* Framing: every short prefix is TRUNCATED (or CORRUPT never; the magic is right). */
    for (size_t k = 0; k < len; k++) {
        uint8_t *t = xmalloc(k);
        memcpy(t, b, k);
        kc_batch_header h2;
        size_t t2 = 0;
        st = kc_batch_frame(t, k, &h2, &t2, &err);
        CHECKF(st == KC_TRUNCATED, "prefix %zu of %zu: frame %d", k, len, st);
        free(t);
    }
    /* Extra bytes after the batch: frame still reports the batch's own size. */
    {
        uint8_t *t = xmalloc(len + 10);
        memcpy(t, b, len);
        memset(t + len, 0xAB, 10);
        kc_batch_header h2;
        size_t t2 = 0;
        CHECK(kc_batch_frame(t, len + 10, &h2, &t2, &err) == KC_OK && t2 == len);
        free(t);
    }
    /* Wrong magic is CORRUPT as soon as the magic byte is present. */
    {
        uint8_t *t = xmalloc(len);
        memcpy(t, b, len);
        t[KC_MAGIC_OFFSET] = 1;
        kc_batch_header h2;
        size_t t2;
        err = NULL;
        CHECK(kc_batch_frame(t, len, &h2, &t2, &err) == KC_CORRUPT && err != NULL);
        CHECK(kc_batch_frame(t, KC_MAGIC_OFFSET + 1, &h2, &t2, &err) == KC_CORRUPT);
        CHECK(kc_batch_frame(t, KC_MAGIC_OFFSET, &h2, &t2, &err) == KC_TRUNCATED);
        /* Length below the v2 minimum (49) is CORRUPT; exactly 49 frames a 61-byte batch. */
        t[KC_MAGIC_OFFSET] = 2;
        kc_put_be32(t + KC_LENGTH_OFFSET, 48);
        err = NULL;
        CHECK(kc_batch_frame(t, len, &h2, &t2, &err) == KC_CORRUPT && err != NULL);
        kc_put_be32(t + KC_LENGTH_OFFSET, -1);
        CHECK(kc_batch_frame(t, len, &h2, &t2, &err) == KC_CORRUPT);
        kc_put_be32(t + KC_LENGTH_OFFSET, INT32_MIN);
        CHECK(kc_batch_frame(t, len, &h2, &t2, &err) == KC_CORRUPT);
        kc_put_be32(t + KC_LENGTH_OFFSET, 49);
        CHECK(kc_batch_frame(t, len, &h2, &t2, &err) == KC_OK && t2 == 61);
        kc_put_be32(t + KC_LENGTH_OFFSET, INT32_MAX);
        CHECK(kc_batch_frame(t, len, &h2, &t2, &err) == KC_TRUNCATED);
        free(t);
    }
    /* An empty batch (61 bytes, count 0). */
    {
        size_t elen;
        kc_batch_header eh = FIVE_HDR;
        eh.last_offset_delta = 0;
        uint8_t *e = build_batch(NULL, 0, &eh, &elen);
        kc_batch_header h2;
        size_t t2;
        CHECK(elen == 61);
        CHECK(kc_batch_frame(e, elen, &h2, &t2, &err) == KC_OK && t2 == 61 && h2.records_count == 0);
        CHECK(kc_batch_crc_ok(e, t2, &h2));
        size_t at;
        CHECK(kc_records_check(e + 61, e + 61, 0, 0, &at, &err) == KC_OK);
        CHECK(kc_records_check(e + 61, e + 61, 1, 0, &at, &err) == KC_CORRUPT && at == 0);
        free(e);
    }

    /* kc_records_check on the records section. */
    const uint8_t *rs = b + KC_RECORD_BATCH_OVERHEAD, *re = b + len;
    size_t at = 12345;
    err = NULL;
    st = kc_records_check(rs, re, 5, 4, &at, &err);
    CHECKF(st == KC_OK, "records_check on a good section: %d %s", st, err ? err : "");
    /* Offsets of each record start, for err_at checks. */
    size_t starts[6];
    starts[0] = 0;
    for (int i = 0; i < 5; i++) starts[i + 1] = starts[i] + spec_size(&FIVE[i]);
    CHECK(starts[5] == (size_t)(re - rs));
    /* Count too high: runs out of records at the end. */
    err = NULL;
    CHECK(kc_records_check(rs, re, 6, 5, &at, &err) == KC_CORRUPT && at == starts[5] && err != NULL);
    /* Count too low: bytes left over after record 4. */
    err = NULL;
    CHECK(kc_records_check(rs, re, 4, 4, &at, &err) == KC_CORRUPT && at == starts[4] && err != NULL);
    CHECK(kc_records_check(rs, re, 0, 4, &at, &err) == KC_CORRUPT && at == 0);
    CHECK(kc_records_check(rs, re, -1, 4, &at, &err) == KC_CORRUPT);
    /* Offset delta beyond last_offset_delta. */
    CHECK(kc_records_check(rs, re, 5, 3, &at, &err) == KC_CORRUPT && at == starts[4]);
    CHECK(kc_records_check(rs, re, 5, 100, &at, &err) == KC_OK);
    /* Truncated section: every shorter section fails, never reads past its end. */
    for (size_t k = 0; k < (size_t)(re - rs); k++) {
        uint8_t *t = xmalloc(k);
        memcpy(t, rs, k);
        err = NULL;
        st = kc_records_check(t, t + k, 5, 4, &at, &err);
        CHECKF(st == KC_CORRUPT && err != NULL && at <= k, "section truncated to %zu: status %d at %zu", k, st, at);
        free(t);
    }
    /* Trailing bytes after the last record. */
    {
        size_t sl = (size_t)(re - rs);
        uint8_t *t = xmalloc(sl + 1);
        memcpy(t, rs, sl);
        t[sl] = 0;
        err = NULL;
        CHECK(kc_records_check(t, t + sl + 1, 5, 4, &at, &err) == KC_CORRUPT && at == sl && err != NULL);
        /* The trailing byte even being a valid record start does not help with count 5. */
        free(t);
    }
    free(b);
}

/* ------------------------------------------------------------------------------------ */
/* Column decoding */

/* Checks the internal consistency every kc_columns must have after successful adds. */
static int columns_consistent(const kc_columns *c, char *why, size_t why_len) {
    size_t rows = (size_t)c->rows;
#define BAD(...)                                       \
    do {                                               \
        snprintf(why, why_len, __VA_ARGS__);           \
        return 0;                                      \
    } while (0)
    if (c->key_offsets.len != (rows + 1) * 4) BAD("key_offsets len %zu rows %zu", c->key_offsets.len, rows);
    if (c->value_offsets.len != (rows + 1) * 4) BAD("value_offsets len %zu", c->value_offsets.len);
    if (c->header_list_offsets.len != (rows + 1) * 4) BAD("header_list_offsets len %zu", c->header_list_offsets.len);
    if (c->offsets.len != rows * 8) BAD("offsets len %zu", c->offsets.len);
    if (c->timestamps.len != rows * 8) BAD("timestamps len %zu", c->timestamps.len);
    if (c->timestamp_types.len != rows * 4) BAD("timestamp_types len %zu", c->timestamp_types.len);
    if (c->key_validity.len < (rows + 7) / 8) BAD("key_validity too short");
    if (c->value_validity.len < (rows + 7) / 8) BAD("value_validity too short");
    if (c->header_list_validity.len < (rows + 7) / 8) BAD("header_list_validity too short");
    if (get_i32(&c->key_offsets, 0) != 0 || get_i32(&c->value_offsets, 0) != 0 ||
        get_i32(&c->header_list_offsets, 0) != 0)
        BAD("first offset not 0");
    if ((size_t)get_i32(&c->key_offsets, rows) != c->key_data.len) BAD("last key offset != key data");
    if ((size_t)get_i32(&c->value_offsets, rows) != c->value_data.len) BAD("last value offset != value data");
    if (get_i32(&c->header_list_offsets, rows) != c->headers) BAD("last header list offset != headers");
    int64_t kn = 0, vn = 0, hn = 0;
    for (size_t i = 0; i < rows; i++) {
        if (get_i32(&c->key_offsets, i + 1) < get_i32(&c->key_offsets, i)) BAD("key offsets decrease at %zu", i);
        if (get_i32(&c->value_offsets, i + 1) < get_i32(&c->value_offsets, i)) BAD("value offsets decrease");
        if (get_i32(&c->header_list_offsets, i + 1) < get_i32(&c->header_list_offsets, i))
            BAD("header list offsets decrease");
        int kv = get_bit(&c->key_validity, (int64_t)i), vv = get_bit(&c->value_validity, (int64_t)i);
        int hv = get_bit(&c->header_list_validity, (int64_t)i);
        if (!kv) {
            kn++;
            if (get_i32(&c->key_offsets, i + 1) != get_i32(&c->key_offsets, i)) BAD("null key with bytes");
        }
        if (!vv) {
            vn++;
            if (get_i32(&c->value_offsets, i + 1) != get_i32(&c->value_offsets, i)) BAD("null value with bytes");
        }
        if (!hv) {
            hn++;
            if (get_i32(&c->header_list_offsets, i + 1) != get_i32(&c->header_list_offsets, i))
                BAD("null header list with entries");
        } else if (get_i32(&c->header_list_offsets, i + 1) == get_i32(&c->header_list_offsets, i)) {
            BAD("valid header list with no entries at row %zu", i);
        }
        int32_t tt = get_i32(&c->timestamp_types, i);
        if (tt != 0 && tt != 1) BAD("timestamp type %d", (int)tt);
    }
    if (kn != c->key_nulls) BAD("key_nulls %lld, bitmap says %lld", (long long)c->key_nulls, (long long)kn);
    if (vn != c->value_nulls) BAD("value_nulls %lld, bitmap says %lld", (long long)c->value_nulls, (long long)vn);
    if (hn != c->header_list_nulls) BAD("header_list_nulls mismatch");
    size_t nh = (size_t)c->headers;
    if (c->header_key_offsets.len != (nh + 1) * 4) BAD("header_key_offsets len");
    if (c->header_value_offsets.len != (nh + 1) * 4) BAD("header_value_offsets len");
    if (c->header_value_validity.len < (nh + 7) / 8) BAD("header_value_validity too short");
    if ((size_t)get_i32(&c->header_key_offsets, nh) != c->header_key_data.len) BAD("header key data");
    if ((size_t)get_i32(&c->header_value_offsets, nh) != c->header_value_data.len) BAD("header value data");
    int64_t hvn = 0;
    for (size_t i = 0; i < nh; i++) {
        int32_t k0 = get_i32(&c->header_key_offsets, i), k1 = get_i32(&c->header_key_offsets, i + 1);
        if (k1 < k0) BAD("header key offsets decrease");
        if (!kc_utf8_valid(c->header_key_data.data + k0, (size_t)(k1 - k0))) BAD("header key %zu not UTF-8", i);
        if (!get_bit(&c->header_value_validity, (int64_t)i)) {
            hvn++;
            if (get_i32(&c->header_value_offsets, i + 1) != get_i32(&c->header_value_offsets, i))
                BAD("null header value with bytes");
        }
    }
    if (hvn != c->header_value_nulls) BAD("header_value_nulls mismatch");
#undef BAD
    return 1;
}

static void test_columns(void) {
    size_t len;
    uint8_t *b = build_batch(FIVE, 5, &FIVE_HDR, &len);
    kc_batch_header h;
    size_t total;
    const char *err = NULL;
    CHECK(kc_batch_frame(b, len, &h, &total, &err) == KC_OK);

    kc_columns c;
    CHECK(columns_new(&c) == KC_OK);
    CHECK(c.rows == 0 && c.key_offsets.len == 4 && get_i32(&c.key_offsets, 0) == 0);
    size_t at = 999;
    err = NULL;
    int st = kc_columns_add_batch(&c, b + KC_RECORD_BATCH_OVERHEAD, b + total, &h, &at, &err);
    CHECKF(st == KC_OK, "add_batch: %d %s at %zu", st, err ? err : "", at);
    CHECK(c.rows == 5);

    /* keys: "k0", null, "", "key3", null */
    static const int32_t key_off[] = {0, 2, 2, 2, 6, 6};
    for (int i = 0; i < 6; i++) CHECKF(get_i32(&c.key_offsets, (size_t)i) == key_off[i], "key offset %d", i);
    CHECK(c.key_data.len == 6 && memcmp(c.key_data.data, "k0key3", 6) == 0);
    CHECK((c.key_validity.data[0] & 0x1F) == 0x0D);
    CHECK(c.key_nulls == 2);
    /* values: "v0", "hello", null, "", null */
    static const int32_t val_off[] = {0, 2, 7, 7, 7, 7};
    for (int i = 0; i < 6; i++) CHECKF(get_i32(&c.value_offsets, (size_t)i) == val_off[i], "value offset %d", i);
    CHECK(c.value_data.len == 7 && memcmp(c.value_data.data, "v0hello", 7) == 0);
    CHECK((c.value_validity.data[0] & 0x1F) == 0x0B);
    CHECK(c.value_nulls == 2);
    /* offsets and timestamps */
    for (int i = 0; i < 5; i++) {
        CHECKF(get_i64(&c.offsets, (size_t)i) == 1000 + i, "offset row %d", i);
        CHECKF(get_i64(&c.timestamps, (size_t)i) == FIVE_HDR.base_timestamp + FIVE[i].ts_delta, "timestamp row %d",
               i);
        CHECKF(get_i32(&c.timestamp_types, (size_t)i) == 0, "timestamp type row %d", i);
    }
    /* headers: none, [h1=x, h2=null], none, [""=""], ["ü"=bin\0\xff] */
    static const int32_t hl_off[] = {0, 0, 2, 2, 3, 4};
    for (int i = 0; i < 6; i++)
        CHECKF(get_i32(&c.header_list_offsets, (size_t)i) == hl_off[i], "header list offset %d", i);
    CHECK((c.header_list_validity.data[0] & 0x1F) == 0x1A);
    CHECK(c.header_list_nulls == 2);
    CHECK(c.headers == 4);
    static const int32_t hk_off[] = {0, 2, 4, 4, 6};
    static const int32_t hv_off[] = {0, 1, 1, 1, 6};
    for (int i = 0; i < 5; i++) {
        CHECKF(get_i32(&c.header_key_offsets, (size_t)i) == hk_off[i], "header key offset %d", i);
        CHECKF(get_i32(&c.header_value_offsets, (size_t)i) == hv_off[i], "header value offset %d", i);
    }
    CHECK(c.header_key_data.len == 6 && memcmp(c.header_key_data.data, "h1h2\xC3\xBC", 6) == 0);
    CHECK(c.header_value_data.len == 6 && memcmp(c.header_value_data.data, "xbin\0\xff", 6) == 0);
    CHECK((c.header_value_validity.data[0] & 0x0F) == 0x0D);
    CHECK(c.header_value_nulls == 1);
    {
        char why[200] = "";
        CHECKF(columns_consistent(&c, why, sizeof why), "%s", why);
    }

    /* A second batch, LogAppendTime: every timestamp is max_timestamp, type 1. */
    {
        static const rec_spec two[2] = {
            {10, 0, U8("a"), 1, U8("b"), 1, NULL, 0},
            {-20, 1, NULL, -1, U8("cc"), 2, H1, 2},
        };
        kc_batch_header lh = FIVE_HDR;
        lh.base_offset = 5000;
        lh.attributes = KC_ATTR_TIMESTAMP_TYPE;
        lh.last_offset_delta = 1;
        lh.base_timestamp = 111;
        lh.max_timestamp = 999999;
        size_t l2;
        uint8_t *b2 = build_batch(two, 2, &lh, &l2);
        kc_batch_header h2;
        size_t t2;
        CHECK(kc_batch_frame(b2, l2, &h2, &t2, &err) == KC_OK && kc_batch_crc_ok(b2, t2, &h2));
        CHECK(h2.attributes == KC_ATTR_TIMESTAMP_TYPE);
        st = kc_columns_add_batch(&c, b2 + KC_RECORD_BATCH_OVERHEAD, b2 + t2, &h2, &at, &err);
        CHECKF(st == KC_OK, "add LogAppendTime batch: %d", st);
        CHECK(c.rows == 7);
        for (size_t i = 5; i < 7; i++) {
            CHECKF(get_i64(&c.timestamps, i) == 999999, "LogAppendTime row %zu: %lld", i,
                   (long long)get_i64(&c.timestamps, i));
            CHECK(get_i32(&c.timestamp_types, i) == 1);
        }
        CHECK(get_i64(&c.offsets, 5) == 5000 && get_i64(&c.offsets, 6) == 5001);
        /* Earlier rows untouched. */
        CHECK(get_i64(&c.timestamps, 0) == FIVE_HDR.base_timestamp);
        CHECK(get_i32(&c.timestamp_types, 0) == 0);
        /* Offsets continue from the first batch. */
        CHECK(get_i32(&c.key_offsets, 6) == 7 && get_i32(&c.key_offsets, 7) == 7);
        CHECK(c.key_data.len == 7 && memcmp(c.key_data.data, "k0key3a", 7) == 0);
        CHECK(get_i32(&c.value_offsets, 7) == 10);
        CHECK(get_bit(&c.key_validity, 5) == 1 && get_bit(&c.key_validity, 6) == 0);
        CHECK(get_bit(&c.header_list_validity, 5) == 0 && get_bit(&c.header_list_validity, 6) == 1);
        CHECK(c.headers == 6 && get_i32(&c.header_list_offsets, 7) == 6);
        CHECK(c.key_nulls == 3 && c.value_nulls == 2 && c.header_list_nulls == 3 && c.header_value_nulls == 2);
        char why[200] = "";
        CHECKF(columns_consistent(&c, why, sizeof why), "%s", why);
        free(b2);
    }
    /* Many rows: bitmaps grow across byte boundaries. */
    {
        rec_spec many[37];
        for (int i = 0; i < 37; i++) {
            rec_spec s = {i, i, (i % 3) ? U8("kk") : NULL, (i % 3) ? 2 : -1, (i % 5) ? U8("v") : NULL,
                          (i % 5) ? 1 : -1, (i % 4) ? NULL : H3, (i % 4) ? 0 : 1};
            many[i] = s;
        }
        kc_batch_header mh = FIVE_HDR;
        mh.last_offset_delta = 36;
        size_t l3;
        uint8_t *b3 = build_batch(many, 37, &mh, &l3);
        kc_batch_header h3;
        size_t t3;
        CHECK(kc_batch_frame(b3, l3, &h3, &t3, &err) == KC_OK);
        st = kc_columns_add_batch(&c, b3 + KC_RECORD_BATCH_OVERHEAD, b3 + t3, &h3, &at, &err);
        CHECK(st == KC_OK && c.rows == 44);
        int bits_ok = 1;
        for (int i = 0; i < 37; i++) {
            int64_t row = 7 + i;
            if (get_bit(&c.key_validity, row) != ((i % 3) != 0)) bits_ok = 0;
            if (get_bit(&c.value_validity, row) != ((i % 5) != 0)) bits_ok = 0;
            if (get_bit(&c.header_list_validity, row) != ((i % 4) == 0)) bits_ok = 0;
        }
        CHECK(bits_ok);
        char why[200] = "";
        CHECKF(columns_consistent(&c, why, sizeof why), "%s", why);
        free(b3);
    }
    kc_columns_free(&c);
    kc_columns_free(&c); /* double free of an emptied struct is harmless */

    /* Failures. */
    {
        const uint8_t *rs = b + KC_RECORD_BATCH_OVERHEAD, *re = b + total;
        kc_batch_header bad = h;
        kc_columns d;
        /* count too high */
        CHECK(columns_new(&d) == KC_OK);
        bad.records_count = 6;
        err = NULL;
        CHECK(kc_columns_add_batch(&d, rs, re, &bad, &at, &err) == KC_CORRUPT && err && at == (size_t)(re - rs));
        kc_columns_free(&d);
        /* count too low: trailing bytes */
        CHECK(columns_new(&d) == KC_OK);
        bad.records_count = 4;
        err = NULL;
        CHECK(kc_columns_add_batch(&d, rs, re, &bad, &at, &err) == KC_CORRUPT && err != NULL);
        kc_columns_free(&d);
        /* negative and absurd counts */
        CHECK(columns_new(&d) == KC_OK);
        bad.records_count = -1;
        CHECK(kc_columns_add_batch(&d, rs, re, &bad, &at, &err) == KC_CORRUPT);
        bad.records_count = INT32_MAX;
        CHECK(kc_columns_add_batch(&d, rs, re, &bad, &at, &err) == KC_CORRUPT);
        kc_columns_free(&d);
        /* count 0 on an empty section is fine */
        CHECK(columns_new(&d) == KC_OK);
        bad.records_count = 0;
        CHECK(kc_columns_add_batch(&d, re, re, &bad, &at, &err) == KC_OK && d.rows == 0);
        kc_columns_free(&d);
        /* truncated section */
        CHECK(columns_new(&d) == KC_OK);
        bad.records_count = 5;
        CHECK(kc_columns_add_batch(&d, rs, re - 1, &bad, &at, &err) == KC_CORRUPT);
        kc_columns_free(&d);
    }
    /* A header key that is not UTF-8 passes records_check (as Java's ensureValid) and is
     * stored repaired (U+FFFD per ill-formed subpart) by columns. */
    {
        static const kc_header_in badk[] = {{U8("\xC0\x80"), 2, U8("v"), 1}};
        static const rec_spec one[1] = {{0, 0, NULL, -1, U8("v"), 1, badk, 1}};
        size_t l4;
        uint8_t *b4 = build_batch(one, 1, &FIVE_HDR, &l4);
        kc_batch_header h4;
        size_t t4;
        CHECK(kc_batch_frame(b4, l4, &h4, &t4, &err) == KC_OK);
        CHECK(kc_records_check(b4 + 61, b4 + t4, 1, 0, &at, &err) == KC_OK);
        kc_columns d;
        CHECK(columns_new(&d) == KC_OK);
        err = NULL;
        CHECK(kc_columns_add_batch(&d, b4 + 61, b4 + t4, &h4, &at, &err) == KC_OK);
        CHECK(d.header_key_data.len == 6 && memcmp(d.header_key_data.data, "\xEF\xBF\xBD\xEF\xBF\xBD", 6) == 0);
        kc_columns_free(&d);
        free(b4);
    }
    free(b);
}

/* ------------------------------------------------------------------------------------ */
/* Columns in adopted (caller-owned, fixed-size) buffers, and the CRC-fused decode */

#define N_ADOPTED 11
typedef struct {
    uint8_t *blk[N_ADOPTED];
} adopted_blocks;

/* Gives the fixed-width column buffers exactly-sized malloc'd blocks the way
 * bindings/records.pyx (_adopt_pool_buffers) does: offsets (rows+1)*4, key/value data
 * data_bytes, int64 columns rows*8, timestamp types rows*4, validity bitmaps
 * validity_bytes. Blocks start as garbage (the pool recycles memory). Exact sizes let
 * AddressSanitizer catch any write past a reservation. Call before kc_columns_start. */
static void adopt_blocks(kc_columns *c, adopted_blocks *a, size_t rows, size_t data_bytes, size_t validity_bytes) {
    kc_buf *bufs[N_ADOPTED] = {&c->key_offsets, &c->value_offsets, &c->header_list_offsets, &c->key_data,
                               &c->value_data,  &c->offsets,       &c->timestamps,          &c->timestamp_types,
                               &c->key_validity, &c->value_validity, &c->header_list_validity};
    size_t sizes[N_ADOPTED] = {(rows + 1) * 4, (rows + 1) * 4, (rows + 1) * 4, data_bytes,     data_bytes,
                               rows * 8,       rows * 8,       rows * 4,       validity_bytes, validity_bytes,
                               validity_bytes};
    for (int i = 0; i < N_ADOPTED; i++) {
        a->blk[i] = xmalloc(sizes[i]);
        if (sizes[i]) memset(a->blk[i], 0xA5, sizes[i]);
        kc_buf_adopt(bufs[i], a->blk[i], sizes[i]);
    }
}
static void free_blocks(adopted_blocks *a) {
    for (int i = 0; i < N_ADOPTED; i++) free(a->blk[i]);
}

/* The binding's validity size for n rows. */
static size_t binding_validity_bytes(size_t n) { return (n + 7) / 8; }

static int bufs_equal(const kc_buf *x, const kc_buf *y) {
    return x->len == y->len && (x->len == 0 || memcmp(x->data, y->data, x->len) == 0);
}

static int columns_equal(const kc_columns *x, const kc_columns *y) {
    return x->rows == y->rows && x->headers == y->headers && x->key_nulls == y->key_nulls &&
           x->value_nulls == y->value_nulls && x->header_list_nulls == y->header_list_nulls &&
           x->header_value_nulls == y->header_value_nulls && bufs_equal(&x->key_offsets, &y->key_offsets) &&
           bufs_equal(&x->key_data, &y->key_data) && bufs_equal(&x->key_validity, &y->key_validity) &&
           bufs_equal(&x->value_offsets, &y->value_offsets) && bufs_equal(&x->value_data, &y->value_data) &&
           bufs_equal(&x->value_validity, &y->value_validity) && bufs_equal(&x->offsets, &y->offsets) &&
           bufs_equal(&x->timestamps, &y->timestamps) && bufs_equal(&x->timestamp_types, &y->timestamp_types) &&
           bufs_equal(&x->header_list_offsets, &y->header_list_offsets) &&
           bufs_equal(&x->header_list_validity, &y->header_list_validity) &&
           bufs_equal(&x->header_key_offsets, &y->header_key_offsets) &&
           bufs_equal(&x->header_key_data, &y->header_key_data) &&
           bufs_equal(&x->header_value_offsets, &y->header_value_offsets) &&
           bufs_equal(&x->header_value_data, &y->header_value_data) &&
           bufs_equal(&x->header_value_validity, &y->header_value_validity);
}

/* A batch of n small records (some null keys, some headers). */
static uint8_t *small_batch(int n, int64_t base_offset, size_t *len) {
    static const kc_header_in hh[] = {{U8("h"), 1, U8("v"), 1}};
    rec_spec recs[64];
    for (int i = 0; i < n && i < 64; i++) {
        rec_spec s = {i, i, (i % 3) ? U8("key") : NULL, (i % 3) ? 3 : -1, U8("value"), 5, (i % 2) ? hh : NULL,
                      (i % 2) ? 1 : 0};
        recs[i] = s;
    }
    kc_batch_header h = FIVE_HDR;
    h.base_offset = base_offset;
    h.last_offset_delta = n ? n - 1 : 0;
    return build_batch(recs, n, &h, len);
}

/* Decodes batches of the given counts into columns whose buffers were adopted with
 * validity_bytes(total rows). Returns the status of the first failing add (KC_OK if none),
 * *failed_at the index of that batch; on success compares with a malloc-grown decode. */
static int decode_adopted(const int *counts, int nb, size_t (*validity_bytes)(size_t), int *failed_at) {
    uint8_t *bat[8];
    size_t lens[8];
    size_t rows = 0, data = 0;
    int64_t off = 0;
    for (int i = 0; i < nb; i++) {
        bat[i] = small_batch(counts[i], off, &lens[i]);
        off += counts[i];
        rows += (size_t)counts[i];
        data += lens[i] - KC_RECORD_BATCH_OVERHEAD;
    }
    kc_columns c, ref;
    adopted_blocks a;
    kc_columns_init(&c);
    adopt_blocks(&c, &a, rows, data, validity_bytes(rows));
    int st = kc_columns_start(&c);
    CHECK(st == KC_OK);
    CHECK(columns_new(&ref) == KC_OK);
    *failed_at = -1;
    for (int i = 0; i < nb && st == KC_OK; i++) {
        kc_batch_header h;
        size_t total, at;
        const char *err = NULL;
        if (kc_batch_frame(bat[i], lens[i], &h, &total, &err) != KC_OK) {
            st = -1;
            break;
        }
        st = kc_columns_add_batch(&c, bat[i] + KC_RECORD_BATCH_OVERHEAD, bat[i] + total, &h, &at, &err);
        if (st != KC_OK) *failed_at = i;
        CHECK(kc_columns_add_batch(&ref, bat[i] + KC_RECORD_BATCH_OVERHEAD, bat[i] + total, &h, &at, &err) ==
              KC_OK);
    }
    if (st == KC_OK) {
        char why[200] = "";
        CHECKF(columns_consistent(&c, why, sizeof why), "adopted columns: %s", why);
        /* Same result as malloc-grown buffers, except validity bytes past the last row. */
        CHECK(c.rows == ref.rows);
        if (c.key_validity.len > (size_t)(c.rows + 7) / 8) c.key_validity.len = (size_t)(c.rows + 7) / 8;
        if (c.value_validity.len > (size_t)(c.rows + 7) / 8) c.value_validity.len = (size_t)(c.rows + 7) / 8;
        if (c.header_list_validity.len > (size_t)(c.rows + 7) / 8)
            c.header_list_validity.len = (size_t)(c.rows + 7) / 8;
        CHECK(columns_equal(&c, &ref));
    }
    kc_columns_free(&c); /* frees the (non-adopted) header buffers only */
    kc_columns_free(&ref);
    free_blocks(&a);
    for (int i = 0; i < nb; i++) free(bat[i]);
    return st;
}

static size_t roomy_validity_bytes(size_t n) { return (n + 7) / 8 + 1; }

static void test_columns_adopted(void) {
    int failed_at;
    /* Single batches of every size up to 40 with the binding's sizing. */
    int bad_single = 0;
    for (int n = 0; n <= 40; n++) {
        int st = decode_adopted(&n, 1, binding_validity_bytes, &failed_at);
        if (st != KC_OK) {
            bad_single++;
            CHECKF(0, "one batch of %d records in binding-sized adopted buffers: status %d", n, st);
        }
    }
    (void)bad_single;

    /* Regression check: two valid batches, 1 record then 8 records. The binding adopts
     * validity bitmaps of ceil(rows/8) = 2 bytes for the 9 rows; kc_columns_reserve once
     * asked for count/8+1 = 2 more bytes for the second batch although the first had left
     * room in its partly filled byte, and the fixed buffer reported KC_NOMEM (MemoryError
     * in Python) for a valid log. */
    {
        const int counts[2] = {1, 8};
        int st = decode_adopted(counts, 2, binding_validity_bytes, &failed_at);
        CHECKF(st == KC_OK,
               "batches of 1 then 8 records into binding-sized adopted buffers (validity rows/8+1 bytes): "
               "status %d (KC_NOMEM=%d) at batch %d",
               st, KC_NOMEM, failed_at);
    }
    /* Sweep of two-batch splits, binding sizing and a roomier sizing. */
    {
        int fails = 0, total = 0, first_r = -1, first_m = -1;
        for (int r = 0; r <= 9; r++) {
            for (int m = 0; m <= 20; m++) {
                const int counts[2] = {r, m};
                total++;
                if (decode_adopted(counts, 2, binding_validity_bytes, &failed_at) != KC_OK) {
                    if (!fails) first_r = r, first_m = m;
                    fails++;
                }
                /* With ceil(rows/8)+1 bytes every split must work. */
                int st = decode_adopted(counts, 2, roomy_validity_bytes, &failed_at);
                CHECKF(st == KC_OK, "split %d+%d with ceil(rows/8)+1 validity bytes: status %d", r, m, st);
            }
        }
        CHECKF(fails == 0,
               "%d of %d two-batch splits fail with binding-sized adopted validity buffers (first: %d then %d "
               "records)",
               fails, total, first_r, first_m);
    }
    /* Many batches. */
    {
        const int counts[8] = {3, 5, 1, 9, 0, 16, 7, 2};
        int st = decode_adopted(counts, 8, roomy_validity_bytes, &failed_at);
        CHECKF(st == KC_OK, "8 batches, roomy sizing: status %d at %d", st, failed_at);
    }
}

static void test_columns_crc(void) {
    /* A batch whose records section spans several of the fused CRC's chunks (CRC_CHUNK in
     * kc_columns.c, 256 KiB at the time of writing): about 1.2 MiB of records. */
    enum { NREC = 1300 };
    static uint8_t val[1000];
    for (size_t i = 0; i < sizeof val; i++) val[i] = (uint8_t)(i * 7);
    rec_spec *recs = xmalloc(NREC * sizeof *recs);
    for (int i = 0; i < NREC; i++) {
        rec_spec s = {i, i, U8("k"), 1, val, (int32_t)(sizeof val - (size_t)(i % 97)), (i % 5) ? NULL : H1,
                      (i % 5) ? 0 : 2};
        recs[i] = s;
    }
    kc_batch_header bh = FIVE_HDR;
    bh.last_offset_delta = NREC - 1;
    size_t len;
    uint8_t *b = build_batch(recs, NREC, &bh, &len);
    free(recs);
    CHECK(len - KC_RECORD_BATCH_OVERHEAD > 4 * 256 * 1024);
    kc_batch_header h;
    size_t total, at;
    const char *err = NULL;
    CHECK(kc_batch_frame(b, len, &h, &total, &err) == KC_OK);
    const uint8_t *rs = b + KC_RECORD_BATCH_OVERHEAD, *re = b + total;
    uint32_t seed = kc_crc32c(0, b + KC_ATTRIBUTES_OFFSET, KC_RECORD_BATCH_OVERHEAD - KC_ATTRIBUTES_OFFSET);

    kc_columns c, ref;
    CHECK(columns_new(&c) == KC_OK);
    CHECK(columns_new(&ref) == KC_OK);
    uint32_t crc = seed;
    int st = kc_columns_add_batch_crc(&c, rs, re, &h, &crc, &at, &err);
    CHECKF(st == KC_OK && crc == h.crc, "fused CRC decode: status %d crc %08X stored %08X", st, (unsigned)crc,
           (unsigned)h.crc);
    CHECK(kc_columns_add_batch(&ref, rs, re, &h, &at, &err) == KC_OK);
    CHECK(columns_equal(&c, &ref));
    kc_columns_free(&c);
    kc_columns_free(&ref);

    /* On every kind of error the CRC still covers the whole section. */
    struct {
        int32_t count;
        size_t cut;
        const char *what;
    } cases[] = {{NREC + 1, 0, "count too high"}, {NREC - 1, 0, "count too low"},
                 {-1, 0, "negative count"},         {INT32_MAX, 0, "absurd count"},
                 {NREC, 5, "truncated end"},        {NREC, 300000, "cut 300000 bytes short"},
                 {NREC, 1000000, "cut 1000000 bytes short"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kc_batch_header hb = h;
        hb.records_count = cases[i].count;
        const uint8_t *e = re - cases[i].cut;
        CHECK(columns_new(&c) == KC_OK);
        crc = seed;
        err = NULL;
        st = kc_columns_add_batch_crc(&c, rs, e, &hb, &crc, &at, &err);
        uint32_t want = kc_crc32c(seed, rs, (size_t)(e - rs));
        CHECKF(st == KC_CORRUPT && err != NULL && crc == want, "%s: status %d crc %08X want %08X", cases[i].what, st,
               (unsigned)crc, (unsigned)want);
        kc_columns_free(&c);
    }
    /* A corrupt byte in the middle of the section. */
    {
        uint8_t *m = xmalloc(len);
        memcpy(m, b, len);
        m[KC_RECORD_BATCH_OVERHEAD + 600000] ^= 0xFF; /* inside the third chunk */
        CHECK(columns_new(&c) == KC_OK);
        crc = seed;
        st = kc_columns_add_batch_crc(&c, m + KC_RECORD_BATCH_OVERHEAD, m + len, &h, &crc, &at, &err);
        CHECK(crc == kc_crc32c(seed, m + KC_RECORD_BATCH_OVERHEAD, len - KC_RECORD_BATCH_OVERHEAD));
        CHECK(crc != h.crc);
        kc_columns_free(&c);
        free(m);
    }
    free(b);
}

/* ------------------------------------------------------------------------------------ */
/* UTF-8 */

static int utf8_exact(const char *s, size_t n) {
    uint8_t *p = xmalloc(n);
    memcpy(p, s, n);
    int r = kc_utf8_valid(p, n);
    free(p);
    return r;
}
#define UTF8_OK(lit) CHECKF(utf8_exact(lit, sizeof(lit) - 1) == 1, "valid UTF-8 rejected: %s", #lit)
#define UTF8_BAD(lit) CHECKF(utf8_exact(lit, sizeof(lit) - 1) == 0, "invalid UTF-8 accepted: %s", #lit)

static void test_utf8(void) {
    UTF8_OK("");
    UTF8_OK("hello, world");
    UTF8_OK("\x00\x7F");
    UTF8_OK("\xC2\x80");         /* U+0080, smallest 2-byte */
    UTF8_OK("\xC3\xBC");         /* ü */
    UTF8_OK("\xDF\xBF");         /* U+07FF */
    UTF8_OK("\xE0\xA0\x80");     /* U+0800, smallest 3-byte */
    UTF8_OK("\xE2\x82\xAC");     /* € */
    UTF8_OK("\xED\x9F\xBF");     /* U+D7FF, just below the surrogates */
    UTF8_OK("\xEE\x80\x80");     /* U+E000, just above */
    UTF8_OK("\xEF\xBF\xBF");     /* U+FFFF */
    UTF8_OK("\xF0\x90\x80\x80"); /* U+10000, smallest 4-byte */
    UTF8_OK("\xF0\x9F\x98\x80"); /* emoji */
    UTF8_OK("\xF4\x8F\xBF\xBF"); /* U+10FFFF */
    UTF8_OK("a\xC3\xBC\xE2\x82\xAC\xF0\x9F\x98\x80z");

    UTF8_BAD("\xC0\x80");         /* overlong NUL */
    UTF8_BAD("\xC1\xBF");         /* overlong */
    UTF8_BAD("\xE0\x80\x80");     /* overlong 3-byte */
    UTF8_BAD("\xE0\x9F\xBF");     /* overlong U+07FF */
    UTF8_BAD("\xF0\x80\x80\x80"); /* overlong 4-byte */
    UTF8_BAD("\xF0\x8F\xBF\xBF"); /* overlong U+FFFF */
    UTF8_BAD("\xED\xA0\x80");     /* U+D800 */
    UTF8_BAD("\xED\xBF\xBF");     /* U+DFFF */
    UTF8_BAD("\xF4\x90\x80\x80"); /* U+110000 */
    UTF8_BAD("\xF5\x80\x80\x80");
    UTF8_BAD("\xF8\x88\x80\x80\x80"); /* 5-byte form */
    UTF8_BAD("\xFF");
    UTF8_BAD("\xFE");
    UTF8_BAD("\x80");      /* lone continuation */
    UTF8_BAD("a\xBF");
    UTF8_BAD("\xC3");      /* truncated 2-byte */
    UTF8_BAD("\xE2\x82");  /* truncated 3-byte */
    UTF8_BAD("\xE2");
    UTF8_BAD("\xF0\x9F\x98"); /* truncated 4-byte */
    UTF8_BAD("\xF0\x9F");
    UTF8_BAD("\xF0");
    UTF8_BAD("ok\xE2\x82");
    UTF8_BAD("\xC3\x41");     /* bad continuation */
    UTF8_BAD("\xE2\x28\xA1");
    UTF8_BAD("\xF0\x9F\x98\x41");

    /* Agreement with a straightforward reference decoder on random short strings. */
    long disagree = 0;
    for (int i = 0; i < 20000 && disagree < 5; i++) {
        uint8_t s[8];
        size_t n = rnd_below(8);
        for (size_t k = 0; k < n; k++) {
            uint32_t r = rnd_below(4);
            s[k] = (uint8_t)(r == 0 ? rnd_below(0x80) : r == 1 ? 0x80 + rnd_below(0x40) : 0xC0 + rnd_below(0x40));
        }
        /* Reference: decode by the RFC 3629 table of well-formed byte sequences. */
        int ok = 1;
        size_t k = 0;
        while (k < n && ok) {
            uint8_t c0 = s[k];
            size_t need;
            uint8_t lo = 0x80, hi = 0xBF;
            if (c0 <= 0x7F) {
                k++;
                continue;
            } else if (c0 >= 0xC2 && c0 <= 0xDF) {
                need = 1;
            } else if (c0 == 0xE0) {
                need = 2, lo = 0xA0;
            } else if ((c0 >= 0xE1 && c0 <= 0xEC) || c0 == 0xEE || c0 == 0xEF) {
                need = 2;
            } else if (c0 == 0xED) {
                need = 2, hi = 0x9F;
            } else if (c0 == 0xF0) {
                need = 3, lo = 0x90;
            } else if (c0 >= 0xF1 && c0 <= 0xF3) {
                need = 3;
            } else if (c0 == 0xF4) {
                need = 3, hi = 0x8F;
            } else {
                ok = 0;
                break;
            }
            if (k + need >= n) { /* the sequence runs past the end */
                ok = 0;
                break;
            }
            if (s[k + 1] < lo || s[k + 1] > hi) ok = 0;
            for (size_t j = 2; j <= need && ok; j++)
                if (s[k + j] < 0x80 || s[k + j] > 0xBF) ok = 0;
            k += need + 1;
        }
        uint8_t *cp = xmalloc(n);
        memcpy(cp, s, n);
        int got = kc_utf8_valid(cp, n);
        free(cp);
        if (got != ok) {
            disagree++;
            char hex[40] = "";
            for (size_t j = 0; j < n; j++) snprintf(hex + 3 * j, 4, "%02X ", s[j]);
            CHECKF(0, "utf8 %s: kc says %d, reference %d", hex, got, ok);
        }
    }
    CHECKF(disagree == 0, "%ld random strings where kc_utf8_valid disagrees with the reference", disagree);
}

/* ------------------------------------------------------------------------------------ */
/* kc_buf */

static void test_buffer(void) {
    kc_buf b;
    memset(&b, 0, sizeof b);
    CHECK(kc_buf_append(&b, "", 0) == 0);
    size_t want = 0;
    int ok = 1;
    for (int i = 0; i < 1000; i++) {
        uint8_t chunk[37];
        size_t n = (size_t)(i % 37);
        memset(chunk, i & 0xFF, n);
        if (kc_buf_append(&b, chunk, n)) ok = 0;
        want += n;
        if (b.len != want || b.cap < b.len) ok = 0;
    }
    CHECK(ok);
    /* content: chunk i repeated i%37 times */
    size_t pos = 0;
    for (int i = 0; i < 1000 && ok; i++)
        for (int k = 0; k < i % 37; k++)
            if (b.data[pos++] != (uint8_t)(i & 0xFF)) ok = 0;
    CHECK(ok);
    CHECK(kc_buf_reserve(&b, SIZE_MAX) == -1); /* overflow is reported, not wrapped */
    size_t cap = b.cap;
    uint8_t *p = kc_buf_release(&b);
    CHECK(p != NULL && b.data == NULL && b.len == 0 && b.cap == 0 && cap >= want);
    free(p);
    kc_buf_free(&b);

    /* Adopted (external) memory: usable up to its capacity, never grown, freed or released. */
    {
        uint8_t *mem = xmalloc(16);
        kc_buf e;
        memset(&e, 0, sizeof e);
        kc_buf_adopt(&e, mem, 16);
        CHECK(e.data == mem && e.len == 0 && e.cap == 16 && e.external);
        CHECK(kc_buf_append(&e, "0123456789abcdef", 16) == 0 && e.len == 16);
        CHECK(kc_buf_reserve(&e, 0) == 0);
        CHECK(kc_buf_reserve(&e, 1) == -1 && e.data == mem && e.cap == 16);
        CHECK(kc_buf_append(&e, "x", 1) == -1 && e.len == 16);
        CHECK(memcmp(mem, "0123456789abcdef", 16) == 0);
        kc_buf e2 = e;
        CHECK(kc_buf_release(&e2) == NULL && e2.data == NULL);
        kc_buf_free(&e); /* must not free mem (ASan would report the later free as a double free) */
        CHECK(e.data == NULL && e.external == 0);
        /* After free the struct is an ordinary empty buffer again. */
        CHECK(kc_buf_append(&e, "y", 1) == 0 && e.data != mem && e.len == 1);
        kc_buf_free(&e);
        free(mem);
    }
}

/* ------------------------------------------------------------------------------------ */
/* kc_pool */

static void test_pool(void) {
    size_t old = kc_pool_set_limit(8u << 20);
    kc_pool_clear();
    CHECK(kc_pool_cached_bytes() == 0);
    size_t cap = 0, cap2 = 0, cap3 = 0;
    /* Small blocks are plain malloc/free. */
    void *s = kc_pool_alloc(100, &cap);
    CHECK(s != NULL && cap == 100);
    if (s) memset(s, 1, cap);
    kc_pool_free(s, cap);
    CHECK(kc_pool_cached_bytes() == 0);
    void *z = kc_pool_alloc(0, &cap);
    CHECK(z != NULL && cap >= 1);
    kc_pool_free(z, cap);
    kc_pool_free(NULL, 12345);
    /* A large block is cached and handed out again for a request it fits without waste. */
    const size_t MiB = 1u << 20;
    void *a = kc_pool_alloc(MiB, &cap);
    CHECK(a != NULL && cap == MiB);
    if (a) memset(a, 0x5A, cap);
    kc_pool_free(a, cap);
    CHECK(kc_pool_cached_bytes() == MiB);
    void *b = kc_pool_alloc(600000, &cap2);
    CHECK(b == a && cap2 == MiB && kc_pool_cached_bytes() == 0);
    if (b) memset(b, 0, cap2); /* the whole reported capacity is writable */
    kc_pool_free(b, cap2);
    /* Too small for the cached block (would waste more than half): fresh memory. */
    void *c = kc_pool_alloc(100000, &cap3);
    CHECK(c != NULL && c != b && cap3 == 100000 && kc_pool_cached_bytes() == MiB);
    if (c) memset(c, 0, cap3);
    kc_pool_free(c, cap3);
    CHECK(kc_pool_cached_bytes() == MiB + 100000);
    /* Shrinking the limit evicts now; blocks above the limit are never cached. */
    kc_pool_set_limit(MiB);
    CHECK(kc_pool_cached_bytes() <= MiB);
    void *big = kc_pool_alloc(2 * MiB, &cap);
    size_t before = kc_pool_cached_bytes();
    kc_pool_free(big, cap);
    CHECK(kc_pool_cached_bytes() == before);
    /* At most 16 slots and never above the limit. */
    kc_pool_set_limit(8 * MiB);
    void *blocks[20];
    size_t caps[20];
    for (int i = 0; i < 20; i++) blocks[i] = kc_pool_alloc(64 * 1024 + (size_t)i * 4096, &caps[i]);
    for (int i = 0; i < 20; i++) kc_pool_free(blocks[i], caps[i]);
    size_t cached = kc_pool_cached_bytes();
    CHECKF(cached <= 8 * MiB && cached <= 16 * (64 * 1024 + 19 * 4096), "cached %zu", cached);
    kc_pool_set_limit(0);
    CHECK(kc_pool_cached_bytes() == 0);
    void *d = kc_pool_alloc(MiB, &cap);
    kc_pool_free(d, cap);
    CHECK(kc_pool_cached_bytes() == 0); /* limit 0 disables caching */
    kc_pool_clear();
    kc_pool_set_limit(old);
    CHECK(kc_pool_cached_bytes() == 0);
}

/* ------------------------------------------------------------------------------------ */
/* Robustness: mutated batches must never crash, over-read, or produce inconsistent columns. */

static long g_fuzz_runs = 0, g_fuzz_frame_ok = 0, g_fuzz_crc_ok = 0, g_fuzz_check_ok = 0, g_fuzz_cols_ok = 0;

/* Runs every parser on an exact-size copy of [data, data+len). `fallback` supplies the
 * header when the bytes are too short to hold one. */
static void exercise(const uint8_t *data, size_t len, const kc_batch_header *fallback, const char *what) {
    uint8_t *buf = xmalloc(len);
    if (len) memcpy(buf, data, len);
    g_fuzz_runs++;

    kc_batch_header h;
    size_t total = 0;
    const char *err = NULL;
    int fst = kc_batch_frame(buf, len, &h, &total, &err);
    if (!(fst == KC_OK || fst == KC_TRUNCATED || (fst == KC_CORRUPT && err != NULL))) {
        CHECKF(0, "%s len %zu: frame returned %d", what, len, fst);
    }
    const uint8_t *recs, *end;
    uint8_t *framed = NULL;
    if (fst == KC_OK) {
        g_fuzz_frame_ok++;
        if (!(total >= KC_RECORD_BATCH_OVERHEAD && total <= len && h.magic == 2))
            CHECKF(0, "%s len %zu: frame OK with total %zu magic %d", what, len, total, (int)h.magic);
        /* Exact copy of the framed batch so reads past the framed end are caught too. */
        framed = xmalloc(total);
        memcpy(framed, buf, total);
        if (kc_batch_crc_ok(framed, total, &h)) g_fuzz_crc_ok++;
        recs = framed + KC_RECORD_BATCH_OVERHEAD;
        end = framed + total;
    } else {
        if (len >= KC_RECORD_BATCH_OVERHEAD) {
            h.base_offset = kc_be64(buf + KC_BASE_OFFSET_OFFSET);
            h.attributes = kc_be16(buf + KC_ATTRIBUTES_OFFSET);
            h.last_offset_delta = kc_be32(buf + KC_LAST_OFFSET_DELTA_OFFSET);
            h.base_timestamp = kc_be64(buf + KC_BASE_TIMESTAMP_OFFSET);
            h.max_timestamp = kc_be64(buf + KC_MAX_TIMESTAMP_OFFSET);
            h.records_count = kc_be32(buf + KC_RECORDS_COUNT_OFFSET);
            recs = buf + KC_RECORD_BATCH_OVERHEAD;
        } else {
            h = *fallback;
            recs = buf + len;
        }
        end = buf + len;
    }

    size_t at = (size_t)-1;
    err = NULL;
    int cst = kc_records_check(recs, end, h.records_count, h.last_offset_delta, &at, &err);
    if (cst == KC_OK) {
        g_fuzz_check_ok++;
    } else if (!(cst == KC_CORRUPT && err != NULL && at <= (size_t)(end - recs))) {
        CHECKF(0, "%s len %zu: records_check returned %d at %zu", what, len, cst, at);
    }

    /* Four ways to decode: malloc-grown or adopted exact-size buffers, with or without the
     * fused CRC. Some columns already hold rows, so appends start mid-bitmap. */
    int mode = (int)(g_fuzz_runs % 4);
    int adopted = mode >= 2, with_crc = mode & 1;
    int pre = (int)((g_fuzz_runs / 4) % 3);
    static const rec_spec one[1] = {{1, 0, U8("pre"), 3, NULL, -1, H1, 2}};
    size_t pl;
    kc_batch_header ph = FIVE_HDR;
    ph.last_offset_delta = 0;
    uint8_t *pb = build_batch(one, 1, &ph, &pl);
    ph.records_count = 1;

    kc_columns c;
    adopted_blocks blocks;
    kc_columns_init(&c);
    if (adopted) {
        /* Sized as the binding does: the rows a batch may reserve are its count bounded by
         * what its section could hold (a record takes at least 7 bytes); validity bitmaps
         * get exactly ceil(rows/8) bytes. */
        size_t section = (size_t)(end - recs);
        size_t n = (size_t)pre;
        if (h.records_count >= 0)
            n += (size_t)h.records_count <= section / 7 + 1 ? (size_t)h.records_count : section / 7 + 1;
        size_t data = (size_t)pre * (pl - KC_RECORD_BATCH_OVERHEAD) + section;
        adopt_blocks(&c, &blocks, n, data, (n + 7) / 8);
    }
    if (kc_columns_start(&c) != KC_OK) CHECKF(0, "kc_columns_start failed");
    int pre_ok = 1;
    for (int i = 0; i < pre; i++) {
        size_t a2;
        const char *e2;
        if (kc_columns_add_batch(&c, pb + KC_RECORD_BATCH_OVERHEAD, pb + pl, &ph, &a2, &e2) != KC_OK) pre_ok = 0;
    }
    CHECK(pre_ok);
    free(pb);
    int64_t rows_before = c.rows;
    at = (size_t)-1;
    err = NULL;
    int st;
    if (with_crc) {
        uint32_t seed = (uint32_t)rnd64();
        uint32_t crc = seed;
        st = kc_columns_add_batch_crc(&c, recs, end, &h, &crc, &at, &err);
        uint32_t want = kc_crc32c(seed, recs, (size_t)(end - recs));
        if (crc != want) CHECKF(0, "%s len %zu: fused CRC %08X, want %08X", what, len, (unsigned)crc, (unsigned)want);
    } else {
        st = kc_columns_add_batch(&c, recs, end, &h, &at, &err);
    }
    if (st == KC_OK) {
        g_fuzz_cols_ok++;
        char why[200] = "";
        if (c.rows - rows_before != h.records_count) CHECKF(0, "%s: rows added != count", what);
        if (!columns_consistent(&c, why, sizeof why))
            CHECKF(0, "%s len %zu mode %d: inconsistent columns: %s", what, len, mode, why);
    } else if (!((st == KC_CORRUPT || st == KC_TOO_LARGE) && err != NULL && at <= (size_t)(end - recs))) {
        CHECKF(0, "%s len %zu mode %d: columns_add_batch returned %d at %zu", what, len, mode, st, at);
    }
    /* records_check OK means the structure is sound, so columns must succeed too (header
     * keys that are not UTF-8 are repaired, not rejected). */
    if (cst == KC_OK && st != KC_OK)
        CHECKF(0, "%s len %zu mode %d: records_check OK but columns failed: %d %s", what, len, mode, st,
               err ? err : "");
    kc_columns_free(&c);
    if (adopted) free_blocks(&blocks);
    free(framed);
    free(buf);
}

/* A random valid batch. */
static uint8_t *random_batch(size_t *len, kc_batch_header *hout) {
    static uint8_t pool[512];
    static int pool_ready = 0;
    if (!pool_ready) {
        for (size_t i = 0; i < sizeof pool; i++) pool[i] = (uint8_t)('a' + i % 26);
        pool_ready = 1;
    }
    int n = (int)rnd_below(9);
    rec_spec recs[8];
    kc_header_in hdrs[8][3];
    for (int i = 0; i < n; i++) {
        rec_spec *s = &recs[i];
        uint32_t r = rnd_below(8);
        s->ts_delta = r == 0 ? (int64_t)rnd64() : (int64_t)rnd_below(100000) - 500;
        s->off_delta = i;
        s->key_len = rnd_below(4) == 0 ? -1 : (int32_t)rnd_below(r == 1 ? 200 : 20);
        s->key = s->key_len >= 0 ? pool + rnd_below(100) : NULL;
        s->value_len = rnd_below(4) == 0 ? -1 : (int32_t)rnd_below(r == 2 ? 300 : 30);
        s->value = s->value_len >= 0 ? pool + rnd_below(100) : NULL;
        s->n_headers = (int32_t)rnd_below(4);
        for (int k = 0; k < s->n_headers; k++) {
            hdrs[i][k].key = pool + rnd_below(50);
            hdrs[i][k].key_len = (int32_t)rnd_below(10);
            hdrs[i][k].value_len = rnd_below(3) == 0 ? -1 : (int32_t)rnd_below(10);
            hdrs[i][k].value = hdrs[i][k].value_len >= 0 ? pool + rnd_below(50) : NULL;
        }
        s->headers = hdrs[i];
    }
    kc_batch_header h = FIVE_HDR;
    h.base_offset = (int64_t)rnd_below(1u << 30);
    h.attributes = (int16_t)(rnd_below(2) ? KC_ATTR_TIMESTAMP_TYPE : 0);
    h.last_offset_delta = n ? n - 1 : 0;
    h.base_timestamp = (int64_t)rnd64() >> 20;
    h.max_timestamp = h.base_timestamp + 100000;
    uint8_t *b = build_batch(recs, n, &h, len);
    h.records_count = n;
    *hout = h;
    return b;
}

static void fix_crc(uint8_t *b, size_t len) {
    if (len < KC_RECORD_BATCH_OVERHEAD) return;
    uint32_t crc = kc_crc32c(0, b + KC_ATTRIBUTES_OFFSET, len - KC_ATTRIBUTES_OFFSET);
    kc_put_be32(b + KC_CRC_OFFSET, (int32_t)crc);
}

static void test_robustness(void) {
    clock_t t0 = clock();
    /* 1. Every truncation of a handful of valid batches. */
    for (int i = 0; i < 25; i++) {
        size_t len;
        kc_batch_header h;
        uint8_t *b = i == 0 ? build_batch(FIVE, 5, &FIVE_HDR, &len) : random_batch(&len, &h);
        if (i == 0) {
            h = FIVE_HDR;
            h.records_count = 5;
        }
        /* Sanity: the unmutated batch passes everything. */
        {
            kc_batch_header hh;
            size_t t;
            const char *err = NULL;
            size_t at;
            int ok = kc_batch_frame(b, len, &hh, &t, &err) == KC_OK && t == len && kc_batch_crc_ok(b, t, &hh) &&
                     kc_records_check(b + 61, b + t, hh.records_count, hh.last_offset_delta, &at, &err) == KC_OK;
            CHECKF(ok, "random batch %d does not validate: %s", i, err ? err : "");
        }
        for (size_t k = 0; k <= len; k++) exercise(b, k, &h, "truncation");
        /* Truncating the records section while keeping the header length consistent. */
        for (size_t k = KC_RECORD_BATCH_OVERHEAD; k < len; k++) {
            uint8_t *t = xmalloc(len);
            memcpy(t, b, len);
            kc_put_be32(t + KC_LENGTH_OFFSET, (int32_t)(k - KC_LOG_OVERHEAD));
            fix_crc(t, k);
            exercise(t, k, &h, "consistent truncation");
            free(t);
        }
        free(b);
    }
    /* 2. Random mutations. */
    const int iterations = 30000;
    for (int it = 0; it < iterations; it++) {
        size_t len;
        kc_batch_header h;
        uint8_t *b = random_batch(&len, &h);
        uint32_t kind = rnd_below(6);
        size_t cap = len + 64;
        uint8_t *m = xmalloc(cap);
        memcpy(m, b, len);
        size_t mlen = len;
        const char *what = "?";
        if (kind == 0 || kind == 1) {
            /* byte flips anywhere; kind 1 fixes the CRC so deeper code runs */
            int flips = 1 + (int)rnd_below(8);
            for (int f = 0; f < flips; f++) m[rnd_below((uint32_t)len)] ^= (uint8_t)(1 + rnd_below(255));
            if (kind == 1) {
                m[KC_MAGIC_OFFSET] = 2;
                fix_crc(m, len);
            }
            what = kind ? "flips+crc" : "flips";
        } else if (kind == 2) {
            /* flips confined to the records section, header left intact, CRC fixed */
            int flips = 1 + (int)rnd_below(4);
            if (len > KC_RECORD_BATCH_OVERHEAD) {
                for (int f = 0; f < flips; f++) {
                    size_t pos = KC_RECORD_BATCH_OVERHEAD + rnd_below((uint32_t)(len - KC_RECORD_BATCH_OVERHEAD));
                    uint32_t r = rnd_below(4);
                    m[pos] = r == 0 ? 0xFF : r == 1 ? (uint8_t)(m[pos] ^ 0x80) : (uint8_t)rnd64();
                }
            }
            fix_crc(m, len);
            what = "record flips";
        } else if (kind == 3) {
            /* insert or delete a byte in the records section; header length and CRC follow */
            if (len > KC_RECORD_BATCH_OVERHEAD && rnd_below(2)) {
                size_t pos = KC_RECORD_BATCH_OVERHEAD + rnd_below((uint32_t)(len - KC_RECORD_BATCH_OVERHEAD));
                memmove(m + pos, m + pos + 1, len - pos - 1);
                mlen = len - 1;
            } else {
                size_t pos = KC_RECORD_BATCH_OVERHEAD + rnd_below((uint32_t)(len - KC_RECORD_BATCH_OVERHEAD + 1));
                memmove(m + pos + 1, m + pos, len - pos);
                m[pos] = (uint8_t)rnd64();
                mlen = len + 1;
            }
            kc_put_be32(m + KC_LENGTH_OFFSET, (int32_t)(mlen - KC_LOG_OVERHEAD));
            fix_crc(m, mlen);
            what = "insert/delete";
        } else if (kind == 4) {
            /* random garbage of random length, sometimes behind a plausible header */
            free(m);
            mlen = rnd_below(400);
            cap = mlen + 1;
            m = xmalloc(cap);
            rnd_fill(m, mlen);
            if (mlen >= KC_RECORD_BATCH_OVERHEAD && rnd_below(2)) {
                memcpy(m, b, KC_RECORD_BATCH_OVERHEAD < len ? KC_RECORD_BATCH_OVERHEAD : len);
                kc_put_be32(m + KC_LENGTH_OFFSET, (int32_t)(mlen - KC_LOG_OVERHEAD));
                kc_put_be32(m + KC_RECORDS_COUNT_OFFSET, (int32_t)rnd_below(70));
                kc_put_be32(m + KC_LAST_OFFSET_DELTA_OFFSET, (int32_t)rnd_below(70));
                fix_crc(m, mlen);
            }
            what = "garbage";
        } else {
            /* hostile header fields on an otherwise valid batch */
            uint32_t r = rnd_below(5);
            int32_t v = rnd_below(2) ? (int32_t)(uint32_t)rnd64() : (int32_t)rnd_below(20) - 5;
            if (r == 0) kc_put_be32(m + KC_RECORDS_COUNT_OFFSET, v);
            if (r == 1) kc_put_be32(m + KC_LAST_OFFSET_DELTA_OFFSET, v);
            if (r == 2) kc_put_be32(m + KC_LENGTH_OFFSET, v);
            if (r == 3) kc_put_be16(m + KC_ATTRIBUTES_OFFSET, (int16_t)v);
            if (r == 4) {
                kc_put_be64(m + KC_BASE_OFFSET_OFFSET, INT64_MAX - rnd_below(3));
                kc_put_be64(m + KC_BASE_TIMESTAMP_OFFSET, INT64_MAX - rnd_below(3));
            }
            fix_crc(m, mlen);
            what = "header fields";
        }
        exercise(m, mlen, &h, what);
        /* And a random truncation of the mutated bytes. */
        if (mlen) exercise(m, rnd_below((uint32_t)mlen), &h, what);
        free(m);
        free(b);
    }
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    printf("# robustness: %ld runs (%d mutation iterations), frame OK %ld, CRC OK %ld, records_check OK %ld, "
           "columns OK %ld, %.2f s CPU\n",
           g_fuzz_runs, iterations, g_fuzz_frame_ok, g_fuzz_crc_ok, g_fuzz_check_ok, g_fuzz_cols_ok, secs);
    /* The mutations must actually reach deep code, or the loop proves little. */
    CHECK(g_fuzz_crc_ok > 1000);
    CHECK(g_fuzz_check_ok > 1000);
    CHECK(g_fuzz_cols_ok > 1000);
    CHECK(g_fuzz_runs - g_fuzz_check_ok > 1000);
}

/* ------------------------------------------------------------------------------------ */


/* Repair vectors: expected outputs are what Python's bytes.decode("utf-8", "replace")
 * gives (the maximal-subpart rule Java's decoder follows too). */
static void test_utf8_repair(void) {
    static const struct {
        const char *in;
        size_t in_len;
        const char *out;
        size_t out_len;
    } cases[] = {
        {"\xC0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6},
        {"\xE2\x82", 2, "\xEF\xBF\xBD", 3},
        {"\xE2\x82\x41", 3, "\xEF\xBF\xBD\x41", 4},
        {"\xED\xA0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9},
        {"\xF4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 12},
        {"\xF0\x9F\x98", 3, "\xEF\xBF\xBD", 3},
        {"\x61\xFF\x62", 3, "\x61\xEF\xBF\xBD\x62", 5},
        {"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9, "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80", 9},
        {"\xE0\x80\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD", 9},
        {"\xF0\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6},
        {"\x80\x80", 2, "\xEF\xBF\xBD\xEF\xBF\xBD", 6},
        {"\xF5", 1, "\xEF\xBF\xBD", 3},
        {"\xC2", 1, "\xEF\xBF\xBD", 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *dst = xmalloc(3 * cases[i].in_len + 1);
        size_t n = kc_utf8_repair((const uint8_t *)cases[i].in, cases[i].in_len, dst);
        CHECKF(n == cases[i].out_len && memcmp(dst, cases[i].out, n) == 0, "utf8 repair case %zu", i);
        CHECKF(kc_utf8_valid(dst, n), "utf8 repair case %zu: output not valid", i);
        free(dst);
    }
}

/* ------------------------------------------------------------------------------------ */
/* Log: index search, produce validation, offset stamping, segment scan, header walk
 * (kc_log.h). Expected values come from the way the inputs were built or from plain linear
 * reference loops, never from the functions under test. */

static void lg_put_off(uint8_t *idx, size_t i, int32_t off, int32_t pos) {
    kc_put_be32(idx + i * KC_OFFSET_INDEX_ENTRY, off);
    kc_put_be32(idx + i * KC_OFFSET_INDEX_ENTRY + 4, pos);
}
static void lg_put_time(uint8_t *idx, size_t i, int64_t ts, int32_t off) {
    kc_put_be64(idx + i * KC_TIME_INDEX_ENTRY, ts);
    kc_put_be32(idx + i * KC_TIME_INDEX_ENTRY + 8, off);
}

/* Reference lookups: linear scan for the last slot whose key is <= target. */
static long lg_ref_le32(const int32_t *keys, size_t n, int32_t target) {
    long r = -1;
    for (size_t i = 0; i < n; i++)
        if (keys[i] <= target) r = (long)i;
    return r;
}
static long lg_ref_le64(const int64_t *keys, size_t n, int64_t target) {
    long r = -1;
    for (size_t i = 0; i < n; i++)
        if (keys[i] <= target) r = (long)i;
    return r;
}
static int32_t lg_clamp32(int64_t v) { return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int32_t)v; }

/* Reference sanity checks, written from the header's description. */
static int lg_ref_off_sane(const int32_t *off, const int32_t *pos, size_t n, int64_t log_size) {
    for (size_t i = 0; i < n; i++) {
        if (off[i] < 0 || pos[i] < 0 || pos[i] >= log_size) return 0;
        if (i > 0 && (off[i] <= off[i - 1] || pos[i] <= pos[i - 1])) return 0;
    }
    return 1;
}
static int lg_ref_time_sane(const int64_t *ts, const int32_t *off, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (off[i] < 0) return 0;
        if (i > 0 && (ts[i] <= ts[i - 1] || off[i] < off[i - 1])) return 0;
    }
    return 1;
}

static void test_log_index_lookup(void) {
    /* Empty indexes. */
    {
        uint8_t *e = xmalloc(0);
        CHECK(kc_offset_index_lookup(e, 0, 0) == -1);
        CHECK(kc_offset_index_lookup(e, 0, INT32_MAX) == -1);
        CHECK(kc_offset_index_lookup(e, 0, INT32_MIN) == -1);
        CHECK(kc_offset_index_lookup_position(e, 0, 0) == -1);
        CHECK(kc_offset_index_lookup_position(e, 0, INT32_MAX) == -1);
        CHECK(kc_time_index_lookup(e, 0, 0) == -1);
        CHECK(kc_time_index_lookup(e, 0, INT64_MAX) == -1);
        CHECK(kc_time_index_lookup(e, 0, INT64_MIN) == -1);
        free(e);
    }
    /* One entry. */
    {
        uint8_t *o = xmalloc(KC_OFFSET_INDEX_ENTRY);
        lg_put_off(o, 0, 10, 4000);
        CHECK(kc_offset_index_lookup(o, 1, 9) == -1);
        CHECK(kc_offset_index_lookup(o, 1, 0) == -1);
        CHECK(kc_offset_index_lookup(o, 1, INT32_MIN) == -1);
        CHECK(kc_offset_index_lookup(o, 1, 10) == 0);
        CHECK(kc_offset_index_lookup(o, 1, 11) == 0);
        CHECK(kc_offset_index_lookup(o, 1, INT32_MAX) == 0);
        CHECK(kc_offset_index_lookup_position(o, 1, 3999) == -1);
        CHECK(kc_offset_index_lookup_position(o, 1, 10) == -1); /* the offset is not the position */
        CHECK(kc_offset_index_lookup_position(o, 1, 4000) == 0);
        CHECK(kc_offset_index_lookup_position(o, 1, 4001) == 0);
        CHECK(kc_offset_index_lookup_position(o, 1, INT32_MAX) == 0);
        free(o);
        const int64_t T = 1700000000000LL;
        uint8_t *t = xmalloc(KC_TIME_INDEX_ENTRY);
        lg_put_time(t, 0, T, 10);
        CHECK(kc_time_index_lookup(t, 1, T - 1) == -1);
        CHECK(kc_time_index_lookup(t, 1, -1) == -1);
        CHECK(kc_time_index_lookup(t, 1, INT64_MIN) == -1);
        CHECK(kc_time_index_lookup(t, 1, 10) == -1);
        CHECK(kc_time_index_lookup(t, 1, T) == 0);
        CHECK(kc_time_index_lookup(t, 1, T + 1) == 0);
        CHECK(kc_time_index_lookup(t, 1, INT64_MAX) == 0);
        free(t);
    }
    /* Many entries with known gaps: offsets 3 + 7i, positions 100 + 4096i + i*i,
     * timestamps T + 1000i (a target just above an entry is still below the next). */
    {
        const size_t n = 1000;
        const int64_t T = 1700000000000LL;
        uint8_t *o = xmalloc(n * KC_OFFSET_INDEX_ENTRY);
        uint8_t *t = xmalloc(n * KC_TIME_INDEX_ENTRY);
        for (size_t i = 0; i < n; i++) {
            lg_put_off(o, i, (int32_t)(3 + 7 * i), (int32_t)(100 + 4096 * i + i * i));
            lg_put_time(t, i, T + 1000 * (int64_t)i, (int32_t)(3 + 7 * i));
        }
        long bad = 0;
        for (size_t i = 0; i < n; i++) {
            int32_t off = (int32_t)(3 + 7 * i), pos = (int32_t)(100 + 4096 * i + i * i);
            int64_t ts = T + 1000 * (int64_t)i;
            long li = (long)i;
            int ok = kc_offset_index_lookup(o, n, off) == li && kc_offset_index_lookup(o, n, off + 1) == li &&
                     kc_offset_index_lookup(o, n, off + 6) == li && kc_offset_index_lookup(o, n, off - 1) == li - 1 &&
                     kc_offset_index_lookup_position(o, n, pos) == li &&
                     kc_offset_index_lookup_position(o, n, pos + 1) == li &&
                     kc_offset_index_lookup_position(o, n, pos - 1) == li - 1 &&
                     kc_time_index_lookup(t, n, ts) == li && kc_time_index_lookup(t, n, ts + 999) == li &&
                     kc_time_index_lookup(t, n, ts - 1) == li - 1;
            if (!ok) bad++;
        }
        CHECKF(bad == 0, "%ld of %zu slots looked up wrongly in the 1000-entry indexes", bad, n);
        CHECK(kc_offset_index_lookup(o, n, 2) == -1);
        CHECK(kc_offset_index_lookup(o, n, INT32_MIN) == -1);
        CHECK(kc_offset_index_lookup(o, n, INT32_MAX) == (long)n - 1);
        CHECK(kc_offset_index_lookup_position(o, n, 99) == -1);
        CHECK(kc_offset_index_lookup_position(o, n, INT32_MAX) == (long)n - 1);
        CHECK(kc_time_index_lookup(t, n, T - 1) == -1);
        CHECK(kc_time_index_lookup(t, n, INT64_MAX) == (long)n - 1);
        /* A prefix of the index is an index of its own. */
        CHECK(kc_offset_index_lookup(o, 10, INT32_MAX) == 9);
        CHECK(kc_offset_index_lookup(o, 2, 3 + 7 * 5) == 1);
        CHECK(kc_time_index_lookup(t, 3, T + 1000 * 500) == 2);
        free(o);
        free(t);
    }
    /* Random sorted indexes (some with repeated keys) against a linear scan. */
    long cases = 0, bad = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = rnd_below(4) == 0 ? rnd_below(4) : rnd_below(600);
        int dup = rnd_below(4) == 0;
        int32_t *offs = xmalloc(n * sizeof(int32_t));
        int32_t *poss = xmalloc(n * sizeof(int32_t));
        int64_t *tss = xmalloc(n * sizeof(int64_t));
        uint8_t *oi = xmalloc(n * KC_OFFSET_INDEX_ENTRY);
        uint8_t *ti = xmalloc(n * KC_TIME_INDEX_ENTRY);
        uint32_t gap = dup ? 3 : 50;
        int64_t o = (int64_t)rnd_below(1u << 20) - (rnd_below(8) == 0 ? (1 << 19) : 0);
        int64_t p = (int64_t)rnd_below(1u << 20) - (rnd_below(8) == 0 ? (1 << 19) : 0);
        if (rnd_below(16) == 0) o = (int64_t)INT32_MAX - (int64_t)n * gap; /* near the top */
        if (rnd_below(16) == 0) p = (int64_t)INT32_MIN + rnd_below(10); /* near the bottom */
        int64_t t = (int64_t)(rnd64() >> 2) - (int64_t)(rnd64() >> 2);
        if (rnd_below(16) == 0) t = INT64_MAX - (int64_t)(n + 1) * ((int64_t)1 << 41);
        if (rnd_below(16) == 0) t = INT64_MIN + 1;
        for (size_t i = 0; i < n; i++) {
            offs[i] = (int32_t)o;
            poss[i] = (int32_t)p;
            tss[i] = t;
            lg_put_off(oi, i, offs[i], poss[i]);
            lg_put_time(ti, i, tss[i], offs[i]);
            o += dup ? rnd_below(gap) : 1 + rnd_below(gap);
            p += dup ? rnd_below(gap) : 1 + rnd_below(gap);
            t += dup ? (int64_t)rnd_below(3) : 1 + (int64_t)(rnd64() >> 24);
        }
        for (int k = 0; k < 12; k++) {
            int32_t to, tp;
            int64_t tt;
            uint32_t kind = rnd_below(5);
            if (n == 0 || kind == 0) {
                to = (int32_t)rnd64();
                tp = (int32_t)rnd64();
                tt = (int64_t)rnd64();
            } else if (kind == 1) {
                size_t j = rnd_below((uint32_t)n);
                to = offs[j];
                tp = poss[j];
                tt = tss[j];
            } else if (kind == 2) {
                size_t j = rnd_below((uint32_t)n);
                int d = rnd_below(2) ? 1 : -1;
                to = lg_clamp32((int64_t)offs[j] + d);
                tp = lg_clamp32((int64_t)poss[j] + d);
                tt = d > 0 ? (tss[j] == INT64_MAX ? tss[j] : tss[j] + 1) : (tss[j] == INT64_MIN ? tss[j] : tss[j] - 1);
            } else if (kind == 3) {
                to = lg_clamp32((int64_t)offs[0] - 5 + (int64_t)rnd_below((uint32_t)(offs[n - 1] - offs[0] + 11)));
                tp = lg_clamp32((int64_t)poss[0] - 5 + (int64_t)rnd_below((uint32_t)(poss[n - 1] - poss[0] + 11)));
                tt = tss[0] + (int64_t)((uint64_t)rnd64() % (uint64_t)(tss[n - 1] - tss[0] + 1));
            } else {
                uint32_t e = rnd_below(2);
                to = e ? INT32_MAX : INT32_MIN;
                tp = e ? INT32_MAX : INT32_MIN;
                tt = e ? INT64_MAX : INT64_MIN;
            }
            long a = kc_offset_index_lookup(oi, n, to), ra = lg_ref_le32(offs, n, to);
            long b = kc_offset_index_lookup_position(oi, n, tp), rb = lg_ref_le32(poss, n, tp);
            long c = kc_time_index_lookup(ti, n, tt), rc = lg_ref_le64(tss, n, tt);
            cases++;
            if (a != ra || b != rb || c != rc) {
                if (bad++ < 10)
                    CHECKF(0, "random index n=%zu dup=%d: offset %ld/%ld position %ld/%ld time %ld/%ld (got/want)", n,
                           dup, a, ra, b, rb, c, rc);
            }
        }
        free(offs);
        free(poss);
        free(tss);
        free(oi);
        free(ti);
    }
    CHECKF(bad == 0, "%ld of %ld random index lookups disagree with a linear scan", bad, cases);
    g_pass += cases - bad; /* each random case counts as a check */
}

static void test_log_index_sane(void) {
    const int64_t T = 1700000000000LL;
    uint8_t o[5 * KC_OFFSET_INDEX_ENTRY], t[5 * KC_TIME_INDEX_ENTRY];
    memset(o, 0, sizeof o);
    memset(t, 0, sizeof t);
    CHECK(kc_offset_index_sane(o, 0, 0) == 1);
    CHECK(kc_offset_index_sane(o, 0, 1000) == 1);
    CHECK(kc_time_index_sane(t, 0) == 1);
    /* A good offset index; the log must extend past the last position. */
    lg_put_off(o, 0, 0, 0);
    lg_put_off(o, 1, 5, 100);
    lg_put_off(o, 2, 9, 250);
    CHECK(kc_offset_index_sane(o, 3, 251) == 1);
    CHECK(kc_offset_index_sane(o, 3, 1 << 30) == 1);
    CHECK(kc_offset_index_sane(o, 3, 250) == 0);
    CHECK(kc_offset_index_sane(o, 3, 0) == 0);
    CHECK(kc_offset_index_sane(o, 2, 101) == 1); /* only the entries asked about count */
    lg_put_off(o, 2, 5, 250); /* repeated offset */
    CHECK(kc_offset_index_sane(o, 3, 1000) == 0);
    lg_put_off(o, 2, 4, 250); /* offset goes back */
    CHECK(kc_offset_index_sane(o, 3, 1000) == 0);
    lg_put_off(o, 2, 9, 100); /* repeated position */
    CHECK(kc_offset_index_sane(o, 3, 1000) == 0);
    lg_put_off(o, 2, 9, 99); /* position goes back */
    CHECK(kc_offset_index_sane(o, 3, 1000) == 0);
    lg_put_off(o, 0, -1, 0); /* a relative offset below the segment base */
    lg_put_off(o, 2, 9, 250);
    CHECK(kc_offset_index_sane(o, 3, 1000) == 0);
    lg_put_off(o, 0, 0, -8); /* a negative position */
    CHECK(kc_offset_index_sane(o, 3, 1000) == 0);
    lg_put_off(o, 0, 0, 0);
    CHECK(kc_offset_index_sane(o, 3, 1000) == 1);
    lg_put_off(o, 0, INT32_MIN, INT32_MIN);
    CHECK(kc_offset_index_sane(o, 1, 1000) == 0);
    lg_put_off(o, 0, INT32_MAX, 5);
    CHECK(kc_offset_index_sane(o, 1, 6) == 1);

    /* A good time index, then breakages. */
    lg_put_time(t, 0, T, 0);
    lg_put_time(t, 1, T + 1, 3);
    lg_put_time(t, 2, T + 500, 7);
    CHECK(kc_time_index_sane(t, 3) == 1);
    lg_put_time(t, 2, T - 1, 7); /* timestamp goes back */
    CHECK(kc_time_index_sane(t, 3) == 0);
    CHECK(kc_time_index_sane(t, 2) == 1);
    lg_put_time(t, 2, T + 1, 7); /* repeated timestamp: Kafka appends only a larger one */
    CHECK(kc_time_index_sane(t, 3) == 0);
    lg_put_time(t, 2, T + 500, 2); /* offset goes back */
    CHECK(kc_time_index_sane(t, 3) == 0);
    lg_put_time(t, 0, T, -1); /* negative relative offset */
    lg_put_time(t, 2, T + 500, 7);
    CHECK(kc_time_index_sane(t, 3) == 0);
    lg_put_time(t, 0, T, 0);
    CHECK(kc_time_index_sane(t, 3) == 1);
    lg_put_time(t, 0, INT64_MIN + 1, 0);
    lg_put_time(t, 1, -1, 3);
    lg_put_time(t, 2, INT64_MAX, 7);
    CHECK(kc_time_index_sane(t, 3) == 1);

    /* Random good indexes, then one entry damaged, against the references. */
    long bad = 0, cases = 0;
    for (int it = 0; it < 2000; it++) {
        size_t n = 1 + rnd_below(40);
        int32_t offs[40], poss[40], toffs[40];
        int64_t tss[40];
        int64_t ov = rnd_below(3) == 0 ? 0 : rnd_below(1000), pv = rnd_below(2) ? 0 : rnd_below(5000);
        int64_t tv = T + (int64_t)rnd_below(1000000), tov = rnd_below(100);
        for (size_t i = 0; i < n; i++) {
            offs[i] = (int32_t)ov;
            poss[i] = (int32_t)pv;
            tss[i] = tv;
            toffs[i] = (int32_t)tov;
            ov += 1 + rnd_below(20);
            pv += 1 + rnd_below(5000);
            tv += 1 + rnd_below(1000);
            tov += rnd_below(3);
        }
        int64_t log_size = (int64_t)poss[n - 1] + 1 + rnd_below(100);
        if (rnd_below(2)) {
            size_t j = rnd_below((uint32_t)n);
            switch (rnd_below(8)) {
            case 0: offs[j] = j ? offs[j - 1] : -1; break;
            case 1: poss[j] = j ? poss[j - 1] - (int32_t)rnd_below(3) : -1; break;
            case 2: offs[j] = (int32_t)rnd64(); break;
            case 3: poss[j] = (int32_t)rnd64(); break;
            case 4: log_size = poss[n - 1] - (int64_t)rnd_below(3); break;
            case 5: tss[j] = j ? tss[j - 1] - (int64_t)rnd_below(3) : tss[j]; break;
            case 6: toffs[j] = j ? toffs[j - 1] - (int32_t)rnd_below(3) : -1; break;
            default: tss[j] = (int64_t)rnd64(); break;
            }
        }
        uint8_t *oi = xmalloc(n * KC_OFFSET_INDEX_ENTRY), *ti = xmalloc(n * KC_TIME_INDEX_ENTRY);
        for (size_t i = 0; i < n; i++) {
            lg_put_off(oi, i, offs[i], poss[i]);
            lg_put_time(ti, i, tss[i], toffs[i]);
        }
        int a = kc_offset_index_sane(oi, n, log_size), ra = lg_ref_off_sane(offs, poss, n, log_size);
        int b = kc_time_index_sane(ti, n), rb = lg_ref_time_sane(tss, toffs, n);
        cases++;
        if (a != ra || b != rb) {
            if (bad++ < 10) CHECKF(0, "random sanity case %d: offset %d/%d time %d/%d (got/want)", it, a, ra, b, rb);
        }
        free(oi);
        free(ti);
    }
    CHECKF(bad == 0, "%ld of %ld random sanity cases disagree with the reference", bad, cases);
    g_pass += cases - bad;
}

/* ---- batches for the log tests ---- */

static uint8_t g_lg_pool[16384];
static void lg_pool_init(void) {
    for (size_t i = 0; i < sizeof g_lg_pool; i++) g_lg_pool[i] = (uint8_t)(i * 31 + 7);
}

typedef struct {
    int n; /* records, 1..64 */
    int64_t base_offset;
    int64_t base_ts, max_ts;
    int16_t attrs;
    int64_t pid;
    int16_t epoch;
    int32_t seq;
    int32_t value_len; /* of each record */
} lg_spec;

static lg_spec lg_default(int n) {
    lg_spec s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.base_ts = 1700000000000LL;
    s.max_ts = s.base_ts + n - 1;
    s.pid = -1;
    s.epoch = -1;
    s.seq = -1;
    s.value_len = 10;
    return s;
}

/* An uncompressed batch (exact size): record i has offset delta i, timestamp delta i, key "key". */
static uint8_t *lg_build(const lg_spec *s, size_t *len) {
    rec_spec recs[64];
    for (int i = 0; i < s->n && i < 64; i++) {
        rec_spec r = {i, i, U8("key"), 3, g_lg_pool + i, s->value_len, NULL, 0};
        recs[i] = r;
    }
    kc_batch_header h;
    memset(&h, 0, sizeof h);
    h.base_offset = s->base_offset;
    h.magic = 2;
    h.attributes = s->attrs;
    h.last_offset_delta = s->n - 1;
    h.base_timestamp = s->base_ts;
    h.max_timestamp = s->max_ts;
    h.producer_id = s->pid;
    h.producer_epoch = s->epoch;
    h.base_sequence = s->seq;
    return build_batch(recs, s->n, &h, len);
}

/* n records with the given offset deltas under last_offset_delta lod; CRC valid. *rec_at gets
 * each record's offset inside the batch (may be NULL). */
static uint8_t *lg_build_deltas(const int32_t *deltas, int n, int32_t lod, size_t *rec_at, size_t *len) {
    rec_spec recs[16];
    size_t at = KC_RECORD_BATCH_OVERHEAD;
    for (int i = 0; i < n; i++) {
        rec_spec r = {i, deltas[i], U8("k"), 1, U8("value"), 5, NULL, 0};
        recs[i] = r;
        if (rec_at) rec_at[i] = at;
        at += spec_size(&r);
    }
    kc_batch_header h = FIVE_HDR;
    h.last_offset_delta = lod;
    return build_batch(recs, n, &h, len);
}

/* A batch with an arbitrary (e.g. compressed) payload, CRC valid. */
static uint8_t *lg_raw_batch(const kc_batch_header *h, const uint8_t *payload, size_t plen, size_t *len) {
    size_t total = KC_RECORD_BATCH_OVERHEAD + plen;
    uint8_t *b = xmalloc(total);
    if (plen) memcpy(b + KC_RECORD_BATCH_OVERHEAD, payload, plen);
    kc_batch_write_header(b, total, h);
    *len = total;
    return b;
}

/* Concatenates (and frees) parts into one exact-size buffer; starts[i] = offset of part i. */
static uint8_t *lg_concat(uint8_t **parts, const size_t *lens, int n, size_t *starts, size_t *out) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += lens[i];
    uint8_t *b = xmalloc(total);
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (starts) starts[i] = pos;
        memcpy(b + pos, parts[i], lens[i]);
        pos += lens[i];
        free(parts[i]);
    }
    *out = total;
    return b;
}

static uint8_t *lg_dup(const uint8_t *p, size_t n) {
    uint8_t *d = xmalloc(n);
    if (n) memcpy(d, p, n);
    return d;
}

/* Several lg_spec batches concatenated. */
static uint8_t *lg_build_many(const lg_spec *specs, int n, size_t *starts, size_t *out) {
    uint8_t *parts[16];
    size_t lens[16];
    for (int i = 0; i < n; i++) parts[i] = lg_build(&specs[i], &lens[i]);
    return lg_concat(parts, lens, n, starts, out);
}

static void test_log_validate(void) {
    const int64_t T = 1700000000000LL;
    const int64_t MAXB = 1 << 20;
    kc_append_info info;
    int st;
    /* One batch. */
    {
        lg_spec s = lg_default(5);
        s.pid = 77;
        s.epoch = 3;
        s.seq = 10;
        s.base_ts = T;
        s.max_ts = T + 4;
        size_t len;
        uint8_t *b = lg_build(&s, &len);
        st = kc_log_validate(b, len, MAXB, 0, &info);
        CHECKF(st == KC_OK, "status %d (%s)", st, info.err ? info.err : "");
        CHECK(info.batches == 1);
        CHECK(info.records == 5);
        CHECK(info.bytes == (int64_t)len);
        CHECK(info.max_timestamp == T + 4);
        CHECK(info.max_timestamp_delta == 4);
        CHECK(info.producer_id == 77);
        CHECK(info.producer_epoch == 3);
        CHECK(info.base_sequence == 10);
        CHECK(info.last_sequence == 14);
        CHECK(info.attributes == 0);
        CHECK(info.is_transactional == 0);
        CHECK(info.has_control == 0);
        CHECK(info.err == NULL);
        /* max_batch_bytes counts the whole batch, log overhead included. */
        CHECK(kc_log_validate(b, len, (int64_t)len, 0, &info) == KC_OK);
        st = kc_log_validate(b, len, (int64_t)len - 1, 0, &info);
        CHECK(st == KC_TOO_LARGE && info.err_at == 0 && info.err != NULL);
        CHECK(kc_log_validate(b, len, 0, 0, &info) == KC_TOO_LARGE);
        free(b);
    }
    /* The shared five-record batch: headers, null keys and values, odd timestamp deltas. */
    {
        size_t len;
        uint8_t *b = build_batch(FIVE, 5, &FIVE_HDR, &len);
        st = kc_log_validate(b, len, MAXB, 0, &info);
        CHECKF(st == KC_OK, "FIVE: status %d (%s)", st, info.err ? info.err : "");
        CHECK(info.records == 5 && info.batches == 1);
        CHECK(info.max_timestamp == FIVE_HDR.max_timestamp && info.max_timestamp_delta == 4);
        CHECK(info.producer_id == 42 && info.producer_epoch == 3);
        CHECK(info.base_sequence == 100 && info.last_sequence == 104);
        free(b);
    }
    /* Several batches: counts 3, 1, 4; where the largest maxTimestamp sits decides its delta. */
    {
        static const int64_t maxes[4][3] = {
            {2, 50, 10},   /* in the middle batch: last offset 3 */
            {2, 10, 50},   /* in the last: 3 + 1 + 3 */
            {9, 9, 5},     /* a tie keeps the first batch holding it */
            {-1, -1, -1}}; /* no timestamps at all */
        static const int64_t want_delta[4] = {3, 7, 2, 0};
        static const int64_t want_max[4] = {50, 50, 9, -1};
        for (int v = 0; v < 4; v++) {
            lg_spec s[3];
            const int counts[3] = {3, 1, 4};
            for (int i = 0; i < 3; i++) {
                s[i] = lg_default(counts[i]);
                s[i].max_ts = maxes[v][i] < 0 ? -1 : T + maxes[v][i];
                s[i].base_ts = s[i].max_ts;
                s[i].pid = 1000;
                s[i].epoch = 2;
            }
            s[0].seq = 0;
            s[1].seq = 3;
            s[2].seq = 4;
            size_t len, starts[3];
            uint8_t *b = lg_build_many(s, 3, starts, &len);
            st = kc_log_validate(b, len, MAXB, 0, &info);
            CHECKF(st == KC_OK, "variant %d: status %d (%s)", v, st, info.err ? info.err : "");
            CHECK(info.batches == 3);
            CHECK(info.records == 8);
            CHECK(info.bytes == (int64_t)len);
            CHECKF(info.max_timestamp == (want_max[v] < 0 ? -1 : T + want_max[v]), "variant %d: max ts %lld", v,
                   (long long)info.max_timestamp);
            CHECKF(info.max_timestamp_delta == want_delta[v], "variant %d: delta %lld", v,
                   (long long)info.max_timestamp_delta);
            CHECK(info.producer_id == 1000 && info.producer_epoch == 2);
            CHECK(info.base_sequence == 0 && info.last_sequence == 7);
            CHECK(info.attributes == 0 && !info.is_transactional && !info.has_control);
            free(b);
        }
    }
    /* Sequences: wrap past INT32_MAX, and -1 (no idempotence) stays -1. */
    {
        static const struct {
            int32_t seq;
            int n;
            int32_t want;
        } seqs[] = {{INT32_MAX - 1, 4, 1}, {INT32_MAX, 1, INT32_MAX}, {INT32_MAX, 2, 0}, {-1, 5, -1}, {0, 64, 63}};
        for (size_t i = 0; i < sizeof seqs / sizeof seqs[0]; i++) {
            lg_spec s = lg_default(seqs[i].n);
            s.pid = 5;
            s.epoch = 0;
            s.seq = seqs[i].seq;
            s.value_len = 1;
            size_t len;
            uint8_t *b = lg_build(&s, &len);
            st = kc_log_validate(b, len, MAXB, 0, &info);
            CHECKF(st == KC_OK && info.base_sequence == seqs[i].seq && info.last_sequence == seqs[i].want,
                   "sequence %d + %d: status %d, last %d, want %d", (int)seqs[i].seq, seqs[i].n - 1, st,
                   (int)info.last_sequence, (int)seqs[i].want);
            free(b);
        }
    }
    /* Transactional second batch: the flag is seen, attributes are the first batch's. */
    {
        lg_spec s[2] = {lg_default(2), lg_default(2)};
        s[1].attrs = KC_ATTR_TRANSACTIONAL;
        size_t len;
        uint8_t *b = lg_build_many(s, 2, NULL, &len);
        st = kc_log_validate(b, len, MAXB, 0, &info);
        CHECK(st == KC_OK && info.is_transactional == 1 && info.attributes == 0 && info.has_control == 0);
        free(b);
    }
    /* Failures in a three-batch buffer; err_at names the failing batch. */
    lg_spec s3[3] = {lg_default(3), lg_default(2), lg_default(4)};
    s3[1].value_len = 200; /* the biggest batch */
    size_t len3, st3[3];
    uint8_t *base3 = lg_build_many(s3, 3, st3, &len3);
    size_t sz3[3] = {st3[1] - st3[0], st3[2] - st3[1], len3 - st3[2]};
    CHECK(kc_log_validate(base3, len3, MAXB, 0, &info) == KC_OK && info.batches == 3 && info.records == 9);
    {
        /* CRC: a flipped record byte, a flipped CRC byte, a flipped attributes byte. */
        static const struct {
            int batch;
            size_t at;
        } flips[] = {{1, KC_RECORD_BATCH_OVERHEAD + 2}, {2, KC_CRC_OFFSET + 3}, {0, KC_ATTRIBUTES_OFFSET + 1},
                     {2, KC_MAX_TIMESTAMP_OFFSET}, {1, KC_RECORDS_COUNT_OFFSET + 3}};
        for (size_t i = 0; i < sizeof flips / sizeof flips[0]; i++) {
            uint8_t *b = lg_dup(base3, len3);
            b[st3[flips[i].batch] + flips[i].at] ^= 0x10;
            st = kc_log_validate(b, len3, MAXB, 0, &info);
            CHECKF(st == KC_CORRUPT && info.err_at == st3[flips[i].batch] && info.err != NULL,
                   "crc flip %zu: status %d err_at %zu", i, st, info.err_at);
            free(b);
        }
        /* The base offset and leader epoch are outside the CRC. */
        uint8_t *b = lg_dup(base3, len3);
        kc_put_be64(b + st3[1], 123456789);
        kc_put_be32(b + st3[1] + KC_PARTITION_LEADER_EPOCH_OFFSET, 77);
        CHECK(kc_log_validate(b, len3, MAXB, 0, &info) == KC_OK);
        free(b);
    }
    {
        /* Magic other than 2 in any batch (the CRC does not cover it). */
        static const uint8_t magics[] = {0, 1, 3, 0xFF};
        for (int batch = 0; batch < 3; batch++) {
            for (size_t m = 0; m < sizeof magics; m++) {
                uint8_t *b = lg_dup(base3, len3);
                b[st3[batch] + KC_MAGIC_OFFSET] = magics[m];
                st = kc_log_validate(b, len3, MAXB, 0, &info);
                CHECKF(st == KC_CORRUPT && info.err_at == st3[batch], "magic %d in batch %d: status %d err_at %zu",
                       magics[m], batch, st, info.err_at);
                free(b);
            }
        }
        /* A batch length below the v2 minimum. */
        uint8_t *b = lg_dup(base3, len3);
        kc_put_be32(b + st3[2] + KC_LENGTH_OFFSET, KC_RECORD_BATCH_OVERHEAD - KC_LOG_OVERHEAD - 1);
        st = kc_log_validate(b, len3, MAXB, 0, &info);
        CHECK(st == KC_CORRUPT && info.err_at == st3[2]);
        kc_put_be32(b + st3[2] + KC_LENGTH_OFFSET, -1);
        st = kc_log_validate(b, len3, MAXB, 0, &info);
        CHECK(st == KC_CORRUPT && info.err_at == st3[2]);
        free(b);
    }
    {
        /* Too large: the middle batch only, or the first already. */
        st = kc_log_validate(base3, len3, (int64_t)sz3[1] - 1, 0, &info);
        CHECK(sz3[0] <= sz3[1] - 1 && sz3[2] <= sz3[1] - 1);
        CHECKF(st == KC_TOO_LARGE && info.err_at == st3[1], "too large: status %d err_at %zu", st, info.err_at);
        CHECK(kc_log_validate(base3, len3, (int64_t)sz3[1], 0, &info) == KC_OK);
        st = kc_log_validate(base3, len3, KC_RECORD_BATCH_OVERHEAD, 0, &info);
        CHECK(st == KC_TOO_LARGE && info.err_at == 0);
    }
    {
        /* Every truncation of the first two batches: only the cut at the boundary is whole. */
        size_t two = st3[2];
        long bad = 0;
        for (size_t k = 1; k < two; k++) {
            uint8_t *b = lg_dup(base3, k);
            st = kc_log_validate(b, k, MAXB, 0, &info);
            int ok;
            if (k == st3[1])
                ok = st == KC_OK && info.batches == 1 && info.records == 3 && info.bytes == (int64_t)k;
            else
                ok = st == KC_CORRUPT && info.err_at == (k < st3[1] ? 0 : st3[1]) && info.err != NULL;
            if (!ok && bad++ < 5) CHECKF(ok, "truncated to %zu: status %d err_at %zu", k, st, info.err_at);
            free(b);
        }
        CHECKF(bad == 0, "%ld truncations misjudged", bad);
    }
    {
        /* Empty input and short garbage. */
        uint8_t *e = xmalloc(0);
        st = kc_log_validate(e, 0, MAXB, 1, &info);
        CHECK(st == KC_INVALID && info.batches == 0 && info.records == 0 && info.err != NULL);
        free(e);
        uint8_t *g = lg_dup(base3, 5);
        st = kc_log_validate(g, 5, MAXB, 0, &info);
        CHECK(st == KC_CORRUPT && info.err_at == 0);
        free(g);
    }
    {
        /* Record count against the offset range (header checks: err_at is the batch start, not a
         * record inside it). In the middle batch (2 records: count 2, last offset delta 1). */
        static const struct {
            int32_t count, lod;
        } bad[] = {{1, 1}, {3, 1}, {2, 2}, {2, 0}, {0, -1}, {0, 0}, {-1, -2}, {INT32_MAX, 1}};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            uint8_t *b = lg_dup(base3, len3);
            kc_put_be32(b + st3[1] + KC_RECORDS_COUNT_OFFSET, bad[i].count);
            kc_put_be32(b + st3[1] + KC_LAST_OFFSET_DELTA_OFFSET, bad[i].lod);
            fix_crc(b + st3[1], sz3[1]);
            st = kc_log_validate(b, len3, MAXB, 0, &info);
            CHECKF(st == KC_INVALID && info.err_at == st3[1] && info.err != NULL,
                   "count %d lod %d: status %d err_at %zu", (int)bad[i].count, (int)bad[i].lod, st, info.err_at);
            free(b);
        }
    }
    {
        /* Record offset deltas must be 0..n-1 (count and range consistent, CRC valid). The bad
         * batch is second, behind a valid one; err_at is the failing record. */
        static const struct {
            int n;
            int32_t deltas[5];
            int bad_rec; /* -1: valid */
        } cases[] = {{5, {0, 1, 2, 3, 4}, -1}, {3, {0, 1, 3}, 2},  {3, {0, 0, 1}, 1}, {3, {1, 2, 3}, 0},
                     {3, {0, 2, 1}, 1},        {1, {-1}, 0},       {2, {0, 1}, -1},  {4, {0, 1, 2, 2}, 3}};
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            size_t rec_at[5], blen, flen;
            uint8_t *parts[2];
            size_t lens[2], starts[2];
            lg_spec first = lg_default(2);
            parts[0] = lg_build(&first, &flen);
            lens[0] = flen;
            parts[1] = lg_build_deltas(cases[i].deltas, cases[i].n, cases[i].n - 1, rec_at, &blen);
            lens[1] = blen;
            size_t len;
            uint8_t *b = lg_concat(parts, lens, 2, starts, &len);
            st = kc_log_validate(b, len, MAXB, 0, &info);
            if (cases[i].bad_rec < 0)
                CHECKF(st == KC_OK && info.records == 2 + cases[i].n, "delta case %zu: status %d", i, st);
            else
                CHECKF(st == KC_INVALID && info.err_at == starts[1] + rec_at[cases[i].bad_rec] && info.err != NULL,
                       "delta case %zu: status %d err_at %zu want %zu", i, st, info.err_at,
                       starts[1] + rec_at[cases[i].bad_rec]);
            free(b);
        }
    }
    {
        /* Fewer records than the count says: 3 records under count 4. */
        static const int32_t d3[3] = {0, 1, 2};
        size_t rec_at[3], len;
        uint8_t *b = lg_build_deltas(d3, 3, 2, rec_at, &len);
        kc_put_be32(b + KC_RECORDS_COUNT_OFFSET, 4);
        kc_put_be32(b + KC_LAST_OFFSET_DELTA_OFFSET, 3);
        fix_crc(b, len);
        st = kc_log_validate(b, len, MAXB, 0, &info);
        CHECKF(st == KC_INVALID && info.err_at == len, "missing record: status %d err_at %zu", st, info.err_at);
        /* Bytes left after the last record (length and CRC follow). */
        uint8_t *b2 = xmalloc(len + 2);
        memcpy(b2, b, len);
        b2[len] = 0x02;
        b2[len + 1] = 0x00;
        kc_put_be32(b2 + KC_RECORDS_COUNT_OFFSET, 3);
        kc_put_be32(b2 + KC_LAST_OFFSET_DELTA_OFFSET, 2);
        kc_put_be32(b2 + KC_LENGTH_OFFSET, (int32_t)(len + 2 - KC_LOG_OVERHEAD));
        fix_crc(b2, len + 2);
        st = kc_log_validate(b2, len + 2, MAXB, 0, &info);
        CHECKF(st == KC_INVALID && info.err_at == len, "trailing bytes: status %d err_at %zu", st, info.err_at);
        /* A record whose length runs past the batch (CRC valid): the record parse fails. */
        memcpy(b2, b, len);
        kc_put_be32(b2 + KC_RECORDS_COUNT_OFFSET, 3);
        kc_put_be32(b2 + KC_LAST_OFFSET_DELTA_OFFSET, 2);
        b2[rec_at[1]] = 0x7E; /* zigzag 63: longer than what is left */
        fix_crc(b2, len);
        st = kc_log_validate(b2, len, MAXB, 0, &info);
        CHECKF(st == KC_INVALID && info.err_at == rec_at[1] && info.err != NULL, "bad record: status %d err_at %zu",
               st, info.err_at);
        free(b2);
        free(b);
    }
    {
        /* Control batches: refused unless allowed. */
        lg_spec s[2] = {lg_default(1), lg_default(1)};
        s[1].attrs = KC_ATTR_CONTROL | KC_ATTR_TRANSACTIONAL;
        size_t len, starts[2];
        uint8_t *b = lg_build_many(s, 2, starts, &len);
        st = kc_log_validate(b, len, MAXB, 0, &info);
        CHECK(st == KC_INVALID && info.err_at == starts[1] && info.err != NULL);
        st = kc_log_validate(b, len, MAXB, 1, &info);
        CHECK(st == KC_OK && info.has_control == 1 && info.is_transactional == 1 && info.batches == 2);
        CHECK(info.attributes == 0);
        free(b);
        lg_spec c = lg_default(1);
        c.attrs = KC_ATTR_CONTROL;
        b = lg_build(&c, &len);
        st = kc_log_validate(b, len, MAXB, 0, &info);
        CHECK(st == KC_INVALID && info.err_at == 0);
        st = kc_log_validate(b, len, MAXB, 1, &info);
        CHECK(st == KC_OK && info.has_control == 1 && info.attributes == KC_ATTR_CONTROL);
        free(b);
    }
    {
        /* Compressed batches are not record-checked: any payload with a valid CRC passes, the
         * same payload uncompressed does not. */
        uint8_t payload[40];
        rnd_fill(payload, sizeof payload);
        payload[0] = 0x01; /* record length varint -1: never a record */
        kc_batch_header h = FIVE_HDR;
        h.last_offset_delta = 2;
        h.records_count = 3;
        for (int codec = 0; codec <= 4; codec++) {
            h.attributes = (int16_t)codec;
            size_t len;
            uint8_t *b = lg_raw_batch(&h, payload, sizeof payload, &len);
            st = kc_log_validate(b, len, MAXB, 0, &info);
            if (codec == 0)
                CHECKF(st == KC_INVALID && info.err_at == KC_RECORD_BATCH_OVERHEAD, "uncompressed garbage: %d", st);
            else
                CHECKF(st == KC_OK && info.records == 3 && info.attributes == codec, "codec %d: status %d (%s)",
                       codec, st, info.err ? info.err : "");
            free(b);
        }
        /* Codec ids Kafka does not define (5-7) are corrupt, whatever the payload. */
        for (int codec = 5; codec <= 7; codec++) {
            h.attributes = (int16_t)codec;
            size_t len;
            uint8_t *b = lg_raw_batch(&h, payload, sizeof payload, &len);
            st = kc_log_validate(b, len, MAXB, 0, &info);
            CHECKF(st == KC_CORRUPT && info.err_at == 0, "codec %d: status %d", codec, st);
            free(b);
        }
        /* Empty compressed payload, and a compressed batch with an inconsistent count. */
        h.attributes = 3;
        size_t len;
        uint8_t *b = lg_raw_batch(&h, payload, 0, &len);
        CHECK(kc_log_validate(b, len, MAXB, 0, &info) == KC_OK);
        free(b);
        h.records_count = 4;
        b = lg_raw_batch(&h, payload, sizeof payload, &len);
        CHECK(kc_log_validate(b, len, MAXB, 0, &info) == KC_INVALID && info.err_at == 0);
        free(b);
    }
    free(base3);
}

static void test_log_assign(void) {
    const int64_t T = 1700000000000LL;
    lg_spec s[3] = {lg_default(3), lg_default(1), lg_default(4)};
    s[1].attrs = KC_ATTR_TRANSACTIONAL;
    s[1].value_len = 100;
    s[2].base_ts = T - 5;
    s[2].max_ts = T + 1000;
    for (int i = 0; i < 3; i++) s[i].base_offset = 999999; /* whatever the client sent */
    size_t len, starts[3];
    uint8_t *orig = lg_build_many(s, 3, starts, &len);
    size_t sizes[3] = {starts[1], starts[2] - starts[1], len - starts[2]};
    const int64_t want_base[3] = {1000, 1003, 1004};
    const int counts[3] = {3, 1, 4};

    /* CreateTime: only base offsets and the leader epoch change; the CRC stays and is valid. */
    {
        uint8_t *b = lg_dup(orig, len);
        int64_t next = kc_log_assign_offsets(b, len, 1000, 9, -1);
        CHECKF(next == 1008, "next offset %lld", (long long)next);
        for (int i = 0; i < 3; i++) {
            const uint8_t *p = b + starts[i], *q = orig + starts[i];
            CHECK(kc_be64(p + KC_BASE_OFFSET_OFFSET) == want_base[i]);
            CHECK(kc_be32(p + KC_PARTITION_LEADER_EPOCH_OFFSET) == 9);
            CHECK(memcmp(p + KC_LENGTH_OFFSET, q + KC_LENGTH_OFFSET, 4) == 0);
            CHECK(memcmp(p + KC_MAGIC_OFFSET, q + KC_MAGIC_OFFSET, sizes[i] - KC_MAGIC_OFFSET) == 0);
            CHECK((uint32_t)kc_be32(p + KC_CRC_OFFSET) ==
                  ref_crc32c(0, p + KC_ATTRIBUTES_OFFSET, sizes[i] - KC_ATTRIBUTES_OFFSET));
            kc_batch_header h;
            size_t t;
            const char *err = NULL;
            CHECK(kc_batch_frame(p, sizes[i], &h, &t, &err) == KC_OK && t == sizes[i] && kc_batch_crc_ok(p, t, &h));
            CHECK(h.base_offset + h.last_offset_delta == want_base[i] + counts[i] - 1);
        }
        kc_append_info info;
        CHECK(kc_log_validate(b, len, 1 << 20, 0, &info) == KC_OK && info.records == 8);
        free(b);
    }
    /* LogAppendTime (including time 0): timestamp-type bit, maxTimestamp, a recomputed CRC. */
    static const int64_t lats[] = {1234567890123LL, 0, INT64_MAX};
    for (size_t li = 0; li < sizeof lats / sizeof lats[0]; li++) {
        int64_t lat = lats[li];
        uint8_t *b = lg_dup(orig, len);
        int64_t next = kc_log_assign_offsets(b, len, 0, 0, lat);
        CHECK(next == 8);
        for (int i = 0; i < 3; i++) {
            const uint8_t *p = b + starts[i], *q = orig + starts[i];
            CHECK(kc_be64(p) == want_base[i] - 1000);
            CHECK(kc_be32(p + KC_PARTITION_LEADER_EPOCH_OFFSET) == 0);
            CHECK(kc_be16(p + KC_ATTRIBUTES_OFFSET) == (int16_t)(kc_be16(q + KC_ATTRIBUTES_OFFSET) | 0x08));
            CHECK(kc_be64(p + KC_MAX_TIMESTAMP_OFFSET) == lat);
            CHECK(kc_be64(p + KC_BASE_TIMESTAMP_OFFSET) == kc_be64(q + KC_BASE_TIMESTAMP_OFFSET));
            CHECK(memcmp(p + KC_LAST_OFFSET_DELTA_OFFSET, q + KC_LAST_OFFSET_DELTA_OFFSET,
                         KC_MAX_TIMESTAMP_OFFSET - KC_LAST_OFFSET_DELTA_OFFSET) == 0);
            CHECK(memcmp(p + KC_PRODUCER_ID_OFFSET, q + KC_PRODUCER_ID_OFFSET, sizes[i] - KC_PRODUCER_ID_OFFSET) == 0);
            uint32_t want_crc = ref_crc32c(0, p + KC_ATTRIBUTES_OFFSET, sizes[i] - KC_ATTRIBUTES_OFFSET);
            CHECKF((uint32_t)kc_be32(p + KC_CRC_OFFSET) == want_crc, "lat %lld batch %d: crc %08X want %08X",
                   (long long)lat, i, (unsigned)kc_be32(p + KC_CRC_OFFSET), (unsigned)want_crc);
            CHECK(want_crc != (uint32_t)kc_be32(q + KC_CRC_OFFSET));
            kc_batch_header h;
            size_t t;
            const char *err = NULL;
            CHECK(kc_batch_frame(p, sizes[i], &h, &t, &err) == KC_OK && kc_batch_crc_ok(p, t, &h));
            CHECK(h.attributes & KC_ATTR_TIMESTAMP_TYPE);
        }
        kc_append_info info;
        int st = kc_log_validate(b, len, 1 << 20, 0, &info);
        CHECK(st == KC_OK && info.max_timestamp == lat && info.is_transactional == 1);
        /* Stamping again is idempotent for everything the CRC covers. */
        uint8_t *b2 = lg_dup(b, len);
        CHECK(kc_log_assign_offsets(b2, len, 0, 0, lat) == 8);
        CHECK(memcmp(b, b2, len) == 0);
        free(b2);
        free(b);
    }
    /* Empty input; a trailing partial batch is left alone; large offsets. */
    {
        uint8_t *e = xmalloc(0);
        CHECK(kc_log_assign_offsets(e, 0, 77, 1, -1) == 77);
        CHECK(kc_log_assign_offsets(e, 0, 77, 1, 5) == 77);
        free(e);
        size_t plen = starts[2] + 30;
        uint8_t *b = lg_dup(orig, plen);
        CHECK(kc_log_assign_offsets(b, plen, 1000, 4, 99) == 1004);
        CHECK(memcmp(b + starts[2], orig + starts[2], 30) == 0);
        CHECK(kc_be64(b + starts[1]) == 1003 && kc_be64(b + starts[1] + KC_MAX_TIMESTAMP_OFFSET) == 99);
        free(b);
        b = lg_dup(orig, len);
        const int64_t big = (int64_t)1 << 40;
        CHECK(kc_log_assign_offsets(b, len, big, INT32_MAX, -1) == big + 8);
        CHECK(kc_be64(b + starts[2]) == big + 4 && kc_be32(b + starts[2] + KC_PARTITION_LEADER_EPOCH_OFFSET) == INT32_MAX);
        free(b);
    }
    free(orig);
}

/* ---- segment scan ---- */

typedef struct {
    int64_t pos, size, base, last, max_ts;
} lg_binfo;

/* nb batches from seg_base on (with occasional offset gaps), sizes from ~70 bytes to ~12 KB,
 * maxTimestamps that mostly grow but sometimes fall back or are absent. big_at: index of one
 * batch made large (9000-byte value), or -1. */
static uint8_t *lg_make_log(int nb, int64_t seg_base, int big_at, lg_binfo *bi, size_t *len) {
    uint8_t **parts = xmalloc((size_t)nb * sizeof(uint8_t *));
    size_t *lens = xmalloc((size_t)nb * sizeof(size_t));
    int64_t next = seg_base, ts = 1700000000000LL, pos = 0;
    for (int i = 0; i < nb; i++) {
        lg_spec s = lg_default(1 + (int)rnd_below(8));
        s.value_len = rnd_below(5) == 0 ? (int32_t)rnd_below(1500) : (int32_t)rnd_below(60);
        if (i == big_at) {
            s.n = 1;
            s.value_len = 9000;
        }
        s.base_offset = next + (rnd_below(6) == 0 ? (int64_t)rnd_below(5) : 0);
        uint32_t r = rnd_below(8);
        if (r == 0)
            s.max_ts = KC_NO_TIMESTAMP;
        else if (r == 1)
            s.max_ts = ts - (int64_t)rnd_below(5000);
        else
            s.max_ts = ts += rnd_below(3000);
        s.base_ts = s.max_ts;
        parts[i] = lg_build(&s, &lens[i]);
        bi[i].pos = pos;
        bi[i].size = (int64_t)lens[i];
        bi[i].base = s.base_offset;
        bi[i].last = s.base_offset + s.n - 1;
        bi[i].max_ts = s.max_ts;
        pos += (int64_t)lens[i];
        next = bi[i].last + 1;
    }
    uint8_t *log = lg_concat(parts, lens, nb, NULL, len);
    free(parts);
    free(lens);
    return log;
}

typedef struct {
    uint8_t *off, *time;
    size_t off_n, time_n;
    int64_t max_ts, max_off, last_time_ts, last_index_pos;
    int *indexed, *time_indexed; /* per batch */
    size_t *off_before, *time_before; /* entries written before batch i */
} lg_ref;

/* Kafka's LogSegment rule, from what the batches were built with. */
static void lg_ref_scan(const lg_binfo *bi, int nb, int64_t seg_base, int64_t interval, lg_ref *r) {
    size_t n = (size_t)nb;
    r->off = xmalloc(n * KC_OFFSET_INDEX_ENTRY);
    r->time = xmalloc(n * KC_TIME_INDEX_ENTRY);
    r->indexed = xmalloc(n * sizeof(int));
    r->time_indexed = xmalloc(n * sizeof(int));
    r->off_before = xmalloc(n * sizeof(size_t));
    r->time_before = xmalloc(n * sizeof(size_t));
    r->off_n = r->time_n = 0;
    r->max_ts = KC_NO_TIMESTAMP;
    r->max_off = -1;
    r->last_time_ts = KC_NO_TIMESTAMP;
    r->last_index_pos = 0;
    for (int i = 0; i < nb; i++) {
        r->off_before[i] = r->off_n;
        r->time_before[i] = r->time_n;
        r->indexed[i] = r->time_indexed[i] = 0;
        if (bi[i].max_ts > r->max_ts) {
            r->max_ts = bi[i].max_ts;
            r->max_off = bi[i].last;
        }
        if (bi[i].pos - r->last_index_pos > interval) {
            lg_put_off(r->off, r->off_n++, (int32_t)(bi[i].last - seg_base), (int32_t)bi[i].pos);
            r->indexed[i] = 1;
            if (r->max_ts > r->last_time_ts) {
                lg_put_time(r->time, r->time_n++, r->max_ts, (int32_t)(r->max_off - seg_base));
                r->last_time_ts = r->max_ts;
                r->time_indexed[i] = 1;
            }
            r->last_index_pos = bi[i].pos;
        }
    }
}
static void lg_ref_free(lg_ref *r) {
    free(r->off);
    free(r->time);
    free(r->indexed);
    free(r->time_indexed);
    free(r->off_before);
    free(r->time_before);
}

static void lg_scan_init(kc_scan *s, int64_t base, int64_t interval, int check_crc, size_t off_cap, size_t time_cap) {
    memset(s, 0, sizeof *s);
    s->base_offset = base;
    s->index_interval = interval;
    s->check_crc = check_crc;
    s->position = 0;
    s->last_index_position = 0;
    s->next_offset = base;
    s->max_timestamp = KC_NO_TIMESTAMP;
    s->offset_of_max_timestamp = -1;
    s->last_time_index_timestamp = KC_NO_TIMESTAMP;
    s->batches = 0;
    s->offset_entries = xmalloc(off_cap * KC_OFFSET_INDEX_ENTRY);
    s->offset_capacity = off_cap;
    s->time_entries = xmalloc(time_cap * KC_TIME_INDEX_ENTRY);
    s->time_capacity = time_cap;
}
static void lg_scan_free(kc_scan *s) {
    free(s->offset_entries);
    free(s->time_entries);
}
/* Replaces an output buffer by a bigger exact-size one, keeping its entries. */
static void lg_grow(uint8_t **buf, size_t *cap, size_t count, size_t entry, size_t new_cap) {
    uint8_t *n = xmalloc(new_cap * entry);
    if (count) memcpy(n, *buf, count * entry);
    free(*buf);
    *buf = n;
    *cap = new_cap;
}

/* Whole-log state after a scan of the first nb batches, against the reference. */
static int lg_scan_matches(const kc_scan *s, const lg_ref *r, const lg_binfo *bi, int nb, const char *what) {
    int64_t end = nb ? bi[nb - 1].pos + bi[nb - 1].size : 0;
    int ok = s->offset_count == r->off_n && s->time_count == r->time_n &&
             (r->off_n == 0 || memcmp(s->offset_entries, r->off, r->off_n * KC_OFFSET_INDEX_ENTRY) == 0) &&
             (r->time_n == 0 || memcmp(s->time_entries, r->time, r->time_n * KC_TIME_INDEX_ENTRY) == 0) &&
             s->position == end && s->batches == nb && s->max_timestamp == r->max_ts &&
             s->offset_of_max_timestamp == r->max_off && s->last_time_index_timestamp == r->last_time_ts &&
             s->last_index_position == r->last_index_pos;
    CHECKF(ok,
           "%s: entries %zu/%zu time %zu/%zu position %lld/%lld batches %lld/%d max ts %lld/%lld last time ts "
           "%lld/%lld (got/want)",
           what, s->offset_count, r->off_n, s->time_count, r->time_n, (long long)s->position, (long long)end,
           (long long)s->batches, nb, (long long)s->max_timestamp, (long long)r->max_ts,
           (long long)s->last_time_index_timestamp, (long long)r->last_time_ts);
    return ok;
}

static void test_log_scan(void) {
    const int64_t seg_base = 5000;
    static const int64_t intervals[] = {-1, 0, 1, 60, 300, 1000, 4096, 100000, INT64_MAX};
    for (int round = 0; round < 6; round++) {
        int nb = 10 + (int)rnd_below(50);
        lg_binfo *bi = xmalloc((size_t)nb * sizeof(lg_binfo));
        size_t len;
        uint8_t *log = lg_make_log(nb, seg_base, round % 2 ? (int)rnd_below((uint32_t)nb) : -1, bi, &len);
        for (size_t iv = 0; iv < sizeof intervals / sizeof intervals[0]; iv++) {
            int64_t interval = intervals[iv];
            lg_ref ref;
            lg_ref_scan(bi, nb, seg_base, interval, &ref);
            if (round == 0 && interval == 0) CHECK(ref.off_n == (size_t)nb - 1); /* every batch but the first */
            if (round == 0 && interval == -1) CHECK(ref.off_n == (size_t)nb);
            if (interval == INT64_MAX) CHECK(ref.off_n == 0 && ref.time_n == 0);
            /* One pass. */
            kc_scan s;
            size_t consumed = 12345;
            lg_scan_init(&s, seg_base, interval, 1, (size_t)nb, (size_t)nb);
            int st = kc_log_scan(&s, log, len, &consumed);
            CHECKF(st == KC_OK && consumed == len && s.err == NULL, "one pass: status %d consumed %zu of %zu (%s)", st,
                   consumed, len, s.err ? s.err : "");
            lg_scan_matches(&s, &ref, bi, nb, "one pass");
            CHECK(s.next_offset == bi[nb - 1].last + 1);
            /* What it wrote is a sane index, and lookups in it agree with the batches. */
            CHECK(kc_offset_index_sane(s.offset_entries, s.offset_count, (int64_t)len) == 1);
            CHECK(kc_time_index_sane(s.time_entries, s.time_count) == 1);
            lg_scan_free(&s);

            /* Chunked: the file arrives in pieces; each call sees it from s.position to what has
             * arrived so far, in an exact-size copy. */
            for (int rep = 0; rep < 3; rep++) {
                lg_scan_init(&s, seg_base, interval, 1, (size_t)nb, (size_t)nb);
                size_t avail = 0;
                int ok = 1, calls = 0, truncs = 0;
                while ((size_t)s.position < len && ok) {
                    size_t step = rep == 0 ? 1 + rnd_below(16) : rep == 1 ? 1 + rnd_below(700) : 1 + rnd_below(5000);
                    avail = avail + step > len ? len : avail + step;
                    size_t from = (size_t)s.position;
                    uint8_t *chunk = lg_dup(log + from, avail - from);
                    consumed = 777;
                    st = kc_log_scan(&s, chunk, avail - from, &consumed);
                    free(chunk);
                    calls++;
                    /* The batches wholly inside [from, avail). */
                    int64_t want_end = (int64_t)from;
                    for (int i = 0; i < nb; i++)
                        if (bi[i].pos >= (int64_t)from && bi[i].pos + bi[i].size <= (int64_t)avail)
                            want_end = bi[i].pos + bi[i].size;
                    int want_st = want_end == (int64_t)avail ? KC_OK : KC_TRUNCATED;
                    if (want_st == KC_TRUNCATED) truncs++;
                    if (st != want_st || consumed != (size_t)(want_end - (int64_t)from) || s.position != want_end) {
                        CHECKF(0, "chunked (interval %lld): status %d/%d consumed %zu/%lld at %zu..%zu",
                               (long long)interval, st, want_st, consumed, (long long)(want_end - (int64_t)from), from,
                               avail);
                        ok = 0;
                    }
                }
                CHECK(ok);
                if (ok) lg_scan_matches(&s, &ref, bi, nb, "chunked");
                if (rep == 0) CHECK(truncs > 0 && calls > nb);
                lg_scan_free(&s);
            }

            /* Small index buffers: KC_INDEX_FULL refuses the batch that needs an entry, and
             * continuing after growing the buffers ends with the same entries. */
            for (int rep = 0; rep < 2; rep++) {
                size_t oc = rep ? 0 : 2, tc = rep ? 0 : 1;
                lg_scan_init(&s, seg_base, interval, 1, oc, tc);
                size_t pos = 0;
                int fulls = 0, ok = 1;
                for (int guard = 0; guard < 4 * nb + 10; guard++) {
                    consumed = 999;
                    st = kc_log_scan(&s, log + pos, len - pos, &consumed);
                    pos += consumed;
                    if (s.position != (int64_t)pos) ok = 0;
                    if (st == KC_OK) break;
                    if (st != KC_INDEX_FULL) {
                        CHECKF(0, "index full loop: status %d", st);
                        ok = 0;
                        break;
                    }
                    fulls++;
                    int bidx = -1;
                    for (int i = 0; i < nb; i++)
                        if (bi[i].pos == (int64_t)pos) bidx = i;
                    int good = bidx >= 0 && ref.indexed[bidx] && s.offset_count == ref.off_before[bidx] &&
                               s.time_count == ref.time_before[bidx] &&
                               (s.offset_count == s.offset_capacity ||
                                (ref.time_indexed[bidx] && s.time_count == s.time_capacity)) &&
                               s.batches == bidx;
                    if (!good) {
                        CHECKF(good, "INDEX_FULL at position %zu (batch %d), counts %zu/%zu caps %zu/%zu", pos, bidx,
                               s.offset_count, s.time_count, s.offset_capacity, s.time_capacity);
                        ok = 0;
                        break;
                    }
                    /* Grow whichever is full (sometimes both) by a little. */
                    if (s.offset_count == s.offset_capacity)
                        lg_grow(&s.offset_entries, &s.offset_capacity, s.offset_count, KC_OFFSET_INDEX_ENTRY,
                                s.offset_capacity + 1 + rnd_below(3));
                    if (s.time_count == s.time_capacity && (rnd_below(2) || ref.time_indexed[bidx]))
                        lg_grow(&s.time_entries, &s.time_capacity, s.time_count, KC_TIME_INDEX_ENTRY,
                                s.time_capacity + 1 + rnd_below(2));
                }
                CHECK(ok && st == KC_OK && pos == len);
                if (ok) lg_scan_matches(&s, &ref, bi, nb, "index full, grown");
                if (ref.off_n > oc || ref.time_n > tc) CHECK(fulls > 0);
                lg_scan_free(&s);
            }
            lg_ref_free(&ref);
        }

        /* Corruption in batch k. Entries before it are those of the first k batches. */
        const int64_t interval = 100;
        for (int rep = 0; rep < 6; rep++) {
            int k = 1 + (int)rnd_below((uint32_t)nb - 1);
            lg_ref pre, full;
            lg_ref_scan(bi, k, seg_base, interval, &pre);
            lg_ref_scan(bi, nb, seg_base, interval, &full);
            uint8_t *b = lg_dup(log, len);
            int64_t at = bi[k].pos;
            int expect_crc_only = 0;
            const char *what = "?";
            switch (rep) {
            case 0: /* a record byte: only the CRC notices */
                b[at + KC_RECORD_BATCH_OVERHEAD + rnd_below((uint32_t)(bi[k].size - KC_RECORD_BATCH_OVERHEAD))] ^= 0x21;
                expect_crc_only = 1;
                what = "record byte";
                break;
            case 1: /* the stored CRC */
                b[at + KC_CRC_OFFSET] ^= 0x80;
                expect_crc_only = 1;
                what = "crc byte";
                break;
            case 2: /* offsets go backwards: base = previous batch's last offset (outside the CRC) */
                kc_put_be64(b + at, bi[k - 1].last);
                what = "backwards";
                break;
            case 3: /* base below the segment's base */
                kc_put_be64(b + at, seg_base - 1);
                what = "below segment base";
                break;
            case 4: /* magic 1 */
                b[at + KC_MAGIC_OFFSET] = 1;
                what = "magic";
                break;
            default: /* a negative last offset delta, CRC fixed */
                kc_put_be32(b + at + KC_LAST_OFFSET_DELTA_OFFSET, -1);
                fix_crc(b + at, (size_t)bi[k].size);
                what = "negative delta";
                break;
            }
            for (int crc = 1; crc >= 0; crc--) {
                kc_scan s;
                size_t consumed;
                lg_scan_init(&s, seg_base, interval, crc, (size_t)nb, (size_t)nb);
                int st = kc_log_scan(&s, b, len, &consumed);
                if (expect_crc_only && !crc) {
                    CHECKF(st == KC_OK && consumed == len, "%s ignored without crc check: status %d", what, st);
                    lg_scan_matches(&s, &full, bi, nb, what);
                } else {
                    CHECKF(st == KC_CORRUPT && consumed == (size_t)at && s.position == at && s.err != NULL,
                           "%s in batch %d (crc %d): status %d consumed %zu want %lld", what, k, crc, st, consumed,
                           (long long)at);
                    lg_scan_matches(&s, &pre, bi, k, what);
                }
                lg_scan_free(&s);
            }
            free(b);
            lg_ref_free(&pre);
            lg_ref_free(&full);
        }
        /* A segment base above the first batch's base offset. */
        {
            kc_scan s;
            size_t consumed;
            lg_scan_init(&s, bi[0].base + 1, 0, 1, (size_t)nb, (size_t)nb);
            CHECK(kc_log_scan(&s, log, len, &consumed) == KC_CORRUPT && consumed == 0 && s.batches == 0);
            lg_scan_free(&s);
            /* next_offset carried from an earlier scan above the first batch: backwards too. */
            lg_scan_init(&s, seg_base, 0, 1, (size_t)nb, (size_t)nb);
            s.next_offset = bi[0].last + 1;
            CHECK(kc_log_scan(&s, log, len, &consumed) == KC_CORRUPT && consumed == 0);
            lg_scan_free(&s);
        }
        free(log);
        free(bi);
    }

    /* Edges: an empty buffer, the last relative offset that fits 32 bits, the 2 GiB position
     * limit, a length below the minimum. */
    {
        kc_scan s;
        size_t consumed = 5;
        uint8_t *e = xmalloc(0);
        lg_scan_init(&s, 0, 0, 1, 1, 1);
        CHECK(kc_log_scan(&s, e, 0, &consumed) == KC_OK && consumed == 0 && s.position == 0 && s.batches == 0);
        lg_scan_free(&s);
        free(e);

        lg_spec sp = lg_default(1);
        sp.base_offset = 100 + (int64_t)INT32_MAX;
        size_t len;
        uint8_t *b = lg_build(&sp, &len);
        lg_scan_init(&s, 100, -1, 1, 1, 1);
        CHECK(kc_log_scan(&s, b, len, &consumed) == KC_OK && s.offset_count == 1);
        CHECK(kc_be32(s.offset_entries) == INT32_MAX && kc_be32(s.offset_entries + 4) == 0);
        CHECK(s.time_count == 1 && kc_be64(s.time_entries) == sp.max_ts && kc_be32(s.time_entries + 8) == INT32_MAX);
        lg_scan_free(&s);
        free(b);
        sp.n = 2;
        b = lg_build(&sp, &len);
        lg_scan_init(&s, 100, -1, 1, 1, 1);
        CHECK(kc_log_scan(&s, b, len, &consumed) == KC_CORRUPT && consumed == 0 && s.offset_count == 0);
        lg_scan_free(&s);
        free(b);

        lg_spec two[2] = {lg_default(2), lg_default(2)};
        two[1].base_offset = 2;
        size_t starts[2];
        b = lg_build_many(two, 2, starts, &len);
        lg_scan_init(&s, 0, -1, 1, 2, 2);
        s.position = INT32_MAX; /* the last position an index entry can hold */
        int st = kc_log_scan(&s, b, len, &consumed);
        CHECKF(st == KC_CORRUPT && consumed == starts[1] && s.offset_count == 1, "2 GiB edge: %d %zu", st, consumed);
        CHECK(kc_be32(s.offset_entries + 4) == INT32_MAX);
        lg_scan_free(&s);
        lg_scan_init(&s, 0, -1, 1, 2, 2);
        s.position = (int64_t)INT32_MAX + 1;
        CHECK(kc_log_scan(&s, b, len, &consumed) == KC_CORRUPT && consumed == 0 && s.offset_count == 0);
        lg_scan_free(&s);
        /* Offsets may jump forward (compacted or aborted ranges). */
        kc_put_be64(b + starts[1], 1000);
        lg_scan_init(&s, 0, -1, 1, 2, 2);
        CHECK(kc_log_scan(&s, b, len, &consumed) == KC_OK && s.next_offset == 1002);
        CHECK(kc_be32(s.offset_entries + KC_OFFSET_INDEX_ENTRY) == 1001);
        lg_scan_free(&s);
        /* A length below the minimum: corrupt, CRC check or not. */
        kc_put_be32(b + starts[1] + KC_LENGTH_OFFSET, 10);
        lg_scan_init(&s, 0, 0, 0, 2, 2);
        CHECK(kc_log_scan(&s, b, len, &consumed) == KC_CORRUPT && consumed == starts[1] && s.err != NULL);
        lg_scan_free(&s);
        free(b);
    }
}

/* ---- header walk over a file ---- */

static int lg_write_file(int fd, const uint8_t *p, size_t n) {
    if (ftruncate(fd, 0) != 0 || lseek(fd, 0, SEEK_SET) != 0) return 0;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return 0;
        p += w;
        n -= (size_t)w;
    }
    return 1;
}

/* The walk from batch s0 on, over batches lying wholly before end. */
static int lg_ref_seek(const lg_binfo *bi, int nb, int s0, int64_t end, int mode, int64_t target, kc_seek_result *r) {
    int any = 0;
    int64_t last_end = 0;
    for (int i = s0; i < nb; i++) {
        if (bi[i].pos + bi[i].size > end) break;
        int64_t bend = bi[i].pos + bi[i].size;
        if (mode == KC_SEEK_BOUNDARY) {
            if (bend > target) {
                r->position = any ? bi[i].pos : bend;
                return KC_OK;
            }
        } else if ((mode == KC_SEEK_OFFSET && bi[i].last >= target) ||
                   (mode == KC_SEEK_TIMESTAMP && bi[i].max_ts >= target)) {
            r->position = bi[i].pos;
            r->base_offset = bi[i].base;
            r->last_offset = bi[i].last;
            r->max_timestamp = bi[i].max_ts;
            r->size = (int32_t)bi[i].size;
            return KC_OK;
        }
        any = 1;
        last_end = bend;
    }
    if (mode == KC_SEEK_BOUNDARY && any) {
        r->position = last_end;
        return KC_OK;
    }
    return KC_NOT_FOUND;
}

static uint8_t *g_lg_scratch[3];
static const size_t g_lg_scratch_len[3] = {64, 100, 8192};

/* Runs one seek with every scratch size (64, 100, 8192 and an odd one) against the reference;
 * returns 1 when all agree. */
static int lg_seek_case(int fd, const lg_binfo *bi, int nb, int s0, int64_t end, int mode, int64_t target) {
    kc_seek_result want, got;
    memset(&want, 0, sizeof want);
    int wst = lg_ref_seek(bi, nb, s0, end, mode, target, &want);
    int64_t start = s0 < nb ? bi[s0].pos : (nb ? bi[nb - 1].pos + bi[nb - 1].size : 0);
    /* A fourth scratch whose end falls inside the second batch's header (first batch + 0..63
     * bytes), so a header is sometimes only partly in the buffer; exact size, so a read past
     * what was loaded shows. */
    size_t odd_len = (size_t)(s0 < nb ? bi[s0].size : 0) + rnd_below(64);
    if (odd_len < 64) odd_len = 64;
    uint8_t *odd = xmalloc(odd_len);
    memset(odd, 0xA5, odd_len);
    for (int k = 0; k < 4; k++) {
        uint8_t *sc = k < 3 ? g_lg_scratch[k] : odd;
        size_t sl = k < 3 ? g_lg_scratch_len[k] : odd_len;
        memset(&got, 0, sizeof got);
        int st = kc_log_seek(fd, start, end, mode, target, sc, sl, &got);
        int ok = st == wst;
        if (ok && st == KC_OK) {
            ok = got.position == want.position;
            if (mode != KC_SEEK_BOUNDARY)
                ok = ok && got.base_offset == want.base_offset && got.last_offset == want.last_offset &&
                     got.size == want.size;
            if (mode == KC_SEEK_TIMESTAMP) ok = ok && got.max_timestamp == want.max_timestamp;
        }
        if (!ok) {
            CHECKF(0,
                   "seek mode %d start %lld end %lld target %lld scratch %zu: status %d/%d position %lld/%lld base "
                   "%lld/%lld size %d/%d (got/want)",
                   mode, (long long)start, (long long)end, (long long)target, sl, st, wst,
                   (long long)got.position, (long long)want.position, (long long)got.base_offset,
                   (long long)want.base_offset, (int)got.size, (int)want.size);
            free(odd);
            return 0;
        }
    }
    free(odd);
    return 1;
}

/* All three modes over a spread of targets; returns the number of cases that disagreed. */
static long lg_seek_sweep(int fd, const lg_binfo *bi, int nb, int s0, int64_t end, long *cases) {
    long bad = 0;
    int64_t file_end = bi[nb - 1].pos + bi[nb - 1].size;
    static const int64_t extremes[] = {INT64_MIN, -1, 0, INT64_MAX};
    for (size_t e = 0; e < sizeof extremes / sizeof extremes[0]; e++)
        for (int mode = 0; mode < 3; mode++) {
            bad += !lg_seek_case(fd, bi, nb, s0, end, mode, extremes[e]);
            (*cases)++;
        }
    for (int i = 0; i < nb; i++) {
        const int64_t offs[] = {bi[i].base - 1, bi[i].base, bi[i].last, bi[i].last + 1};
        const int64_t tss[] = {bi[i].max_ts - 1, bi[i].max_ts, bi[i].max_ts + 1};
        const int64_t poss[] = {bi[i].pos - 1, bi[i].pos, bi[i].pos + 1, bi[i].pos + bi[i].size - 1,
                                bi[i].pos + (int64_t)rnd_below((uint32_t)bi[i].size)};
        for (size_t j = 0; j < 4; j++) bad += !lg_seek_case(fd, bi, nb, s0, end, KC_SEEK_OFFSET, offs[j]);
        for (size_t j = 0; j < 3; j++) bad += !lg_seek_case(fd, bi, nb, s0, end, KC_SEEK_TIMESTAMP, tss[j]);
        for (size_t j = 0; j < 5; j++) bad += !lg_seek_case(fd, bi, nb, s0, end, KC_SEEK_BOUNDARY, poss[j]);
        *cases += 12;
    }
    bad += !lg_seek_case(fd, bi, nb, s0, end, KC_SEEK_BOUNDARY, file_end);
    bad += !lg_seek_case(fd, bi, nb, s0, end, KC_SEEK_BOUNDARY, file_end + 1000);
    *cases += 2;
    return bad;
}

static void test_log_seek(void) {
    char path[] = "/tmp/kc_test_log_XXXXXX";
    int fd = mkstemp(path);
    CHECKF(fd >= 0, "mkstemp: %s", strerror(errno));
    if (fd < 0) return;
    /* A write-only descriptor for the I/O error case, then the name goes at once so that a run
     * that crashes leaves nothing behind. */
    int wfd = open(path, O_WRONLY);
    CHECK(wfd >= 0);
    CHECK(unlink(path) == 0);
    for (int k = 0; k < 3; k++) g_lg_scratch[k] = xmalloc(g_lg_scratch_len[k]);
    const int nb = 40;
    lg_binfo bi[40];
    size_t len;
    uint8_t *log = lg_make_log(nb, 100, 17, bi, &len);
    CHECK(lg_write_file(fd, log, len));
    const int64_t flen = (int64_t)len;
    long cases = 0, bad = 0;

    /* Hand-picked cases first (the reference must agree with the obvious answers). */
    {
        kc_seek_result r;
        uint8_t *sc = g_lg_scratch[0];
        /* Offsets: in the first, a middle and the last batch; beyond the end. */
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, bi[0].base, sc, 64, &r) == KC_OK && r.position == 0 &&
              r.base_offset == bi[0].base && r.last_offset == bi[0].last && r.size == (int32_t)bi[0].size);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, bi[20].last, sc, 64, &r) == KC_OK && r.position == bi[20].pos);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, bi[nb - 1].last, sc, 64, &r) == KC_OK &&
              r.position == bi[nb - 1].pos);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, bi[nb - 1].last + 1, sc, 64, &r) == KC_NOT_FOUND);
        /* From a middle position, an earlier offset finds the batch at the start. */
        CHECK(kc_log_seek(fd, bi[20].pos, flen, KC_SEEK_OFFSET, bi[3].base, sc, 64, &r) == KC_OK &&
              r.position == bi[20].pos);
        /* Boundary: inside the first batch gives its end; exactly a boundary gives it. */
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, 0, sc, 64, &r) == KC_OK && r.position == bi[0].size);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, bi[0].size - 1, sc, 64, &r) == KC_OK &&
              r.position == bi[0].size);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, bi[5].pos, sc, 64, &r) == KC_OK && r.position == bi[5].pos);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, bi[5].pos + 1, sc, 64, &r) == KC_OK &&
              r.position == bi[5].pos);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, bi[6].pos - 1, sc, 64, &r) == KC_OK &&
              r.position == bi[5].pos);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, INT64_MAX, sc, 64, &r) == KC_OK && r.position == flen);
        /* Boundary with end inside a batch: that batch is left out. */
        CHECK(kc_log_seek(fd, 0, bi[9].pos + 40, KC_SEEK_BOUNDARY, INT64_MAX, sc, 64, &r) == KC_OK &&
              r.position == bi[9].pos);
        /* Empty ranges. */
        CHECK(kc_log_seek(fd, flen, flen, KC_SEEK_BOUNDARY, INT64_MAX, sc, 64, &r) == KC_NOT_FOUND);
        CHECK(kc_log_seek(fd, 100, 50, KC_SEEK_OFFSET, 0, sc, 64, &r) == KC_NOT_FOUND);
        CHECK(kc_log_seek(fd, 0, 0, KC_SEEK_TIMESTAMP, INT64_MIN, sc, 64, &r) == KC_NOT_FOUND);
        /* Timestamps: INT64_MIN takes the first batch. */
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_TIMESTAMP, INT64_MIN, sc, 64, &r) == KC_OK && r.position == 0 &&
              r.max_timestamp == bi[0].max_ts);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_TIMESTAMP, INT64_MAX, sc, 64, &r) == KC_NOT_FOUND);
    }

    /* Whole file, from several starting batches and from the end. */
    const int starts[] = {0, 1, 2, 16, 17, 18, nb / 2, nb - 1, nb};
    for (size_t i = 0; i < sizeof starts / sizeof starts[0]; i++) bad += lg_seek_sweep(fd, bi, nb, starts[i], flen, &cases);
    /* end below the file size: at a boundary, inside a header (< 12 bytes, < 27, < 43 bytes), inside
     * a batch's records, one byte short. */
    for (int j = 1; j < nb; j += 3) {
        const int64_t ends[] = {bi[j].pos, bi[j].pos + 5, bi[j].pos + 20, bi[j].pos + 40, bi[j].pos + 61,
                                bi[j].pos + bi[j].size - 1};
        for (size_t e = 0; e < sizeof ends / sizeof ends[0]; e++) {
            bad += lg_seek_sweep(fd, bi, nb, 0, ends[e], &cases);
            if (j > 2) bad += lg_seek_sweep(fd, bi, nb, 2, ends[e], &cases);
        }
    }
    /* end past the file's end reads as the file's end. */
    bad += lg_seek_sweep(fd, bi, nb, 0, flen + 100, &cases);

    /* An incomplete trailing batch in the file itself: 5 bytes (inside the length), 30 bytes,
     * all but one byte of a batch. */
    {
        lg_spec extra = lg_default(3);
        extra.base_offset = bi[nb - 1].last + 1;
        extra.max_ts = INT64_MAX - 1;
        size_t elen;
        uint8_t *eb = lg_build(&extra, &elen);
        const size_t tails[] = {5, 30, elen - 1};
        for (size_t t = 0; t < 3; t++) {
            uint8_t *f = xmalloc(len + tails[t]);
            memcpy(f, log, len);
            memcpy(f + len, eb, tails[t]);
            CHECK(lg_write_file(fd, f, len + tails[t]));
            int64_t fsz = (int64_t)(len + tails[t]);
            bad += lg_seek_sweep(fd, bi, nb, 0, fsz, &cases);
            bad += lg_seek_sweep(fd, bi, nb, nb - 1, fsz, &cases);
            kc_seek_result r;
            CHECKF(kc_log_seek(fd, 0, fsz, KC_SEEK_BOUNDARY, INT64_MAX, g_lg_scratch[0], 64, &r) == KC_OK &&
                       r.position == flen,
                   "partial tail %zu: boundary", tails[t]);
            CHECKF(kc_log_seek(fd, 0, fsz, KC_SEEK_OFFSET, extra.base_offset, g_lg_scratch[2], 8192, &r) ==
                       KC_NOT_FOUND,
                   "partial tail %zu: offset in it", tails[t]);
            CHECKF(kc_log_seek(fd, 0, fsz, KC_SEEK_TIMESTAMP, INT64_MAX - 1, g_lg_scratch[1], 100, &r) ==
                       KC_NOT_FOUND,
                   "partial tail %zu: timestamp in it", tails[t]);
            free(f);
        }
        free(eb);
        CHECK(lg_write_file(fd, log, len));
    }
    CHECKF(bad == 0, "%ld of %ld seek cases disagree with the reference", bad, cases);
    g_pass += cases - bad;

    /* Corrupt headers in batch k: a length below the minimum, a negative length, magic 1, a
     * negative last offset delta. Walks that stop before k are unaffected. */
    {
        const int k = 12;
        for (int v = 0; v < 4; v++) {
            uint8_t *f = lg_dup(log, len);
            uint8_t *h = f + bi[k].pos;
            if (v == 0) kc_put_be32(h + KC_LENGTH_OFFSET, 20);
            if (v == 1) kc_put_be32(h + KC_LENGTH_OFFSET, -5);
            if (v == 2) h[KC_MAGIC_OFFSET] = 1;
            if (v == 3) kc_put_be32(h + KC_LAST_OFFSET_DELTA_OFFSET, -1);
            CHECK(lg_write_file(fd, f, len));
            for (int sc = 0; sc < 3; sc++) {
                kc_seek_result r;
                uint8_t *s = g_lg_scratch[sc];
                size_t sl = g_lg_scratch_len[sc];
                CHECKF(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, bi[nb - 1].last, s, sl, &r) == KC_CORRUPT,
                       "variant %d scratch %zu: offset walk through the bad header", v, sl);
                CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, bi[k - 1].last, s, sl, &r) == KC_OK &&
                      r.position == bi[k - 1].pos);
                CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_TIMESTAMP, INT64_MAX, s, sl, &r) == KC_CORRUPT);
                if (v < 2) {
                    /* The boundary walk reads only lengths. */
                    CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, bi[k].pos + 1, s, sl, &r) == KC_CORRUPT);
                    CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, INT64_MAX, s, sl, &r) == KC_CORRUPT);
                }
                CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_BOUNDARY, bi[k].pos - 1, s, sl, &r) == KC_OK &&
                      r.position == bi[k - 1].pos);
            }
            free(f);
        }
        CHECK(lg_write_file(fd, log, len));
    }
    /* I/O errors: a bad descriptor, a write-only descriptor. */
    {
        kc_seek_result r;
        for (int mode = 0; mode < 3; mode++) {
            CHECK(kc_log_seek(-1, 0, flen, mode, 0, g_lg_scratch[2], 8192, &r) == KC_IO_ERROR);
            if (wfd >= 0) CHECK(kc_log_seek(wfd, 0, flen, mode, 0, g_lg_scratch[0], 64, &r) == KC_IO_ERROR);
        }
        /* A scratch below the documented minimum is refused, not overrun. */
        uint8_t *small = xmalloc(63);
        CHECK(kc_log_seek(fd, 0, flen, KC_SEEK_OFFSET, 0, small, 63, &r) != KC_OK);
        free(small);
    }

    /* Random damage to the file: no crash, no sanitizer report, results inside the range. */
    {
        long ok_results = 0, bad_results = 0;
        for (int it = 0; it < 400; it++) {
            size_t flen2 = len;
            uint8_t *f = lg_dup(log, len);
            int flips = 1 + (int)rnd_below(6);
            for (int j = 0; j < flips; j++) {
                size_t at = rnd_below(3) ? (size_t)bi[rnd_below((uint32_t)nb)].pos + rnd_below(KC_RECORD_BATCH_OVERHEAD)
                                         : rnd_below((uint32_t)len);
                f[at] = rnd_below(2) ? (uint8_t)rnd64() : (uint8_t)(f[at] ^ (1u << rnd_below(8)));
            }
            if (rnd_below(4) == 0) flen2 = rnd_below((uint32_t)len + 1);
            CHECK(lg_write_file(fd, f, flen2));
            for (int q = 0; q < 6; q++) {
                int mode = (int)rnd_below(3);
                int64_t start = rnd_below(2) ? 0 : (int64_t)rnd_below((uint32_t)flen2 + 1);
                int64_t end = rnd_below(2) ? (int64_t)flen2 : (int64_t)rnd_below((uint32_t)flen2 + 1);
                int64_t target = mode == KC_SEEK_BOUNDARY ? (int64_t)rnd_below((uint32_t)len + 100)
                                 : mode == KC_SEEK_OFFSET ? 100 + (int64_t)rnd_below((uint32_t)(bi[nb - 1].last + 10))
                                                          : (int64_t)rnd64();
                int sc = (int)rnd_below(3);
                kc_seek_result r;
                int st = kc_log_seek(fd, start, end, mode, target, g_lg_scratch[sc], g_lg_scratch_len[sc], &r);
                int ok = st == KC_OK || st == KC_NOT_FOUND || st == KC_CORRUPT;
                if (st == KC_OK) {
                    if (mode == KC_SEEK_BOUNDARY)
                        ok = ok && r.position > start && r.position <= end;
                    else
                        ok = ok && r.position >= start && r.position + r.size <= end && r.last_offset >= r.base_offset;
                }
                if (ok)
                    ok_results++;
                else if (bad_results++ < 10)
                    CHECKF(ok, "damaged seek mode %d start %lld end %lld: status %d position %lld size %d", mode,
                           (long long)start, (long long)end, st, (long long)r.position, (int)r.size);
            }
            free(f);
        }
        CHECKF(bad_results == 0, "%ld damaged seeks out of range", bad_results);
        g_pass += ok_results;
    }

    for (int k = 0; k < 3; k++) free(g_lg_scratch[k]);
    free(log);
    if (wfd >= 0) close(wfd);
    close(fd);
}

/* Random mutated and truncated input to validate, assign and scan, in exact-size buffers. */
static void test_log_robustness(void) {
    clock_t t0 = clock();
    const int iterations = 4000;
    long v_ok = 0, v_invalid = 0, v_corrupt = 0, s_ok = 0, s_full = 0, s_other = 0;
    for (int it = 0; it < iterations; it++) {
        int nb = 1 + (int)rnd_below(4);
        uint8_t *parts[4];
        size_t lens[4];
        for (int i = 0; i < nb; i++) {
            kc_batch_header h;
            parts[i] = random_batch(&lens[i], &h);
        }
        size_t starts[4], len;
        uint8_t *log = lg_concat(parts, lens, nb, starts, &len);
        if (rnd_below(2)) kc_log_assign_offsets(log, len, rnd_below(1000), 1, -1);
        uint32_t kind = rnd_below(7);
        int b = (int)rnd_below((uint32_t)nb);
        size_t bsize = (b + 1 < nb ? starts[b + 1] : len) - starts[b];
        uint8_t *bp = log + starts[b];
        if (kind == 0) {
            int flips = 1 + (int)rnd_below(6);
            for (int j = 0; j < flips; j++) log[rnd_below((uint32_t)len)] ^= (uint8_t)(1 + rnd_below(255));
        } else if (kind == 1) { /* record bytes, CRC fixed */
            if (bsize > KC_RECORD_BATCH_OVERHEAD) {
                int flips = 1 + (int)rnd_below(3);
                for (int j = 0; j < flips; j++)
                    bp[KC_RECORD_BATCH_OVERHEAD + rnd_below((uint32_t)(bsize - KC_RECORD_BATCH_OVERHEAD))] =
                        (uint8_t)rnd64();
            }
            fix_crc(bp, bsize);
        } else if (kind == 2) { /* hostile header fields, CRC fixed */
            int32_t v = rnd_below(2) ? (int32_t)(uint32_t)rnd64() : (int32_t)rnd_below(20) - 5;
            uint32_t r = rnd_below(6);
            if (r == 0) kc_put_be32(bp + KC_RECORDS_COUNT_OFFSET, v);
            if (r == 1) kc_put_be32(bp + KC_LAST_OFFSET_DELTA_OFFSET, v);
            if (r == 2) kc_put_be32(bp + KC_LENGTH_OFFSET, v);
            if (r == 3) kc_put_be16(bp + KC_ATTRIBUTES_OFFSET, (int16_t)v);
            if (r == 4) kc_put_be64(bp + KC_BASE_OFFSET_OFFSET, rnd_below(2) ? INT64_MAX - rnd_below(3) : -(int64_t)rnd_below(3));
            if (r == 5) kc_put_be64(bp + KC_MAX_TIMESTAMP_OFFSET, (int64_t)rnd64());
            fix_crc(bp, bsize);
        } else if (kind == 3) { /* a length that disagrees with the bytes */
            kc_put_be32(bp + KC_LENGTH_OFFSET, kc_be32(bp + KC_LENGTH_OFFSET) + (int32_t)rnd_below(41) - 20);
        } else if (kind == 4) { /* compression bits: records no longer checked */
            kc_put_be16(bp + KC_ATTRIBUTES_OFFSET, (int16_t)(kc_be16(bp + KC_ATTRIBUTES_OFFSET) | (1 + rnd_below(4))));
            fix_crc(bp, bsize);
        }
        /* kind 5, 6: untouched, or only truncated below. */
        size_t mlen = (kind == 6 || rnd_below(4) == 0) ? rnd_below((uint32_t)len + 1) : len;
        uint8_t *m = lg_dup(log, mlen);

        kc_append_info info;
        int64_t maxb = rnd_below(4) == 0 ? (int64_t)rnd_below(400) : (int64_t)1 << 30;
        int st = kc_log_validate(m, mlen, maxb, (int)rnd_below(2), &info);
        int vok = st == KC_OK || st == KC_CORRUPT || st == KC_INVALID || st == KC_TOO_LARGE;
        if (st == KC_OK) {
            vok = vok && info.bytes == (int64_t)mlen && info.batches >= 1 && info.records >= info.batches &&
                  info.err == NULL;
            v_ok++;
            /* Stamping validated input keeps it valid, with or without LogAppendTime. */
            uint8_t *m2 = lg_dup(m, mlen);
            int64_t first = rnd_below(1000);
            int64_t lat = rnd_below(2) ? -1 : (int64_t)rnd_below(1u << 30);
            int64_t next = kc_log_assign_offsets(m2, mlen, first, 3, lat);
            kc_append_info info2;
            int st2 = kc_log_validate(m2, mlen, maxb, 1, &info2);
            vok = vok && next == first + info.records && st2 == KC_OK && info2.records == info.records &&
                  info2.batches == info.batches;
            free(m2);
        } else {
            vok = vok && info.err != NULL && info.err_at <= mlen;
            if (st == KC_INVALID) v_invalid++;
            if (st == KC_CORRUPT) v_corrupt++;
        }
        if (!vok) CHECKF(vok, "validate iteration %d kind %u: status %d err_at %zu of %zu", it, kind, st, info.err_at, mlen);

        /* Scan with small, growing index buffers. */
        kc_scan s;
        int64_t seg = rnd_below(2) ? 0 : (int64_t)rnd_below(1000);
        lg_scan_init(&s, seg, (int64_t)rnd_below(300) - 1, (int)rnd_below(2), rnd_below(3), rnd_below(3));
        size_t pos = 0, consumed = 0;
        int sst = KC_OK, sok = 1;
        for (int guard = 0; guard < 64; guard++) {
            sst = kc_log_scan(&s, m + pos, mlen - pos, &consumed);
            if (consumed > mlen - pos) sok = 0;
            pos += consumed;
            if (sst != KC_INDEX_FULL) break;
            s_full++;
            lg_grow(&s.offset_entries, &s.offset_capacity, s.offset_count, KC_OFFSET_INDEX_ENTRY, s.offset_capacity + 1);
            lg_grow(&s.time_entries, &s.time_capacity, s.time_count, KC_TIME_INDEX_ENTRY, s.time_capacity + 1);
        }
        sok = sok && (sst == KC_OK || sst == KC_TRUNCATED || sst == KC_CORRUPT) && s.position == (int64_t)pos &&
              s.offset_count <= s.offset_capacity && s.time_count <= s.time_capacity;
        if (sst == KC_OK) sok = sok && pos == mlen;
        if (sst == KC_CORRUPT) sok = sok && s.err != NULL;
        /* Whatever it indexed is a sane index of the bytes walked. */
        sok = sok && kc_offset_index_sane(s.offset_entries, s.offset_count, s.position) &&
              kc_time_index_sane(s.time_entries, s.time_count);
        if (sst == KC_OK) s_ok++;
        else s_other++;
        if (!sok)
            CHECKF(sok, "scan iteration %d kind %u: status %d consumed %zu of %zu, %zu entries", it, kind, sst, pos,
                   mlen, s.offset_count);
        else
            g_pass++;
        /* Lookups in the produced index agree with a linear scan. */
        if (s.offset_count) {
            int32_t *offs = xmalloc(s.offset_count * sizeof(int32_t));
            for (size_t i = 0; i < s.offset_count; i++) offs[i] = kc_be32(s.offset_entries + i * KC_OFFSET_INDEX_ENTRY);
            int32_t target = offs[rnd_below((uint32_t)s.offset_count)] + (int32_t)rnd_below(3) - 1;
            CHECK(kc_offset_index_lookup(s.offset_entries, s.offset_count, target) ==
                  lg_ref_le32(offs, s.offset_count, target));
            free(offs);
        }
        lg_scan_free(&s);
        free(m);
        free(log);
    }
    printf("# log robustness: %d iterations, validate OK %ld / INVALID %ld / CORRUPT %ld, scan OK %ld / other %ld, "
           "%ld index-full resumes, %.2f s CPU\n",
           iterations, v_ok, v_invalid, v_corrupt, s_ok, s_other, s_full, (double)(clock() - t0) / CLOCKS_PER_SEC);
    /* The mutations must reach both outcomes, or the loop proves little. */
    CHECK(v_ok > 200 && v_invalid > 200 && v_corrupt > 200);
    CHECK(s_ok > 200 && s_other > 200 && s_full > 50);
}


/* ------------------------------------------------------------------------------------ */
/* Read-committed filtering: kc_control_type, kc_aborted_* */

/* The records section of a one-record control batch with the given key (key_len -1: null). */
static uint8_t *control_records(const uint8_t *key, int32_t key_len, size_t *len) {
    static const uint8_t value[6] = {0, 0, 0, 0, 0, 7};
    rec_spec r = {0, 0, key, key_len, value, 6, NULL, 0};
    *len = spec_size(&r);
    uint8_t *b = xmalloc(*len);
    CHECK(spec_encode(b, &r) == *len);
    return b;
}

static void test_control_type(void) {
    const uint8_t abort_key[4] = {0, 0, 0, 0}, commit_key[4] = {0, 0, 0, 1}, v1_key[6] = {0, 1, 0, 1, 9, 9},
                  odd_key[4] = {0, 0, 0x7F, 0x05}, neg_version[4] = {0xFF, 0xFF, 0, 0}, short_key[3] = {0, 0, 0};
    struct {
        const uint8_t *key;
        int32_t key_len;
        int st, type;
    } cases[] = {
        {abort_key, 4, KC_OK, KC_CONTROL_ABORT}, {commit_key, 4, KC_OK, KC_CONTROL_COMMIT},
        {v1_key, 6, KC_OK, KC_CONTROL_COMMIT},   /* a newer key version with more fields */
        {odd_key, 4, KC_OK, 0x7F05},             /* unknown types are returned as read */
        {neg_version, 4, KC_CORRUPT, 0},         {short_key, 3, KC_CORRUPT, 0},
        {NULL, -1, KC_CORRUPT, 0},               {abort_key, 0, KC_CORRUPT, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        uint8_t *rs = control_records(cases[i].key, cases[i].key_len, &len);
        int type = -99;
        const char *err = NULL;
        int st = kc_control_type(rs, rs + len, 1, &type, &err);
        CHECKF(st == cases[i].st, "case %zu: status %d", i, st);
        if (st == KC_OK) CHECKF(type == cases[i].type, "case %zu: type %d", i, type);
        else CHECKF(err != NULL, "case %zu: no message", i);
        /* Only the first record is read: a count above 1 does not matter... */
        if (cases[i].st == KC_OK) CHECK(kc_control_type(rs, rs + len, 3, &type, &err) == KC_OK);
        /* ...and every truncation of that record is CORRUPT, never a read past the end. */
        for (size_t k = 0; k < len; k++) {
            uint8_t *t = xmalloc(k);
            memcpy(t, rs, k);
            err = NULL;
            st = kc_control_type(t, t + k, 1, &type, &err);
            CHECKF(st == KC_CORRUPT && err != NULL, "case %zu truncated to %zu: status %d", i, k, st);
            free(t);
        }
        free(rs);
    }
    int type = -99;
    const char *err = NULL;
    CHECK(kc_control_type(NULL, NULL, 0, &type, &err) == KC_OK && type == KC_CONTROL_NONE);
    err = NULL;
    CHECK(kc_control_type(NULL, NULL, -1, &type, &err) == KC_CORRUPT && err != NULL);
    /* A real marker batch: frame it, then read the type from its records section. */
    {
        kc_batch_header mh = {.base_offset = 9, .magic = 2, .attributes = KC_ATTR_TRANSACTIONAL | KC_ATTR_CONTROL,
                              .producer_id = 5, .producer_epoch = 1, .base_sequence = -1};
        static const uint8_t val[6] = {0, 0, 0, 0, 0, 3};
        rec_spec rr = {0, 0, abort_key, 4, val, 6, NULL, 0};
        size_t blen;
        uint8_t *b = build_batch(&rr, 1, &mh, &blen);
        kc_batch_header h;
        size_t total;
        CHECK(blen == 78); /* Kafka's marker: 61-byte header + a 17-byte record */
        CHECK(kc_batch_frame(b, blen, &h, &total, &err) == KC_OK && kc_batch_crc_ok(b, total, &h));
        CHECK(kc_control_type(b + KC_RECORD_BATCH_OVERHEAD, b + total, h.records_count, &type, &err) == KC_OK &&
              type == KC_CONTROL_ABORT);
        free(b);
    }
}

static kc_batch_header txn_hdr(int64_t pid, int64_t base, int32_t last_delta, int16_t attrs) {
    kc_batch_header h;
    memset(&h, 0, sizeof h);
    h.producer_id = pid;
    h.base_offset = base;
    h.last_offset_delta = last_delta;
    h.attributes = attrs;
    h.magic = 2;
    h.records_count = last_delta + 1;
    return h;
}

#define TX KC_ATTR_TRANSACTIONAL
#define CTL (KC_ATTR_TRANSACTIONAL | KC_ATTR_CONTROL)

/* A step of a scripted read: the batch, whether it is an ABORT marker, the expected verdict. */
typedef struct {
    int64_t pid, base;
    int32_t last_delta;
    int16_t attrs;
    int abort_marker;
    int want;
} txn_step;

static void run_txn_script(const char *name, const kc_aborted_txn *list, size_t n, const txn_step *steps,
                           size_t n_steps) {
    kc_aborted a;
    CHECK(kc_aborted_init(&a, list, n) == KC_OK);
    for (size_t i = 0; i < n_steps; i++) {
        kc_batch_header h = txn_hdr(steps[i].pid, steps[i].base, steps[i].last_delta, steps[i].attrs);
        int v = kc_aborted_batch(&a, &h);
        CHECKF(v == steps[i].want, "%s step %zu: verdict %d, want %d", name, i, v, steps[i].want);
        if (v == KC_TXN_MARKER && steps[i].abort_marker) kc_aborted_end(&a, steps[i].pid);
    }
    kc_aborted_free(&a);
    CHECK(a.txns == NULL && a.pids == NULL && a.active == NULL && a.count == 0);
}

/* Reference for the random test: the same rules with linear scans and an insertion sort. */
static void ref_txn_run(const kc_aborted_txn *list, size_t n, const kc_batch_header *hs, const int *aborts,
                        size_t nb, int *out) {
    kc_aborted_txn *sorted = xmalloc(n * sizeof *sorted);
    int64_t *active = xmalloc(n * sizeof *active);
    size_t n_active = 0, next = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        while (j > 0 && sorted[j - 1].first_offset > list[i].first_offset) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        sorted[j] = list[i];
    }
    for (size_t b = 0; b < nb; b++) {
        const kc_batch_header *h = &hs[b];
        out[b] = KC_TXN_KEEP;
        if (h->producer_id < 0) continue;
        int64_t last = (int64_t)((uint64_t)h->base_offset + (uint64_t)(int64_t)h->last_offset_delta);
        for (; next < n && sorted[next].first_offset <= last; next++) {
            size_t k = 0;
            while (k < n_active && active[k] != sorted[next].producer_id) k++;
            if (k == n_active) active[n_active++] = sorted[next].producer_id;
        }
        size_t k = 0;
        while (k < n_active && active[k] != h->producer_id) k++;
        if (h->attributes & KC_ATTR_CONTROL) {
            out[b] = KC_TXN_MARKER;
            if (aborts[b] && k < n_active) active[k] = active[--n_active];
        } else if ((h->attributes & KC_ATTR_TRANSACTIONAL) && k < n_active) {
            out[b] = KC_TXN_ABORTED;
        }
    }
    free(sorted);
    free(active);
}

static void test_aborted(void) {
    /* Interleaved producers 1 and 2, two aborted transactions of producer 1 (listed out of
     * order: the Fetch response's order is not trusted), a committed one between them. */
    const kc_aborted_txn list1[] = {{1, 10}, {1, 0}, {3, 100}};
    const txn_step s1[] = {
        {1, 0, 1, TX, 0, KC_TXN_ABORTED},   /* producer 1's first transaction, aborted */
        {2, 2, 0, TX, 0, KC_TXN_KEEP},      /* producer 2, committed (not listed) */
        {-1, 3, 0, 0, 0, KC_TXN_KEEP},      /* a plain producer */
        {1, 4, 0, TX, 0, KC_TXN_ABORTED},   /* still producer 1's aborted transaction */
        {1, 5, 0, 0, 0, KC_TXN_KEEP},       /* non-transactional data of an aborting producer: kept */
        {1, 6, 0, CTL, 1, KC_TXN_MARKER},   /* its ABORT marker ends the range */
        {1, 7, 1, TX, 0, KC_TXN_KEEP},      /* producer 1's next transaction (committed) */
        {2, 9, 0, CTL, 0, KC_TXN_MARKER},   /* producer 2's COMMIT */
        {1, 8, 0, CTL, 0, KC_TXN_MARKER},   /* producer 1's COMMIT */
        {1, 10, 2, TX, 0, KC_TXN_ABORTED},  /* the second aborted transaction starts at 10 */
        {2, 13, 0, TX, 0, KC_TXN_KEEP},
        {1, 14, 0, CTL, 1, KC_TXN_MARKER},  /* ABORT */
        {1, 15, 0, TX, 0, KC_TXN_KEEP},
        {3, 16, 0, TX, 0, KC_TXN_KEEP},     /* producer 3's aborted transaction starts later */
        {3, 95, 10, TX, 0, KC_TXN_ABORTED}, /* a batch whose range reaches first offset 100 */
    };
    run_txn_script("interleaved", list1, 3, s1, sizeof s1 / sizeof s1[0]);

    /* A first offset reached by a batch of another producer (or of no producer) still
     * counts once a batch with a producer id passes it. */
    const kc_aborted_txn list2[] = {{7, 0}};
    const txn_step s2[] = {
        {-1, 0, 5, 0, 0, KC_TXN_KEEP},
        {8, 6, 0, TX, 0, KC_TXN_KEEP},
        {7, 7, 0, TX, 0, KC_TXN_ABORTED},
        {7, 8, 0, CTL, 0, KC_TXN_MARKER}, /* a COMMIT does not end an aborted range */
        {7, 9, 0, TX, 0, KC_TXN_ABORTED},
        {9, 10, 0, CTL, 1, KC_TXN_MARKER}, /* another producer's ABORT does not either */
        {7, 11, 0, TX, 0, KC_TXN_ABORTED},
    };
    run_txn_script("late", list2, 1, s2, sizeof s2 / sizeof s2[0]);

    /* No list: nothing is aborted, markers are still reported; offsets at the int64 edges
     * (the last offset wraps as Java's long) without undefined behaviour. */
    const txn_step s3[] = {
        {1, 0, 0, TX, 0, KC_TXN_KEEP},
        {1, 1, 0, CTL, 1, KC_TXN_MARKER},
        {1, INT64_MAX, 1, TX, 0, KC_TXN_KEEP},
        {-5, INT64_MIN, -1, CTL, 0, KC_TXN_KEEP}, /* a control batch without a producer id */
    };
    run_txn_script("empty", NULL, 0, s3, sizeof s3 / sizeof s3[0]);
    const kc_aborted_txn list4[] = {{4, INT64_MIN}, {4, INT64_MAX}};
    const txn_step s4[] = {
        {4, INT64_MAX, 1, TX, 0, KC_TXN_ABORTED}, /* last offset wraps to INT64_MIN: only the first is reached */
        {4, 0, 0, CTL, 1, KC_TXN_MARKER},
        {4, 1, INT32_MIN, TX, 0, KC_TXN_KEEP},
        {4, INT64_MAX, 0, TX, 0, KC_TXN_ABORTED},
    };
    run_txn_script("edges", list4, 2, s4, sizeof s4 / sizeof s4[0]);

    /* Random lists and batch sequences against the reference. */
    clock_t t0 = clock();
    long mismatches = 0;
    for (int it = 0; it < 3000; it++) {
        size_t n = rnd_below(12);
        size_t nb = 1 + rnd_below(40);
        kc_aborted_txn *list = xmalloc(n * sizeof *list);
        kc_batch_header *hs = xmalloc(nb * sizeof *hs);
        int *aborts = xmalloc(nb * sizeof(int)), *want = xmalloc(nb * sizeof(int));
        for (size_t i = 0; i < n; i++) {
            list[i].producer_id = (int64_t)rnd_below(5) - 1;
            list[i].first_offset = rnd_below(8) == 0 ? (int64_t)rnd64() : (int64_t)rnd_below(60);
        }
        int64_t off = 0;
        for (size_t b = 0; b < nb; b++) {
            int16_t attrs = (int16_t)((rnd_below(2) ? TX : 0) | (rnd_below(4) == 0 ? KC_ATTR_CONTROL : 0));
            int32_t delta = rnd_below(10) == 0 ? (int32_t)rnd64() : (int32_t)rnd_below(4);
            hs[b] = txn_hdr((int64_t)rnd_below(5) - 1, off, delta, attrs);
            aborts[b] = (int)rnd_below(2);
            off += 1 + rnd_below(4);
        }
        ref_txn_run(list, n, hs, aborts, nb, want);
        kc_aborted a;
        if (kc_aborted_init(&a, list, n) != KC_OK) {
            CHECK(0);
        } else {
            for (size_t b = 0; b < nb; b++) {
                int v = kc_aborted_batch(&a, &hs[b]);
                if (v != want[b]) mismatches++;
                if (v == KC_TXN_MARKER && aborts[b]) kc_aborted_end(&a, hs[b].producer_id);
            }
            kc_aborted_free(&a);
        }
        free(list);
        free(hs);
        free(aborts);
        free(want);
    }
    CHECKF(mismatches == 0, "%ld verdicts differ from the reference", mismatches);
    printf("# aborted-transaction filter: 3000 random runs, %.2f s CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
}

#undef TX
#undef CTL

static void test_log(void) {
    clock_t t0 = clock();
    lg_pool_init();
    test_log_index_lookup();
    test_log_index_sane();
    test_log_validate();
    test_log_assign();
    test_log_scan();
    test_log_seek();
    test_log_robustness();
    printf("# log: %.2f s CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
}

/* ------------------------------------------------------------------------------------ */
/* kc_append_run: the accumulator's bulk append, against a one-record-at-a-time model */

/* Value j of a column, as the run reads it (0: malformed offsets). */
static int model_value(const kc_value_column *c, int64_t j, const uint8_t **v, int32_t *n) {
    if (!c->off32 && !c->off64) {
        *v = c->data + j * c->width;
        *n = c->width;
        return 1;
    }
    int64_t at = c->offset + j;
    if (c->validity && !((c->validity[at >> 3] >> (at & 7)) & 1)) {
        *v = NULL;
        *n = -1;
        return 1;
    }
    int64_t a = c->off32 ? c->off32[at] : c->off64[at], b = c->off32 ? c->off32[at + 1] : c->off64[at + 1];
    if (b < a || b - a > INT32_MAX) return 0;
    if (!c->data && b > a) return 0;
    *v = c->data ? c->data + a : (const uint8_t *)"";
    *n = (int32_t)(b - a);
    return 1;
}

/* The accumulator's rules for one record at a time (accumulator.pxi's _append), on the same
 * state as the run. */
static int64_t model_run(kc_append_state *m, const kc_value_column *c, int64_t i, int64_t end, const int64_t *ts_in,
                         int64_t now, int *stop) {
    int64_t j;
    *stop = KC_APPEND_CALLER;
    if (m->count < 1) return 0;
    for (j = i; j < end; j++) {
        const uint8_t *v;
        int32_t n;
        if (!model_value(c, j, &v, &n)) return j - i;
        int64_t est = m->record_overhead + (n > 0 ? n : 0);
        if (est > m->max_estimate || m->len + (size_t)est > m->limit ||
            (m->buffered && m->buffered + est > m->buffer_memory))
            return j - i;
        int64_t ts = ts_in ? ts_in[j] : now;
        int64_t delta = (int64_t)((uint64_t)ts - (uint64_t)m->base_ts);
        size_t size = kc_record_encoded_size(delta, m->count, -1, n, NULL, 0);
        if (m->cap - m->len < size) return j - i;
        m->len += kc_record_encode(m->buf + m->len, delta, m->count, NULL, -1, v, n, NULL, 0);
        m->max_ts = ts > m->max_ts ? ts : m->max_ts;
        m->count++;
        if (m->len > m->reserved) {
            m->buffered += (int64_t)(m->len - m->reserved);
            m->reserved = m->len;
        }
        if (m->len >= m->limit) {
            *stop = KC_APPEND_SEAL;
            return j - i + 1;
        }
        if (m->sticky_bytes > 0 && (m->sticky_used += est) >= m->sticky_bytes) {
            *stop = KC_APPEND_STICKY;
            return j - i + 1;
        }
    }
    *stop = KC_APPEND_END;
    return j - i;
}

/* Runs both on the same inputs (each into its own exactly-sized buffer, so ASan sees any write
 * past cap) and checks they agree in every output. Returns the number appended. */
static int64_t check_run_matches_model(const char *what, const kc_append_state *start, const kc_value_column *c,
                                       int64_t i, int64_t end, const int64_t *ts, int64_t now, int *stop_out) {
    kc_append_state s = *start, m = *start;
    uint8_t *a = xmalloc(start->cap), *b = xmalloc(start->cap);
    memcpy(a, start->buf, start->len);
    memcpy(b, start->buf, start->len);
    s.buf = a;
    m.buf = b;
    int stop = -1, mstop = -1;
    int64_t got = kc_append_run(&s, c, i, end, ts, now, &stop);
    int64_t want = model_run(&m, c, i, end, ts, now, &mstop);
    CHECKF(got == want && stop == mstop, "%s: appended %lld stop %d, model %lld stop %d", what, (long long)got, stop,
           (long long)want, mstop);
    CHECKF(s.len == m.len && memcmp(a, b, s.len) == 0, "%s: bytes differ (%zu vs %zu)", what, s.len, m.len);
    CHECKF(s.count == m.count && s.max_ts == m.max_ts && s.reserved == m.reserved && s.buffered == m.buffered &&
               s.sticky_used == m.sticky_used,
           "%s: state differs", what);
    CHECK(s.buf == a && s.cap == start->cap && s.base_ts == start->base_ts);
    free(a);
    free(b);
    *stop_out = stop;
    return got;
}

static kc_append_state append_start(uint8_t *first, size_t cap) {
    /* a batch holding one record (the caller appends the first), of value "first", at ts 1000 */
    kc_append_state s;
    memset(&s, 0, sizeof(s));
    s.buf = first;
    s.len = KC_RECORD_BATCH_OVERHEAD;
    memset(first, 0, KC_RECORD_BATCH_OVERHEAD);
    s.len += kc_record_encode(first + s.len, 0, 0, NULL, -1, (const uint8_t *)"first", 5, NULL, 0);
    s.cap = cap;
    s.count = 1;
    s.base_ts = s.max_ts = 1000;
    s.limit = 1 << 20;
    s.reserved = s.len;
    s.buffered = (int64_t)s.len;
    s.buffer_memory = 1 << 30;
    s.max_estimate = 1 << 20;
    s.record_overhead = 21;
    return s;
}

static void test_append(void) {
    uint8_t data[64 * 40];
    rnd_fill(data, sizeof data);
    uint8_t *first = xmalloc(1 << 16);
    int stop;
    kc_value_column fixed = {data, NULL, NULL, NULL, 0, 40};
    int64_t ts[64];
    for (int k = 0; k < 64; k++) ts[k] = 1000 + (k % 5 == 0 ? -300 - k : 17 * k);

    /* every record fits: the same bytes as one-record encodes, "now" and per-record times */
    kc_append_state s = append_start(first, 1 << 16);
    CHECK(check_run_matches_model("all", &s, &fixed, 1, 64, NULL, 1234, &stop) == 63 && stop == KC_APPEND_END);
    CHECK(check_run_matches_model("times", &s, &fixed, 0, 64, ts, 0, &stop) == 64 && stop == KC_APPEND_END);
    {   /* and the bytes are exactly those of kc_record_encode, record by record */
        kc_append_state r = s;
        uint8_t *out = xmalloc(1 << 16), *ref = xmalloc(1 << 16);
        memcpy(out, first, s.len);
        memcpy(ref, first, s.len);
        r.buf = out;
        CHECK(kc_append_run(&r, &fixed, 3, 9, ts, 0, &stop) == 6 && stop == KC_APPEND_END && r.count == 7);
        size_t len = s.len;
        for (int k = 3; k < 9; k++)
            len += kc_record_encode(ref + len, ts[k] - 1000, k - 2, NULL, -1, data + 40 * k, 40, NULL, 0);
        CHECK(r.len == len && memcmp(out, ref, len) == 0 && r.max_ts == 1000 + 17 * 8);
        free(out);
        free(ref);
    }
    /* no room left in the buffer: stops before the record that would not fit, writes nothing past cap */
    s = append_start(first, 1 << 16);
    s.cap = s.len + 3 * 47 - 1; /* a 40-byte value encodes in 47 bytes */
    CHECK(check_run_matches_model("room", &s, &fixed, 1, 64, NULL, 1000, &stop) == 2 && stop == KC_APPEND_CALLER);
    /* batch.size: sealed after the record that reaches it; a record that would pass it is the caller's */
    s = append_start(first, 1 << 16);
    s.limit = s.len + 4 * 47 + 14; /* the estimate (61 per record, 47 written) stops the 5th */
    CHECK(check_run_matches_model("limit", &s, &fixed, 1, 64, NULL, 1000, &stop) == 4 && stop == KC_APPEND_CALLER);
    s.limit = s.len + 40; /* estimated at its value alone, the record fits; written, it fills the batch */
    s.record_overhead = 0;
    s.max_estimate = 40;
    CHECK(check_run_matches_model("full", &s, &fixed, 1, 64, NULL, 1000, &stop) == 1 && stop == KC_APPEND_SEAL);
    /* the sticky partitioner's budget, carried over from earlier records */
    s = append_start(first, 1 << 16);
    s.sticky_bytes = 1000;
    s.sticky_used = 900;
    CHECK(check_run_matches_model("sticky", &s, &fixed, 1, 64, NULL, 1000, &stop) == 2 && stop == KC_APPEND_STICKY);
    /* buffer.memory */
    s = append_start(first, 1 << 16);
    s.buffer_memory = s.buffered + 3 * 61 + 30;
    CHECK(check_run_matches_model("memory", &s, &fixed, 1, 64, NULL, 1000, &stop) >= 2 && stop == KC_APPEND_CALLER);
    /* a record too large for max.request.size: nothing appended */
    s = append_start(first, 1 << 16);
    s.max_estimate = 60;
    CHECK(check_run_matches_model("too large", &s, &fixed, 1, 64, NULL, 1000, &stop) == 0 && stop == KC_APPEND_CALLER);
    /* an empty batch: its first record (the base timestamp) is the caller's */
    s = append_start(first, 1 << 16);
    s.count = 0;
    CHECK(kc_append_run(&s, &fixed, 0, 64, NULL, 1000, &stop) == 0 && stop == KC_APPEND_CALLER);

    /* Arrow offsets: nulls, empty values, an array offset, malformed offsets stop the run */
    int32_t off32[12] = {0, 3, 3, 10, 10, 40, 41, 41, 60, 59, 70, 80};
    int64_t off64[12];
    for (int k = 0; k < 12; k++) off64[k] = off32[k];
    uint8_t validity[2] = {0xFF & ~(1u << 4) & ~(1u << 7), 0xFF};
    kc_value_column a32 = {data, off32, NULL, validity, 1, 0};
    kc_value_column a64 = {data, NULL, off64, validity, 1, 0};
    kc_value_column nodata = {NULL, off32, NULL, NULL, 0, 0};
    s = append_start(first, 1 << 16);
    CHECK(check_run_matches_model("arrow32", &s, &a32, 0, 10, NULL, 1000, &stop) == 7 && stop == KC_APPEND_CALLER);
    CHECK(check_run_matches_model("arrow64", &s, &a64, 0, 7, ts, 0, &stop) == 7 && stop == KC_APPEND_END);
    CHECK(check_run_matches_model("no data", &s, &nodata, 1, 3, NULL, 1000, &stop) == 1 && stop == KC_APPEND_CALLER);
    int32_t empty_off[3] = {0, 0, 0};
    kc_value_column empties = {NULL, empty_off, NULL, NULL, 0, 0};
    CHECK(check_run_matches_model("empties", &s, &empties, 0, 2, NULL, 1000, &stop) == 2 && stop == KC_APPEND_END);

    /* random limits and columns against the model */
    for (int round = 0; round < 2000; round++) {
        int width = (int)rnd_below(41);
        kc_value_column c = {data, NULL, NULL, NULL, 0, width};
        int32_t offs[65];
        uint8_t valid[8];
        if (rnd_below(2)) {
            offs[0] = (int32_t)rnd_below(40);
            for (int k = 1; k < 65; k++) offs[k] = offs[k - 1] + (int32_t)rnd_below(38);
            if (rnd_below(10) == 0) offs[1 + rnd_below(64)] -= 5; /* malformed */
            rnd_fill(valid, sizeof valid);
            c.off32 = offs;
            c.validity = rnd_below(2) ? valid : NULL;
            c.offset = rnd_below(4);
        }
        kc_append_state r = append_start(first, 1 << 16);
        r.cap = r.len + rnd_below(4000);
        r.limit = r.len + rnd_below(4000);
        r.buffer_memory = r.buffered + rnd_below(5000);
        r.max_estimate = 21 + rnd_below(60);
        r.sticky_bytes = rnd_below(3) ? 0 : 1 + rnd_below(3000);
        r.sticky_used = r.sticky_bytes ? rnd_below((uint32_t)r.sticky_bytes) : 0;
        int64_t i0 = rnd_below(30), end = i0 + rnd_below((uint32_t)(61 - c.offset - i0));
        check_run_matches_model("random", &r, &c, i0, end, rnd_below(2) ? ts : NULL, 1000 + rnd_below(100), &stop);
    }
    free(first);
}

/* kc_batch_grow: malloc while small, then the pool's blocks toward size_hint, the bytes kept */
static void test_batch_grow(void) {
    kc_buf b = {0};
    int pooled = 0;
    CHECK(kc_buf_reserve(&b, 4096) == 0);
    uint8_t pattern[4096];
    rnd_fill(pattern, sizeof pattern);
    memcpy(b.data, pattern, sizeof pattern);
    b.len = sizeof pattern;
    CHECK(kc_batch_grow(&b, 1000, 1 << 20, &pooled) == 0 && !pooled && b.cap >= 5096 && b.cap < 64 * 1024);
    /* past KC_POOL_MIN_CACHED: a block of the pool, 4x at a time toward the hint */
    size_t cap = b.cap;
    CHECK(kc_batch_grow(&b, KC_POOL_MIN_CACHED, 1 << 20, &pooled) == 0 && pooled && b.cap >= 4 * cap &&
          b.cap >= b.len + KC_POOL_MIN_CACHED);
    CHECK(memcmp(b.data, pattern, sizeof pattern) == 0 && b.len == sizeof pattern);
    cap = b.cap;
    b.len = cap - 10;
    CHECK(kc_batch_grow(&b, 11, 1 << 20, &pooled) == 0 && pooled && b.cap >= (4 * cap < (1u << 20) ? 4 * cap : (1u << 20)));
    CHECK(memcmp(b.data, pattern, sizeof pattern) == 0);
    /* no hint: doubling */
    cap = b.cap;
    b.len = cap;
    CHECK(kc_batch_grow(&b, 1, 0, &pooled) == 0 && b.cap >= 2 * cap && b.cap < 3 * cap);
    /* absurd sizes and external memory are refused, the buffer unchanged */
    uint8_t *data = b.data;
    CHECK(kc_batch_grow(&b, SIZE_MAX - 5, 0, &pooled) == -1 && b.data == data);
    kc_pool_free(b.data, b.cap);
    uint8_t ext[16];
    kc_buf e;
    kc_buf_adopt(&e, ext, sizeof ext);
    int epooled = 0;
    CHECK(kc_batch_grow(&e, 100, 0, &epooled) == -1 && e.data == ext && !epooled);
}

/* kc_append_run growing its batch (state.grow): the bytes of a run into a buffer big enough */
static void test_append_grows(void) {
    uint8_t data[64 * 40];
    rnd_fill(data, sizeof data);
    kc_value_column fixed = {data, NULL, NULL, NULL, 0, 40};
    for (int round = 0; round < 50; round++) {
        uint8_t *big = xmalloc(1 << 16);
        kc_append_state want = append_start(big, 1 << 16), s = want;
        size_t room = rnd_below(200); /* small: the run grows it (realloc, then the pool's blocks) */
        s.buf = xmalloc(s.len + room);
        memcpy(s.buf, big, s.len);
        s.cap = s.len + room;
        s.grow = 1;
        s.size_hint = rnd_below(2) ? 0 : 1 << 20;
        int stop, wstop;
        int64_t n = 1 + rnd_below(63);
        CHECK(kc_append_run(&s, &fixed, 0, n, NULL, 1000, &stop) == n && stop == KC_APPEND_END);
        CHECK(model_run(&want, &fixed, 0, n, NULL, 1000, &wstop) == n && wstop == KC_APPEND_END);
        CHECK(s.len == want.len && s.cap >= s.len && memcmp(s.buf, big, s.len) == 0 && s.count == want.count &&
              s.buffered == want.buffered && s.reserved == want.reserved);
        if (s.pooled)
            kc_pool_free(s.buf, s.cap);
        else
            free(s.buf);
        free(big);
    }
    /* a batch that may not grow stops where its room ends */
    uint8_t *first = xmalloc(1 << 16);
    kc_append_state s = append_start(first, 1 << 16);
    s.cap = s.len + 47;
    int stop;
    CHECK(kc_append_run(&s, &fixed, 0, 64, NULL, 1000, &stop) == 1 && stop == KC_APPEND_CALLER && !s.pooled);
    free(first);
}

/* The test's own xorshift32 and sticky choice (accumulator.pxi's one-record path). */
static uint32_t model_xorshift(uint32_t *x) {
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/* kc_append_sticky_runs against one model_run per partition's turn, switching as the
 * one-record path does: the same partitions, bytes, order, budget, memory and stop. */
static void test_append_sticky_runs(void) {
    enum { N = 5 };
    uint8_t data[600 * 40];
    rnd_fill(data, sizeof data);
    for (int round = 0; round < 400; round++) {
        int width = 1 + (int)rnd_below(40);
        kc_value_column c = {data, NULL, NULL, NULL, 0, width};
        int32_t n = 1 + (int32_t)rnd_below(N), n_states = 1 + (int32_t)rnd_below((uint32_t)n);
        kc_append_state st[N], md[N];
        uint8_t *bufs[N], *mbufs[N];
        int64_t sticky_bytes = 1 + rnd_below(3000), memory = 1 << 30;
        if (rnd_below(4) == 0) memory = 2000 + rnd_below(20000);
        for (int q = 0; q < N; q++) {
            bufs[q] = xmalloc(1 << 16);
            mbufs[q] = xmalloc(1 << 16);
            st[q] = append_start(bufs[q], 1 << 16);
            st[q].limit = st[q].len + 200 + rnd_below(8000);
            st[q].cap = st[q].len + rnd_below(12000);
            st[q].sticky_bytes = sticky_bytes;
            st[q].buffer_memory = memory;
            if (q >= n_states || rnd_below(5) == 0) st[q].buf = NULL; /* no batch to fill */
            md[q] = st[q];
            if (st[q].buf) {
                memcpy(mbufs[q], bufs[q], st[q].len);
                md[q].buf = mbufs[q];
            }
        }
        int32_t p = (int32_t)rnd_below((uint32_t)n), mp = p;
        int64_t buffered = 100 + rnd_below(1000), mbuffered = buffered;
        int64_t used = rnd_below((uint32_t)sticky_bytes), mused = used;
        uint32_t rand = 1 + rnd_below(1u << 30), mrand = rand;
        int32_t order[N], n_order = 0, morder[N], mn_order = 0;
        int64_t i0 = rnd_below(50), end = i0 + rnd_below(550);
        int stop, mstop = KC_APPEND_CALLER;
        int64_t got = kc_append_sticky_runs(st, n_states, n, &p, &buffered, &used, &rand, &c, i0, end, NULL, 1000,
                                            order, &n_order, &stop);
        /* the model */
        int64_t j = i0;
        if (mp < n_states && md[mp].buf) {
            for (;;) {
                md[mp].buffered = mbuffered;
                md[mp].sticky_used = mused;
                int64_t k = model_run(&md[mp], &c, j, end, NULL, 1000, &mstop);
                mbuffered = md[mp].buffered;
                mused = md[mp].sticky_used;
                int seen = 0;
                for (int32_t x = 0; x < mn_order; x++) seen |= morder[x] == mp;
                if (k && !seen) morder[mn_order++] = mp;
                j += k;
                if (mstop != KC_APPEND_STICKY) break;
                if (n > 1) {
                    int32_t r = (int32_t)(model_xorshift(&mrand) % (uint32_t)(n - 1));
                    mp = r < mp ? r : r + 1;
                }
                mused = 0;
                if (mp >= n_states || !md[mp].buf) {
                    mstop = KC_APPEND_SWITCHED;
                    break;
                }
            }
        }
        CHECKF(got == j - i0 && stop == mstop && p == mp && rand == mrand && buffered == mbuffered && used == mused,
               "sticky runs round %d: %lld/%lld stop %d/%d partition %d/%d", round, (long long)got,
               (long long)(j - i0), stop, mstop, p, mp);
        CHECK(n_order == mn_order && memcmp(order, morder, sizeof(int32_t) * (size_t)n_order) == 0);
        for (int q = 0; q < N; q++) {
            if (!st[q].buf) continue;
            CHECKF(st[q].len == md[q].len && st[q].count == md[q].count && memcmp(bufs[q], mbufs[q], st[q].len) == 0,
                   "sticky runs round %d: partition %d differs", round, q);
        }
        for (int q = 0; q < N; q++) {
            free(bufs[q]);
            free(mbufs[q]);
        }
    }
}

int main(void) {
    const char *seed = getenv("KC_TEST_SEED");
    if (seed && *seed) {
        g_rng = (uint64_t)strtoull(seed, NULL, 0);
        if (!g_rng) g_rng = 1;
    }
    printf("# seed 0x%016llX\n", (unsigned long long)g_rng);
    clock_t t0 = clock();
    test_crc32c();
    test_crc32c_impls();
    test_murmur2();
    test_varint();
    test_records();
    test_columns();
    test_columns_crc();
    test_columns_adopted();
    test_utf8();
    test_utf8_repair();
    test_buffer();
    test_pool();
    test_append();
    test_batch_grow();
    test_append_grows();
    test_append_sticky_runs();
    test_robustness();
    test_control_type();
    test_aborted();
    test_log();
    printf("# total %.2f s CPU\n", (double)(clock() - t0) / CLOCKS_PER_SEC);
    printf("%ld passed, %ld failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
