"""Live numbers for the charts: every SAMPLE_INTERVAL_S the sampler asks the cluster for the
end offset of every partition and the committed offsets of every group, and keeps the last
RING_SIZE samples per topic and per group. Rates are computed here, from end offsets over
time (a broker has no rate to ask for over the Kafka protocol), so every page and API client
sees the same numbers.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from ..client.admin import LATEST
from ..errors import KafkaError
from .api import group_lag, offline, share_starts

log = logging.getLogger("kafkacore.console")

SAMPLE_INTERVAL_S = 1.5
RING_SIZE = 120        # three minutes of samples
RATE_WINDOW = 5        # a topic's current rate: over its last five samples (~6 s), so it does not flicker
MAX_GROUPS = 200       # groups sampled per round; more would make a round slower than the interval


def take_sample(admin) -> dict:
    """One round against the cluster (blocking): {"time": ms, "ends": {topic: {partition: end}},
    "committed": {group: {(topic, partition): offset}}}."""
    topics = admin.list_topics()
    specs = {(t, p.partition): LATEST for t, info in topics.items() for p in info.partitions if not offline(p)}
    found = admin.list_offsets(specs) if specs else {}
    ends = {t: {} for t in topics}
    for (t, p), o in found.items():
        ends[t][p] = o.offset
    committed = {}
    for g in admin.list_groups()[:MAX_GROUPS]:
        try:
            # a share group's progress is its share partitions' start offsets (it commits none)
            committed[g.group_id] = (share_starts(admin, g.group_id) if g.protocol_type == "share"
                                     else admin.list_group_offsets(g.group_id))
        except KafkaError:
            continue  # deleted or moving between coordinators: it is sampled again next round
    return {"time": int(time.time() * 1000), "ends": ends, "committed": committed}


class Sampler:
    def __init__(self, pool, interval_s: float = SAMPLE_INTERVAL_S):
        self.pool = pool
        self.interval_s = interval_s
        self.topic_ends: dict[str, deque] = {}   # topic -> deque[(time ms, sum of end offsets)]
        self.group_lags: dict[str, deque] = {}   # group -> deque[(time ms, total lag)]
        self.cluster_ends: deque = deque(maxlen=RING_SIZE)
        self.last_error: str | None = None
        self.last_sample_ms: int | None = None
        self._task = None

    def start(self):
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self):
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _run(self):
        while True:
            started = time.monotonic()
            try:
                self.add(await self.pool.run(take_sample))
                self.last_error = None
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the cluster may come back: report, keep sampling
                if self.last_error is None:
                    log.warning("sampling the cluster failed: %s", e)
                self.last_error = f"{type(e).__name__}: {e}"
            await asyncio.sleep(max(0.1, self.interval_s - (time.monotonic() - started)))

    def add(self, sample: dict):
        """Records one round's results (on the event loop; readers are there too)."""
        now, ends = sample["time"], sample["ends"]
        for name in list(self.topic_ends):
            if name not in ends:
                del self.topic_ends[name]  # deleted: a topic made again later starts afresh
        for name, parts in ends.items():
            self.topic_ends.setdefault(name, deque(maxlen=RING_SIZE)).append((now, sum(parts.values())))
        self.cluster_ends.append((now, sum(sum(parts.values()) for parts in ends.values())))
        for group in list(self.group_lags):
            if group not in sample["committed"]:
                del self.group_lags[group]
        for group, committed in sample["committed"].items():
            lag = sum(group_lag(committed, ends).values())
            self.group_lags.setdefault(group, deque(maxlen=RING_SIZE)).append((now, lag))
        self.last_sample_ms = now

    # -- what the pages read -------------------------------------------------------------------
    def topic_rate(self, topic: str) -> float | None:
        """Records/s over the last RATE_WINDOW samples; None until there are two."""
        ring = self.topic_ends.get(topic)
        if not ring or len(ring) < 2:
            return None
        (t0, e0), (t1, e1) = ring[max(0, len(ring) - 1 - RATE_WINDOW)], ring[-1]
        return max(0.0, (e1 - e0) * 1000 / (t1 - t0)) if t1 > t0 else None

    def topic_series(self, topic: str) -> dict | None:
        ring = self.topic_ends.get(topic)
        return None if ring is None else self._rates(ring)

    def cluster_series(self) -> dict:
        return self._rates(self.cluster_ends)

    def group_series(self, group: str) -> dict | None:
        ring = self.group_lags.get(group)
        if ring is None:
            return None
        return {"interval_s": self.interval_s, "unit": "records", "points": [[t, v] for t, v in ring]}

    def _rates(self, ring) -> dict:
        """Records/s between consecutive samples, stamped with the later sample's time."""
        pts = list(ring)
        rates = [[t1, round(max(0.0, (e1 - e0) * 1000 / (t1 - t0)), 3)]
                 for (t0, e0), (t1, e1) in zip(pts, pts[1:]) if t1 > t0]
        return {"interval_s": self.interval_s, "unit": "records/s", "points": rates,
                "end_offset": pts[-1][1] if pts else None}
