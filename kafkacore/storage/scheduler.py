"""A background thread running delayed and periodic jobs (Kafka's KafkaScheduler): retention
checks, flushes, checkpoints and the delayed deletion of ``.deleted`` segment files. A job that
raises is logged and does not stop the others."""
import heapq
import itertools
import logging
import threading
import time

log = logging.getLogger("kafkacore.storage")


class Scheduler:
    def __init__(self, name="kafka-scheduler"):
        self._queue = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def schedule(self, delay_ms, fn, period_ms=None):
        """Runs fn after delay_ms, then every period_ms if given."""
        with self._cond:
            stopped = self._stopped
            if not stopped:
                heapq.heappush(self._queue, (time.monotonic() + delay_ms / 1000, next(self._seq), fn, period_ms))
                self._cond.notify()
        if stopped and period_ms is None:
            fn()  # after shutdown a one-shot job (a flush, a deletion) runs at once, never lost

    def _run(self):
        while True:
            with self._cond:
                while not self._stopped and (not self._queue or self._queue[0][0] > time.monotonic()):
                    timeout = None if not self._queue else max(0.0, self._queue[0][0] - time.monotonic())
                    self._cond.wait(timeout)
                if self._stopped:
                    return
                _when, _seq, fn, period = heapq.heappop(self._queue)
            try:
                fn()
            except Exception:  # keep the thread alive; the job's own owner reports state
                log.exception("scheduled job %r failed", fn)
            if period is not None:
                self.schedule(period, fn, period)

    def shutdown(self, run_pending=False):
        """Stops the thread. With run_pending, one-shot jobs still queued run now (in the caller's
        thread), so delayed deletions are not left undone by a clean shutdown."""
        with self._cond:
            self._stopped = True
            pending = [item for item in self._queue if item[3] is None]
            self._queue.clear()
            self._cond.notify_all()
        self._thread.join()
        if run_pending:
            for _w, _s, fn, _p in sorted(pending):
                try:
                    fn()
                except Exception:
                    log.exception("scheduled job %r failed at shutdown", fn)


class InlineScheduler:
    """Runs every job at once in the caller's thread (a Log used without a LogManager)."""

    def schedule(self, delay_ms, fn, period_ms=None):
        if period_ms is None:
            fn()

    def shutdown(self, run_pending=False):
        pass
