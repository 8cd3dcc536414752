#include "kc_murmur2.h"

int32_t kc_murmur2(const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    const uint32_t seed = 0x9747b28cu, m = 0x5bd1e995u;
    const int r = 24;
    /* Kafka takes the length as a Java int; keys are far below 2 GiB. */
    uint32_t h = seed ^ (uint32_t)len;
    size_t blocks = len / 4;
    for (size_t i = 0; i < blocks; i++) {
        const unsigned char *b = p + 4 * i;
        uint32_t k = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = p + (len & ~(size_t)3);
    switch (len & 3) {
    case 3: h ^= (uint32_t)tail[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)tail[1] << 8;  /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}
