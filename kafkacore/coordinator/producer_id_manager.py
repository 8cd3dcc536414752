"""Hands out producer ids (InitProducerId) that are never reused, across restarts too.

Kafka's controller allocates ids in blocks of 1000 and records each block durably before any id
from it is used; this does the same with one file in the data directory
(``kafkacore-producer-ids``: the first id of the next unallocated block). After a crash at most
the rest of one block is skipped, never reused."""
from __future__ import annotations

import os
import threading

from ..storage.checkpoints import write_atomically

BLOCK_SIZE = 1000
FILE_NAME = "kafkacore-producer-ids"


class ProducerIdManager:
    def __init__(self, data_dir):
        self.path = os.path.join(data_dir, FILE_NAME)
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
                start = self._next_block
                write_atomically(self.path, f"{start + BLOCK_SIZE}\n")
                self._next_block = start + BLOCK_SIZE
                self._next, self._end = start, start + BLOCK_SIZE
            pid = self._next
            self._next += 1
            return pid

    def close(self):
        pass
