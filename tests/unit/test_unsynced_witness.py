"""storage.unsynced_witness: after an unclean stop, did the writes no fsync covered survive? Only
if every log directory's witness is there with this boot's id (a kill -9 keeps it; a power cut
brings another boot id, or a file system that loses unsynced writes loses the file). The power
cut and the kill themselves: tests/chaos/test_power_cut_txn_writes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from eoslog.storage import unsynced_witness
from eoslog.storage.unsynced_witness import WITNESS_FILE, boot_id, survived, write


def test_a_witness_of_this_boot_in_every_directory_means_they_survived(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    assert boot_id(), "this kernel has no boot id: the witness cannot tell a power cut"
    write(dirs)
    assert survived(dirs)


def test_a_missing_empty_or_other_boots_witness_means_a_loss(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for d in dirs:
        d.mkdir()
    assert not survived(dirs)  # never written (a fresh directory, or lost with the page cache)
    write(dirs)
    (dirs[1] / WITNESS_FILE).write_text("")  # what a cut leaves of a file whose entry was fsynced
    assert not survived(dirs)
    write(dirs)
    (dirs[0] / WITNESS_FILE).write_text("another-boot\n")  # the machine restarted
    assert not survived(dirs)
    write(dirs)
    assert survived(dirs)


def test_without_a_boot_id_nothing_survives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write([tmp_path])
    monkeypatch.setattr(unsynced_witness, "BOOT_ID", tmp_path / "no-such-file")
    assert not survived([tmp_path])  # fail closed: a kill cannot be told from a power cut


def test_a_witness_that_cannot_be_written_counts_as_a_loss(tmp_path: Path) -> None:
    gone = tmp_path / "gone"  # (a log directory removed or unwritable)
    write([gone])  # logged, not raised: the broker runs on
    assert not survived([gone])
