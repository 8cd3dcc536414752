"""A progress bar for long operations, on stderr and only when stderr is a terminal: piped or
captured output (scripts, tests, ``2>log``) never sees it, and stdout stays the command's result.

    with Progress(len(plan), "committing offsets") as progress:
        for chunk in chunks:
            ...
            progress.advance(len(chunk))
"""
from __future__ import annotations

import sys
import time

BAR_WIDTH = 30
REDRAW_INTERVAL_S = 0.1  # at most ten redraws a second: a fast loop must not spend its time drawing


class Progress:
    def __init__(self, total: int, label: str, stream=None):
        self.total = max(int(total), 0)
        self.label = label
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream)
        self._started = time.monotonic()
        self._drawn_at = 0.0
        self._width = 0

    def __enter__(self):
        self._draw(force=True)
        return self

    def __exit__(self, *exc):
        self.close()

    def advance(self, n: int = 1):
        self.update(self.done + n)

    def update(self, done: int):
        self.done = min(max(int(done), 0), self.total) if self.total else int(done)
        self._draw(force=self.done == self.total)

    def close(self):
        """Erases the bar (the command's own output follows on a clean line)."""
        if self.enabled and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0
        self.enabled = False

    def _draw(self, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < REDRAW_INTERVAL_S:
            return
        self._drawn_at = now
        if self.total:
            filled = BAR_WIDTH * self.done // self.total
            line = (f"{self.label} [{'#' * filled}{'.' * (BAR_WIDTH - filled)}] {self.done}/{self.total} "
                    f"{100 * self.done // self.total}% {now - self._started:.0f}s")
        else:
            line = f"{self.label} {self.done} {now - self._started:.0f}s"
        self.stream.write("\r" + line.ljust(self._width))
        self.stream.flush()
        self._width = max(self._width, len(line))


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
