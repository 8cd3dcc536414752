"""A byte range of a segment's log file: what Log.read returns and the broker sends with
os.sendfile (Kafka's FileRecords slice). It holds the segment's file open, so a segment deleted
or replaced by the cleaner while the slice is in flight is still read whole."""
import os


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
        if self.length <= 1 << 24:  # the common case: one read, one copy
            data = os.pread(self.file.fileno(), self.length, self.position)
            if len(data) == self.length:
                return data
        out = bytearray()
        pos, end = self.position, self.position + self.length
        while pos < end:
            chunk = os.pread(self.file.fileno(), min(end - pos, 1 << 24), pos)
            if not chunk:
                break
            out += chunk
            pos += len(chunk)
        return bytes(out)

    def sendfile(self, sock_fd, offset=0, count=None):
        """os.sendfile of the slice from offset within it; returns bytes sent (may be short)."""
        count = self.length - offset if count is None else count
        return os.sendfile(sock_fd, self.file.fileno(), self.position + offset, count)

    def __repr__(self):
        return f"FileSlice({self.file.path!r}, position={self.position}, length={self.length})"

