"""The exclusive lock on a data directory, as Kafka takes it: ``<log.dir>/.lock``, held with
flock for as long as the directory is open. A second broker (or LogManager, or embedded Broker)
on the same directory would acknowledge writes at the same offsets as the first and lose one
side's records, so it must refuse to start.

The lock file holds the holder's pid and host, only to name it in the error (Kafka leaves the
file empty; its tools never read it). The lock itself is the flock, which the kernel drops when
the holder dies, so a crashed broker never leaves a stale lock behind."""
import fcntl
import os
import socket

from ..errors import KafkaStorageError

LOCK_FILE = ".lock"


class DataDirectoryInUseError(KafkaStorageError):
    """The data directory's .lock is held by another process or another open LogManager."""


class DataDirLock:
    def __init__(self, data_dir):
        self.path = os.path.join(data_dir, LOCK_FILE)
        self._fd = None  # set before the open, which can fail (permission denied, read-only): __del__ reads it
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = self._holder()
            os.close(self._fd)
            self._fd = None
            raise DataDirectoryInUseError(
                f"data directory {data_dir} is in use{' by ' + holder if holder else ''} "
                f"({self.path} is locked); stop that broker or choose another data directory") from None
        except OSError:
            os.close(self._fd)
            self._fd = None
            raise
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"pid={os.getpid()} host={socket.gethostname()}\n".encode(), 0)

    def _holder(self):
        try:
            text = os.pread(self._fd, 256, 0).decode("utf-8", "replace").strip()
        except OSError:
            return ""
        fields = dict(f.split("=", 1) for f in text.split() if "=" in f)
        if "pid" not in fields:
            return ""
        return f"process {fields['pid']}" + (f" on {fields['host']}" if fields.get("host") else "")

    @property
    def held(self):
        return self._fd is not None

    def release(self):
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the descriptor drops the flock

    def __del__(self):
        self.release()
