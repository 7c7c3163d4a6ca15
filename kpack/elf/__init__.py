"""ELF reading, classification and in-process DT_RPATH surgery (x86-64, ELF64 LE).

Scan once into frozen values (:func:`scan_elf`, :func:`classify`), plan an edit as a
value (:func:`plan_rpath_edit` returns an :class:`ElfEdit`), verify it
(:func:`verify_elf`), then write it (:meth:`ElfEdit.write_to`, or all three in
:func:`apply_rpath_edit`). :func:`plan_needed_edit` renames NEEDED entries in place; an
RPATH edit planned on its result composes with it (:func:`check_link_edit` checks both).
:func:`phdr_pin_problem` / :func:`pin_phdr` check and re-apply the old-kernel rule for an
executable's program-header table after other tools edited it.
Errors are :class:`kpack.errors.ElfError`. The link edits (RPATH, NEEDED) and the
old-kernel rule are imported when first used (:mod:`kpack.common.lazy`): a split whose
binaries need neither does not load them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kpack.elf._edit import ElfEdit
from kpack.elf._load import Blob, LoadPlan, Patch, grown_table, plan_load
from kpack.elf._scan import ElfInfo, FileKind, classify, scan_elf, scan_reader
from kpack.elf._verify import verify_elf

if TYPE_CHECKING:
    from kpack.elf._apply import apply_rpath_edit, check_link_edit, check_rpath_edit
    from kpack.elf._needed import plan_needed_edit
    from kpack.elf._pin import load_overlap_problem, phdr_pin_problem, pin_phdr, plan_phdr_pin
    from kpack.elf._rpath import plan_rpath_edit
else:
    from kpack.common.lazy import lazy_face

    __getattr__, __dir__ = lazy_face(
        __name__,
        {
            **dict.fromkeys(("apply_rpath_edit", "check_link_edit", "check_rpath_edit"), "_apply"),
            "plan_needed_edit": "_needed",
            **dict.fromkeys(
                ("load_overlap_problem", "phdr_pin_problem", "pin_phdr", "plan_phdr_pin"), "_pin"
            ),
            "plan_rpath_edit": "_rpath",
        },
    )

__all__ = [
    "Blob",
    "ElfEdit",
    "ElfInfo",
    "FileKind",
    "LoadPlan",
    "Patch",
    "apply_rpath_edit",
    "check_link_edit",
    "check_rpath_edit",
    "classify",
    "grown_table",
    "load_overlap_problem",
    "phdr_pin_problem",
    "pin_phdr",
    "plan_load",
    "plan_needed_edit",
    "plan_phdr_pin",
    "plan_rpath_edit",
    "scan_elf",
    "scan_reader",
    "verify_elf",
]
