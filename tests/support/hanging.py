"""A hanging transaction, made the way it happens in practice (shared by the transactions
CLI tests and the console tests).

An application (a child process of librdkafka producers) opens one transaction per
(transactional id, partition) and writes to it; then the application and the broker die
(SIGKILL) and, while the broker is down, the ``__transaction_state`` partitions holding
those ids are deleted: the coordinator's record of them is lost. After the restart the
partitions replay their open transactions from their own logs, but no coordinator will
ever end them: each pins its partition's last stable offset.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from support.harness import BrokerProcess

TXN_STATE_TOPIC = "__transaction_state"

# A producer process that opens one transaction per (transactional id, partition) given,
# writes to it, reports each producer's partition and stays open until it is killed.
HANGING_PRODUCERS = r'''
import json, sys, time
from confluent_kafka import Producer
bootstrap, topic = sys.argv[1:3]
producers = []
for spec in sys.argv[3:]:
    txn_id, partition = spec.rsplit(":", 1)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 0})
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, value=f"{txn_id}-uncommitted-{i}".encode(), partition=int(partition))
    assert p.flush(60) == 0
    producers.append(p)
print(json.dumps("open"), flush=True)
time.sleep(3600)
'''


def open_transactions_app(bootstrap: str, topic: str, ids: Mapping[int, str]) -> subprocess.Popen[str]:
    """The application with its transactions open (3 records each): partition → transactional id."""
    app = subprocess.Popen(
        [sys.executable, "-c", HANGING_PRODUCERS, bootstrap, topic,
         *(f"{txn_id}:{partition}" for partition, txn_id in ids.items())],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    assert app.stdout is not None
    assert json.loads(app.stdout.readline() or "null") == "open", app.stderr.read() if app.stderr else ""
    return app


def state_partition_dirs_holding(data_dir: Path, transactional_id: str) -> list[Path]:
    """The ``__transaction_state`` partition directories whose log holds records of the id
    (the key embeds the id as plain bytes; the topic is never compressed)."""
    needle = transactional_id.encode()
    return sorted(
        d for d in data_dir.glob(f"{TXN_STATE_TOPIC}-*")
        if any(needle in f.read_bytes() for f in d.glob("*.log"))
    )


def lose_coordinator_state(broker: BrokerProcess, app: subprocess.Popen[str], ids: Mapping[int, str]) -> None:
    """Kill the application and the broker, delete the coordinator's record of ``ids``,
    restart the broker: the transactions now hang."""
    app.kill()
    app.wait(30)
    broker.kill()
    state_dirs = {d for txn_id in ids.values() for d in state_partition_dirs_holding(broker.data_dir, txn_id)}
    assert state_dirs, "no __transaction_state partition holds the transactional ids"
    for d in state_dirs:
        shutil.rmtree(d)
    broker.start()
