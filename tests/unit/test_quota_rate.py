"""Kafka's sampled rate (``quotas.rate``) and the replication throttle's replica lists."""

from __future__ import annotations

import pytest

from eoslog.quotas.rate import SampledRate
from eoslog.quotas.replication import UNLIMITED, ReplicationQuota, throttled_partitions


def test_a_rate_is_measured_over_at_least_all_but_one_window() -> None:
    rate = SampledRate(num=11, window_ms=1000)
    rate.record(10_000, now_ms=0)
    # One event: Kafka divides by 10 whole windows more than the 1 ms since it happened.
    assert rate.measure(now_ms=1) == pytest.approx(10_000 / 10.001)
    for t in range(1, 20):
        rate.record(1000, now_ms=t * 1000)
    # Steady 1000/s: after the windows have filled, the measure is close to it.
    assert 950 <= rate.measure(now_ms=20_000) <= 1100


def test_windows_without_events_are_forgotten() -> None:
    rate = SampledRate(num=2, window_ms=1000)
    rate.record(5000, now_ms=0)
    assert rate.measure(now_ms=500) == 5000 / 1.5  # 500 ms and the one more window counted
    assert rate.measure(now_ms=3000) == 0.0  # 2 windows of silence reset the sample


def test_throttled_partitions_parse_kafkas_lists() -> None:
    assert throttled_partitions("*", 1) is None
    assert throttled_partitions("0:1,0:2,1:2, 3:1", 1) == {0, 3}
    assert throttled_partitions("", 1) == frozenset()


def test_a_quota_is_exceeded_only_above_its_bound() -> None:
    now = [0]
    quota = ReplicationQuota(2, UNLIMITED, lambda: now[0], num=2, window_ms=1000)
    quota.record(10**9)
    assert not quota.is_exceeded()  # no bound
    quota.update_bound(1000)
    assert quota.is_exceeded()
    assert quota.is_throttled("0:2,1:3", 0) and not quota.is_throttled("0:2,1:3", 1)
    assert quota.is_throttled("*", 5) and not quota.is_throttled("", 0)
    now[0] = 5000
    assert not quota.is_exceeded()
