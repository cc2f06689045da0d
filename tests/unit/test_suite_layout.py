"""The test suite's own layout: every module under tests/ is imported by its bare name
(pytest's default prepend import mode, and tests import helpers such as ``harness`` or
``clients`` that way), so two files with one name make the whole-suite collection fail
with "import file mismatch" — a failure a run of one directory does not show."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_module_names_are_unique_across_the_test_directories() -> None:
    by_name: defaultdict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if path.name not in ("conftest.py", "__init__.py"):
            by_name[path.stem].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
