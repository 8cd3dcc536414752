"""Kafka's TransactionIndex: the ``<base offset>.txnindex`` file of a segment, listing the aborted
transactions whose ABORT marker is in the segment (docs/transactions.md, section 2.3).

Each entry is Kafka's AbortedTxn, 34 bytes big-endian: int16 version (0), int64 producerId,
int64 firstOffset (the transaction's first offset in the partition), int64 lastOffset (its
ABORT marker's offset), int64 lastStableOffset (the LSO when the marker was written). The file
is created at the first entry, only appended to, never preallocated, and ``lastOffset``
increases along it.

Entries are also kept in memory (read from the file at first use: 34 bytes each), so collecting
the aborted transactions of a read_committed fetch is a binary search on ``lastOffset`` and a
short walk, without I/O. Readers run without the log's lock: they take the entry list as it is
(an append adds to the end, a truncation puts a new list in place), so they never see a
half-changed one."""
from __future__ import annotations

import bisect
import os
import struct
import threading
from typing import NamedTuple

from ..errors import KafkaStorageError

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34, Kafka's AbortedTxn.TOTAL_SIZE
CURRENT_VERSION = 0


class AbortedTxn(NamedTuple):
    """One entry (Kafka's AbortedTxn). A fetch response's AbortedTransaction takes
    producer_id and first_offset."""
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def to_bytes(self) -> bytes:
        return ENTRY.pack(CURRENT_VERSION, self.producer_id, self.first_offset, self.last_offset,
                          self.last_stable_offset)


class CorruptIndexError(KafkaStorageError):
    """A .txnindex failing its sanity check (Kafka's CorruptIndexException)."""


def _last_offset(entry):
    return entry.last_offset


class TransactionIndex:
    def __init__(self, path, base_offset):
        self.path = path
        self.base_offset = base_offset
        self._entries = None  # loaded at first use
        self._fd = -1
        self._unflushed = False
        self._lock = threading.Lock()  # the lazy load against an append in another thread

    # -- reading ----------------------------------------------------------------------------
    @property
    def entries(self) -> list:
        """The entries in file order (the list itself: callers do not change it)."""
        entries = self._entries
        if entries is None:
            with self._lock:
                if self._entries is None:
                    self._entries = self._read_file()
                entries = self._entries
        return entries

    def _read_file(self):
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        except OSError as e:
            raise KafkaStorageError(f"reading transaction index {self.path} failed: {e}") from e
        if len(data) % ENTRY_SIZE:
            raise CorruptIndexError(f"transaction index {self.path} has {len(data)} bytes, not a multiple of "
                                    f"{ENTRY_SIZE}")
        out = []
        for pos in range(0, len(data), ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != CURRENT_VERSION:
                raise CorruptIndexError(f"transaction index {self.path}: entry {pos // ENTRY_SIZE} has version "
                                        f"{version}, only {CURRENT_VERSION} is known")
            out.append(AbortedTxn(pid, first, last, lso))
        return out

    @property
    def exists(self) -> bool:
        return self._fd >= 0 or os.path.exists(self.path)

    def collect(self, fetch_offset, upper_bound_offset):
        """(entries, complete) for a read of [fetch_offset, upper_bound_offset) (Kafka's
        collectAbortedTxns): every entry with lastOffset >= fetch_offset and firstOffset <
        upper_bound_offset; complete once an entry's lastStableOffset reaches the upper bound
        (no later segment can hold a transaction the read needs). The scan starts at the first
        lastOffset >= fetch_offset: an entry before it has lastStableOffset <= lastOffset + 1
        <= fetch_offset, so it can neither match nor end the search."""
        entries = self.entries
        n = len(entries)
        i = bisect.bisect_left(entries, fetch_offset, 0, n, key=_last_offset)
        out = []
        while i < n:
            e = entries[i]
            if e.first_offset < upper_bound_offset:
                out.append(e)
            if e.last_stable_offset >= upper_bound_offset:
                return out, True
            i += 1
        return out, False

    def sanity_check(self):
        """Kafka's sanityCheck plus the file's shape: CorruptIndexError when the size is not
        a multiple of 34, an entry's version is not 0, or a lastOffset is below the segment's
        base offset."""
        with self._lock:
            entries = self._read_file()
            self._entries = entries
        for e in entries:
            if e.last_offset < self.base_offset:
                raise CorruptIndexError(f"transaction index {self.path}: last offset {e.last_offset} of {e} is "
                                        f"below the segment's base offset {self.base_offset}")

    # -- writing (under the log's lock) ------------------------------------------------------
    def append(self, txn: AbortedTxn):
        """Appends an entry, creating the file at the first one. ValueError when lastOffset does
        not increase (Kafka's check); KafkaStorageError when the write fails (nothing stays)."""
        with self._lock:
            if self._entries is None:
                self._entries = self._read_file()
            entries = self._entries
            if entries and entries[-1].last_offset >= txn.last_offset:
                raise ValueError(f"the last offset of appended transactions must increase: {txn.last_offset} is not "
                                 f"above {entries[-1].last_offset} in {self.path}")
            size = len(entries) * ENTRY_SIZE
            try:
                if self._fd < 0:
                    self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                data = txn.to_bytes()
                if os.pwrite(self._fd, data, size) != len(data):
                    raise OSError("short write")
            except OSError as e:
                try:
                    if self._fd >= 0:
                        os.ftruncate(self._fd, size)
                except OSError:
                    pass  # the in-memory entries stay right; recovery cuts a torn entry
                raise KafkaStorageError(f"writing transaction index {self.path} failed: {e}") from e
            entries.append(txn)
            self._unflushed = True

    def truncate_to(self, offset):
        """Removes the entries with lastOffset >= offset (Kafka's truncateTo). The file stays
        (empty when nothing is kept), as Kafka's does."""
        with self._lock:
            entries = self._entries if self._entries is not None else self._read_file()
            keep = bisect.bisect_left(entries, offset, key=_last_offset)
            if keep == len(entries):
                self._entries = entries
                return
            try:
                if self._fd < 0:
                    self._fd = os.open(self.path, os.O_RDWR)
                os.ftruncate(self._fd, keep * ENTRY_SIZE)
            except OSError as e:
                raise KafkaStorageError(f"truncating transaction index {self.path} failed: {e}") from e
            self._entries = entries[:keep]  # a new list: readers keep the one they took
            self._unflushed = True

    def reset(self):
        """All entries go (Kafka's reset: the file is cut to 0 when it exists)."""
        self.truncate_to(-1 << 63)

    def flush(self):
        if self._unflushed and self._fd >= 0:
            os.fsync(self._fd)
            self._unflushed = False

    def close(self):
        with self._lock:
            if self._fd >= 0:
                try:
                    self.flush()
                finally:
                    os.close(self._fd)
                    self._fd = -1

    def rename(self, new_path):
        """Renames the file when it exists; the path changes either way (Kafka's renameTo)."""
        if os.path.exists(self.path):
            os.rename(self.path, new_path)
        self.path = new_path

    def delete(self):
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
            self._entries = []

    def __repr__(self):
        return f"TransactionIndex({self.path!r}, entries={len(self._entries) if self._entries is not None else '?'})"
