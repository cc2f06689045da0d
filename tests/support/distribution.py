"""How the suite is shared between pytest-xdist's workers (``-n N --dist loadgroup``, scripts/test.sh).

A worker is a pytest process of its own, so a shared fixture is made once per worker that needs
it, and tests that must see the same instance go to the same worker:

- a test using a package-scoped fixture of ours (tests/conformance's eoslog + Kafka pair, the
  Apache Kafka broker of tests/reference/eoslog_client_on_kafka) joins its package's group: one
  pair, one Kafka JVM, as in a serial run;
- a test using a module-, class- or session-scoped fixture of ours (``shared_broker``,
  ``zookeeper``, ``cutfs``, a module's own cluster; tests/spark's SparkSession and broker) joins
  its module's group. A session-scoped fixture is then made once per worker that runs such a
  module (a SparkSession per worker, kept until the worker ends), so the Spark modules spread;
- every other test is a group of its own.

Fixtures of pytest and its plugins (``tmp_path_factory``...) do not count. The groups are then
ordered by their module's cost (``MODULE_COST_S``; the rest keep collection order, tests/unit's
short tests last), so the long groups start first and the short ones fill the workers' ends;
``--no-loadscope-reorder`` keeps that order (xdist would otherwise sort by number of tests).
"""

from __future__ import annotations

import pytest

_BROADER = {"session": 3, "package": 2, "module": 1, "class": 1}

# Seconds per group (a module, or tests/conformance and tests/reference/eoslog_client_on_kafka),
# from a clean-clone run on 3 workers on 2 shared cores (24 min, 2026-11-29): those over 30 s. Only
# the order of the groups depends on it; a module missing here starts after them, so a long one
# left out (test_quotas' fixed windows, the throttled disk moves) ends the run with one worker busy.
MODULE_COST_S: dict[str, float] = {
    "tests/chaos/test_copy.py": 444,
    "tests/spark/test_standalone.py": 236,
    "tests/interop/test_move_replica_log_dirs.py": 218,
    "tests/interop/test_clients.py": 166,
    "tests/reference/test_kafka_connect_eos.py": 139,
    "tests/interop/test_quotas.py": 131,
    "tests/spark/test_sink_driver_kill.py": 126,
    "tests/reference/test_kafka_transactions_system_test.py": 122,
    "tests/chaos/test_power_cut.py": 121,
    "tests/cluster/test_cluster_clients.py": 120,
    "tests/conformance": 107,
    "tests/cluster/test_cluster_reassignment.py": 98,
    "tests/interop/test_eoslog_consumer_protocol.py": 97,
    "tests/spark/test_sink.py": 90,
    "tests/spark/test_kafka_connector.py": 85,
    "tests/reference/test_java_clients.py": 83,
    "tests/chaos/test_grow_copy.py": 77,
    "tests/interop/test_groups.py": 75,
    "tests/reference/test_kafka_tools_on_eoslog.py": 71,
    "tests/reference/test_kafka_harness.py": 65,
    "tests/spark/test_eoslog_connector_on_kafka.py": 64,
    "tests/interop/test_consumer_protocol.py": 61,
    "tests/interop/test_transactions_cli.py": 58,
    "tests/reference/eoslog_client_on_kafka": 50,
    "tests/interop/test_cli.py": 46,
    "tests/cluster/test_cluster_power_cut.py": 45,
    "tests/interop/test_transactions.py": 43,
    "tests/spark/test_source.py": 42,
    "tests/spark/test_sink_power_cut.py": 41,
    "tests/observability/test_console.py": 41,
    "tests/interop/test_security.py": 41,
    "tests/cluster/test_cluster_controller.py": 40,
    "tests/interop/test_eoslog_producer.py": 40,
    "tests/reference/test_kafka_streams_eos.py": 39,
    "tests/spark/test_quiet_stop.py": 37,
    "tests/cluster/test_cluster_share.py": 37,
    "tests/cluster/test_cluster_racks.py": 35,
    "tests/chaos/test_idempotence.py": 33,
    "tests/cluster/test_cluster_partitions.py": 33,
    "tests/share/test_share_tools.py": 32,
}


def group_of(item: pytest.Item) -> str | None:
    """The xdist group ``item`` must share, or None when it may run on any worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    group = None
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixturedef = defs[-1]  # the definition this item uses (the closest override)
        if _BROADER.get(fixturedef.scope, 0) == 0 or not fixturedef.baseid:  # function scope, or a plugin's
            continue
        if fixturedef.scope == "package":
            return fixturedef.baseid  # the package that defines it
        group = module_of(item)
    return group


def module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def assign(items: list[pytest.Item]) -> None:
    """Mark each item with its group; order the groups by cost, the rest as collected."""
    first_seen: dict[str, int] = {}
    keys: dict[int, tuple[float, int]] = {}
    for item in items:
        group = group_of(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
        position = first_seen.setdefault(group or item.nodeid, len(first_seen))
        cost = MODULE_COST_S.get(group or module_of(item), 0.0)
        keys[id(item)] = (-cost, position)
    items.sort(key=lambda item: keys[id(item)])


def check_grouped(items: list[pytest.Item]) -> None:
    """Fail the run when xdist did not put a group in the node ids (its scheduler's only source):
    the groups' tests would be spread over the workers, each starting its own shared fixtures."""
    lost = [item.nodeid for item in items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"--dist loadgroup is not grouping with this pytest and pytest-xdist "
                                f"(pytest-xdist#1386; pyproject.toml pins pytest below 9.2): {lost[0]}, ...")
