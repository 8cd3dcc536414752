#define _POSIX_C_SOURCE 200809L
#include "kc_pool.h"
#include <pthread.h>
#include <stdlib.h>

#define SLOTS 16

typedef struct {
    void *p;
    size_t cap;
} slot;

static slot slots[SLOTS];
static size_t cached_bytes = 0;
static size_t limit_bytes = 256u * 1024 * 1024;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *kc_pool_alloc(size_t size, size_t *cap) {
    if (size == 0) size = 1;
    if (size >= KC_POOL_MIN_CACHED) {
        int best = -1;
        pthread_mutex_lock(&lock);
        /* Smallest block that fits without wasting more than half of it. */
        for (int i = 0; i < SLOTS; i++) {
            if (slots[i].p && slots[i].cap >= size && slots[i].cap / 2 <= size &&
                (best < 0 || slots[i].cap < slots[best].cap))
                best = i;
        }
        if (best >= 0) {
            void *p = slots[best].p;
            *cap = slots[best].cap;
            cached_bytes -= slots[best].cap;
            slots[best].p = NULL;
            slots[best].cap = 0;
            pthread_mutex_unlock(&lock);
            return p;
        }
        pthread_mutex_unlock(&lock);
    }
    void *p = malloc(size);
    if (p) *cap = size;
    return p;
}

void kc_pool_free(void *p, size_t cap) {
    if (!p) return;
    if (cap >= KC_POOL_MIN_CACHED) {
        pthread_mutex_lock(&lock);
        if (cap <= limit_bytes) {
            /* Make room by evicting the smallest blocks first: big ones save the most faults. */
            while (cached_bytes + cap > limit_bytes) {
                int smallest = -1;
                for (int i = 0; i < SLOTS; i++)
                    if (slots[i].p && (smallest < 0 || slots[i].cap < slots[smallest].cap)) smallest = i;
                if (smallest < 0) break;
                free(slots[smallest].p);
                cached_bytes -= slots[smallest].cap;
                slots[smallest].p = NULL;
                slots[smallest].cap = 0;
            }
            int free_slot = -1, smallest = -1;
            for (int i = 0; i < SLOTS; i++) {
                if (!slots[i].p) {
                    if (free_slot < 0) free_slot = i;
                } else if (smallest < 0 || slots[i].cap < slots[smallest].cap) {
                    smallest = i;
                }
            }
            if (free_slot < 0 && smallest >= 0 && slots[smallest].cap < cap) {
                free(slots[smallest].p);
                cached_bytes -= slots[smallest].cap;
                slots[smallest].p = NULL;
                slots[smallest].cap = 0;
                free_slot = smallest;
            }
            if (free_slot >= 0 && cached_bytes + cap <= limit_bytes) {
                slots[free_slot].p = p;
                slots[free_slot].cap = cap;
                cached_bytes += cap;
                pthread_mutex_unlock(&lock);
                return;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    free(p);
}

void kc_pool_clear(void) {
    pthread_mutex_lock(&lock);
    for (int i = 0; i < SLOTS; i++) {
        free(slots[i].p);
        slots[i].p = NULL;
        slots[i].cap = 0;
    }
    cached_bytes = 0;
    pthread_mutex_unlock(&lock);
}

size_t kc_pool_cached_bytes(void) {
    pthread_mutex_lock(&lock);
    size_t n = cached_bytes;
    pthread_mutex_unlock(&lock);
    return n;
}

size_t kc_pool_set_limit(size_t bytes) {
    pthread_mutex_lock(&lock);
    size_t old = limit_bytes;
    limit_bytes = bytes;
    pthread_mutex_unlock(&lock);
    if (bytes < old) {
        /* Shrink now rather than at the next free. */
        pthread_mutex_lock(&lock);
        for (int i = 0; i < SLOTS && cached_bytes > limit_bytes; i++) {
            if (slots[i].p) {
                free(slots[i].p);
                cached_bytes -= slots[i].cap;
                slots[i].p = NULL;
                slots[i].cap = 0;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return old;
}
