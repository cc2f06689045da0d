"""Writes ``src/eoslog/protocol/requests.py`` and ``responses.py``: per API the handler registry
serves, the union of kio's request (response) classes over its versions. A generator, kept out
of the package (it reads the broker's registry, which the protocol layer must not import). The
unit test ``test_protocol_types`` checks both files are what this script writes for today's
registry; after changing a version range run ``python scripts/typegen.py``."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import eoslog.protocol
from eoslog.broker.handlers.registry import HANDLED
from eoslog.protocol.codec import request_schema, response_schema

HERE = Path(eoslog.protocol.__file__).parent  # where the two files are written
LINE = 120


class VersionRange(Protocol):
    @property
    def min_version(self) -> int: ...
    @property
    def max_version(self) -> int: ...


_DOCS = {
    "request": '''"""kio's request classes of every version a handler serves, as one type per API (generated
from the handler registry's version ranges by ``scripts/typegen.py``): a handler typed with
it has each field it reads checked against every version (a field some versions lack is read with
``getattr`` and a default). Types only: handlers import them under ``TYPE_CHECKING``, so the
broker does not load every version's module at start-up."""''',
    "response": '''"""kio's response classes of every version a handler serves, as one type per API (generated
from the handler registry's version ranges by ``scripts/typegen.py``): what each handler
returns. Types only, imported under ``TYPE_CHECKING``; eoslog's own copy of a class kio reads
too strictly (``protocol/messages.py``) stands in for kio's."""''',
}


def _import_line(module: str, name: str, alias: str) -> str:
    line = f"    from {module} import {name} as {alias}"
    if len(line) <= LINE:
        return line
    return f"    from {module} import (\n        {name} as {alias},\n    )"


def _union(name: str, aliases: list[str]) -> str:
    if len(aliases) == 1:
        return f"    {name} = {aliases[0]}"
    one = f"    {name} = " + " | ".join(aliases)
    if len(one) <= LINE:
        return one
    lines, current = [], "        "
    for i, alias in enumerate(aliases):
        part = alias if i == 0 else f" | {alias}"
        if len(current) + len(part) > LINE and current.strip():
            lines.append(current)
            current = "        |" + part[2:] if i else "        " + alias
        else:
            current += part
    lines.append(current)
    return f"    {name} = (\n" + "\n".join(lines) + "\n    )"


def _natural(module: str) -> list[str | int]:
    """isort's order: ``v9`` before ``v10``."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", module)]


def render(kind: str, specs: Mapping[int, VersionRange]) -> str:
    """The text of ``protocol/{kind}s.py`` for ``specs`` (api key -> version range)."""
    schema: Callable[[int, int], type[Any]] = request_schema if kind == "request" else response_schema
    imports: dict[str, str] = {}
    unions: list[str] = []
    for api_key, spec in specs.items():
        aliases = []
        name = ""
        for version in range(spec.min_version, spec.max_version + 1):
            cls = schema(api_key, version)
            # Named as kio names it: eoslog's extended classes (share_transactions) have names of their own.
            name = next((c.__name__ for c in cls.__mro__ if c.__module__.startswith("kio.")), cls.__name__)
            alias = f"_{name}V{version}"
            imports[alias] = _import_line(cls.__module__, cls.__name__, alias)
            aliases.append(alias)
        unions.append(_union(name, aliases))
    ordered = sorted(imports.values(), key=lambda line: _natural(line.split(" import ")[0]))
    kio = [line for line in ordered if line.startswith("    from kio")]
    ours = [line for line in ordered if not line.startswith("    from kio")]  # isort: first-party last
    return "\n".join([
        _DOCS[kind], "", "from __future__ import annotations", "", "from typing import TYPE_CHECKING", "",
        "if TYPE_CHECKING:", *kio, *(["", *ours] if ours else []), "", *unions, "",
    ])


def main() -> None:
    for kind in ("request", "response"):
        (HERE / f"{kind}s.py").write_text(render(kind, HANDLED))


if __name__ == "__main__":
    main()
