/* Strict UTF-8 validation (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF),
 * for header keys, which Arrow and Kafka treat as strings. */
#ifndef KC_UTF8_H
#define KC_UTF8_H
#include <stddef.h>
#include <stdint.h>
int kc_utf8_valid(const uint8_t *p, size_t n);
#endif
