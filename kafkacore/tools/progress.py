"""A progress bar for long commands, drawn on stderr only when stderr is a terminal.

    with Progress(total_bytes, "dump 00000000000000000000.log", unit="B") as bar:
        for ...:
            bar.update(done)                  # or bar.advance(n)

Pipes, files and tests see nothing: the bar is for people watching. It waits ``delay``
seconds before drawing, so quick jobs never flash one, redraws at most ``REDRAW_EVERY``
seconds apart, and erases itself when closed, leaving the terminal as it was. ``note``
replaces the label's detail (perf uses it for its live throughput and latency line).
"""
from __future__ import annotations

import shutil
import sys
import time

REDRAW_EVERY = 0.1  # seconds between redraws: smooth enough, and cheap
DEFAULT_DELAY = 0.5  # seconds before the first draw
BAR_WIDTH = 24


def human_count(n: float, unit: str = "") -> str:
    """1234567 -> '1.2M'; with unit 'B', bytes in binary multiples: '1.2 MiB'."""
    if unit == "B":
        for suffix in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(n) < 1024 or suffix == "TiB":
                return f"{n:.0f} {suffix}" if suffix == "B" else f"{n:.1f} {suffix}"
            n /= 1024
    for suffix in ("", "k", "M", "G"):
        if abs(n) < 1000 or suffix == "G":
            text = f"{n:.0f}" if suffix == "" else f"{n:.1f}{suffix}"
            return f"{text} {unit}".rstrip() if unit else text
        n /= 1000
    return str(n)  # not reached


def human_duration(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.5))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Progress:
    """A bar for ``total`` units of work (None or 0: unknown, a counter without a bar)."""

    def __init__(self, total: float | None, label: str, unit: str = "", stream=None,
                 delay: float = DEFAULT_DELAY, enabled: bool | None = None):
        self.total = total or 0
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = _is_terminal(self.stream) if enabled is None else enabled
        self.done = 0
        self.note = ""
        self.started = time.monotonic()
        self._first_draw = self.started + delay
        self._last_draw = 0.0
        self._drawn = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def update(self, done: float, note: str | None = None) -> None:
        """Sets the work done so far (and, optionally, the note shown after the numbers)."""
        self.done = done
        if note is not None:
            self.note = note
        if not self.enabled:
            return
        now = time.monotonic()
        if now < self._first_draw or now - self._last_draw < REDRAW_EVERY:
            return
        self._last_draw = now
        self._draw(now)

    def advance(self, amount: float = 1) -> None:
        self.update(self.done + amount)

    def line(self, now: float | None = None, width: int = 100) -> str:
        """The text of the bar as it would be drawn now (without the carriage return), fitted
        to ``width`` columns: the bar shrinks first, then the text is cut."""
        now = time.monotonic() if now is None else now
        elapsed = max(now - self.started, 1e-9)
        rate = self.done / elapsed
        unit = f" {self.unit}" if self.unit and self.unit != "B" else ""
        if self.total:
            frac = min(max(self.done / self.total, 0.0), 1.0)
            if self.unit == "B":
                amount = f"{human_count(self.done, 'B')}/{human_count(self.total, 'B')}"
            else:
                amount = f"{human_count(self.done)}/{human_count(self.total)}{unit}"
            head, tail = [self.label], [f"{frac * 100:5.1f}%", amount]
        else:
            frac = None
            head, tail = [self.label], [human_count(self.done, self.unit) if self.unit == "B"
                                        else f"{human_count(self.done)}{unit}"]
        tail.append(f"{human_count(rate, 'B') if self.unit == 'B' else human_count(rate) + unit}/s")
        if self.total and rate > 0 and self.done < self.total:
            tail.append(f"ETA {human_duration((self.total - self.done) / rate)}")
        if self.note:
            tail.append(self.note)
        text = " ".join(tail)
        if frac is not None:
            room = width - len(self.label) - len(text) - 4
            if room >= 8:
                bar_width = min(BAR_WIDTH, room)
                filled = int(frac * bar_width)
                head.append("[" + "#" * filled + "-" * (bar_width - filled) + "]")
        return (" ".join(head) + " " + text)[:width]

    def _draw(self, now):
        width = shutil.get_terminal_size((100, 20)).columns
        text = self.line(now, max(width - 1, 10))
        try:
            # \r to the line start, \x1b[K clears what a longer previous line left behind
            self.stream.write("\r" + text + "\x1b[K")
            self.stream.flush()
            self._drawn = True
        except (OSError, ValueError):  # the terminal went away: stop drawing, keep working
            self.enabled = False

    def print(self, text: str) -> None:
        """Writes a line of output above the bar (the bar is redrawn at the next update)."""
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def clear(self) -> None:
        if self._drawn:
            try:
                self.stream.write("\r\x1b[K")
                self.stream.flush()
            except (OSError, ValueError):
                pass
            self._drawn = False
            self._last_draw = 0.0

    def close(self) -> None:
        self.clear()
        self.enabled = False


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
