/* UTF-8 for header keys, which Kafka and Arrow treat as strings: strict validation (RFC 3629:
 * no overlongs, no surrogates, nothing above U+10FFFF) and repair of ill-formed input. */
#ifndef KC_UTF8_H
#define KC_UTF8_H
#include <stddef.h>
#include <stdint.h>
int kc_utf8_valid(const uint8_t *p, size_t n);

/* Copies [src, src+n) to dst with each ill-formed sequence (its maximal subpart) replaced
 * by U+FFFD, as Java's new String(bytes, UTF_8) and Python's errors="replace" do. dst must
 * hold 3*n bytes. Returns the bytes written. */
size_t kc_utf8_repair(const uint8_t *src, size_t n, uint8_t *dst);
#endif
