"""Field-by-field comparison of two observations, with the allowed differences applied.

A difference is a path (``produce#2.responses[0].partition_responses[0].error_code``) with both
values. It is *allowed* when a rule of ``allowed.ALLOWED`` covers it (cluster id, node addresses,
clocks, ...), *known* when the session's entry in ``allowed.KNOWN`` covers it (a listed, explained
difference), and otherwise *unexplained*: the session fails.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

MISSING = "<absent>"


@dataclass(frozen=True)
class Rule:
    """A difference that is not a defect: paths matching ``pattern`` (fnmatch, ``*`` crosses
    dots) may differ, when ``when(eoslog_value, kafka_value)`` holds, for ``reason``."""
    pattern: str
    reason: str
    when: Callable[[object, object], bool] | None = None

    def covers(self, path: str, ours: object, theirs: object) -> bool:
        # "[*]" in a pattern means any list index (fnmatch would read it as a character class).
        pattern = self.pattern.replace("[*]", "[[]*[]]")
        return fnmatch.fnmatchcase(path, pattern) and (self.when is None or self.when(ours, theirs))


@dataclass(frozen=True)
class Difference:
    path: str
    eoslog: object
    kafka: object

    def __str__(self) -> str:
        return f"{self.path}: eoslog={short(self.eoslog)} kafka={short(self.kafka)}"


@dataclass
class Verdict:
    allowed: list[tuple[Difference, Rule]] = field(default_factory=list)
    known: list[tuple[Difference, Rule]] = field(default_factory=list)
    unexplained: list[Difference] = field(default_factory=list)

    @property
    def status(self) -> str:
        if self.unexplained:
            return "differs"
        if self.known:
            return "known difference"
        return "identical"


def short(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def differences(ours: object, theirs: object, path: str = "") -> Iterator[Difference]:
    """Every leaf where the two trees differ (a missing key or list element counts)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in list(ours) + [k for k in theirs if k not in ours]:
            sub = f"{path}.{key}" if path else str(key)
            yield from differences(ours.get(key, MISSING), theirs.get(key, MISSING), sub)
    elif isinstance(ours, list) and isinstance(theirs, list):
        for i in range(max(len(ours), len(theirs))):
            yield from differences(ours[i] if i < len(ours) else MISSING,
                                   theirs[i] if i < len(theirs) else MISSING, f"{path}[{i}]")
    elif ours != theirs:
        yield Difference(path, ours, theirs)


def judge(ours: object, theirs: object, allowed: list[Rule], known: list[Rule]) -> Verdict:
    verdict = Verdict()
    for d in differences(ours, theirs):
        rule = next((r for r in allowed if r.covers(d.path, d.eoslog, d.kafka)), None)
        if rule is not None:
            verdict.allowed.append((d, rule))
            continue
        rule = next((r for r in known if r.covers(d.path, d.eoslog, d.kafka)), None)
        if rule is not None:
            verdict.known.append((d, rule))
        else:
            verdict.unexplained.append(d)
    return verdict
