"""The broker's collector setting and its pause histograms (``broker/gc_policy.py``)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from eoslog.broker import gc_policy
from eoslog.stats import GC_PAUSES


@pytest.fixture
def policy() -> Iterator[None]:
    thresholds, callbacks = gc.get_threshold(), list(gc.callbacks)
    gc_policy.after_startup()
    yield
    gc.set_threshold(*thresholds)
    gc.callbacks[:] = callbacks


@pytest.mark.usefixtures("policy")
def test_each_collection_is_observed_under_its_generation() -> None:
    before = [h.count for h in GC_PAUSES]
    total_before = GC_PAUSES[2].total
    gc.collect(2)
    gc.collect(0)
    assert GC_PAUSES[2].count - before[2] == 1
    assert GC_PAUSES[0].count - before[0] >= 1  # and any young collection an allocation ran meanwhile
    assert GC_PAUSES[2].total > total_before
    assert gc.get_threshold()[0] == gc_policy.YOUNG_THRESHOLD


@pytest.mark.usefixtures("policy")
def test_installed_once() -> None:
    gc_policy.after_startup()  # a second broker in the process (tests) adds no second observer
    before = GC_PAUSES[1].count
    gc.collect(1)
    assert GC_PAUSES[1].count - before == 1


@pytest.mark.usefixtures("policy")
def test_a_scrape_that_sets_off_a_collection_does_not_deadlock() -> None:
    """Reading the histograms allocates; with a collection due at every allocation, the
    collection's callback observes into the histogram being read — which must not wait for it."""
    from eoslog.metrics.broker import GcPauseCollector

    before = GC_PAUSES[0].count
    gc.set_threshold(1, 10, 10)
    try:
        for _ in range(200):
            list(GcPauseCollector().collect())
    finally:
        gc.set_threshold(gc_policy.YOUNG_THRESHOLD, 10, 10)
    assert GC_PAUSES[0].count - before > 0
