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

Enforcement (KIP-219): every request's cost is recorded on the entity's rate, measured over
``quota.window.num`` windows of ``quota.window.size.seconds``; when the rate is over the quota the
response carries the throttle time that brings it back under, and the broker mutes the
connection for that long after sending it. A client is slowed, never failed."""
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


class Rate:
    """A rate over ``samples`` windows of ``window_s`` seconds (Kafka's SampledStat Rate): the
    sum of the recent windows over the time they cover, the current window counting for the
    time it has run."""

    __slots__ = ("window_s", "samples", "_starts", "_values", "_created")

    def __init__(self, window_s: float, samples: int, now: float):
        self.window_s = window_s
        self.samples = samples
        self._starts = [now]
        self._values = [0.0]
        self._created = now

    def record(self, value: float, now: float) -> None:
        if now - self._starts[-1] >= self.window_s:
            start = self._starts[-1] + ((now - self._starts[-1]) // self.window_s) * self.window_s
            self._starts.append(start)
            self._values.append(0.0)
            if len(self._starts) > self.samples:
                del self._starts[0], self._values[0]
        self._values[-1] += value

    def measure(self, now: float) -> tuple[float, float]:
        """(rate per second, the window it was measured over, seconds)."""
        horizon = now - self.samples * self.window_s
        total = sum(v for s, v in zip(self._starts, self._values) if s > horizon - self.window_s)
        # Kafka's Rate.windowSize: at least samples-1 full windows, so a first burst is not read as
        # an enormous rate over a few milliseconds
        elapsed = now - max(self._starts[0], horizon)
        window = max(elapsed, (self.samples - 1) * self.window_s)
        return total / window, window


class QuotaManager:
    """One quota key's enforcement: a Rate per entity that has a quota, the throttle time of each
    recorded value."""

    def __init__(self, key: str, configs: QuotaConfigs, window_s: float = 1.0, samples: int = 11):
        self.key = key
        self.configs = configs
        self.window_s = window_s
        self.samples = samples
        self._rates: dict[QuotaEntity, Rate] = {}
        self._lock = threading.Lock()

    def record(self, user: str, client_id: str, value: float, now: float) -> int:
        """Records ``value`` for the client; returns the throttle time in ms (0: within quota)."""
        quota, entity = self.configs.quota(self.key, user, client_id)
        if quota is None:
            return 0
        # a default entity's quota is each client's own: the rate is kept per concrete client
        key = QuotaEntity(user if entity.user is not ABSENT else ABSENT,
                          client_id if entity.client_id is not ABSENT else ABSENT)
        with self._lock:
            rate = self._rates.get(key)
            if rate is None:
                rate = self._rates[key] = Rate(self.window_s, self.samples, now)
            rate.record(value, now)
            observed, window = rate.measure(now)
        if quota <= 0:
            return int(self.window_s * self.samples * 1000)
        if observed <= quota:
            return 0
        # Kafka's QuotaUtils.throttleTime: how long until the rate over the window is back at quota
        throttle_s = (observed - quota) / quota * window
        return int(min(throttle_s, self.window_s * self.samples) * 1000)
