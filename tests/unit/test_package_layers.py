"""The packages' layers as docs/architecture.md draws them ("Packages"): a module of
``src/eoslog`` imports only from its own package or from a lower layer — lazy imports and
``TYPE_CHECKING`` ones count too — so there is no import cycle between packages and no
import that runs back up. A package added to ``src/eoslog`` must be given its layer here and
in the architecture page."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "eoslog"

# Top to bottom; a package imports only from the layers below its own.
LAYERS = [
    {"__main__"},
    {"cli"},
    {"console"},
    {"broker"},
    {"cluster", "metrics", "share"},
    {"coordinator"},
    {"replica", "security", "spark", "tools"},
    {"storage", "client", "quotas"},
    {"records", "protocol"},
    {"features"},
    {"errors", "types", "config", "stats", "faults", "javahash", "running_loop"},
    {"kafka_configs"},  # data generated from Kafka's jars, read by config and the DescribeConfigs handler
]
RANK = {package: rank for rank, layer in enumerate(LAYERS) for package in layer}


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "eoslog" and len(parts) > 1 else None


def _imports() -> list[tuple[str, str, str]]:
    """(importing file, its package, imported package) for every eoslog import in src."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        own = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                target = _package(name)
                if target is not None and target != own:
                    found.append((str(rel), own, target))
    return found


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in SRC.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    modules = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    assert (packages | modules) - set(RANK) == set()


def test_imports_only_go_down_the_layers() -> None:
    upward = sorted(f"{file} imports eoslog.{target}" for file, own, target in _imports()
                    if RANK[target] <= RANK[own])
    assert upward == []
