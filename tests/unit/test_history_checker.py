"""The history checker finds each anomaly it claims to check (and none in a clean history)."""

from __future__ import annotations

from support.history import ABORT, COMMIT, FAIL, INFO, OK, History, check


def _clean() -> History:
    h = History()
    h.send(b"a", OK)
    h.send(b"b", OK, txn="t1")
    h.send(b"c", OK, txn="t2")
    h.send(b"d", FAIL)
    h.send(b"e", INFO)
    h.txn("t1", COMMIT)
    h.txn("t2", ABORT)
    h.assign("c1", 0)
    h.poll("c1", 0, 0, b"a")
    h.poll("c1", 0, 2, b"b")
    h.final_read(0, [(0, b"a"), (2, b"b"), (4, b"e")])
    return h


def test_clean_history_passes_and_says_what_was_checked() -> None:
    report = check(_clean())
    assert report.ok, report.summary()
    assert "5 sends (3 acknowledged, 1 refused, 1 indeterminate), 2 transactions" in report.summary()
    assert "lost writes: 0" in report.summary()


def test_each_anomaly_is_found() -> None:
    lost = _clean()
    lost.final_read(0, [(0, b"a"), (4, b"e")])
    assert check(lost).anomalies["lost writes"] == ["b'b' (txn t1)"]

    duplicate = _clean()
    duplicate.final_read(0, [(0, b"a"), (2, b"b"), (3, b"b")])
    assert len(check(duplicate).anomalies["duplicates"]) == 1

    aborted = _clean()
    aborted.poll("c1", 0, 3, b"c")
    assert len(check(aborted).anomalies["aborted reads"]) == 1

    inconsistent = _clean()
    inconsistent.poll("c2", 0, 2, b"x")
    assert check(inconsistent).anomalies["inconsistent offsets"] == ["p0@2 held [b'b', b'x']"]

    backwards = _clean()
    backwards.poll("c1", 0, 1, b"z")
    assert len(check(backwards).anomalies["non-monotonic polls"]) == 1
    reassigned = _clean()
    reassigned.assign("c1", 0)
    reassigned.poll("c1", 0, 0, b"a")  # a rebalance may start over: not an anomaly
    assert check(reassigned).ok
