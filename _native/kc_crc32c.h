/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as used by Kafka record batches v2. */
#ifndef KC_CRC32C_H
#define KC_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* Build the lookup tables and pick the implementation. Idempotent; call once before
 * concurrent use (the Python module calls it at import). */
void kc_crc32c_init(void);

/* Continue a CRC: crc is a previous result (0 to start). Returns the finished CRC. */
uint32_t kc_crc32c(uint32_t crc, const void *data, size_t len);

/* The portable slicing-by-8 path, exposed so tests can compare it with the hardware one. */
uint32_t kc_crc32c_sw(uint32_t crc, const void *data, size_t len);

/* 1 when the CPU has the SSE4.2 crc32 instruction. */
int kc_crc32c_hw_available(void);
/* 1 when the AVX-512 VPCLMULQDQ folding path is the one in use. */
int kc_crc32c_avx512_available(void);

/* The best hardware path (the one in use unless the software one was forced): only call it
 * when kc_crc32c_hw_available() says 1 (tests do). */
uint32_t kc_crc32c_hw(uint32_t crc, const void *data, size_t len);

/* The implementations, chosen at init from the CPU's features (cpuid), best last:
 *   SW          portable slicing-by-8
 *   SSE42       crc32 instruction, 3 interleaved streams (x86-64)
 *   PCLMUL      PCLMULQDQ folding on 128-bit registers, 8 accumulators
 *   VPCLMUL256  VPCLMULQDQ folding on 256-bit registers (AVX2), 8 accumulators
 *   MIXED256    VPCLMUL256's folding and 3 crc32 streams in the same loop
 *   AVX512      VPCLMULQDQ folding on 512-bit registers (AVX-512F)
 * Each SIMD kernel is compiled with a target attribute, so the file needs no -m flags, and
 * hands short buffers and its last bytes to the crc32 instruction. */
enum {
    KC_CRC32C_IMPL_SW = 0,
    KC_CRC32C_IMPL_SSE42 = 1,
    KC_CRC32C_IMPL_PCLMUL = 2,
    KC_CRC32C_IMPL_VPCLMUL256 = 3,
    KC_CRC32C_IMPL_MIXED256 = 4,
    KC_CRC32C_IMPL_AVX512 = 5,
    KC_CRC32C_IMPL_COUNT = 6
};
/* 1 when this CPU (and build) can run the implementation. */
int kc_crc32c_impl_available(int impl);
/* The implementation kc_crc32c uses. */
int kc_crc32c_impl(void);
/* Tests and benchmarks: make kc_crc32c use another available implementation (not thread
 * safe against concurrent kc_crc32c calls). Returns 0, or -1 when it is not available. */
int kc_crc32c_set_impl(int impl);
/* "sw", "sse4.2", "pclmul", "vpclmul256", "mixed256", "avx512" (the KAFKACORE_CRC32C_IMPL values). */
const char *kc_crc32c_impl_name(int impl);
/* kc_crc32c through one implementation (the software one when it is not available). */
uint32_t kc_crc32c_with(int impl, uint32_t crc, const void *data, size_t len);

#endif
