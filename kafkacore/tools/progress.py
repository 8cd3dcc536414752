"""A progress bar for long operations, on stderr and only when stderr is a terminal: piped or
captured output (scripts, tests, ``2>log``) never sees it, and stdout stays the command's result.

    with Progress(len(plan), "committing offsets") as progress:
        for chunk in chunks:
            ...
            progress.advance(len(chunk))

    with Progress(size, "00000000000000000000.log", unit="B", delay=0.5) as bar:
        bar.update(position)                  # bytes: shown in KiB/MiB, with a rate and an ETA

The line shows the label, a bar, done/total and the percentage, the rate and the time left;
``update(done, note)`` adds a note after them (perf shows its MB/s and latency there). It
redraws at most ten times a second, fits the terminal's width (the bar shrinks, then goes),
and is erased on close. ``delay`` holds the first draw back that long, so that a job that
turns out quick never flashes a bar.
"""
from __future__ import annotations

import shutil
import sys
import time

BAR_WIDTH = 30
REDRAW_INTERVAL_S = 0.1  # at most ten redraws a second: a fast loop must not spend its time drawing

# seconds before a perf tool's live line appears: a short run just prints its summary
LIVE_LINE_DELAY = 0.5


def human_count(n: float) -> str:
    """1234567 -> '1.2M': counts and rates for people."""
    for suffix in ("", "k", "M", "G"):
        if abs(n) < 1000 or suffix == "G":
            return f"{n:.0f}" if suffix == "" else f"{n:.1f}{suffix}"
        n /= 1000
    return str(n)  # not reached


def _count(n: int) -> str:
    """Exact while it is short enough to read (a partition count), 1.2M beyond."""
    return str(n) if n < 100_000 else human_count(n)


def human_duration(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    def __init__(self, total: int, label: str, stream=None, unit: str = "", delay: float = 0.0,
                 enabled: bool | None = None):
        """``total`` units of work (0: unknown, a counter without a bar); ``unit`` names them
        ("records"; "B" shows bytes in binary units); ``enabled`` overrides the terminal test."""
        self.total = max(int(total or 0), 0)
        self.label = label
        self.unit = unit
        self.done = 0
        self.note = ""
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_tty(self.stream) if enabled is None else enabled
        self._started = time.monotonic()
        self._first_draw = self._started + delay
        self._drawn_at = 0.0
        self._width = 0  # of the longest line drawn: what close() erases

    def __enter__(self):
        self._draw(force=True)
        return self

    def __exit__(self, *exc):
        self.close()

    def advance(self, n: int = 1):
        self.update(self.done + n)

    def update(self, done: int, note: str | None = None):
        """Sets the work done so far (and, optionally, the note shown after the numbers)."""
        self.done = min(max(int(done), 0), self.total) if self.total else int(done)
        if note is not None:
            self.note = note
        self._draw(force=self.done == self.total)

    def close(self):
        """Erases the bar (the command's own output follows on a clean line)."""
        if self.enabled and self._width:
            try:
                self.stream.write("\r" + " " * self._width + "\r")
                self.stream.flush()
            except (OSError, ValueError):  # the terminal went away
                pass
            self._width = 0
        self.enabled = False

    def line(self, now: float | None = None, width: int = 100) -> str:
        """The text drawn at ``now``, fitted to ``width`` columns."""
        from .output import human_bytes

        now = time.monotonic() if now is None else now
        rate = self.done / max(now - self._started, 1e-9)
        if self.unit == "B":
            amount, speed = human_bytes(self.done), f"{human_bytes(int(rate))}/s"
            if self.total:
                amount += f"/{human_bytes(self.total)}"
        else:
            unit = f" {self.unit}" if self.unit else ""
            amount = f"{_count(self.done)}/{_count(self.total)}{unit}" if self.total else f"{_count(self.done)}{unit}"
            speed = f"{human_count(rate)}{unit}/s"
        tail = [amount]
        if self.total:
            tail.append(f"{100 * self.done // self.total}%")
        tail.append(speed)
        if self.total and 0 < self.done < self.total and rate > 0:
            tail.append(f"ETA {human_duration((self.total - self.done) / rate)}")
        if self.note:
            tail.append(self.note)
        text = " ".join(tail)
        head = self.label
        if self.total:
            room = width - len(self.label) - len(text) - 4
            if room >= 8:
                bar = min(BAR_WIDTH, room)
                filled = bar * self.done // self.total
                head += f" [{'#' * filled}{'.' * (bar - filled)}]"
        return f"{head} {text}"[:width]

    def _draw(self, force=False):
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._first_draw or (not force and now - self._drawn_at < REDRAW_INTERVAL_S):
            return
        self._drawn_at = now
        line = self.line(now, max(shutil.get_terminal_size((100, 20)).columns - 1, 10))
        try:
            self.stream.write("\r" + line.ljust(self._width))
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: stop drawing, keep working
            self.enabled = False
            return
        self._width = max(self._width, len(line))


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
