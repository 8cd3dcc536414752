"""How idle the broker's event loop is, for Kafka's idle-percent metrics (broker/metrics.py).

Kafka has network threads (``NetworkProcessorAvgIdlePercent``) and request handler threads
(``RequestHandlerAvgIdlePercent``); kafkacore does both jobs on one asyncio event loop, so both
are the share of time that loop spends waiting in its selector for something to do. The loop's
selector is wrapped: each ``select()`` that may wait is timed with two ``perf_counter()`` calls
(a turn with callbacks queued only polls, and is not timed); nothing else on the request path
changes. Loops without a selector (a proactor, uvloop) are not wrapped and their broker exports
neither metric.
"""
from __future__ import annotations

from time import perf_counter

# Kafka's metrics average over two 30 s samples (metrics.num.samples, metrics.sample.window.ms)
WINDOW_S = 30.0


class _TimedSelector:
    """The loop's selector, with the seconds spent in ``select()`` added up."""

    def __init__(self, selector):
        self._selector = selector
        self.idle_s = 0.0

    def select(self, timeout=None):
        if timeout == 0:
            # callbacks are queued: a poll, not a wait (and a busy loop pays no clock reads,
            # which cost some 0.4 us each on a virtual machine's clock)
            return self._selector.select(0)
        t0 = perf_counter()
        try:
            return self._selector.select(timeout)
        finally:
            self.idle_s += perf_counter() - t0

    def __getattr__(self, name):  # register, modify, unregister, get_key, get_map, close
        return getattr(self._selector, name)


class LoopIdle:
    def __init__(self, loop):
        """Wraps ``loop``'s selector; ``watching`` is False when the loop has none."""
        selector = getattr(loop, "_selector", None)
        self.watching = selector is not None and hasattr(selector, "select")
        self._timed = None
        if self.watching:
            self._timed = loop._selector = _TimedSelector(selector)
        self._started = perf_counter()
        self._window = (self._started, 0.0)  # (start, idle seconds then) of the current window
        self._previous = None

    def mean_since_start(self) -> float:
        """The idle share since the broker started (what Kafka's meter reports as MeanRate)."""
        return self._share(self._started, 0.0, perf_counter())

    def recent(self) -> float:
        """The idle share over the last one to two windows (since the start for the first one)."""
        now = perf_counter()
        if now - self._window[0] >= WINDOW_S:
            self._previous, self._window = self._window, (now, self._timed.idle_s)
        start, idle0 = self._previous or (self._started, 0.0)
        return self._share(start, idle0, now)

    def _share(self, start, idle0, now) -> float:
        elapsed = now - start
        if elapsed <= 0:
            return 1.0
        return min(max((self._timed.idle_s - idle0) / elapsed, 0.0), 1.0)
