/* A small cache of large blocks for decoded columns and producers' record batches. Fresh
 * memory costs a page fault and a page clear per 4 KiB when first written (the main cost of
 * decoding, and of filling 1 MB batches, on a VM), and the general-purpose allocators hand
 * big blocks back to the OS on free; keeping a few recently freed blocks lets the next user
 * write into pages that are already mapped.
 * Thread-safe; bounded in count and bytes. */
#ifndef KC_POOL_H
#define KC_POOL_H
#include <stddef.h>

/* Blocks of this size and more are cached; smaller ones are cheap for malloc itself. */
#define KC_POOL_MIN_CACHED (64 * 1024)

/* A block of at least `size` bytes (malloc'd or recycled); *cap receives its real size.
 * NULL when out of memory. */
void *kc_pool_alloc(size_t size, size_t *cap);
/* Gives a block back: cached if it is large and the cache has room, else freed. */
void kc_pool_free(void *p, size_t cap);
/* Frees every cached block. */
void kc_pool_clear(void);
/* Bytes currently held in the cache. */
size_t kc_pool_cached_bytes(void);
/* Sets the cache's byte limit (0 disables caching); returns the old one. */
size_t kc_pool_set_limit(size_t bytes);
#endif
