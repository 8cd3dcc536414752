"""A client thread's wake-up: the pipe its loop selects on beside its sockets (the producer's
sender, the consumer's fetcher)."""
import os
import select


class WakePipe:
    """``wake()`` writes one byte only while the thread is about to wait or waiting: each write
    is a wake-up of another CPU, and many calls between two waits need one. The thread calls
    ``going_to_sleep()`` before it looks at what it will wait for, so a change another thread
    makes while it decides is not missed; ``select()`` waits and clears the flag."""

    def __init__(self):
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self.sleeping = False

    def fileno(self):
        return self._r

    def going_to_sleep(self):
        self.sleeping = True

    def wake(self):
        if self.sleeping:
            self.sleeping = False
            self.wake_always()

    def wake_always(self):
        """For stop(): the loop reads its ``running`` flag before it calls going_to_sleep()."""
        w = self._w
        if w < 0:  # closed at the thread's end: the number may name another file by now
            return
        try:
            os.write(w, b"x")
        except OSError:  # full: a wake-up is pending anyway
            pass

    def select(self, conns, timeout):
        """select() on the pipe and ``conns`` (readable ones returned, the pipe drained)."""
        try:
            readable, _, _ = select.select([self] + conns, [], [], timeout)
        finally:
            self.sleeping = False
        if self in readable:
            try:
                while os.read(self._r, 4096):
                    pass
            except BlockingIOError:
                pass
        return readable

    def close(self):
        r, w = self._r, self._w
        self._r = self._w = -1
        os.close(r)
        os.close(w)
