#include "kc_buffer.h"
#include <stdlib.h>

int kc_buf_reserve_slow(kc_buf *b, size_t extra) {
    if (b->external || extra > SIZE_MAX - b->len) return -1;
    size_t need = b->len + extra;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    uint8_t *p = (uint8_t *)realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

void kc_buf_free(kc_buf *b) {
    if (!b->external) free(b->data);
    b->external = 0;
    b->data = NULL;
    b->len = b->cap = 0;
}

uint8_t *kc_buf_release(kc_buf *b) {
    uint8_t *p = b->external ? NULL : b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}
