"""scripts/mutants.py, the mutant catalogue's runner (issue 28), without running a mutant's tests:
it applies an edit found exactly once and refuses one whose old text is gone or ambiguous, reads
pytest's exit status as CAUGHT / SURVIVED / ERROR, and runs a mutant end to end on a toy tree
(its test fails with the edit, passes without). Every entry of tests/mutants/catalogue.toml still
applies to today's src/ and names test files that exist: the catalogue follows the code."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import mutants  # noqa: E402  (scripts/ is not a package)
from mutants import Edit, Mutant, MutantDoesNotApply, Outcome  # noqa: E402


def mutant(old: str, new: str, file: str = "src/pkg/mod.py", tests: tuple[str, ...] = ("tests/test_mod.py",)) -> Mutant:
    return Mutant("m", "loss", "here", tests, (Edit(file, old, new),))


def test_an_edit_found_once_is_applied(tmp_path: Path) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    module = tmp_path / "src" / "pkg" / "mod.py"
    module.write_text("def durable():\n    return fsync()\n")
    mutants.apply(mutant("    return fsync()\n", "    return None\n"), tmp_path)
    assert module.read_text() == "def durable():\n    return None\n"


@pytest.mark.parametrize(("text", "found"), [("x = 1\n", 0), ("y = 2\ny = 2\n", 2)])
def test_an_edit_whose_old_text_is_gone_or_ambiguous_is_refused(tmp_path: Path, text: str, found: int) -> None:
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    module = tmp_path / "src" / "pkg" / "mod.py"
    module.write_text(text)
    with pytest.raises(MutantDoesNotApply, match=f"found {found} times"):
        mutants.apply(mutant("y = 2\n", "y = 3\n"), tmp_path)
    with pytest.raises(MutantDoesNotApply, match="no such file"):
        mutants.apply(mutant("y = 2\n", "y = 3\n", file="src/pkg/gone.py"), tmp_path)


def test_pytest_exit_statuses_are_classified() -> None:
    assert mutants.classify(1, "1 failed in 2.00s") is Outcome.CAUGHT  # tests failed
    assert mutants.classify(1, "1 failed, 1 error in 2.00s") is Outcome.CAUGHT
    assert mutants.classify(1, "1 error in 2.00s") is Outcome.ERROR  # a fixture failed: nothing judged
    assert mutants.classify(0, "1 passed in 2.00s") is Outcome.SURVIVED  # all passed with the mutant in
    assert mutants.classify(0, "1 passed, 1 skipped in 2.00s") is Outcome.SURVIVED
    assert mutants.classify(0, "1 skipped in 2.00s") is Outcome.ERROR  # skipped: nothing judged
    for status in (2, 3, 4, 5):  # interrupted, internal error, usage error, nothing collected
        assert mutants.classify(status) is Outcome.ERROR
    assert mutants.combine([Outcome.CAUGHT, Outcome.CAUGHT]) is Outcome.CAUGHT
    assert mutants.combine([Outcome.CAUGHT, Outcome.SURVIVED]) is Outcome.SURVIVED  # each test must fail
    assert mutants.combine([Outcome.SURVIVED, Outcome.ERROR]) is Outcome.ERROR


def test_the_catalogue_is_checked_when_read() -> None:
    good = {"name": "m", "breaks": "loss", "source": "here", "tests": ["tests/t.py"],
            "edit": [{"file": "src/a.py", "old": "a", "new": "b"}]}
    assert mutants.parse({"mutant": [good]})[0].edits == (Edit("src/a.py", "a", "b"),)
    bad = [
        ({**good, "tests": []}, "'tests'"),
        ({**good, "breaks": ""}, "'breaks'"),
        ({**good, "edit": []}, "no edit"),
        ({**good, "edit": [{"file": "src/a.py", "old": "a", "new": "a"}]}, "changes nothing"),
        ({**good, "edit": [{"file": "tests/t.py", "old": "a", "new": "b"}]}, "not under src/"),
    ]
    for entry, message in bad:
        with pytest.raises(ValueError, match=message):
            mutants.parse({"mutant": [entry]})
    with pytest.raises(ValueError, match="used twice"):
        mutants.parse({"mutant": [good, good]})


def test_a_mutant_runs_end_to_end_on_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A toy tree: its test passes on the real code, so the mutant is CAUGHT only because the
    edit reached the copy's src (and the tree itself is left as it was)."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the toy needs no plugin: a fast start
    (tmp_path / "src" / "toy").mkdir(parents=True)
    (tmp_path / "src" / "toy" / "__init__.py").write_text("def once(xs):\n    return sorted(set(xs))\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_toy.py").write_text(
        "from toy import once\n\ndef test_once():\n    assert once([2, 1, 2]) == [1, 2]\n")
    duplicate = Mutant("toy-duplicate", "duplicate", "here", ("tests/test_toy.py::test_once",),
                       (Edit("src/toy/__init__.py", "sorted(set(xs))", "sorted(xs)"),))
    caught = mutants.run_one(duplicate, root=tmp_path, logs=tmp_path / "logs")
    assert caught.outcome is Outcome.CAUGHT, caught.detail
    assert caught.log is not None and "1 failed" in caught.log.read_text()
    assert mutants.run_one(duplicate, root=tmp_path, mutate=False).outcome is Outcome.SURVIVED  # the baseline
    missing = Mutant("toy-missing", "duplicate", "here", ("tests/test_toy.py::test_gone",), duplicate.edits)
    assert mutants.run_one(missing, root=tmp_path).outcome is Outcome.ERROR
    moved = Mutant("toy-moved", "duplicate", "here", duplicate.tests,
                   (Edit("src/toy/__init__.py", "list(set(xs))", "list(xs)"),))
    assert mutants.run_one(moved, root=tmp_path).outcome is Outcome.BROKEN
    assert "sorted(set(xs))" in (tmp_path / "src" / "toy" / "__init__.py").read_text()


def test_every_catalogued_mutant_applies_to_todays_code(tmp_path: Path) -> None:
    catalogue = mutants.load()
    assert catalogue, "the catalogue is empty"
    for m in catalogue:
        for edit in m.edits:
            target = tmp_path / m.name / edit.file
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text((ROOT / edit.file).read_text())
        mutants.apply(m, tmp_path / m.name)  # raises, naming the file, when the code moved
        for test in m.tests:
            assert (ROOT / test.split("::")[0]).is_file(), f"{m.name}: {test} names no test file"


def test_the_reported_failure_is_the_exception_that_ended_the_test() -> None:
    output = ("E   asyncio.exceptions.CancelledError\n\nduring handling, another exception occurred:\n"
              "E   TimeoutError\n>   pytest.fail(...)\nE   Failed: nothing more after 7 of 9 bytes\n"
              "E   (more)\nFAILED t.py::test_x\n1 failed in 1.00s\n")
    assert mutants._failure(output) == "Failed: nothing more after 7 of 9 bytes"
    assert mutants._failure("1 passed in 1.00s\n") == "1 passed in 1.00s"
