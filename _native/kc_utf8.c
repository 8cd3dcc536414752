#include "kc_utf8.h"
#include <string.h>

int kc_utf8_valid(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint32_t cp, min;
        if ((c & 0xE0) == 0xC0) {
            need = 1; cp = c & 0x1F; min = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            need = 2; cp = c & 0x0F; min = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            need = 3; cp = c & 0x07; min = 0x10000;
        } else {
            return 0;
        }
        if (n - i <= need) return 0;
        for (size_t k = 1; k <= need; k++) {
            uint8_t cc = p[i + k];
            if ((cc & 0xC0) != 0x80) return 0;
            cp = (cp << 6) | (cc & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
        i += need + 1;
    }
    return 1;
}

/* Length of the longest prefix of [p, p+n) that starts a well-formed sequence ("maximal
 * subpart", Unicode 6.0+ / what Python's and Java's decoders replace as one U+FFFD);
 * *complete says whether that prefix is a whole character. */
static size_t maximal_subpart(const uint8_t *p, size_t n, int *complete) {
    uint8_t c = p[0];
    size_t need;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    *complete = 0;
    if (c < 0x80) {
        *complete = 1;
        return 1;
    }
    if (c < 0xC2) return 1;
    if (c < 0xE0) {
        need = 1;
    } else if (c < 0xF0) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c < 0xF5) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 1;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) return i;
        uint8_t cc = p[i];
        if (i == 1 ? (cc < lo || cc > hi) : (cc & 0xC0) != 0x80) return i;
    }
    *complete = 1;
    return i;
}

size_t kc_utf8_repair(const uint8_t *src, size_t n, uint8_t *dst) {
    size_t in = 0, out = 0;
    while (in < n) {
        int complete;
        size_t len = maximal_subpart(src + in, n - in, &complete);
        if (complete) {
            memcpy(dst + out, src + in, len);
            out += len;
        } else {
            dst[out++] = 0xEF; /* U+FFFD */
            dst[out++] = 0xBF;
            dst[out++] = 0xBD;
        }
        in += len;
    }
    return out;
}
