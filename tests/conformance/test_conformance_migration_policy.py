"""``group.consumer.migration.policy`` other than ``bidirectional`` (``upgrade``, ``downgrade``,
``disabled``): the consumer-groups sessions that change a group's protocol — an empty group's
migration both ways, a live classic group's upgrade, a live consumer group's downgrade, a static
member's downgrade — each on a pair of brokers (eoslog, Kafka 4.4) set with the policy, compared
as every conformance session is. The policy is a static broker config, so each policy has its own
pair (the package's shared pair runs ``bidirectional``, test_conformance_consumer_groups.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conformance.conftest import broker_pair
from conformance.session import Broker, Catalogue
from conformance.test_conformance_consumer_groups import CATALOGUE as CONSUMER_GROUPS

POLICIES = ("upgrade", "downgrade", "disabled")
MIGRATING = ("empty-group-migration", "online-migration", "online-downgrade", "static-member-downgrade")
# pytest_generate_tests (conftest.py) parametrizes session_name from this module's CATALOGUE.
CATALOGUE = Catalogue("consumer-groups-migration",
                      sessions={name: CONSUMER_GROUPS.sessions[name] for name in MIGRATING})


@pytest.fixture(scope="module", params=POLICIES)
def policy_brokers(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, tuple[Broker, Broker]]]:
    with broker_pair(tmp_path_factory, {"group.consumer.migration.policy": request.param}) as pair:
        yield request.param, pair


def test_session(session_name: str, policy_brokers: tuple[str, tuple[Broker, Broker]]) -> None:
    policy, pair = policy_brokers
    Catalogue(f"consumer-groups-policy-{policy}", sessions=CATALOGUE.sessions, caps=CATALOGUE.caps).run(
        session_name, pair)
