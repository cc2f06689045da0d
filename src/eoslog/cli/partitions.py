"""``eoslog partitions reassign``: kafka-reassign-partitions.sh's --generate, --execute, --verify,
--cancel and --list over eoslog's admin client (``tools/reassign.py``), with Kafka's JSON and
headings, plus ``--remove-broker`` (a proposal that empties a broker) and, while a reassignment
runs, a progress bar per moving replica (bytes copied / the leader's). Proposals move the
fewest replicas that even the brokers out (``tools/placement.py``), not Kafka's fresh placement.
``eoslog cluster rebalance`` proposes, asks, and executes throttled in one go. ``eoslog partitions
move-dir`` moves a replica to another log directory of its broker (AlterReplicaLogDirs, as
kafka-reassign-partitions.sh does for a JSON with ``log_dirs``), with a progress bar."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn

from eoslog.cli.cluster import cluster_app
from eoslog.cli.common import (
    DEFAULT_BOOTSTRAP_SERVER,
    BootstrapServer,
    CommandConfig,
    CommandError,
    app,
    open_admin,
    table_console,
    user_errors,
)
from eoslog.client.admin import Admin
from eoslog.client.types import TopicPartition
from eoslog.tools import placement, reassign
from eoslog.tools.reassign import Assignment

partitions_app = typer.Typer(help="Move partitions between brokers (KIP-455) or a broker's disks (KIP-113).",
                             no_args_is_help=True)
app.add_typer(partitions_app, name="partitions")

POLL_S = 0.5


def _ids(text: str | None, option: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise CommandError(f"{option} expects broker ids like 1,2,3, got {text!r}", exit_code=2) from None


def _plan_file(path: Path | None) -> Assignment:
    if path is None:
        raise CommandError("--reassignment-json-file is needed", exit_code=2)
    try:
        return reassign.parse_json(path.read_text())
    except OSError as e:
        raise CommandError(f"--reassignment-json-file {path}: {e.strerror or e}", exit_code=2) from None


@partitions_app.command("reassign")
def reassign_command(
    generate: Annotated[bool, typer.Option("--generate", help="Propose a reassignment (printed, or --output)")] = False,
    execute: Annotated[bool, typer.Option("--execute", help="Start the reassignment of --reassignment-json-file "
                                          "and show each moving replica's progress until done")] = False,
    verify: Annotated[bool, typer.Option("--verify", help="Say whether it is done; once done, remove the "
                                         "throttles")] = False,
    cancel: Annotated[bool, typer.Option("--cancel", help="Cancel the partitions of the file still moving")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the reassignments in progress")] = False,
    reassignment_json_file: Annotated[Path | None, typer.Option("--reassignment-json-file", metavar="FILE",
                                                                help="Kafka's reassignment JSON")] = None,
    topics: Annotated[str | None, typer.Option("--topics", metavar="T1,T2",
                                               help="--generate: only these topics (default: all)")] = None,
    broker_list: Annotated[str | None, typer.Option("--broker-list", metavar="1,2,3",
                                                    help="--generate: the brokers to use (default: all)")] = None,
    remove_broker: Annotated[str | None, typer.Option("--remove-broker", metavar="ID[,ID]",
                                                      help="--generate: move every replica off these brokers")] = None,
    output: Annotated[Path | None, typer.Option("--output", metavar="FILE",
                                                help="--generate: write the proposal there")] = None,
    disable_rack_aware: Annotated[bool, typer.Option("--disable-rack-aware", help="--generate: without regard "
                                                     "to racks (needed when only some brokers have one)")] = False,
    throttle: Annotated[int | None, typer.Option("--throttle", metavar="BYTES/S", min=1,
                                                 help="--execute: replication throttle while moving")] = None,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="--execute: follow it until done")] = True,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Reassign partitions, like kafka-reassign-partitions.sh (one of --generate, --execute,
    --verify, --cancel, --list)."""
    if sum((generate, execute, verify, cancel, list_)) != 1:
        raise typer.BadParameter("give one of --generate, --execute, --verify, --cancel, --list")
    console = table_console()
    with user_errors("partitions reassign"), open_admin(bootstrap_server, command_config=command_config) as admin:
        if generate:
            _generate(admin, topics, _ids(broker_list, "--broker-list"), _ids(remove_broker, "--remove-broker"),
                      output, rack_aware=not disable_rack_aware)
        elif execute:
            target = _plan_file(reassignment_json_file)
            before = reassign.current(admin, sorted({tp.topic for tp in target}))
            typer.echo("Current partition replica assignment\n\n"
                       + reassign.to_json({tp: before[tp] for tp in target if tp in before})
                       + "\n\nSave this to use as the --reassignment-json-file option during rollback")
            reassign.start(admin, target, throttle)
            if throttle is not None:
                typer.echo(f"The inter-broker throttle limit was set to {throttle} B/s")
            typer.echo("Successfully started partition reassignments for "
                       + ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(target)))
            if wait:
                follow(admin)
                _print_verify(reassign.verify(admin, target))
        elif verify:
            _print_verify(reassign.verify(admin, _plan_file(reassignment_json_file)))
        elif cancel:
            done = reassign.cancel(admin, _plan_file(reassignment_json_file))
            typer.echo("Successfully cancelled partition reassignments for: "
                       + ",".join(f"{tp.topic}-{tp.partition}" for tp in done) if done
                       else "None of the specified partition reassignments are active.")
        else:
            ongoing = admin.list_partition_reassignments()
            if not ongoing:
                typer.echo("No partition reassignments found.")
            else:
                typer.echo("Current partition reassignments:")
                for tp, r in sorted(ongoing.items()):
                    typer.echo(f"{tp.topic}-{tp.partition}: replicas: {','.join(map(str, r.replicas))}. "
                               f"adding: {','.join(map(str, r.adding_replicas))}. "
                               f"removing: {','.join(map(str, r.removing_replicas))}.")
    console.file.flush()


def _generate(admin: Admin, topics: str | None, brokers: list[int] | None, removed: list[int] | None,
              output: Path | None, rack_aware: bool) -> tuple[Assignment, int]:
    """Propose and print the fewest moves that even the brokers (and racks) out: the partitions
    that move, and how many replicas are to be copied. Refused, as Kafka's ``--generate``, when
    some of the brokers to use have a rack and others not, unless not ``rack_aware``."""
    names = [t for t in topics.split(",") if t] if topics else None
    now = reassign.current(admin, names)
    nodes = admin.describe_cluster().nodes
    use = set(brokers if brokers is not None else [n.id for n in nodes]) - set(removed or ())
    try:
        racks = placement.racks_to_use({n.id: n.rack for n in nodes}, use, rack_aware)
        proposed = placement.propose(now, use, racks)
    except ValueError as e:
        raise CommandError(str(e)) from None
    changed = placement.moves(now, proposed)
    copies = placement.copies(now, proposed)
    typer.echo("Current partition replica assignment\n" + reassign.to_json({tp: now[tp] for tp in changed}))
    typer.echo(f"\nProposed partition reassignment configuration ({len(changed)} partitions, "
               f"{copies} replicas to copy)\n" + reassign.to_json(changed))
    if output is not None:
        output.write_text(reassign.to_json(changed) + "\n")
    return changed, copies


@cluster_app.command("rebalance")
def rebalance_command(
    topics: Annotated[str | None, typer.Option("--topics", metavar="T1,T2",
                                               help="Only these topics (default: all, internal ones too)")] = None,
    throttle: Annotated[int, typer.Option("--throttle", metavar="BYTES/S", min=1,
                                          help="Replication throttle while replicas are copied")] = 50_000_000,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Execute without asking")] = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Follow it until done")] = True,
    disable_rack_aware: Annotated[bool, typer.Option("--disable-rack-aware", help="Without regard to racks "
                                                     "(needed when only some brokers have one)")] = False,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Even replicas and leaders per broker and rack with the fewest moves: show the proposal,
    then, once confirmed, execute it throttled (as ``partitions reassign --generate`` then
    ``--execute --throttle``), following each moving replica."""
    with user_errors("cluster rebalance"), open_admin(bootstrap_server, command_config=command_config) as admin:
        changed, copies = _generate(admin, topics, None, None, None, rack_aware=not disable_rack_aware)
        if not changed:
            typer.echo("The cluster is balanced: nothing to move.")
            return
        if not yes and not typer.confirm(f"Move {len(changed)} partitions ({copies} replicas to copy) "
                                         f"throttled at {throttle} B/s?"):
            raise typer.Exit(1)
        reassign.start(admin, changed, throttle)
        typer.echo(f"Successfully started partition reassignments for {len(changed)} partitions, "
                   f"throttled at {throttle} B/s")
        if wait:
            follow(admin)
            _print_verify(reassign.verify(admin, changed))


def _print_verify(states: dict[TopicPartition, str]) -> None:
    typer.echo("Status of partition reassignment:")
    for line in states.values():
        typer.echo(line)


def follow(admin: Admin) -> None:
    """A progress bar per replica being added, until no reassignment is in progress."""
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, console=table_console(), transient=False) as bars:
        tasks: dict[tuple[TopicPartition, int], tuple[TaskID, int]] = {}
        while True:
            ongoing = admin.list_partition_reassignments()
            for p in reassign.progress(admin, ongoing):
                key = (p.tp, p.broker)
                total = max(p.total, p.copied, 1)
                if key not in tasks:
                    tasks[key] = (bars.add_task(f"{p.tp.topic}-{p.tp.partition} → broker {p.broker}", total=total),
                                  total)
                tasks[key] = (tasks[key][0], total)
                bars.update(tasks[key][0], completed=p.copied, total=total)
            for (tp, _), (task, total) in tasks.items():
                if tp not in ongoing:  # done: the replica has everything
                    bars.update(task, completed=total)
            if not ongoing:
                return
            time.sleep(POLL_S)


@partitions_app.command("move-dir")
def move_dir_command(
    topic: Annotated[str, typer.Option("--topic", help="The partition's topic")],
    partition: Annotated[int, typer.Option("--partition", min=0, help="The partition")],
    log_dir: Annotated[str, typer.Option("--log-dir", metavar="PATH",
                                         help="One of the broker's log.dirs, as kafka-log-dirs.sh lists it")],
    broker: Annotated[int, typer.Option("--broker", help="The broker whose replica moves")] = 0,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Follow the copy until done")] = True,
    bootstrap_server: BootstrapServer = DEFAULT_BOOTSTRAP_SERVER,
    command_config: CommandConfig = None,
) -> None:
    """Move a replica to another log directory of its broker while it is served (AlterReplicaLogDirs):
    the broker copies it there, catches up with its writes and swaps the copy in."""
    tp = TopicPartition(topic, partition)
    with user_errors("partitions move-dir"), open_admin(bootstrap_server, command_config=command_config) as admin:
        [error] = admin.alter_replica_log_dirs({(tp, broker): log_dir}).values()
        if error is not None:
            raise CommandError(f"cannot move {topic}-{partition} on broker {broker} to {log_dir}: {error}")
        typer.echo(f"Successfully started moving {topic}-{partition} on broker {broker} to {log_dir}")
        if wait:
            _follow_move(admin, tp, broker, log_dir)
            typer.echo(f"{topic}-{partition} on broker {broker} is in {log_dir}")


def _follow_move(admin: Admin, tp: TopicPartition, broker: int, log_dir: str) -> None:
    """A progress bar (the future replica's bytes against the current one's) until the replica is
    in ``log_dir`` with no future replica left."""
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn())
    with Progress(*columns, console=table_console(), transient=False) as bars:
        task = bars.add_task(f"{tp.topic}-{tp.partition} → {log_dir}", total=1)
        while True:
            dirs = admin.describe_log_dirs([broker])[broker]
            current = {path: d.replica_infos[tp] for path, d in dirs.items()
                       if tp in d.replica_infos and not d.replica_infos[tp].is_future}
            future = [d.replica_infos[tp] for d in dirs.values()
                      if tp in d.replica_infos and d.replica_infos[tp].is_future]
            size = max([r.size for r in current.values()] or [1])
            if not future and any(Path(path) in (Path(log_dir), Path(log_dir).resolve()) for path in current):
                bars.update(task, total=size, completed=size)
                return
            if not future and not current:
                raise CommandError(f"broker {broker} no longer holds {tp.topic}-{tp.partition}")
            if not future:
                raise CommandError(f"{tp.topic}-{tp.partition} on broker {broker} is not being moved to {log_dir} "
                                   f"(it is in {', '.join(current)})")
            bars.update(task, total=max(size, future[0].size, 1), completed=future[0].size)
            time.sleep(POLL_S)
