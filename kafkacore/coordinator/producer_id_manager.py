"""Hands out producer ids (InitProducerId) that are never reused, across restarts too.

Kafka allocates ids in blocks of 1000 and records each block durably before any id from it is
used. On a single node the record is one file in the data directory (``kafkacore-producer-ids``:
the first id of the next unallocated block); on a cluster it is ZooKeeper's
``/latest_producer_id_block``, updated conditionally, so ids are unique cluster-wide (an
idempotent producer's state moves with its partitions' leaders, and two producers with one id
would corrupt it). After a crash at most the rest of one block is skipped, never reused."""
from __future__ import annotations

import os
import threading

from ..storage.checkpoints import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "kafkacore-producer-ids"


class ProducerIdManager:
    def __init__(self, data_dir, allocate_block=None):
        """``allocate_block(size) -> (first, last)``: the cluster's allocator; None: the file."""
        self.path = os.path.join(data_dir, FILE_NAME)
        self._allocate_block = allocate_block
        self._lock = threading.Lock()
        try:
            with open(self.path, encoding="utf-8") as f:
                self._next_block = int(f.read().strip() or 0)
        except FileNotFoundError:
            self._next_block = 0
        except ValueError as e:
            raise ValueError(f"{self.path} is not an integer: {e}") from None
        self._next = self._end = self._next_block

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._end:
                if self._allocate_block is not None:
                    first, last = self._allocate_block(BLOCK_SIZE)
                    self._next, self._end = first, last + 1
                else:
                    start = self._next_block
                    write_atomically(self.path, f"{start + BLOCK_SIZE}\n")
                    self._next_block = start + BLOCK_SIZE
                    self._next, self._end = start, start + BLOCK_SIZE
            pid = self._next
            self._next += 1
            return pid

    def close(self):
        pass
