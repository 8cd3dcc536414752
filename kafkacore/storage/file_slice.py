"""A byte range of a segment's log file: what Log.read returns and the broker sends with
os.sendfile (Kafka's FileRecords slice). It holds the segment's file open, so a segment deleted
or replaced by the cleaner while the slice is in flight is still read whole."""
import os

from .._loader import load_native

_records = load_native("records")


class SegmentFile:
    """The open .log file of one segment; closed when the last holder lets go."""

    __slots__ = ("fd", "path", "__weakref__")

    def __init__(self, path, flags):
        self.path = path
        self.fd = os.open(path, flags, 0o644)

    def fileno(self):
        return self.fd

    def close(self):
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self):
        self.close()


class FileSlice:
    """``file`` (with fileno()), ``position`` and ``length``: the bytes to send. Empty when
    there is nothing to read at that offset (length 0)."""

    __slots__ = ("file", "position", "length", "first_offset")

    def __init__(self, file, position, length, first_offset=-1):
        self.file = file
        self.position = position
        self.length = length
        self.first_offset = first_offset

    def fileno(self):
        return self.file.fileno()

    def __len__(self):
        return self.length

    def read(self) -> bytes:
        """The bytes of the slice (a copy; the broker sends with sendfile instead)."""
        if self.length == 0:
            return b""
        # One pread is one copy out of the page cache; the chunks of a long (or short) read are
        # joined once. (Gathering them in a bytearray and converting to bytes copied every byte
        # twice more, into fresh memory: most of an embedded consumer's fetch cost, issue 30.)
        chunks = []
        pos, end = self.position, self.position + self.length
        while pos < end:
            chunk = os.pread(self.file.fileno(), min(end - pos, 1 << 24), pos)
            if not chunk:
                break
            chunks.append(chunk)
            pos += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def read_buffer(self):
        """The bytes of the slice as a read-only buffer: read into a recycled block of the
        native block cache (no page faults on fresh memory), or read() without the extension."""
        if _records is None or self.length == 0:
            return self.read()
        return _records.read_pooled(self.file.fileno(), self.position, self.length)

    def sendfile(self, sock_fd, offset=0, count=None):
        """os.sendfile of the slice from offset within it; returns bytes sent (may be short)."""
        count = self.length - offset if count is None else count
        return os.sendfile(sock_fd, self.file.fileno(), self.position + offset, count)

    def __repr__(self):
        return f"FileSlice({self.file.path!r}, position={self.position}, length={self.length})"

