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

/* 1 when the SSE4.2 crc32 instruction is in use. */
int kc_crc32c_hw_available(void);
/* 1 when the AVX-512 VPCLMULQDQ folding path is used for long buffers (inside the hw path). */
int kc_crc32c_avx512_available(void);

/* The SSE4.2 path itself: only call it when kc_crc32c_hw_available() says 1 (tests do). */
uint32_t kc_crc32c_hw(uint32_t crc, const void *data, size_t len);

#endif
