"""AdminClients lent to worker threads. An AdminClient blocks and its connections serve one
thread at a time, so each call borrows a whole client for its duration; clients are made on
demand up to ``size`` and kept for the next call (their connections stay open)."""
from __future__ import annotations

import asyncio
import threading


class AdminPool:
    def __init__(self, make_client, size: int = 3):
        self._make = make_client
        self._size = size
        self._idle = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)

    def call(self, fn, *args):
        """``fn(admin, *args)`` on this thread with a client of the pool (blocking)."""
        with self._slots:
            with self._lock:
                admin = self._idle.pop() if self._idle else None
            if admin is None:
                admin = self._make()
            ok = False
            try:
                result = fn(admin, *args)
                ok = True
                return result
            finally:
                if ok:
                    with self._lock:
                        self._idle.append(admin)
                else:
                    # after a failure its connections may be half-way through a request: start afresh
                    admin.close()

    async def run(self, fn, *args):
        """``fn(admin, *args)`` in a worker thread, awaited."""
        return await asyncio.to_thread(self.call, fn, *args)

    def close(self):
        with self._lock:
            idle, self._idle = self._idle, []
        for admin in idle:
            admin.close()
