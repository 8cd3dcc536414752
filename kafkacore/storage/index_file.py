"""What Kafka's OffsetIndex and TimeIndex share (Kafka's AbstractIndex): a file of fixed-size
big-endian entries, preallocated to segment.index.bytes while its segment is active, memory-mapped
for the native binary search, and trimmed to its entries when the segment rolls or closes.

Entries are written with pwrite, not through the map: on a full disk a store into a sparse
mapped page kills the process with SIGBUS, while pwrite reports ENOSPC and the append fails
cleanly. Reads go through the map (the page cache is shared, so it sees every pwrite)."""
import mmap
import os
import threading

from ..errors import KafkaStorageError


class IndexFile:
    ENTRY_SIZE = 0  # set by subclasses

    def __init__(self, path, base_offset, max_index_size, mutable):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.ENTRY_SIZE)
        self._map = None
        self._map_len = 0
        self._map_lock = threading.Lock()
        self.existed = os.path.exists(path)
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            size = os.fstat(self.fd).st_size
        except OSError as e:
            raise KafkaStorageError(f"opening index {path} failed: {e}") from e
        self.entries = size // self.ENTRY_SIZE
        self.corrupt_size = size % self.ENTRY_SIZE != 0
        self.mutable = False
        if mutable:
            self.make_mutable()

    # -- file management ------------------------------------------------------------------
    def make_mutable(self):
        """Grow the file to its maximum so entries can be appended (the active segment)."""
        with self._map_lock:
            self._unmap()
            try:
                os.ftruncate(self.fd, self.max_entries * self.ENTRY_SIZE)
            except OSError as e:
                raise KafkaStorageError(f"preallocating index {self.path} failed: {e}") from e
        self.mutable = True

    def trim(self):
        """Cut the file to its entries (Kafka's trimToValidSize) and stop accepting appends."""
        with self._map_lock:
            self._unmap()
            os.ftruncate(self.fd, self.entries * self.ENTRY_SIZE)
        self.mutable = False

    def flush(self):
        os.fsync(self.fd)

    def _unmap(self):
        # Readers in other threads may still hold the old map (a roll trims the index while
        # fetches search it): it is dropped, not closed, and unmapped with its last reference.
        # They only touch the first `entries` entries, which the file keeps, so a smaller file
        # under an old, longer map is never read past its end.
        self._map = None
        self._map_len = 0

    def buffer(self, entries=None):
        """The mapped file, holding at least `entries` entries (default: all of them); None
        when that is 0. Maps lazily: many segments are never searched. A caller that reads
        `entries` itself passes it, so appends in another thread cannot make the two disagree."""
        if entries is None:
            entries = self.entries
        if entries == 0:
            return None
        need = entries * self.ENTRY_SIZE
        m = self._map
        if m is not None and self._map_len >= need:
            return m
        with self._map_lock:
            if self._map is None or self._map_len < need:
                if self.fd < 0:
                    raise KafkaStorageError(f"index {self.path} is closed")
                length = os.fstat(self.fd).st_size
                if length < need:
                    raise KafkaStorageError(f"index {self.path} is shorter than its entries")
                self._map = mmap.mmap(self.fd, length, mmap.MAP_SHARED, mmap.PROT_READ)
                self._map_len = length
            return self._map

    def close(self):
        with self._map_lock:
            self._unmap()
            fd, self.fd = self.fd, -1  # -1 first: a reader must not see a number being reused
        if fd >= 0:
            os.close(fd)

    def rename(self, new_path):
        os.rename(self.path, new_path)
        self.path = new_path

    # -- entries --------------------------------------------------------------------------
    def is_full(self, more=1):
        return self.entries + more > self.max_entries

    def append_entries(self, blob):
        """Appends entries already in the file format (from the segment scanner)."""
        if not blob:
            return
        n = len(blob) // self.ENTRY_SIZE
        if not self.mutable:
            raise KafkaStorageError(f"index {self.path} is not open for appends")
        if self.entries + n > self.max_entries:
            raise KafkaStorageError(f"index {self.path} is full")
        pos = self.entries * self.ENTRY_SIZE
        view = memoryview(blob)
        while view:
            written = os.pwrite(self.fd, view, pos)  # OSError (ENOSPC, EIO) goes to the caller
            view = view[written:]
            pos += written
        self.entries += n

    def truncate_to_entries(self, n):
        """Forget entries from slot n on; their bytes are zeroed so a crash cannot revive them."""
        if n >= self.entries:
            return
        start = n * self.ENTRY_SIZE
        length = (self.entries - n) * self.ENTRY_SIZE
        os.pwrite(self.fd, bytes(length), start)
        self.entries = n

    def reset(self):
        """Drop every entry (before a rebuild)."""
        with self._map_lock:
            self._unmap()
            self.entries = 0
            os.ftruncate(self.fd, 0)
            self.corrupt_size = False
            if self.mutable:
                os.ftruncate(self.fd, self.max_entries * self.ENTRY_SIZE)

    def entry_bytes(self, slot):
        buf = self.buffer()
        return bytes(buf[slot * self.ENTRY_SIZE:(slot + 1) * self.ENTRY_SIZE])
