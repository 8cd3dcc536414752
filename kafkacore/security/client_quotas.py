"""Client quotas (Kafka's ClientQuotaManager, KIP-55, KIP-219, KIP-546): how much a client may
produce, fetch and keep the broker busy, per user principal, client id, or both.

Entities and where they are stored (Kafka's ZooKeeper layout, under /config):
``users/<user>``, ``users/<user>/clients/<client-id>``, ``clients/<client-id>``, with
``<default>`` for the defaults of each kind; names sanitized (credential_cache.sanitize). The
quota keys: ``producer_byte_rate`` and ``consumer_byte_rate`` (bytes/s), ``request_percentage``
(percent of one request-handler thread's time) and ``controller_mutation_rate`` (partitions
created or deleted per second).

For a connection of user U with client id C, the quota of each key is the first of these
entities that sets it (Kafka's precedence): (U, C), (U, default client), (U), (default user, C),
(default user, default client), (default user), (C), (default client).

Enforcement (KIP-219): every request's cost is recorded on the entity's sensor, a rate measured
over ``quota.window.num`` windows of ``quota.window.size.seconds`` (Kafka's SampledStat Rate);
when the rate is over the quota the response carries the throttle time that brings it back
under, and the broker mutes the connection for that long (broker/quotas.py). A client is slowed,
never failed - except by ``controller_mutation_rate`` (KIP-599), a token bucket whose strict
form refuses a mutation with THROTTLING_QUOTA_EXCEEDED while the bucket is empty.

This module holds the arithmetic and the sensors; it knows nothing of requests or sockets."""
from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import NamedTuple

from .credential_cache import desanitize, sanitize

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
USER, CLIENT_ID, IP = "user", "client-id", "ip"  # DescribeClientQuotas/AlterClientQuotas entity types
DEFAULT = "<default>"  # Kafka's ConfigEntityName.DEFAULT, as stored


class QuotaEntity(NamedTuple):
    """A quota entity: each part a name, None for "the default of this kind", or ABSENT."""
    user: object
    client_id: object


ABSENT = ()  # the entity has no component of this kind (None means its default)


def entity_config_path(entity: QuotaEntity) -> tuple[str, str]:
    """(entity type, sanitized entity name) of the config entity in the metadata store."""
    user = None if entity.user is ABSENT else (DEFAULT if entity.user is None else sanitize(entity.user))
    client = None if entity.client_id is ABSENT else (DEFAULT if entity.client_id is None else
                                                       sanitize(entity.client_id))
    if user is not None and client is not None:
        return "users", f"{user}/clients/{client}"
    if user is not None:
        return "users", user
    return "clients", client


def entity_from_path(entity_type: str, name: str) -> QuotaEntity | None:
    """The entity of a stored config (the inverse of entity_config_path); None if not a quota entity."""
    def part(text):
        return None if text == DEFAULT else desanitize(text)
    if entity_type == "clients" and "/" not in name:
        return QuotaEntity(ABSENT, part(name))
    if entity_type == "users":
        user, sep, rest = name.partition("/clients/")
        if not sep:
            return QuotaEntity(part(user), ABSENT) if "/" not in user else None
        if "/" in rest:
            return None
        return QuotaEntity(part(user), part(rest))
    return None


def _precedence(user: str, client_id: str):
    return ((user, client_id), (user, None), (user, ABSENT), (None, client_id), (None, None), (None, ABSENT),
            (ABSENT, client_id), (ABSENT, None))


class QuotaConfigs:
    """Every entity's quotas, as the metadata store holds them (filled by the config manager)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._entities: dict[QuotaEntity, dict[str, float]] = {}
        self.version = 0  # bumped on every change: resolved quotas are cached against it
        # whether any entity sets any quota: with none (the usual broker) the request path tests
        # only this, as Kafka's quotasEnabled
        self.active = False

    def update(self, entity: QuotaEntity, configs: Mapping[str, str]) -> None:
        """The entity's whole stored config; its quota keys replace what was held."""
        quotas = {}
        for key in QUOTA_KEYS:
            if key in configs:
                try:
                    quotas[key] = float(configs[key])
                except (TypeError, ValueError):
                    continue  # written by another tool without validation: no quota rather than a crash
        with self._lock:
            if quotas:
                self._entities[QuotaEntity(*entity)] = quotas
            else:
                self._entities.pop(QuotaEntity(*entity), None)
            self.active = bool(self._entities)
            self.version += 1

    def bump(self) -> None:
        """Makes every cached resolution stale (a sensor was dropped)."""
        with self._lock:
            self.version += 1

    def entities(self) -> dict[QuotaEntity, dict[str, float]]:
        with self._lock:
            return {e: dict(q) for e, q in self._entities.items()}

    def quota(self, key: str, user: str, client_id: str) -> tuple[float | None, QuotaEntity | None]:
        """(the quota of ``key`` for this user and client id, the entity that sets it); (None,
        None) when none does."""
        entities = self._entities
        for candidate in _precedence(user, client_id):
            q = entities.get(candidate)
            if q is not None and key in q:
                return q[key], QuotaEntity(*candidate)
        return None, None


INACTIVE_SENSOR_EXPIRY_S = 3600  # Kafka's InactiveSensorExpirationTimeSeconds for quota sensors


class Rate:
    """Kafka's SampledStat Rate: ``samples`` windows, each opened by the first value recorded
    after the previous one is ``window_s`` old (not aligned to the clock); a window ``samples *
    window_s`` old is dropped. The rate is the sum over the kept windows divided by the time since
    the oldest began, counted as at least ``samples - 1`` full windows (Rate.windowSize: a first
    burst is not read as an enormous rate over a few milliseconds)."""

    __slots__ = ("window_s", "samples", "_starts", "_values")

    def __init__(self, window_s: float, samples: int, now: float):
        self.window_s = window_s
        self.samples = samples
        self._starts = [now]
        self._values = [0.0]

    def _purge(self, now: float) -> None:
        expire = self.samples * self.window_s
        starts = self._starts
        while len(starts) > 1 and now - starts[0] >= expire:
            del starts[0], self._values[0]
        if now - starts[0] >= expire:  # the only window left is obsolete: start again from now
            starts[0], self._values[0] = now, 0.0

    def record(self, value: float, now: float) -> None:
        if now - self._starts[-1] >= self.window_s:
            self._starts.append(now)
            self._values.append(0.0)
            if len(self._starts) > self.samples:
                del self._starts[0], self._values[0]
        self._values[-1] += value

    def window(self, now: float) -> float:
        """Rate.windowSize, seconds."""
        self._purge(now)
        elapsed = now - self._starts[0]
        full = int(elapsed // self.window_s)
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_s
        return max(elapsed, 0.001)

    def measure(self, now: float) -> tuple[float, float]:
        """(rate per second, the window it was measured over, seconds)."""
        window = self.window(now)
        return sum(self._values) / window, window


class Avg:
    """Kafka's SampledStat Avg over the same windows (the ``throttle-time`` metric): the mean of
    the values recorded in the kept windows, NaN when there are none."""

    __slots__ = ("window_s", "samples", "_starts", "_sums", "_counts")

    def __init__(self, window_s: float, samples: int):
        self.window_s = window_s
        self.samples = samples
        self._starts, self._sums, self._counts = [], [], []

    def record(self, value: float, now: float) -> None:
        if not self._starts or now - self._starts[-1] >= self.window_s:
            self._starts.append(now)
            self._sums.append(0.0)
            self._counts.append(0)
            if len(self._starts) > self.samples:
                del self._starts[0], self._sums[0], self._counts[0]
        self._sums[-1] += value
        self._counts[-1] += 1

    def measure(self, now: float) -> float:
        expire = self.samples * self.window_s
        total = count = 0
        for start, value, n in zip(self._starts, self._sums, self._counts):
            if now - start < expire:
                total += value
                count += n
        return total / count if count else float("nan")


class TokenBucket:
    """Kafka's TokenBucket (KIP-599): full at ``quota * samples * window_s`` tokens, refilled at
    ``quota`` per second, each record taking its value (it may go below zero)."""

    __slots__ = ("tokens", "_last")

    def __init__(self, burst: float, now: float):
        self.tokens = burst
        self._last = now

    def refill(self, quota: float, burst: float, now: float) -> float:
        self.tokens = min(burst, self.tokens + quota * max(now - self._last, 0.0))
        self._last = now
        return self.tokens


class QuotaSensor:
    """One entity's quota of one key (Kafka's ClientSensors): the bound, the rate recorded
    against it and the throttle times given. ``user`` and ``client_id`` are the metric tags
    (Kafka's quotaMetricTags: the concrete names of the levels the entity has, "" for a level
    it does not have)."""

    __slots__ = ("manager", "quota", "user", "client_id", "rate", "throttle", "bucket", "last_used")

    def __init__(self, manager, quota: float, user: str, client_id: str, now: float):
        self.manager = manager
        self.quota = quota
        self.user = user
        self.client_id = client_id
        self.rate = Rate(manager.window_s, manager.samples, now)
        self.throttle = Avg(manager.window_s, manager.samples)
        self.bucket = TokenBucket(self.burst, now) if manager.token_bucket else None
        self.last_used = now

    def max_window_value(self) -> float:
        """The most the quota allows over the measured window (Kafka's getMaxValueInQuotaWindow)."""
        return self.quota * (self.manager.samples - 1) * self.manager.window_s

    @property
    def burst(self) -> float:
        return self.quota * self.manager.samples * self.manager.window_s

    def record(self, value: float, now: float) -> int:
        """Records ``value``; the throttle time in ms that brings the rate back to the quota (0:
        within it). Kafka's QuotaUtils.throttleTime, bounded by ``max_throttle_ms`` where the
        manager has one (the request quota: one window)."""
        manager = self.manager
        with manager.lock:
            self.last_used = now
            rate = self.rate
            rate.record(value, now)
            observed, window = rate.measure(now)
        quota = self.quota
        if observed <= quota:
            return 0
        if quota <= 0:
            return manager.max_throttle_ms or int(window * 1000)
        throttle_ms = round((observed - quota) / quota * window * 1000)
        bound = manager.max_throttle_ms
        return min(throttle_ms, bound) if bound else throttle_ms

    def unrecord(self, value: float, now: float) -> None:
        """Takes back a recorded value (Kafka's unrecordQuotaSensor: a fetch answered empty
        because it was throttled sent nothing)."""
        with self.manager.lock:
            self.rate.record(-value, now)

    def record_throttle(self, throttle_ms: int, now: float) -> None:
        """A throttle this quota imposed (the ``throttle-time`` metric)."""
        with self.manager.lock:
            self.throttle.record(throttle_ms, now)

    # -- controller_mutation_rate: the token bucket (KIP-599) ------------------------------------
    def _bucket_throttle_ms(self, tokens: float) -> int:
        # ControllerMutationQuotaManager.throttleTimeMs: the time to refill to zero
        return round(-tokens / self.quota * 1000) if self.quota > 0 else int(self.burst * 1000) or 1000

    def try_mutate(self, permits: float, now: float) -> int:
        """Strict (KIP-599 versions): refused (returns the throttle ms, nothing recorded) while
        the bucket is below zero; else the permits are taken, even if that empties it."""
        with self.manager.lock:
            self.last_used = now
            tokens = self.bucket.refill(self.quota, self.burst, now)
            if tokens < 0:
                return self._bucket_throttle_ms(tokens)
            self.bucket.tokens -= permits
            self.rate.record(permits, now)
            return 0

    def mutate(self, permits: float, now: float) -> int:
        """Permissive (older versions): the permits are always taken; the throttle ms when the
        bucket is now below zero."""
        with self.manager.lock:
            self.last_used = now
            self.bucket.refill(self.quota, self.burst, now)
            self.bucket.tokens -= permits
            self.rate.record(permits, now)
            tokens = self.bucket.tokens
        return self._bucket_throttle_ms(tokens) if tokens < 0 else 0

    def tokens(self, now: float) -> float:
        with self.manager.lock:
            return self.bucket.refill(self.quota, self.burst, now)


class QuotaManager:
    """One quota key's sensors (Kafka's ClientQuotaManager of one QuotaType): one per entity
    that has a quota, made on first use, dropped after an hour unused."""

    def __init__(self, key: str, configs: QuotaConfigs, window_s: float = 1.0, samples: int = 11,
                 max_throttle_ms: int | None = None, token_bucket: bool = False):
        self.key = key
        self.configs = configs
        self.window_s = window_s
        self.samples = samples
        self.max_throttle_ms = max_throttle_ms
        self.token_bucket = token_bucket
        self._sensors: dict[QuotaEntity, QuotaSensor] = {}
        self.lock = threading.Lock()
        self._next_expiry = 0.0

    def sensor(self, user: str, client_id: str, now: float) -> QuotaSensor | None:
        """The sensor of the entity whose quota applies to this user and client id; None when
        none does (such a client is never slowed)."""
        quota, entity = self.configs.quota(self.key, user, client_id)
        if quota is None:
            return None
        # a default entity's quota is each client's own: the sensor is kept per concrete client
        key = QuotaEntity(user if entity.user is not ABSENT else ABSENT,
                          client_id if entity.client_id is not ABSENT else ABSENT)
        with self.lock:
            if now >= self._next_expiry:
                self._expire(now)
            sensor = self._sensors.get(key)
            if sensor is None:
                sensor = self._sensors[key] = QuotaSensor(self, quota, "" if key.user is ABSENT else key.user,
                                                          "" if key.client_id is ABSENT else key.client_id, now)
            else:
                sensor.quota = quota  # a changed quota keeps the rate measured so far, as Kafka's
        return sensor

    def _expire(self, now):
        self._next_expiry = now + 60
        stale = [k for k, s in self._sensors.items() if now - s.last_used > INACTIVE_SENSOR_EXPIRY_S]
        for k in stale:
            del self._sensors[k]
        if stale:
            self.configs.bump()  # connections' cached sensors may be among them

    def sensors(self) -> list[QuotaSensor]:
        with self.lock:
            return list(self._sensors.values())

    def record(self, user: str, client_id: str, value: float, now: float) -> int:
        """Records ``value`` for the client; returns the throttle time in ms (0: within quota)."""
        sensor = self.sensor(user, client_id, now)
        return 0 if sensor is None else sensor.record(value, now)


class ClientQuotaManagers:
    """The four quota managers a broker keeps (Kafka's QuotaManagers), sharing its QuotaConfigs
    and its ``quota.window.num`` / ``quota.window.size.seconds``."""

    def __init__(self, configs: QuotaConfigs, window_s: float = 1.0, samples: int = 11):
        self.configs = configs
        self.produce = QuotaManager(PRODUCER_BYTE_RATE, configs, window_s, samples)
        self.fetch = QuotaManager(CONSUMER_BYTE_RATE, configs, window_s, samples)
        # ClientRequestQuotaManager: a request-time throttle is at most one window
        self.request = QuotaManager(REQUEST_PERCENTAGE, configs, window_s, samples,
                                    max_throttle_ms=int(window_s * 1000))
        self.controller_mutation = QuotaManager(CONTROLLER_MUTATION_RATE, configs, window_s, samples,
                                                token_bucket=True)
        self.all = (self.produce, self.fetch, self.request, self.controller_mutation)
