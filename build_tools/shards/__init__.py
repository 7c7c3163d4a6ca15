"""Assemble the dist directories of target-sharded builds into one: the work behind
``assemble-shards``.

This face re-exports its parts: every archive of a shard read and checked in full
(``archives``).
"""

from __future__ import annotations

from .archives import archive_problems

__all__ = ["archive_problems"]
