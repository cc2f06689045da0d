"""The test suite's own layout: a module under tests/ outside a package (every test module,
and the helpers beside them such as interop's ``clients``) is imported by its bare name
(pytest's default prepend import mode), so two such files with one name make the whole-suite
collection fail with "import file mismatch" — a failure a run of one directory does not show.
Modules of a package (``support``, ``conformance``) are imported by their qualified names."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_module_names_are_unique_across_the_test_directories() -> None:
    by_name: defaultdict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        in_package = (path.parent / "__init__.py").exists()
        if path.name not in ("conftest.py", "__init__.py") and not in_package:
            by_name[path.stem].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
