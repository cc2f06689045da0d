"""Exceptions of cluster mode that the broker's handlers catch (importing them loads no kazoo)."""

from __future__ import annotations


class ClusterError(RuntimeError):
    """The broker cannot take part in the cluster; the message says why."""


class TopicExists(Exception):
    """The topic's assignment znode exists (another request created it meanwhile)."""
