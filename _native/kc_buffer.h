/* A growable byte buffer owned by C code. */
#ifndef KC_BUFFER_H
#define KC_BUFFER_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
    int external; /* memory owned by someone else (e.g. an Arrow pool): never grown or freed */
} kc_buf;

/* Makes b use caller-owned memory of `cap` bytes; reserving past it then fails. */
static inline void kc_buf_adopt(kc_buf *b, uint8_t *data, size_t cap) {
    b->data = data;
    b->len = 0;
    b->cap = cap;
    b->external = 1;
}

/* Makes room for `extra` more bytes; returns 0 on success, -1 when out of memory. */
int kc_buf_reserve_slow(kc_buf *b, size_t extra);
static inline int kc_buf_reserve(kc_buf *b, size_t extra) {
    if (b->cap - b->len >= extra) return 0;
    return kc_buf_reserve_slow(b, extra);
}
static inline int kc_buf_append(kc_buf *b, const void *src, size_t n) {
    if (kc_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}
void kc_buf_free(kc_buf *b);
/* Hands the memory to the caller (who frees it with free()); leaves b empty. */
uint8_t *kc_buf_release(kc_buf *b);
#endif
