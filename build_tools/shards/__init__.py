"""Assemble the dist directories of target-sharded builds into one: the work behind
``assemble-shards``.

Scan, plan, then write: :func:`scan_shards` reads every shard into frozen values,
:func:`plan_assembly` checks them against each other and returns what the output will
hold, and only :func:`write_assembly` writes it, all or nothing.

This face re-exports its parts: the shards as read and the dist names (``scan``), a
shard's ``report.json`` parsed and checked (``report``), the reports merged (``merge``),
the cross-shard checks and the assembly planned (``assembly``), the writer and its undo
(``write``) and every archive of a shard read and checked in full (``archives``).
"""

from __future__ import annotations

from .archives import archive_problems
from .assembly import AssemblyPlan, plan_assembly
from .report import parse_report
from .scan import DistFile, Kind, Shard, scan_shards
from .write import write_assembly

__all__ = [
    "AssemblyPlan",
    "DistFile",
    "Kind",
    "Shard",
    "archive_problems",
    "parse_report",
    "plan_assembly",
    "scan_shards",
    "write_assembly",
]
