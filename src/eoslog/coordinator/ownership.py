"""Which partitions of its internal topic a coordinator serves, which it is still loading, and
at what epoch: one node serves all of them at epoch 0 once loaded; in a cluster a partition is
served from the moment its leadership's load completes, unless it resigned or was led again in
another leader epoch meanwhile (the load of an older epoch is then thrown away).
"""

from __future__ import annotations

from eoslog.errors import Errors

SINGLE_NODE_EPOCH = 0


class PartitionOwnership:
    def __init__(self) -> None:
        self.epochs: dict[int, int] = {}  # served (loaded) partition → coordinator epoch
        self.loading: set[int] = set()
        self._loading_epoch: dict[int, int] = {}  # cluster mode: the leader epoch being loaded
        self.active = True

    def own_all(self, partitions: range) -> None:
        """A topic this node just created: nothing to load."""
        for p in partitions:
            self.epochs[p] = SINGLE_NODE_EPOCH

    def begin_loading(self, partitions: range) -> list[int]:
        self.loading = set(partitions)
        return sorted(self.loading)

    def become_leader(self, partition: int, leader_epoch: int) -> None:
        self.epochs.pop(partition, None)
        self.loading.add(partition)
        self._loading_epoch[partition] = leader_epoch

    def loaded(self, partition: int, leader_epoch: int | None = None) -> bool:
        """The load of ``partition`` finished (``leader_epoch``: the epoch it was started for,
        cluster mode); True if it is now served, False if that load is stale."""
        if not self.active:
            return False
        if leader_epoch is not None:
            if self._loading_epoch.get(partition) != leader_epoch or partition not in self.loading:
                return False
            del self._loading_epoch[partition]
        self.loading.discard(partition)
        self.epochs[partition] = SINGLE_NODE_EPOCH if leader_epoch is None else leader_epoch
        return True

    def resign(self, partition: int) -> None:
        self.epochs.pop(partition, None)
        self.loading.discard(partition)
        self._loading_epoch.pop(partition, None)

    def status(self, partition: int) -> Errors:
        """Can a key of ``partition`` be served now?"""
        if not self.active:
            return Errors.NOT_COORDINATOR
        if partition in self.loading:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.epochs:
            return Errors.NOT_COORDINATOR
        return Errors.NONE

    def shutdown(self) -> None:
        self.active = False
        self.epochs.clear()
        self.loading.clear()
        self._loading_epoch.clear()
