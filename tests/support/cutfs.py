"""cutfs: a FUSE file system for power-cut tests (issue 14). Nothing unsynced survives a cut.

It holds every file in memory with two states: what processes see now, and what an fsync
made durable. A file's contents and size become durable with ``fsync``/``fdatasync`` of that
file; a directory's entries (creates, renames, unlinks, mkdirs) only with ``fsync`` of the
directory itself, as POSIX promises and as ext4/xfs behave at worst. A *cut* (the power goes)
throws away everything else at once: each file goes back to its last fsynced contents, each
directory to its last fsynced entries, and what is no longer reachable is gone. From the cut
until ``thaw`` every operation fails with EIO, so the writes of a process still dying after
the cut cannot land on the post-cut state: the test cuts, ``kill -9``s the broker, waits for
it to die, thaws and restarts it on what survived.

A cut may also be told which files the kernel had *written back* before the power went
(``cut`` with fnmatch patterns over paths): their unsynced contents survive, as background
writeback can make a later write durable before an earlier one in another file. That is the
order group commit cannot rely on: it is what a cut keeping ``__transaction_state`` but not the
partitions' tails looks like.

An fsync can be made to fail (``fail_fsync``): the Nth fsync of a file whose path matches a pattern
returns EIO and the file's unsynced writes are lost as Linux loses them (PostgreSQL's "fsyncgate"):
the failed write-back leaves the pages clean, so processes still read what they wrote and a later
fsync, which succeeds, does not write it again; the disk keeps what it had, and the file's new
size (a hole of zeros where the lost writes were). A cut then shows the hole. A directory's
failed fsync leaves its entries as durable as they were. One-shot: later fsyncs succeed.

An fsync takes ``CUTFS_FSYNC_DELAY_MS`` (2 ms by default, an SSD's flush) before it makes
durable what was written when it ends, so there is unsynced data in flight to lose at a cut.

The kernel caches nothing (direct_io, zero attribute/entry timeouts): after a cut the next
process sees the file system's state, not the page cache's.

    python tests/support/cutfs.py MOUNTPOINT CONTROL_SOCKET

Control (one line per request on the Unix socket, answered with one JSON line):
``cut`` [JSON list of patterns written back] → {"dropped_bytes", "dropped_entries", "written_back"},
``thaw``, ``stats`` → {"fsyncs", "dir_fsyncs", "failed_fsyncs": [paths], ...},
``fail_fsync`` JSON {"pattern", "nth"} → {"armed"}: the nth fsync from now of a path matching the
fnmatch pattern fails with EIO.
``CutFs`` (the client) wraps mounting, the control requests and unmounting for tests.
"""

from __future__ import annotations

import errno
import fnmatch
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FUSE_HINT = ("the power-cut tests need FUSE 3: /dev/fuse, libfuse3 and fusermount3 (apt-get install -y fuse3), "
             "and the Python binding mfusepy (pip install 'mfusepy>=3.1'); scripts/setup.sh installs them")


def fuse_missing() -> str | None:
    """Why cutfs cannot run here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is not installed"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as e:  # OSError: libfuse not found
        return f"mfusepy cannot load: {e}"
    return None


# -- the file system (runs in its own process) -------------------------------------------------


@dataclass(eq=False)
class Node:
    mode: int
    data: bytearray = field(default_factory=bytearray)
    synced: bytearray = field(default_factory=bytearray)
    dirty_from: int | None = None  # lowest offset changed since the last fsync
    entries: dict[str, Node] = field(default_factory=dict)
    synced_entries: dict[str, Node] = field(default_factory=dict)
    mtime: float = field(default_factory=time.time)

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.mode)

    def touch(self, offset: int) -> None:
        self.dirty_from = offset if self.dirty_from is None else min(self.dirty_from, offset)
        self.mtime = time.time()


def make_operations() -> Any:
    from mfusepy import FuseOSError, Operations

    class CutOperations(Operations):  # type: ignore[misc]
        def __init__(self) -> None:
            self.mutex = threading.RLock()
            self.root = Node(stat.S_IFDIR | 0o755)
            self.handles: dict[int, Node] = {}
            self.next_fh = 1
            self.frozen = False
            self.fsync_delay_s = float(os.environ.get("CUTFS_FSYNC_DELAY_MS", "2")) / 1000
            self.stats: dict[str, Any] = {"fsyncs": 0, "dir_fsyncs": 0, "cuts": 0, "writes": 0,
                                          "failed_fsyncs": [], "bytes_lost_by_failed_fsyncs": 0,
                                          "stalled_fsyncs": 0}
            self.fsync_faults: list[dict[str, Any]] = []  # armed: {"pattern", "nth"} (nth counts down)
            # A disk that stops answering fsyncs of some files until the power goes or they are
            # released (stall_fsync, release_stalls).
            self.stall_patterns: list[str] = []
            self.stalls_end = threading.Event()

        # -- helpers ---------------------------------------------------------------

        def _check(self) -> None:
            if self.frozen:
                raise FuseOSError(errno.EIO)

        def _lookup(self, path: str) -> Node:
            node = self.root
            for part in path.strip("/").split("/"):
                if not part:
                    continue
                if not node.is_dir or part not in node.entries:
                    raise FuseOSError(errno.ENOENT)
                node = node.entries[part]
            return node

        def _parent(self, path: str) -> tuple[Node, str]:
            head, _, name = path.rstrip("/").rpartition("/")
            parent = self._lookup(head or "/")
            if not parent.is_dir:
                raise FuseOSError(errno.ENOTDIR)
            return parent, name

        def _node(self, path: str | None, fh: int | None) -> Node:
            if fh and fh in self.handles:
                return self.handles[fh]
            if path is None:
                raise FuseOSError(errno.EBADF)
            return self._lookup(path)

        def _fsync_fails(self, path: str | None) -> bool:
            """Whether this fsync of ``path`` is the armed failure (which then disarms)."""
            for fault in self.fsync_faults:
                if path is not None and fnmatch.fnmatchcase(path, fault["pattern"]):
                    fault["nth"] -= 1
                    if fault["nth"] == 0:
                        self.fsync_faults.remove(fault)
                        self.stats["failed_fsyncs"].append(path)
                        return True
            return False

        def fail_fsync(self, pattern: str, nth: int = 1) -> dict[str, Any]:
            with self.mutex:
                self.fsync_faults.append({"pattern": pattern, "nth": nth})
                return {"armed": len(self.fsync_faults)}

        def stall_fsync(self, pattern: str) -> dict[str, Any]:
            with self.mutex:
                self.stall_patterns.append(pattern)
                return {"stalling": len(self.stall_patterns)}

        def release_stalls(self) -> dict[str, Any]:
            with self.mutex:
                self.stall_patterns = []
                self.stalls_end.set()
                self.stalls_end = threading.Event()
                return {}

        def _stall(self, path: str | None) -> None:
            """Wait while fsyncs of ``path`` are stalled; EIO if the power went meanwhile."""
            with self.mutex:
                if path is None or not any(fnmatch.fnmatchcase(path, p) for p in self.stall_patterns):
                    return
                self.stats["stalled_fsyncs"] += 1
                end, cuts = self.stalls_end, self.stats["cuts"]
            end.wait()  # (outside the mutex: other operations go on)
            with self.mutex:
                if self.stats["cuts"] != cuts:
                    raise FuseOSError(errno.EIO)

        def _open_handle(self, node: Node) -> int:
            fh = self.next_fh
            self.next_fh += 1
            self.handles[fh] = node
            return fh

        # -- the power cut ---------------------------------------------------------------

        def cut(self, written_back: list[str] | None = None) -> dict[str, Any]:
            with self.mutex:
                dropped: dict[str, Any] = {"dropped_bytes": 0, "dropped_entries": 0, "examples": [],
                                           "written_back": 0, "dropped_by_file": {}}
                seen: set[int] = set()

                def restore(node: Node, path: str = "") -> None:
                    if id(node) in seen:
                        return
                    seen.add(id(node))
                    if node.is_dir:
                        changed = {name for name in node.entries.keys() | node.synced_entries.keys()
                                   if node.entries.get(name) is not node.synced_entries.get(name)}
                        dropped["dropped_entries"] += len(changed)
                        dropped["examples"] += [f"{path}/{name}" for name in sorted(changed)][:3]
                        node.entries = dict(node.synced_entries)
                        for name, child in node.entries.items():
                            restore(child, f"{path}/{name}")
                    elif node.dirty_from is not None and any(fnmatch.fnmatchcase(path, p) for p in written_back or ()):
                        dropped["written_back"] += 1  # the kernel had written it back: it survives
                        node.synced = bytearray(node.data)
                        node.dirty_from = None
                    else:
                        if node.dirty_from is not None:
                            lost = max(len(node.data) - node.dirty_from, 0)
                            dropped["dropped_bytes"] += lost
                            if lost:
                                dropped["dropped_by_file"][path] = lost
                        node.data = bytearray(node.synced)
                        node.dirty_from = None

                restore(self.root)
                dropped["examples"] = dropped["examples"][:12]
                self.handles.clear()
                self.frozen = True
                self.stats["cuts"] += 1
                self.release_stalls()  # the stalled fsyncs fail: the power is gone
                return dropped

        def thaw(self) -> dict[str, int]:
            with self.mutex:
                self.frozen = False
                return {}

        # -- operations --------------------------------------------------------------------

        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            with self.mutex:
                self._check()
                node = self._node(path, fh)
                size = 4096 if node.is_dir else len(node.data)
                return {"st_mode": node.mode, "st_nlink": 2 if node.is_dir else 1, "st_size": size,
                        "st_mtime": node.mtime, "st_ctime": node.mtime, "st_atime": node.mtime,
                        "st_uid": os.getuid(), "st_gid": os.getgid(), "st_blocks": (size + 511) // 512}

        def readdir(self, path: str, fh: int) -> list[str]:
            with self.mutex:
                self._check()
                return [".", "..", *self._lookup(path).entries]

        def opendir(self, path: str) -> int:
            with self.mutex:
                self._check()
                return self._open_handle(self._lookup(path))

        def releasedir(self, path: str, fh: int) -> int:
            with self.mutex:
                self.handles.pop(fh, None)
                return 0

        def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
            with self.mutex:
                self._check()
                node = self._node(path, fh)
                if self._fsync_fails(path):
                    raise FuseOSError(errno.EIO)  # the entries stay as durable as they were
                node.synced_entries = dict(node.entries)
                self.stats["dir_fsyncs"] += 1
                return 0

        def mkdir(self, path: str, mode: int) -> int:
            with self.mutex:
                self._check()
                parent, name = self._parent(path)
                if name in parent.entries:
                    raise FuseOSError(errno.EEXIST)
                parent.entries[name] = Node(stat.S_IFDIR | (mode & 0o7777))
                return 0

        def rmdir(self, path: str) -> int:
            with self.mutex:
                self._check()
                parent, name = self._parent(path)
                node = self._lookup(path)
                if node.entries:
                    raise FuseOSError(errno.ENOTEMPTY)
                del parent.entries[name]
                return 0

        def create(self, path: str, mode: int, fi: Any = None) -> int:
            with self.mutex:
                self._check()
                parent, name = self._parent(path)
                node = parent.entries.get(name)
                if node is None:
                    node = parent.entries[name] = Node(stat.S_IFREG | (mode & 0o7777))
                return self._open_handle(node)

        def open(self, path: str, flags: int) -> int:
            with self.mutex:
                self._check()
                node = self._lookup(path)
                if flags & os.O_TRUNC and node.data:
                    node.data.clear()
                    node.touch(0)
                return self._open_handle(node)

        def release(self, path: str, fh: int) -> int:
            with self.mutex:
                self.handles.pop(fh, None)
                return 0

        def flush(self, path: str, fh: int) -> int:
            return 0

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            with self.mutex:
                self._check()
                return bytes(self._node(path, fh).data[offset:offset + size])

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self.mutex:
                self._check()
                node = self._node(path, fh)
                if offset > len(node.data):
                    node.data.extend(bytes(offset - len(node.data)))
                node.data[offset:offset + len(data)] = data
                node.touch(offset)
                self.stats["writes"] += 1
                return len(data)

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            with self.mutex:
                self._check()
                node = self._node(path, fh)
                if length < len(node.data):
                    del node.data[length:]
                else:
                    node.data.extend(bytes(length - len(node.data)))
                node.touch(min(length, len(node.data)))
                return 0

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            # A disk's flush takes time, during which writes go on: the power may go in between.
            time.sleep(self.fsync_delay_s)
            self._stall(path)
            with self.mutex:
                self._check()
                node = self._node(path, fh)
                if self._fsync_fails(path):
                    if node.dirty_from is not None:
                        # Linux after a failed write-back: the pages are clean (still read, never
                        # written again), the disk has its old bytes and, past them, a hole.
                        self.stats["bytes_lost_by_failed_fsyncs"] += max(len(node.data) - node.dirty_from, 0)
                        if len(node.data) > len(node.synced):
                            node.synced.extend(bytes(len(node.data) - len(node.synced)))
                        node.dirty_from = None
                    raise FuseOSError(errno.EIO)
                if node.dirty_from is not None:
                    start = min(node.dirty_from, len(node.synced))
                    node.synced[start:] = node.data[start:]
                    node.dirty_from = None
                self.stats["fsyncs"] += 1
                return 0

        def unlink(self, path: str) -> int:
            with self.mutex:
                self._check()
                parent, name = self._parent(path)
                if name not in parent.entries:
                    raise FuseOSError(errno.ENOENT)
                del parent.entries[name]
                return 0

        def rename(self, old: str, new: str) -> int:
            with self.mutex:
                self._check()
                old_parent, old_name = self._parent(old)
                new_parent, new_name = self._parent(new)
                node = old_parent.entries.get(old_name)
                if node is None:
                    raise FuseOSError(errno.ENOENT)
                target = new_parent.entries.get(new_name)
                if target is not None and target.is_dir and target.entries:
                    raise FuseOSError(errno.ENOTEMPTY)
                del old_parent.entries[old_name]
                new_parent.entries[new_name] = node
                return 0

        def chmod(self, path: str, mode: int) -> int:
            with self.mutex:
                self._check()
                node = self._lookup(path)
                node.mode = (node.mode & ~0o7777) | (mode & 0o7777)
                return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            with self.mutex:
                self._check()
                self._lookup(path).mtime = time.time() if times is None else times[1] / 1e9
                return 0

        def statfs(self, path: str) -> dict[str, int]:
            return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 24, "f_bfree": 1 << 23,
                    "f_bavail": 1 << 23, "f_files": 1 << 20, "f_ffree": 1 << 19, "f_namemax": 255}

    return CutOperations()


def _serve_control(ops: Any, sock_path: str) -> None:
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    server.listen(4)
    while True:
        conn, _ = server.accept()
        with conn, conn.makefile("rw") as f:
            for line in f:
                command, _, argument = line.strip().partition(" ")
                if command == "cut":
                    answer: dict[str, Any] = ops.cut(json.loads(argument) if argument else None)
                elif command == "thaw":
                    answer = ops.thaw()
                elif command == "fail_fsync":
                    answer = ops.fail_fsync(**json.loads(argument))
                elif command == "release_stalls":
                    answer = ops.release_stalls()
                elif command == "stall_fsync":
                    answer = ops.stall_fsync(**json.loads(argument))
                elif command == "stats":
                    with ops.mutex:
                        answer = dict(ops.stats)
                else:
                    answer = {"error": f"unknown command {command!r}"}
                f.write(json.dumps(answer) + "\n")
                f.flush()


def main(mountpoint: str, sock_path: str) -> None:
    from mfusepy import FUSE

    ops = make_operations()
    threading.Thread(target=_serve_control, args=(ops, sock_path), daemon=True).start()
    FUSE(ops, mountpoint, foreground=True, nothreads=False, hard_remove=True, direct_io=True,
         attr_timeout=0, entry_timeout=0, negative_timeout=0, default_permissions=False)


# -- the client tests use ------------------------------------------------------------------------


class CutFs:
    """A mounted cutfs: ``cut()``, ``thaw()``, ``fail_fsync()``, ``stats()``, ``unmount()``."""

    def __init__(self, mountpoint: Path, log_path: Path) -> None:
        self.mountpoint = mountpoint
        self.sock_path = str(mountpoint.parent / f".{mountpoint.name}.sock")
        mountpoint.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, __file__, str(mountpoint), self.sock_path],
                                         stdout=log, stderr=log)
        deadline = time.monotonic() + 30
        while not (os.path.ismount(mountpoint) and os.path.exists(self.sock_path)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                raise RuntimeError(f"cutfs did not mount at {mountpoint}; see {log_path}:\n"
                                   + log_path.read_text(errors="replace")[-2000:])
            time.sleep(0.05)

    def _request(self, command: str) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(self.sock_path)
            s.sendall(command.encode() + b"\n")
            answer: dict[str, Any] = json.loads(s.makefile().readline())
            return answer

    def cut(self, written_back: list[str] | None = None) -> dict[str, Any]:
        """The power goes; files matching a pattern of ``written_back`` keep what was written."""
        return self._request("cut" + (" " + json.dumps(written_back) if written_back else ""))

    def thaw(self) -> None:
        self._request("thaw")

    def fail_fsync(self, pattern: str, nth: int = 1) -> None:
        """The ``nth`` fsync from now of a path matching ``pattern`` (fnmatch, from the mount's root:
        ``/dir/file``) returns EIO and loses the file's unsynced writes, as Linux does."""
        self._request(f"fail_fsync {json.dumps({'pattern': pattern, 'nth': nth})}")

    def stall_fsync(self, pattern: str) -> None:
        """From now until the next cut, fsyncs of paths matching ``pattern`` (as ``fail_fsync``'s)
        do not return — a disk that stops answering — and then fail, the power gone; the
        ``stalled_fsyncs`` of ``stats()`` counts them. ``release_stalls`` ends the stall sooner."""
        self._request(f"stall_fsync {json.dumps({'pattern': pattern})}")

    def release_stalls(self) -> None:
        """The stalled fsyncs go on (and succeed); later ones are not stalled."""
        self._request("release_stalls")

    def stats(self) -> dict[str, Any]:
        return self._request("stats")

    def unmount(self) -> None:
        subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], check=False, capture_output=True)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        Path(self.sock_path).unlink(missing_ok=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
