"""Client quota enforcement, as Kafka's ClientQuotaManager does it (KIP-13, KIP-55, KIP-124,
KIP-219).

For each quota type — produce and fetch bytes, request time, controller mutations — a request
is mapped to the quota that applies (``entities.resolve``) and to the rate its metric tags name
(shared by every request with the same tags). Recording a value adds it to that rate
(``rate.SampledRate``: ``quota.window.num`` windows of ``quota.window.size.seconds``); when the
rate is then above the quota, the throttle time is how long the rate takes to fall back to
it: (rate - quota) / quota * the window the rate was measured over (Kafka's
QuotaUtils.throttleTime). The broker puts that time in the response's ``throttle_time_ms`` and
mutes the connection for as long (``broker.connection``), so a client that ignores it is held
back anyway.

Controller mutations (KIP-599: partitions created or deleted by CreateTopics, CreatePartitions,
DeleteTopics) are measured with a token bucket instead (``MutationQuota``): a request at a version
that knows THROTTLING_QUOTA_EXCEEDED is refused, per topic, once the bucket is empty ("strict");
an older one is let through and throttled ("permissive").
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from eoslog.errors import Errors, KafkaError
from eoslog.quotas.entities import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    resolve,
)
from eoslog.quotas.rate import SampledRate, TokenBucket

INACTIVE_SENSOR_S = 3600  # ClientQuotaManager.InactiveSensorExpirationTimeSeconds


class QuotaType(Enum):
    PRODUCE = PRODUCER_BYTE_RATE
    FETCH = CONSUMER_BYTE_RATE
    REQUEST = REQUEST_PERCENTAGE
    CONTROLLER_MUTATION = CONTROLLER_MUTATION_RATE


@dataclass(slots=True)
class Sensor:
    """The rate of one (quota type, user tag, client-id tag), and the throttling it caused."""

    rate: SampledRate
    bound: float | None = None
    bucket: TokenBucket = field(default_factory=TokenBucket)  # controller mutations' (KIP-599)
    last_ms: int = 0
    throttle_ms_total: int = 0
    throttles: int = 0


@dataclass(slots=True)
class ClientQuotas:
    clock_ms: Callable[[], int]
    num: int = 11  # quota.window.num
    window_ms: int = 1000  # quota.window.size.seconds
    mutation_num: int = 11  # controller.quota.window.num
    mutation_window_ms: int = 1000  # controller.quota.window.size.seconds
    quotas: dict[QuotaEntity, dict[str, float]] = field(default_factory=dict)
    sensors: dict[tuple[QuotaType, str, str], Sensor] = field(default_factory=dict)
    _enabled: frozenset[QuotaType] = frozenset()

    def update(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """The configured quotas changed: from now on requests are measured against these
        (rates already measured are kept, as Kafka updates a sensor's bound in place)."""
        self.quotas = {e: dict(v) for e, v in quotas.items() if v}
        self._enabled = frozenset(t for t in QuotaType if any(t.value in v for v in self.quotas.values()))

    def enabled(self, qtype: QuotaType) -> bool:
        """Is any quota of this type configured? (Nothing is measured until one is.)"""
        return qtype in self._enabled

    def _sensor(self, qtype: QuotaType, user: str, client_id: str) -> Sensor:
        (user_tag, client_tag), bound = resolve(self.quotas, qtype.value, user, client_id)
        key = (qtype, user_tag, client_tag)
        sensor = self.sensors.get(key)
        if sensor is None:
            sensor = self.sensors[key] = Sensor(SampledRate(self.num, self.window_ms))
        sensor.bound = bound
        return sensor

    def record(self, qtype: QuotaType, user: str, client_id: str, value: float) -> int:
        """Kafka's maybeRecordAndGetThrottleTimeMs: add ``value``; the throttle time in ms (0:
        within the quota, or none applies)."""
        if not self.enabled(qtype):
            return 0
        now = self.clock_ms()
        sensor = self._sensor(qtype, user, client_id)
        sensor.rate.record(value, now)
        sensor.last_ms = now
        if sensor.bound is None:
            return 0
        measured = sensor.rate.measure(now)
        if measured <= sensor.bound:
            return 0
        if sensor.bound <= 0:
            ms = self.num * self.window_ms
        else:
            ms = round((measured - sensor.bound) / sensor.bound * sensor.rate.window_size_ms(now))
        # ClientRequestQuotaManager bounds a request-time throttle to one window; byte rates are not bounded.
        return min(ms, self.window_ms) if qtype is QuotaType.REQUEST else ms

    def mutation_quota(self, user: str, client_id: str, strict: bool) -> MutationQuota:
        """Kafka's newQuotaFor: the controller-mutation quota one request records its partitions
        against (unbounded when no quota applies)."""
        if not self.enabled(QuotaType.CONTROLLER_MUTATION):
            return MutationQuota(self, None, strict)
        sensor = self._sensor(QuotaType.CONTROLLER_MUTATION, user, client_id)
        return MutationQuota(self, sensor if sensor.bound is not None else None, strict)

    def unrecord(self, qtype: QuotaType, user: str, client_id: str, value: float) -> None:
        """Take a recorded value back (a throttled fetch is answered empty: its bytes were not sent)."""
        if self.enabled(qtype):
            self._sensor(qtype, user, client_id).rate.record(-value, self.clock_ms())

    def throttled(self, qtype: QuotaType, user: str, client_id: str, throttle_ms: int) -> None:
        """A response carried ``throttle_ms`` and its connection was muted for it (metrics)."""
        sensor = self._sensor(qtype, user, client_id)
        sensor.throttle_ms_total += throttle_ms
        sensor.throttles += 1

    def max_value_in_window(self, qtype: QuotaType, user: str, client_id: str) -> float:
        """Kafka's getMaxValueInQuotaWindow: the most one request may take without being
        throttled for sure (a fetch's bytes are capped at it); infinite without a quota."""
        if not self.enabled(qtype):
            return math.inf
        _, bound = resolve(self.quotas, qtype.value, user, client_id)
        return math.inf if bound is None else bound * (self.num - 1) * self.window_ms / 1000

    def expire_inactive(self) -> None:
        now = self.clock_ms()
        for key in [k for k, s in self.sensors.items() if now - s.last_ms > INACTIVE_SENSOR_S * 1000]:
            del self.sensors[key]

    def rates(self) -> list[tuple[QuotaType, str, str, float, float | None, int]]:
        """(type, user tag, client-id tag, rate now, quota, throttle ms in all) of each sensor."""
        now = self.clock_ms()
        return [(t, u, c, s.rate.measure(now), s.bound, s.throttle_ms_total)
                for (t, u, c), s in sorted(self.sensors.items(), key=lambda kv: (kv[0][0].value, kv[0][1], kv[0][2]))]


THROTTLING_QUOTA_EXCEEDED_MESSAGE = "The throttling quota has been exceeded."


@dataclass(slots=True)
class MutationQuota:
    """Kafka's Strict/PermissiveControllerMutationQuota for one request."""

    owner: ClientQuotas
    sensor: Sensor | None  # None: no quota applies
    strict: bool
    _throttle_ms: int = 0
    _recorded_ms: int = 0

    def record(self, partitions: int) -> None:
        """Take ``partitions`` tokens. Strict: raises KafkaError(THROTTLING_QUOTA_EXCEEDED)
        instead while the bucket is below zero (the topic is refused, nothing is taken)."""
        sensor = self.sensor
        if sensor is None or sensor.bound is None:
            return
        now = self.owner.clock_ms()
        quota = sensor.bound
        burst = self.owner.mutation_num * self.owner.mutation_window_ms / 1000 * quota
        sensor.last_ms = now
        if self.strict and sensor.bucket.measure(quota, burst, now) < 0:
            self._exceeded(sensor.bucket.measure(quota, burst, now), quota, now)
            raise KafkaError(Errors.THROTTLING_QUOTA_EXCEEDED, THROTTLING_QUOTA_EXCEEDED_MESSAGE)
        sensor.bucket.record(partitions, quota, burst, now)
        sensor.rate.record(partitions, now)
        tokens = sensor.bucket.measure(quota, burst, now)
        if not self.strict and tokens < 0:
            self._exceeded(tokens, quota, now)

    def _exceeded(self, tokens: float, quota: float, now: int) -> None:
        # ControllerMutationQuotaManager.throttleTimeMs: until the bucket is back at zero.
        self._throttle_ms = round(-tokens / quota * 1000) if quota > 0 else self.owner.mutation_window_ms
        self._recorded_ms = now

    def throttle_ms(self) -> int:
        """The throttle left now (a request may wait for its topics after recording)."""
        return max(0, self._throttle_ms - (self.owner.clock_ms() - self._recorded_ms))
