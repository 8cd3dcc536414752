/* Kafka's murmur2 (org.apache.kafka.common.utils.Utils.murmur2), used by the default
 * partitioner for keyed records. */
#ifndef KC_MURMUR2_H
#define KC_MURMUR2_H
#include <stddef.h>
#include <stdint.h>

int32_t kc_murmur2(const void *data, size_t len);

/* (murmur2(key) & 0x7fffffff) % num_partitions, as Kafka's BuiltInPartitioner does. */
static inline int32_t kc_partition_for_hash(int32_t hash, int32_t num_partitions) {
    return (int32_t)(((uint32_t)hash & 0x7fffffffu) % (uint32_t)num_partitions);
}
#endif
