"""What a test needs from outside Python (Java, kcat, Maven jars, ZooKeeper, ...): a missing
piece FAILS the test, naming it and how to install it — never a quiet skip (issue 19).

    from support.deps import require, require_executable
    require("ZooKeeper", zk_home.exists(), "apt-get install -y zookeeper (scripts/setup.sh does it)")
    kcat = require_executable("kcat", KCAT_HINT, "kafkacat")

A developer who knows a piece is missing may ask for skips instead — ``pytest --allow-skips``
or ``EOSLOG_ALLOW_SKIPS=1`` — and each skip then shows, with its reason, in pytest's summary
(``-ra``). Under CI (``CI=true``) asking for skips is a usage error: a CI run either runs
every test or fails.
"""

from __future__ import annotations

import functools
import os
import shutil
from typing import NoReturn

import pytest

ALLOW_SKIPS_ENV = "EOSLOG_ALLOW_SKIPS"
ALLOW_SKIPS_OPTION = "--allow-skips"
KCAT_HINT = "install it with: apt-get install -y kcat (scripts/setup.sh does it; macOS: brew install kcat)"

_allowed_by_option = False


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


def under_ci() -> bool:
    return _truthy(os.environ.get("CI"))


def skips_requested() -> bool:
    return _allowed_by_option or _truthy(os.environ.get(ALLOW_SKIPS_ENV))


def configure(config: pytest.Config) -> None:
    """Called from tests/conftest.py's pytest_configure with the parsed options."""
    global _allowed_by_option
    _allowed_by_option = bool(config.getoption("allow_skips"))
    if under_ci() and skips_requested():
        raise pytest.UsageError(
            f"{ALLOW_SKIPS_OPTION} / {ALLOW_SKIPS_ENV}=1 is refused under CI=true: "
            "a CI run must run every test or fail")


def missing(name: str, how_to_install: str) -> NoReturn:
    """Fail (or, when the developer allowed it, skip) because ``name`` is missing."""
    message = f"missing dependency: {name} — {how_to_install}"
    if skips_requested() and not under_ci():
        pytest.skip(f"{message} (skipped: skips allowed by {ALLOW_SKIPS_OPTION} / {ALLOW_SKIPS_ENV})")
    pytest.fail(f"{message}\n(to skip such tests instead, run pytest with {ALLOW_SKIPS_OPTION} "
                f"or {ALLOW_SKIPS_ENV}=1; never under CI)", pytrace=False)


def require(name: str, available: bool, how_to_install: str) -> None:
    if not available:
        missing(name, how_to_install)


def require_executable(name: str, how_to_install: str, *aliases: str) -> str:
    """The path of ``name`` (or of the first alias found) on PATH."""
    for candidate in (name, *aliases):
        path = shutil.which(candidate)
        if path is not None:
            return path
    missing(f"{name} (not on PATH)", how_to_install)


def require_kcat() -> str:
    return require_executable("kcat", KCAT_HINT, "kafkacat")


@functools.cache  # each check runs `java -version`; every JVM a test starts asks
def require_java() -> str:
    """The java Spark will use (Java 17 or newer, ``$JAVA_HOME/bin/java`` else PATH)."""
    from eoslog.spark.session import SparkSetupError
    from eoslog.spark.session import require_java as spark_require_java

    try:
        return spark_require_java()
    except SparkSetupError as e:
        problem = str(e)  # reported outside the handler: no chained traceback in the failure
    missing("Java 17 or newer", problem)
