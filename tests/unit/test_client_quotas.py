"""Client quotas' model (``quotas.entities``, ``quotas.client``): Kafka's order of precedence,
its checks of AlterClientQuotas values, DescribeClientQuotas filters and the throttle time."""

from __future__ import annotations

import pytest

from eoslog.errors import Errors, KafkaError
from eoslog.quotas.client import ClientQuotas, QuotaType
from eoslog.quotas.entities import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    Component,
    QuotaEntity,
    altered,
    describe,
    resolve,
)

P = "producer_byte_rate"


def test_the_most_specific_quota_applies_in_kafkas_order_and_names_the_shared_rate() -> None:
    quotas = {QuotaEntity(None, None, False, True): {P: 1.0},  # clients/<default>
              QuotaEntity(None, None, True, False): {P: 2.0},  # users/<default>
              QuotaEntity("alice", None, True, False): {P: 3.0},
              QuotaEntity("alice", "app", True, True): {P: 4.0}}
    assert resolve(quotas, P, "alice", "app") == (("alice", "app"), 4.0)
    assert resolve(quotas, P, "alice", "other") == (("alice", ""), 3.0)  # every client of alice shares it
    assert resolve(quotas, P, "bob", "app") == (("bob", ""), 2.0)  # the default: bob's own rate
    del quotas[QuotaEntity(None, None, True, False)]
    assert resolve(quotas, P, "bob", "app") == (("", "app"), 1.0)
    assert resolve({}, P, "bob", "app") == (("bob", "app"), None)


def test_values_are_checked_as_kafka_checks_them() -> None:
    assert altered({P: 5.0}, [(P, 7.0), ("request_percentage", 12.5)]) == {P: 7.0, "request_percentage": 12.5}
    assert altered({P: 5.0}, [(P, None)]) == {}
    for ops, message in (([(P, 1.5)], "must be a LONG value"), ([("nonsense", 1.0)], "Invalid configuration key")):
        with pytest.raises(KafkaError) as e:
            altered({}, ops)
        assert e.value.error is Errors.INVALID_REQUEST and message in str(e.value)
    with pytest.raises(KafkaError) as e:
        QuotaEntity.of([("user", "a"), ("user", "b")])
    assert e.value.error is Errors.INVALID_REQUEST


def test_describe_filters_match_as_kafka_matches() -> None:
    alice = QuotaEntity("alice", None, True, False)
    alice_app = QuotaEntity("alice", "app", True, True)
    default_user = QuotaEntity(None, None, True, False)
    quotas = {alice: {P: 1.0}, alice_app: {P: 2.0}, default_user: {P: 3.0}}
    exact = [Component("user", MATCH_EXACT, "alice")]
    assert set(describe(quotas, exact, strict=False)) == {alice, alice_app}
    assert set(describe(quotas, exact, strict=True)) == {alice}
    assert set(describe(quotas, [Component("user", MATCH_DEFAULT)], strict=True)) == {default_user}


def test_the_throttle_time_brings_the_rate_back_to_the_quota_and_a_request_quota_is_bounded() -> None:
    now = [0]
    quotas = ClientQuotas(lambda: now[0], num=11, window_ms=1000)
    quotas.update({QuotaEntity(None, "c", False, True): {P: 1000.0, "request_percentage": 10.0}})
    assert quotas.record(QuotaType.PRODUCE, "u", "c", 10_000) == 0  # 10 windows' worth at once: at the quota
    # 15 000 over the 10 s the rate counts at least: 1500/s, half again the quota: 5 s more.
    assert quotas.record(QuotaType.PRODUCE, "u", "c", 5_000) == 5000
    assert quotas.record(QuotaType.PRODUCE, "u", "other", 5_000) == 0  # another client's rate
    # A request quota's throttle is at most one window (ClientRequestQuotaManager).
    assert quotas.record(QuotaType.REQUEST, "u", "c", 10_000) == 1000
    assert quotas.max_value_in_window(QuotaType.PRODUCE, "u", "c") == 10_000


def test_a_controller_mutation_quota_is_a_token_bucket_strict_or_permissive() -> None:
    now = [0]
    quotas = ClientQuotas(lambda: now[0], mutation_num=11, mutation_window_ms=1000)
    quotas.update({QuotaEntity(None, "c", False, True): {"controller_mutation_rate": 2.0}})
    strict = quotas.mutation_quota("u", "c", strict=True)
    strict.record(20)  # a burst of 22 (11 windows at 2/s): 2 left
    assert strict.throttle_ms() == 0
    strict.record(6)  # allowed while the bucket is not below zero: now 4 below, not throttled (Kafka's)
    assert strict.throttle_ms() == 0
    refused = quotas.mutation_quota("u", "c", strict=True)
    with pytest.raises(KafkaError) as e:
        refused.record(1)
    assert e.value.error is Errors.THROTTLING_QUOTA_EXCEEDED and refused.throttle_ms() == 2000
    permissive = quotas.mutation_quota("u", "c", strict=False)
    permissive.record(2)  # let through: 6 below zero
    assert permissive.throttle_ms() == 3000
    now[0] = 1000  # refilled by 2: the throttle left shrinks with the time passed
    assert permissive.throttle_ms() == 2000
    now[0] = 3000
    quotas.mutation_quota("u", "c", strict=True).record(1)  # back at zero: allowed again
    quotas.mutation_quota("u", "other", strict=True).record(22)  # another client id's own bucket
    assert quotas.mutation_quota("v", "unlimited", strict=True).sensor is None


def test_the_rates_of_clients_idle_for_an_hour_are_forgotten() -> None:
    now = [0]
    quotas = ClientQuotas(lambda: now[0])
    quotas.update({QuotaEntity(None, None, False, True): {P: 1000.0}})  # every client id, its own rate
    quotas.record(QuotaType.PRODUCE, "u", "old", 10)
    now[0] = 1800_000
    quotas.record(QuotaType.PRODUCE, "u", "recent", 10)
    now[0] = 3600_001
    quotas.expire_inactive()
    assert [c for _, _, c, *_ in quotas.rates()] == ["recent"]
