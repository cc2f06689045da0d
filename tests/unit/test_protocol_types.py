"""protocol/requests.py and protocol/responses.py are what ``scripts/typegen.py`` writes for
the handler registry of today: a version range changed without regenerating them fails here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from eoslog.broker.handlers.registry import HANDLED

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # no package: imported by file name
import typegen


@pytest.mark.parametrize("kind", ["request", "response"])
def test_generated_type_unions_match_the_registry(kind: str) -> None:
    text = (typegen.HERE / f"{kind}s.py").read_text()
    assert text == typegen.render(kind, HANDLED), "run: python scripts/typegen.py"
