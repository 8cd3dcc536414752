"""Retry pacing after failures, as Kafka's clients do it since KIP-580: the wait starts at
``retry.backoff.ms``, doubles with each failure in a row up to ``retry.backoff.max.ms``, with
+-20% jitter so that many clients do not retry in step, and resets on the first success.

A run of the same failure is logged once as a warning, then at debug level until it changes or
clears, so a client left running against a stopped broker does not fill its log."""
from __future__ import annotations

import logging
import random

JITTER = 0.2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_JITTER
MULTIPLIER = 2  # Kafka's CommonClientConfigs.RETRY_BACKOFF_EXP_BASE


class FailureBackoff:
    def __init__(self, initial_ms: int, max_ms: int, logger: logging.Logger, what: str):
        self.initial_ms = initial_ms
        self.max_ms = max(initial_ms, max_ms)
        self.log = logger
        self.what = what
        self.failures = 0  # in a row
        self._last_message = None

    def failed(self, error) -> float:
        """Records a failure and returns the seconds to wait before the next attempt."""
        message = str(error)
        if message != self._last_message:
            self.log.warning("%s failed: %s", self.what, message)
            self._last_message = message
        else:
            self.log.debug("%s failed again (%d in a row): %s", self.what, self.failures + 1, message)
        wait_ms = min(self.initial_ms * MULTIPLIER ** min(self.failures, 30), self.max_ms)
        self.failures += 1
        if wait_ms and self.max_ms > self.initial_ms:
            wait_ms *= random.uniform(1 - JITTER, 1 + JITTER)
        return wait_ms / 1000.0

    def succeeded(self):
        if self.failures > 1:
            self.log.info("%s succeeded after %d failures", self.what, self.failures)
        self.failures = 0
        self._last_message = None
