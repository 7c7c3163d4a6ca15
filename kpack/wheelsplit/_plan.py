"""Classify the members of an extracted wheel: fat binaries to split, per-arch database
files to move to device wheels, everything else kept as it is. Plans only; writes nothing.

Every member is looked at by its bytes (ELF or PE with a device-code section holding
bundles), wherever it sits: the import package, auditwheel's ``<dist>.libs/``,
``<name>.data/<scheme>/…``. The overlay root, if given, only restricts where binaries are
split; a fat binary the options leave unsplit is an error naming it, unless a
``--keep-fat`` glob names it.

**Where the archives go.** Each split binary belongs to an *archive root*, the directory
whose ``.kpack/`` holds its archives ``<group>_<target>.kpack``; the binary's
``.rocm_kpack_ref`` search path climbs to it from the binary's own directory
(``'../' * depth``, :func:`kpack.hipfmt.search_path`), and its binary key is its path
below that root:

- with an overlay root, the overlay root (``torch/`` → ``torch/.kpack/``, as rocm-kpack);
- without one (or ``.``, ``./``, ``/``), the top-level directory the binary installs
  under: ``cyllama/.kpack/``, ``cyllama_rocm.libs/.kpack/``; a binary directly in
  site-packages gets ``.kpack/`` there; under ``<name>.data/<scheme>/`` (data, scripts,
  headers) the first directory below the scheme, installed beside the binary in the same
  scheme. So an auditwheel library's archives install next to the library's directory,
  one archive per target and root, and every binary key in an archive is unique.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Sequence

from kpack.common.frozen import frozen
from kpack.databases import Handler, match_database
from kpack.errors import PackagingError
from kpack.hipfmt import identify, search_path
from kpack.transform import inspect_fat_binary
from kpack.wheelfile import InputWheel, WheelEntry
from kpack.wheelsplit._bundles import bundle_key

__all__ = ["DatabaseFile", "FatBinary", "SplitPlan", "archive_root", "plan_split"]

log = logging.getLogger(__name__)

_SITE_SCHEMES = ("purelib", "platlib")


@frozen
class FatBinary:
    entry: WheelEntry
    root: str  # its archive root, as an install path ending in '/' ('' = site-packages)
    kernel_name: str  # path below the archive root, e.g. 'lib/libtorch_hip.so'
    search_path: str  # e.g. '../.kpack/torch_@GFXARCH@.kpack'


@frozen
class DatabaseFile:
    entry: WheelEntry
    key: str  # device-wheel bundle key, e.g. 'gfx90a'
    handler: str
    install_path: str  # where it lands in site-packages (its arcname in the device wheel)


@frozen
class SplitPlan:
    overlay_root: str | None  # ends with '/'; None: the whole wheel
    group: str  # lower-cased wheel name
    fat: tuple[FatBinary, ...]
    databases: tuple[DatabaseFile, ...]
    notes: tuple[str, ...]

    def archive_arcname(self, root: str, file_name: str) -> str:
        """Where the archive ``file_name`` of archive root ``root`` goes (the split names it:
        ``<group>_<target>.kpack``, a further part ``<group>-part<k>_<target>.kpack``)."""
        return f"{root}.kpack/{file_name}"

    @property
    def where(self) -> str:
        return f"under {self.overlay_root}" if self.overlay_root else "in the wheel"

    @property
    def empty(self) -> bool:
        return not self.fat and not self.databases


def archive_root(wheel: InputWheel, arcname: str, overlay_root: str | None) -> str:
    """The archive root of a member (see the module docstring), as an install path."""
    if overlay_root is not None:
        return overlay_root
    installed = wheel.install_path(arcname)
    prefix = ""
    if installed == arcname and arcname.startswith(f"{wheel.data_dir}/"):
        scheme, _, rest = arcname[len(wheel.data_dir) + 1 :].partition("/")
        if scheme not in _SITE_SCHEMES:
            prefix, installed = f"{wheel.data_dir}/{scheme}/", rest
    top, sep, _ = installed.partition("/")
    return prefix + (f"{top}/" if sep else "")


def _under(path: str, root: str | None) -> bool:
    return root is None or path.startswith(root)


def _kept(entry: WheelEntry, installed: str, keep_fat: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(n, g) for g in keep_fat for n in (entry.arcname, installed))


def plan_split(
    wheel: InputWheel,
    overlay_root: str | None,
    handlers: Sequence[Handler],
    keep_fat: Sequence[str] = (),
) -> SplitPlan:
    """Database handlers first (a per-arch ``.so`` moves whole; only under the overlay
    root), then fat-binary detection by the bytes of every member (ELF or PE). A fat
    binary outside the overlay root, or one that cannot be split, is a
    :class:`PackagingError` naming each, unless ``keep_fat`` (fnmatch globs on the
    member's path in the wheel or its install path) names it."""
    root = overlay_root
    if root is not None and not root.endswith("/"):
        root += "/"
    group = wheel.name.lower()
    fat: list[FatBinary] = []
    databases: list[DatabaseFile] = []
    notes: list[str] = []
    kept: list[str] = []
    unsplit: list[str] = []
    if root is not None and not any(
        _under(wheel.install_path(e.arcname), root) for e in wheel.entries
    ):
        notes.append(f"no file under the overlay root {root}")
    for entry in wheel.entries:
        installed = wheel.install_path(entry.arcname)
        base = archive_root(wheel, entry.arcname, root)
        relpath = installed[len(base) :] if installed.startswith(base) else None
        if _under(installed, root) and relpath is not None:
            match = match_database(relpath, handlers)
            if match is not None:
                key = bundle_key(match.arch_key)
                databases.append(DatabaseFile(entry, key, match.handler.name, installed))
                continue
        kind = _fat_kind(wheel, entry)
        if not kind:
            continue
        if kind != "fat" and kind != "unsplittable":
            notes.append(f"{entry.arcname}: {kind}; kept unchanged")
        elif _kept(entry, installed, keep_fat):
            kept.append(entry.arcname)
        elif kind == "unsplittable":
            unsplit.append(f"{entry.arcname}: device code without wrappers cannot be split")
        elif not _under(installed, root) or relpath is None:
            unsplit.append(f"{entry.arcname}: fat binary outside the overlay root {root}")
        else:
            search = search_path(relpath.count("/"), group)
            fat.append(FatBinary(entry, base, relpath, search))
    if unsplit:
        raise PackagingError(
            f"{len(unsplit)} fat binar{'y' if len(unsplit) == 1 else 'ies'} would ship "
            "unsplit in the host wheel (drop --overlay-root to split the whole wheel, or keep "
            "them fat on purpose with --keep-fat GLOB)",
            path=wheel.path,
            problems=unsplit,
        )
    notes += _keep_notes(kept, keep_fat, wheel)
    for note in notes:
        log.warning("%s", note)
    return SplitPlan(root, group, tuple(fat), tuple(databases), tuple(notes))


def _keep_notes(kept: Sequence[str], keep_fat: Sequence[str], wheel: InputWheel) -> list[str]:
    notes = [f"{name}: fat binary kept fat (--keep-fat)" for name in kept]
    for glob in keep_fat:
        if not any(fnmatch.fnmatchcase(n, glob) for a in kept for n in (a, wheel.install_path(a))):
            notes.append(f"--keep-fat {glob}: matches no fat binary")
    return notes


def _fat_kind(wheel: InputWheel, entry: WheelEntry) -> str:
    """'fat', 'unsplittable' (device code without wrappers), '' (no device code) or why a
    file with device code needs no split."""
    path = wheel.root / entry.arcname
    with open(path, "rb") as f:
        if identify(f.read(4)) not in ("elf", "pe"):
            return ""
    info = inspect_fat_binary(path)
    if info is None:
        return ""
    if info.already_transformed:
        return "already transformed (HIPK wrappers or a kpack marker)"
    if info.wrapper_count == 0:
        return "unsplittable"
    return "fat"
