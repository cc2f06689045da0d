"""protocol/requests.py and protocol/responses.py are what ``eoslog.protocol.typegen`` writes for
the handler registry of today: a version range changed without regenerating them fails here."""

from __future__ import annotations

import pytest

from eoslog.broker.handlers.registry import REGISTRY
from eoslog.protocol import typegen


@pytest.mark.parametrize("kind", ["request", "response"])
def test_generated_type_unions_match_the_registry(kind: str) -> None:
    text = (typegen.HERE / f"{kind}s.py").read_text()
    assert text == typegen.render(kind, REGISTRY), "run: python -m eoslog.protocol.typegen"
