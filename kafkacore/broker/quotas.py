"""Client quotas enforced on requests (Kafka's KafkaApis and SocketServer side of KIP-124,
KIP-219 and KIP-599; the arithmetic and sensors are security/client_quotas.py).

With no quota set on any entity (``QuotaConfigs.active`` false) a connection tests that one
flag per request and nothing else. Otherwise each connection keeps a ``ClientQuotaSensors``: the
sensors of its (user, client id) resolved once and cached until the quota configs change, so a
client without a quota costs a tuple comparison per request. After a request is handled (once
its response is ready, for a long-poll fetch or a delayed produce):

- Produce: the request's size is recorded on ``producer_byte_rate``; acks=0 is muted without a
  response, as Kafka;
- Fetch (consumers): the response's record bytes on ``consumer_byte_rate``; a throttled fetch is
  answered empty (its bytes taken back), as Kafka's getThrottledResponse;
- every API but the cluster's own (Kafka's clusterAction APIs, a follower's fetch) and the SASL
  login: the handler's time as a percentage of one thread on ``request_percentage`` (Kafka's
  nanosToPercentage: 1 s of handler time is 100); acks=0 produce records none, as Kafka;
- CreateTopics, CreatePartitions, DeleteTopics: the partitions they create or delete on the
  ``controller_mutation_rate`` token bucket (``mutation_quota``, called by the handlers).

The largest of the throttle times goes into the response's ``throttle_time_ms`` (where its
version has the field) and is recorded as that quota's ``throttle-time``; the connection then
reads nothing more until it has passed (``Connection.mute``), whatever the version: clients of
KIP-219 versions also wait on their own, older ones are held by the mute.
"""
from __future__ import annotations

from time import monotonic

from ..errors import ThrottlingQuotaExceededError
from ..protocol.api_table import ApiKey
from ..protocol.messages.fetch_response import FetchResponse

# Kafka's clusterAction APIs (and the SASL login, handled before the principal is known): never
# recorded on a client's request quota
EXEMPT_APIS = frozenset({ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA, ApiKey.UPDATE_METADATA,
                         ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS, ApiKey.ALTER_PARTITION,
                         ApiKey.ENVELOPE, ApiKey.BROKER_HEARTBEAT, ApiKey.ALLOCATE_PRODUCER_IDS,
                         ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
# KIP-599: the versions from which a request over controller_mutation_rate is refused with
# THROTTLING_QUOTA_EXCEEDED; older ones are accepted and the connection muted
STRICT_MUTATION_SINCE = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}
THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."  # Kafka's Errors message
_NANOS_TO_PERCENTAGE = 100.0  # seconds of handler time -> percent of one thread over a second


class ClientQuotaSensors:
    """A connection's sensors for its current (user, client id), re-resolved when either or the
    broker's quota configs change."""

    __slots__ = ("managers", "_configs", "_version", "_user", "_client_id", "produce", "fetch", "request", "mutation",
                 "any")

    def __init__(self, managers):
        self.managers = managers
        self._configs = managers.configs
        self._version = self._user = self._client_id = None
        self.produce = self.fetch = self.request = self.mutation = None
        self.any = False  # whether any quota applies to the current client

    def resolve(self, user: str, client_id: str) -> None:
        version = self._configs.version  # bumped by every quota change and sensor expiry
        if version == self._version and client_id == self._client_id and user == self._user:
            return
        managers = self.managers
        now = monotonic()
        self.produce = managers.produce.sensor(user, client_id, now)
        self.fetch = managers.fetch.sensor(user, client_id, now)
        self.request = managers.request.sensor(user, client_id, now)
        self.mutation = managers.controller_mutation.sensor(user, client_id, now)
        self.any = any(s is not None for s in (self.produce, self.fetch, self.request, self.mutation))
        self._version, self._user, self._client_id = version, user, client_id

    def before(self, api_key, request, version) -> None:
        """A consumer's fetch is bounded to what its quota allows in one window (Kafka's
        getMaxValueInQuotaWindow: quota * (quota.window.num - 1) * window): a response larger than
        that would be throttled, answered empty and taken back at every try."""
        if api_key == ApiKey.FETCH and self.fetch is not None and not _follower(request, version):
            bound = max(int(self.fetch.max_window_value()), 1)
            if request.max_bytes > bound or request.max_bytes <= 0:
                request.max_bytes = bound
            request.min_bytes = min(request.min_bytes, request.max_bytes)

    def after(self, ctx, api_key, request, response, request_bytes, handle_s, mute):
        """Records the request; returns its response with the throttle time set (a fetch's
        answered empty when throttled; an awaitable response: one that does this once it is
        ready) and calls ``mute(ms)`` when the connection is to be held. ``resolve`` was called
        for the request before its handler ran."""
        if not self.any:
            return response
        if api_key == ApiKey.FETCH and _follower(request, ctx.api_version):
            return response  # replication is held by replication quotas, never by a client's
        if hasattr(response, "__await__"):
            return self._later(ctx, api_key, request, response, request_bytes, handle_s, mute)
        return self._finish(ctx, api_key, request, response, request_bytes, handle_s, mute)

    async def _later(self, ctx, api_key, request, awaitable, request_bytes, handle_s, mute):
        response = await awaitable
        return self._finish(ctx, api_key, request, response, request_bytes, handle_s, mute)

    def _finish(self, ctx, api_key, request, response, request_bytes, handle_s, mute):
        now = monotonic()
        throttles = []  # (ms, sensor)
        if api_key == ApiKey.PRODUCE:
            if self.produce is not None:
                throttles.append((self.produce.record(request_bytes, now), self.produce))
            if self.request is not None and request.acks != 0:
                throttles.append((self.request.record(handle_s * _NANOS_TO_PERCENTAGE, now), self.request))
        else:
            if self.request is not None:
                throttles.append((self.request.record(handle_s * _NANOS_TO_PERCENTAGE, now), self.request))
            mutation = ctx.mutation_quota
            if mutation is not None:
                throttles.append((mutation.throttle_ms(now), mutation.sensor))
            if api_key == ApiKey.FETCH and self.fetch is not None and isinstance(response, FetchResponse):
                size = _record_bytes(response)
                fetch_ms = self.fetch.record(size, now)
                throttles.append((fetch_ms, self.fetch))
                if max(ms for ms, _s in throttles) > 0:
                    self.fetch.unrecord(size, now)  # nothing of it is sent
                    response = FetchResponse(error_code=response.error_code, session_id=response.session_id,
                                             responses=[])
        if not throttles:
            return response
        ms, sensor = max(throttles, key=lambda t: t[0])
        if ms <= 0:
            return response
        sensor.record_throttle(ms, now)
        if response is not None and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = ms
        mute(ms)
        return response


class MutationQuota:
    """One request's controller_mutation_rate (Kafka's Strict/PermissiveControllerMutationQuota):
    ``record(permits)`` before each topic's mutation."""

    __slots__ = ("sensor", "strict", "_throttle_ms", "_at")

    def __init__(self, sensor, strict):
        self.sensor = sensor
        self.strict = strict
        self._throttle_ms = 0
        self._at = 0.0

    def record(self, permits: int) -> None:
        """Raises THROTTLING_QUOTA_EXCEEDED (strict) while the client's bucket is empty; the
        mutation is then not made."""
        now = monotonic()
        if self.strict:
            ms = self.sensor.try_mutate(permits, now)
            if ms > 0:
                self._throttle_ms, self._at = ms, now
                raise ThrottlingQuotaExceededError(THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        else:
            ms = self.sensor.mutate(permits, now)
            if ms > 0:
                self._throttle_ms, self._at = ms, now

    def throttle_ms(self, now: float) -> int:
        """What is left of the last throttle time at ``now`` (Kafka's throttleTime)."""
        if self._throttle_ms <= 0:
            return 0
        return max(0, self._throttle_ms - int((now - self._at) * 1000))


def mutation_quota(ctx) -> MutationQuota | None:
    """The request's controller_mutation_rate quota, or None when none applies (nothing to
    record). Made once per request; the server reads its throttle time for the response."""
    quotas = ctx.quotas
    if quotas is None or quotas.mutation is None:
        return None
    quota = MutationQuota(quotas.mutation, ctx.api_version >= STRICT_MUTATION_SINCE[ctx.header.api_key])
    ctx.mutation_quota = quota
    return quota


def _follower(request, version) -> bool:
    if version >= 15:
        state = request.replica_state
        return state is not None and state.replica_id >= 0
    return request.replica_id >= 0


def _record_bytes(response) -> int:
    """A fetch response's size as recorded: its record bytes (the rest is a few dozen bytes per
    partition)."""
    n = 0
    for t in response.responses:
        for p in t.partitions:
            r = p.records
            if r is not None:
                n += len(r)
    return n
