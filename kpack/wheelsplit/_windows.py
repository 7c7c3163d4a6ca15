"""What a Windows wheel split must not produce: names Windows file systems reject or fold
together. Each check is one error naming every offending name, before anything is written."""

from __future__ import annotations

from collections.abc import Sequence

from kpack.common.safepath import case_collisions, windows_name_problem, windows_platform
from kpack.errors import PackagingError
from kpack.wheelfile import InputWheel, Member
from kpack.wheelsplit._kernels import ArchiveFile

__all__ = ["check_windows_cases", "check_windows_names"]


def check_windows_names(filename: str, wheel: InputWheel, archives: Sequence[ArchiveFile]) -> None:
    """A Windows wheel cannot hold ``…_gfx90a:xnack+.kpack`` (``:`` opens an NTFS stream;
    neither TheRock nor rocm-kpack defines another spelling): one error, nothing written."""
    if not windows_platform(wheel.tag):
        return
    bad = sorted(a.arcname for a in archives if windows_name_problem(a.arcname) is not None)
    if bad:
        raise PackagingError(
            f"{filename}: a Windows wheel would hold archive names with ':', which "
            "Windows file systems reject (code for feature-qualified targets)",
            problems=bad,
        )


def check_windows_cases(
    wheel: InputWheel, host: frozenset[str], groups: dict[str, list[Member]]
) -> None:
    """Installed together on Windows, the host and device wheels must not hold two names
    that differ only in case (NTFS keeps one file for both): one error, nothing written."""
    if not windows_platform(wheel.tag):
        return
    installed = sorted({wheel.install_path(n) for n in host})
    installed += [m.arcname for _, members in sorted(groups.items()) for m in members]
    pairs = case_collisions(installed)
    if pairs:
        raise PackagingError(
            "the split wheels would install names that differ only in case (one file on Windows)",
            path=wheel.path,
            problems=pairs,
        )
