"""A rate over sampled time windows: Kafka's ``Rate`` over a ``SampledStat`` (the metrics
library every Kafka quota is measured with), so a throttle or quota here measures what
Kafka's would for the same traffic.

``num`` windows of ``window_ms`` each: a value is added to the current window (a new one
starts when it has lasted ``window_ms``; the oldest is reused); windows without an event for
``num * window_ms`` are reset. The rate is the sum over the windows divided by the time
they span, counted as at least ``num - 1`` whole windows, so a burst at start-up is not
measured over a few milliseconds (Kafka's ``Rate.windowSize``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class SampledRate:
    """Units per second over ``num`` windows of ``window_ms``."""

    def __init__(self, num: int = 11, window_ms: int = 1000) -> None:
        if num < 1 or window_ms < 1:
            raise ValueError(f"{num} windows of {window_ms} ms")
        self.num, self.window_ms = num, window_ms
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate per second now."""
        self._purge(now_ms)
        total = sum(s.value for s in self._samples)
        return total / self.window_size_ms(now_ms) * 1000.0

    def window_size_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = elapsed // self.window_ms
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        # num + 1 samples: one may overlap the start of the measured span (Kafka keeps it too).
        self._current = (self._current + 1) % (self.num + 1)
        if self._current >= len(self._samples):
            self._samples.append(_Sample(now_ms, now_ms))
        else:
            self._samples[self._current].reset(now_ms)
        return self._samples[self._current]

    def _purge(self, now_ms: int) -> None:
        expire = self.num * self.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire:
                s.reset(now_ms)


class TokenBucket:
    """Kafka's ``TokenBucket`` (KIP-599, controller mutations): it holds up to ``burst`` tokens
    (the quota times the windows' span), refills at the quota per second, and each mutation
    takes one token per partition — taking it below zero is allowed once, and the quota is
    exceeded while it stays below."""

    def __init__(self) -> None:
        self.tokens: float | None = None  # None: full (Kafka's first refill fills it)
        self.last_ms = 0

    def measure(self, quota: float, burst: float, now_ms: int) -> float:
        self._refill(quota, burst, now_ms)
        assert self.tokens is not None
        return self.tokens

    def record(self, value: float, quota: float, burst: float, now_ms: int) -> None:
        self.tokens = min(burst, self.measure(quota, burst, now_ms) - value)

    def _refill(self, quota: float, burst: float, now_ms: int) -> None:
        tokens = burst if self.tokens is None else self.tokens + quota * (now_ms - self.last_ms) / 1000
        self.tokens = min(burst, tokens)
        self.last_ms = now_ms
