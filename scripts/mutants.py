"""The mutant catalogue's runner (issue 28: no test weakened). Each mutant in
tests/mutants/catalogue.toml is a small edit of src/ (file, exact old text, new text) that breaks
one exactly-once property — a duplicate, a loss, an aborted read, a reordering, a fencing — and
names the tests that must fail with it. For each selected mutant the runner copies the tree to a
temporary directory, applies the edit there (refusing when the old text is not found exactly
once: the catalogue must stay true as the code moves), runs the tests with this venv's pytest
on the mutated src (PYTHONPATH first, before the editable install's path), each test in a
pytest of its own, and reports:

- CAUGHT: every one of its tests failed, as they must;
- SURVIVED: one passed with the mutant in — a weakened test (a finding: never hidden);
- BROKEN: the mutant no longer applies (its old text moved or changed): fix the catalogue;
- ERROR: pytest did not run the tests (a collection or usage error, no test found).

The exit status is non-zero unless every selected mutant was CAUGHT. One mutant at a time by
default (the tests start brokers; a 2-core machine): ``--jobs N`` for more.

    .venv/bin/python scripts/mutants.py --list
    .venv/bin/python scripts/mutants.py --only txn-witness-always-survived --only tv2-no-epoch-bump
    .venv/bin/python scripts/mutants.py --markdown            # every mutant; a Markdown table too

It is no part of the pytest suite (tests/mutants holds no test module);
tests/unit/test_mutants_runner.py tests the runner itself.
"""

from __future__ import annotations

import enum
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
CATALOGUE = ROOT / "tests" / "mutants" / "catalogue.toml"
# Not copied into a mutant's tree: history, environments, caches, build output. .reference (the
# Kafka jars, 200 MB) is linked instead.
COPY_IGNORE = (".git", ".venv", ".reference", "build", "test-artifacts", "__pycache__", ".mypy_cache",
               ".ruff_cache", ".pytest_cache", "*.egg-info")
LINKED = (".reference",)
LOGS = ROOT / "test-artifacts" / "mutants"
SUMMARY = re.compile(r"\b\d+ (failed|passed|skipped|errors?)\b.* in [0-9.]+s")  # pytest's last line


class Outcome(enum.Enum):
    CAUGHT = "CAUGHT"
    SURVIVED = "SURVIVED"
    BROKEN = "BROKEN"
    ERROR = "ERROR"


@dataclass(frozen=True)
class Edit:
    file: str  # relative to the tree's root, under src/
    old: str   # must occur exactly once in the file
    new: str


@dataclass(frozen=True)
class Mutant:
    name: str
    breaks: str  # one line: what the mutant breaks
    source: str  # where it was first shown (docstring, commit)
    tests: tuple[str, ...]  # pytest node ids that must fail with it
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Result:
    mutant: Mutant
    outcome: Outcome
    seconds: float
    detail: str  # why BROKEN/ERROR, or the last line pytest printed
    log: Path | None


class MutantDoesNotApply(Exception):
    """The mutant's old text is not in its file exactly once."""


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: {key!r} must be a non-empty string")
    return value


def parse(data: dict[str, Any]) -> list[Mutant]:
    """The catalogue's mutants, checked: every field present, names unique, tests named, each
    edit under src/ and changing something."""
    mutants: list[Mutant] = []
    for i, entry in enumerate(data.get("mutant", [])):
        where = f"mutant #{i + 1}"
        name = _text(entry, "name", where)
        where = f"mutant {name!r}"
        tests = entry.get("tests")
        if not isinstance(tests, list) or not tests or not all(isinstance(t, str) and t for t in tests):
            raise ValueError(f"{where}: 'tests' must list the node ids that must fail")
        edits: list[Edit] = []
        for edit in entry.get("edit", []):
            e = Edit(_text(edit, "file", where), _text(edit, "old", where), edit.get("new", ""))
            if not isinstance(e.new, str) or e.new == e.old:
                raise ValueError(f"{where}: an edit of {e.file} changes nothing")
            if not e.file.startswith("src/") or ".." in Path(e.file).parts:
                raise ValueError(f"{where}: {e.file} is not under src/")
            edits.append(e)
        if not edits:
            raise ValueError(f"{where}: no edit")
        mutants.append(Mutant(name, _text(entry, "breaks", where), _text(entry, "source", where),
                              tuple(tests), tuple(edits)))
    names = [m.name for m in mutants]
    if duplicated := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"mutant names used twice: {', '.join(duplicated)}")
    return mutants


def load(path: Path = CATALOGUE) -> list[Mutant]:
    with path.open("rb") as f:
        return parse(tomllib.load(f))


def apply(mutant: Mutant, tree: Path) -> None:
    """Apply every edit in ``tree``; raise MutantDoesNotApply (nothing half-written is relied on:
    the tree is a throw-away copy) when an old text is missing or ambiguous."""
    for edit in mutant.edits:
        path = tree / edit.file
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise MutantDoesNotApply(f"{edit.file}: no such file") from None
        found = text.count(edit.old)
        if found != 1:
            first = edit.old.strip().splitlines()[0]
            raise MutantDoesNotApply(f"{edit.file}: the old text ({first!r}...) is found {found} times, not once")
        path.write_text(text.replace(edit.old, edit.new))


def classify(returncode: int, output: str = "") -> Outcome:
    """pytest's exit status: 1 is failed tests (the mutant caught) — unless only errors (a fixture
    that could not set up) made it, which judge nothing; 0 all passed (it survived), unless all
    were skipped; anything else (interrupted, internal or usage error, no tests collected) ran
    nothing to judge."""
    summary = next((line for line in reversed(output.splitlines()) if SUMMARY.search(line)), "")
    if returncode == 0:  # (only skipped is no pass: nothing judged)
        return Outcome.ERROR if "skipped" in summary and " passed" not in summary else Outcome.SURVIVED
    if returncode == 1:
        return Outcome.ERROR if " error" in summary and " failed" not in summary else Outcome.CAUGHT
    return Outcome.ERROR


def copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*COPY_IGNORE), symlinks=True)
    for name in LINKED:
        if (source / name).exists():
            (target / name).symlink_to(source / name)


def pytest_command(python: str, tests: Sequence[str]) -> list[str]:
    return [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=-ra", *tests]


def combine(outcomes: Sequence[Outcome]) -> Outcome:
    """A mutant's outcome from its tests' (each must fail): ERROR if one could not be judged,
    SURVIVED if one passed, CAUGHT when all failed."""
    for worst in (Outcome.ERROR, Outcome.SURVIVED):
        if worst in outcomes:
            return worst
    return Outcome.CAUGHT


def run_one(mutant: Mutant, *, root: Path = ROOT, python: str = sys.executable, logs: Path | None = None,
            mutate: bool = True) -> Result:
    """Copy ``root``, apply ``mutant`` (unless ``mutate`` is false: the baseline run), run each
    of its tests there in a pytest of its own (each must fail on its own); the pytest output goes
    to ``logs/<name>.log``."""
    start = time.monotonic()
    outputs: list[str] = []
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix=f"eoslog-mutant-{mutant.name}-") as tmp:
        tree = Path(tmp) / "tree"
        copy_tree(root, tree)
        if mutate:
            try:
                apply(mutant, tree)
            except MutantDoesNotApply as e:
                return Result(mutant, Outcome.BROKEN, time.monotonic() - start, str(e), None)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(tree / "src"), os.environ.get("PYTHONPATH"))
                                                           if p)}
        env.pop("PYTEST_XDIST_WORKER", None)
        for test in mutant.tests:
            proc = subprocess.run(pytest_command(python, [test]), cwd=tree, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
            outcomes.append(classify(proc.returncode, proc.stdout))
            outputs.append(f"==> {test}: exit {proc.returncode} ({outcomes[-1].value})\n{proc.stdout}")
    seconds = time.monotonic() - start
    log: Path | None = None
    if logs is not None:
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{mutant.name}{'' if mutate else '.baseline'}.log"
        log.write_text("\n".join(outputs))
    outcome = combine(outcomes)
    if outcome is Outcome.CAUGHT:
        detail = "; ".join(_failure(o) for o in outputs)
    else:
        detail = "; ".join(f"{t}: {o.value}" for t, o in zip(mutant.tests, outcomes, strict=True) if o is outcome)
    return Result(mutant, outcome, seconds, detail, log)


def _failure(output: str) -> str:
    """What the test saw: the first line of pytest's last block of ``E`` lines (the exception
    that ended the test, after any it chained), else its summary line."""
    lines = [line for line in output.splitlines() if line.strip()]
    blocks: list[list[str]] = []
    for previous, line in zip(["", *lines], lines, strict=False):
        if line.startswith("E "):
            if not previous.startswith("E "):
                blocks.append([])
            blocks[-1].append(line[1:].strip())
    return blocks[-1][0] if blocks else (lines[-1] if lines else "")


def select(mutants: Sequence[Mutant], only: Iterable[str]) -> list[Mutant]:
    wanted = list(only)
    if not wanted:
        return list(mutants)
    known = {m.name for m in mutants}
    if unknown := [n for n in wanted if n not in known]:
        raise ValueError(f"no such mutant: {', '.join(unknown)}")
    return [m for m in mutants if m.name in wanted]


def run_all(mutants: Sequence[Mutant], jobs: int, run: Callable[[Mutant], Result],
            advance: Callable[[Result], None]) -> list[Result]:
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [pool.submit(run, m) for m in mutants]
        results = []
        for f in futures:
            results.append(f.result())
            advance(results[-1])
    return results


def markdown(results: Sequence[Result]) -> str:
    rows = ["| mutant | breaks | tests | outcome | seconds |", "|---|---|---|---|---|"]
    for r in results:
        tests = "<br>".join(f"`{t}`" for t in r.mutant.tests)
        rows.append(f"| `{r.mutant.name}` | {r.mutant.breaks} | {tests} | {r.outcome.value} | {r.seconds:.0f} |")
    return "\n".join(rows)


def main() -> None:
    def command(
        only: Annotated[list[str] | None, typer.Option("--only", help="a mutant's name (repeatable)")] = None,
        list_: Annotated[bool, typer.Option("--list", help="list the catalogue and exit")] = False,
        jobs: Annotated[int, typer.Option("--jobs", min=1, help="mutants run at once")] = 1,
        baseline: Annotated[bool, typer.Option("--baseline", help="also run each mutant's tests unmutated "
                                               "(they must pass)")] = False,
        catalogue: Annotated[Path, typer.Option("--catalogue")] = CATALOGUE,
        logs: Annotated[Path, typer.Option("--logs", help="pytest output per mutant")] = LOGS,
        as_markdown: Annotated[bool, typer.Option("--markdown", help="print a Markdown table too")] = False,
    ) -> None:
        console = Console()
        try:
            chosen = select(load(catalogue), only or [])
        except (ValueError, OSError, tomllib.TOMLDecodeError) as e:
            console.print(f"[red]mutants: {e}[/red]")
            raise typer.Exit(2) from None
        if list_:
            table = Table("MUTANT", "BREAKS", "TESTS", title=f"{len(chosen)} mutants ({catalogue.name})")
            for m in chosen:
                table.add_row(m.name, m.breaks, "\n".join(m.tests))
            console.print(table)
            return
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                      console=console) as progress:
            task = progress.add_task("mutants", total=len(chosen) * (2 if baseline else 1))

            def run(m: Mutant) -> Result:
                if baseline:
                    base = run_one(m, logs=logs, mutate=False)
                    progress.advance(task)
                    if base.outcome is not Outcome.SURVIVED:  # the unmutated tests fail: nothing to judge
                        return Result(m, Outcome.ERROR, base.seconds, f"fails unmutated: {base.detail}", base.log)
                return run_one(m, logs=logs)

            def advance(r: Result) -> None:
                progress.advance(task)
                progress.console.print(f"{r.mutant.name}: {r.outcome.value} ({r.seconds:.0f} s) {r.detail}")

            results = run_all(chosen, jobs, run, advance)
        table = Table("MUTANT", "TESTS", "OUTCOME", "SECONDS", title="mutants")
        colour = {Outcome.CAUGHT: "green", Outcome.SURVIVED: "red", Outcome.BROKEN: "red", Outcome.ERROR: "yellow"}
        for r in results:
            table.add_row(r.mutant.name, "\n".join(r.mutant.tests),
                          f"[{colour[r.outcome]}]{r.outcome.value}[/]", f"{r.seconds:.0f}")
        console.print(table)
        if as_markdown:
            print(markdown(results))
        if any(r.outcome is not Outcome.CAUGHT for r in results):
            raise typer.Exit(1)

    typer.run(command)


if __name__ == "__main__":
    main()
