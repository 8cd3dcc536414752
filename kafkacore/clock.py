"""The broker's two clocks, each defined once. Kafka's timestamps, retention and expiries are
wall-clock milliseconds since the epoch (``wall_ms``), as Kafka's are; lags and timeouts that
must not jump when the system clock is set use the monotonic clock (``monotonic_ms``): the
ISR's replica.lag.time.max.ms, for one."""
import time


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000
