"""Writes src/eoslog/kafka_configs.py: Kafka's broker and topic config definitions (names, types,
defaults, which broker configs Kafka can change at run time, the topic configs' broker synonyms),
read from the reference jars by scripts/KafkaConfigs.java. Run it after reference/pom.xml moves to
another Kafka; tests/unit/test_kafka_configs.py fails while the module differs from the jars.

    .venv/bin/python scripts/kafka_configs.py [--check]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "scripts" / "KafkaConfigs.java"
TARGET = ROOT / "src" / "eoslog" / "kafka_configs.py"
LIB = Path(os.environ.get("EOSLOG_REFERENCE_LIB", ROOT / ".reference" / "lib")) / "kafka"


def read_definitions() -> list[dict[str, Any]]:
    """Kafka's definitions, one dict per config, as the Java program prints them."""
    if not list(LIB.glob("kafka_2.13-*.jar")):
        raise SystemExit(f"no Kafka jars in {LIB}: run scripts/setup.sh")
    command = ["java", "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", str(LIB / "*"), str(SOURCE)]
    out = subprocess.run(command, capture_output=True, text=True, timeout=300, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def kafka_version() -> str:
    return next(LIB.glob("kafka_2.13-*.jar")).stem.removeprefix("kafka_2.13-")


def _entry(name: str, value: tuple[Any, ...]) -> str:
    line = f"    {name!r}: {value!r},"
    return line if len(line) <= 120 else f"    {name!r}:\n        {value!r},"


def render(definitions: list[dict[str, Any]], version: str) -> str:
    broker = [d for d in definitions if d["kind"] == "broker"]
    topic = [d for d in definitions if d["kind"] == "topic"]
    lines = [
        f'"""Apache Kafka {version}\'s config definitions, generated from its jars by scripts/kafka_configs.py',
        "(do not edit). DescribeConfigs lists every one (broker/handlers/configs.py); eoslog's own",
        'definitions, the ones it acts on, are config.py\'s."""',
        "",
        "from __future__ import annotations",
        "",
        f"KAFKA_VERSION = {version!r}",
        "",
        "# name -> (Kafka's ConfigDef type, default as DescribeConfigs writes it or None, changeable at run time)",
        "BROKER: dict[str, tuple[str, str | None, bool]] = {",
        *(_entry(d["name"], (d["type"], d["default"], d["dynamic"])) for d in broker),
        "}",
        "",
        "# name -> (type, default, the broker configs that supply it, in Kafka's order)",
        "TOPIC: dict[str, tuple[str, str | None, tuple[str, ...]]] = {",
        *(_entry(d["name"], (d["type"], d["default"], tuple(d["synonyms"]))) for d in topic),
        "}",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    text = render(read_definitions(), kafka_version())
    if "--check" in sys.argv[1:]:
        same = TARGET.exists() and TARGET.read_text() == text
        print(f"{TARGET} is {'up to date' if same else 'out of date: run scripts/kafka_configs.py'}")
        return 0 if same else 1
    TARGET.write_text(text)
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
