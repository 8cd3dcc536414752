"""Replication, the layer every broker runs whatever the number of nodes (Kafka's
ReplicaManager and Partition): the partitions this broker holds a replica of and their roles,
the one write path of a leader (``ReplicaManager.append_records``), the acks=all waits, the
followers' fetchers and the connections between brokers, and the MetadataCache the handlers
answer from. It sits on storage and the protocol; the coordinators and the broker use it, and
the ZooKeeper side (kafkacore/cluster) feeds it."""
