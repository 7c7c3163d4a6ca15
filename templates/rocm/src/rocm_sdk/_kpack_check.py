"""Integrity of kpack-split device code in an installed package set (``rocm-sdk test``).

Host binaries in the libraries (and core) platform packages whose fat-binary wrappers were
redirected (HIPK) load their device code at run time from ``.kpack`` archives that the
``rocm-sdk-device-<gfx>`` wheels install into the libraries platform package. For every
such binary, every wrapper (``co_index``) and every *installed target*, this checks that
the runtime's lookup (kpack.md §7) finds ``<kernel_name>#<co_index>`` (for the target's
ISA, then for its LLVM generic target, ``gfx942`` -> ``gfx9-4-generic``, as the runtime
looks it up), and that the entry decodes to exactly ``original_size`` bytes.

Device wheels are ours (``rocm-sdk-device-<base>``) and those of the wheel splitter
(``kpack split-wheel``: ``<prefix>-<key>``, e.g. ``amd-torch-device-gfx90a``, any
``*-device-*`` distribution whose RECORD lists ``<root>/.kpack/<group>_<target>.kpack``
archives for the host package at ``<root>``, which its METADATA requires first), found by
:mod:`rocm_sdk._kpack_installed`.

Installed targets: the base target of each installed device wheel (from its dist-info
name; a splitter wheel of a family key such as ``gfx9-4``, from its archives' names) and
the feature variants (``gfx90a:xnack+``) of those bases whose archives are
installed (in a device wheel's RECORD, or next to a binary's search pattern). A base
target counts as served when the key resolves for the base itself or for one of its
installed variants: agents report concrete features (``gfx90a:sramecc+:xnack-``), so a
build that only ships feature-specific code is complete without a bare archive. Targets
whose device wheel is not installed are not checked. ``ROCM_KPACK_PATH*`` variables are
ignored: this checks what is installed.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path, PurePosixPath

from ._elf import ElfError
from ._kpack import (
    GFXARCH,
    KpackError,
    KpackRef,
    base_target,
    candidate_targets,
    is_target_id,
    read_kpack_ref,
)
from ._kpack_archive import ArchiveEntry, Decompress, KpackArchive
from ._kpack_installed import DeviceWheel, archive_target, host_binaries
from ._kpack_report import Failure, KpackReport

__all__ = [
    "KpackChecker",
]


class KpackChecker:
    """Opens each archive once and checks each entry once, for a whole installation."""

    def __init__(
        self,
        site: Path,
        decompress: Decompress | None,
        generic_of: Callable[[str], str | None] | None = None,
        prefix: Sequence[Path] = (),
        owner_of: Callable[[str], str] | None = None,
    ) -> None:
        self.site = site
        self.decompress = decompress
        self.generic_of = generic_of or (lambda _target: None)
        #: the processor whose device wheel ships a target's code (``_dist_info.package_owner``:
        #: ``gfx1250-strict`` -> gfx1250); by default its base target
        self.owner_of = owner_of or base_target
        #: archives searched before each binary's own search paths, as the runtime searches
        #: ROCM_KPACK_PATH_PREFIX (device wheels of another site dir, added by
        #: rocm_sdk.initialize_process)
        self.prefix = tuple(prefix)
        self._archives: dict[str, KpackArchive | KpackError | None] = {}
        self._entries: dict[tuple[str, int], str | None] = {}

    def close(self) -> None:
        for archive in self._archives.values():
            if isinstance(archive, KpackArchive):
                archive.close()
        self._archives.clear()

    def __enter__(self) -> KpackChecker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def rel(self, path: Path | str) -> str:
        text = os.path.normpath(path)
        try:
            return Path(text).relative_to(self.site).as_posix()
        except ValueError:
            return text

    def archive(self, path: Path) -> KpackArchive | KpackError | None:
        """The opened archive, the error opening it, or None when there is no file."""
        canonical = os.path.realpath(path)
        if canonical not in self._archives:
            if not os.path.isfile(canonical):
                self._archives[canonical] = None
            else:
                try:
                    self._archives[canonical] = KpackArchive.open(Path(canonical))
                except KpackError as exc:
                    self._archives[canonical] = exc
        return self._archives[canonical]

    def entry_problem(self, archive: KpackArchive, entry: ArchiveEntry) -> str | None:
        key = (os.path.realpath(archive.path), entry.ordinal)
        if key not in self._entries:
            self._entries[key] = archive.entry_problem(entry, self.decompress)
        return self._entries[key]

    # --- device wheels ---------------------------------------------------------------

    def check_device_archives(self, wheels: Sequence[DeviceWheel]) -> list[Failure]:
        """Each RECORD-listed archive exists, is readable and lists exactly its name's target."""
        failures = []
        for wheel in wheels:
            for rel in wheel.archives:
                failures += self._check_device_archive(wheel, rel)
        return failures

    def _check_device_archive(self, wheel: DeviceWheel, rel: str) -> list[Failure]:
        name = PurePosixPath(rel).name
        target = archive_target(name)
        if target is None:
            return [
                Failure(
                    rel, None, None, f"{wheel.name}: the name does not end in '_<target>.kpack'"
                )
            ]
        if base_target(target) not in wheel.bases and self.owner_of(target) not in wheel.bases:
            return [
                Failure(
                    rel,
                    target,
                    None,
                    f"shipped by {wheel.name}, whose target is "
                    f"{wheel.base}, not {base_target(target)}",
                )
            ]
        archive = self.archive(wheel.dist_info.parent / rel)  # in the wheel's own site dir
        if archive is None:
            return [Failure(rel, target, None, f"listed in the RECORD of {wheel.name} but missing")]
        if isinstance(archive, KpackError):
            return [Failure(rel, target, None, f"unreadable archive: {archive.message}")]
        problems = []
        if list(archive.gfx_arches) != [target]:
            problems.append(
                f"gfx_arches {list(archive.gfx_arches)} do not match the file "
                f"name's target {target!r}"
            )
        stray = sorted({t for _k, t in archive.entries if t not in archive.gfx_arches})
        if stray:
            problems.append(
                f"TOC targets {stray} are missing from gfx_arches (the runtime never finds them)"
            )
        return [Failure(rel, target, None, p) for p in problems]

    # --- installed targets -----------------------------------------------------------

    def installed_targets(
        self, wheels: Sequence[DeviceWheel], refs: Sequence[KpackRef]
    ) -> tuple[str, ...]:
        """Base targets of ``wheels`` plus the installed variants of those bases, sorted."""
        bases = {b for w in wheels for b in w.bases}
        found = [archive_target(PurePosixPath(rel).name) for w in wheels for rel in w.archives]
        for ref in refs:
            found += self._pattern_targets(ref)
        variants = {t for t in found if t is not None and self.owner_of(t) in bases}
        return tuple(sorted(bases | variants))

    @staticmethod
    def _pattern_targets(ref: KpackRef) -> list[str | None]:
        """Targets of the files next to ``ref``'s search patterns that match the pattern."""
        out: list[str | None] = []
        for pattern in ref.search_paths:
            directory, _sep, name = pattern.rpartition("/")
            if GFXARCH not in name or GFXARCH in directory:
                continue
            prefix, _sep, suffix = name.partition(GFXARCH)
            try:
                listing = os.listdir(ref.path.parent / directory)
            except OSError:
                continue
            for entry in listing:
                if entry.startswith(prefix) and entry.endswith(suffix):
                    middle = entry[len(prefix) : len(entry) - len(suffix)]
                    if is_target_id(middle):
                        out.append(middle)
        return out

    # --- host binaries ---------------------------------------------------------------

    def _archives_for(
        self, ref: KpackRef, strings: Sequence[str]
    ) -> tuple[list[Path], list[KpackArchive], list[str]]:
        """Candidate paths, opened archives (deduplicated) and unreadable-archive notes."""
        paths: list[Path] = list(self.prefix)
        for pattern in ref.search_paths:
            expanded = (
                [pattern.replace(GFXARCH, s) for s in strings] if GFXARCH in pattern else [pattern]
            )
            paths += [ref.path.parent / p for p in expanded]
        paths = list(dict.fromkeys(paths))
        opened: dict[str, KpackArchive] = {}
        broken = []
        for path in paths:
            archive = self.archive(path)
            if isinstance(archive, KpackError):
                broken.append(f"{self.rel(path)} is unreadable ({archive.message})")
            elif archive is not None:
                opened.setdefault(os.path.realpath(path), archive)
        return paths, list(opened.values()), broken

    def lookup_strings(self, target: str) -> list[str]:
        """What the runtime tries for an agent ``target``, in order: the ISA's compatible
        target strings, then those of its generic target with the same features."""
        strings = list(candidate_targets(target))
        generic = self.generic_of(target)
        if generic is not None:
            _processor, sep, features = target.partition(":")
            strings += [s for s in candidate_targets(generic + sep + features) if s not in strings]
        return strings

    def check_binary(self, ref: KpackRef, targets: Sequence[str]) -> tuple[int, list[Failure]]:
        """(lookups done, failures) for every co_index of ``ref`` on every target."""
        binary = self.rel(ref.path)
        failures: list[Failure] = []
        lookups = 0
        # variants first, so that a bare base can count as served by one of them
        ordered = sorted(targets, key=lambda t: (":" not in t, t))
        served: set[tuple[str, int]] = set()
        for target in ordered:
            strings = self.lookup_strings(target)
            paths, archives, broken = self._archives_for(ref, strings)
            for co_index in ref.co_indices:
                lookups += 1
                key = ref.key(co_index)
                found = _find(archives, key, strings)
                if found is not None:
                    archive, entry = found
                    served.add((base_target(target), co_index))
                    problem = self.entry_problem(archive, entry)
                    if problem is not None:
                        failures.append(
                            Failure(
                                binary, target, co_index, f"{self.rel(archive.path)}: {problem}"
                            )
                        )
                    continue
                if ":" not in target and (target, co_index) in served:
                    continue
                if not archives and not broken:
                    # No archive for this binary exists for any candidate of this target:
                    # it was never built for it (a fat binary without that code object).
                    # An archive a device wheel declares but lacks is caught by the RECORD
                    # check of the device wheels.
                    continue
                failures.append(
                    Failure(
                        binary,
                        target,
                        co_index,
                        self._not_found(ref, strings, paths, archives, broken),
                    )
                )
        return lookups, failures

    def _not_found(
        self,
        ref: KpackRef,
        strings: Sequence[str],
        paths: Sequence[Path],
        archives: Sequence[KpackArchive],
        broken: Sequence[str],
    ) -> str:
        key = f"{ref.kernel_name}#<co_index>"
        notes = [*broken]
        if not archives:
            tried = ", ".join(self.rel(p) for p in paths)
            return "; ".join([f"no archive for {key}: none of {tried} exists", *notes])
        listing = [a for a in archives if any(s in a.gfx_arches for s in strings)]
        if not listing:
            found = ", ".join(f"{self.rel(a.path)} {list(a.gfx_arches)}" for a in archives)
            return "; ".join(
                [
                    f"no archive lists any of {list(strings)} in gfx_arches for "
                    f"{key} (found {found})",
                    *notes,
                ]
            )
        looked = ", ".join(self.rel(a.path) for a in listing)
        return "; ".join([f"{key} is missing from {looked} (targets {list(strings)})", *notes])

    def transformed(self, dirs: Iterable[Path]) -> tuple[list[KpackRef], list[Failure]]:
        """The kpack references of every transformed binary under ``dirs``, and the binaries
        whose reference cannot be read."""
        refs: list[KpackRef] = []
        failures: list[Failure] = []
        for path in host_binaries(dirs):
            try:
                ref = read_kpack_ref(path)
            except (KpackError, ElfError, OSError) as exc:
                message = exc.message if isinstance(exc, KpackError) else str(exc)
                failures.append(Failure(self.rel(path), None, None, message))
                continue
            if ref is not None:
                refs.append(ref)
        return refs, failures

    def check_gpu(
        self,
        refs: Sequence[KpackRef],
        isas: Sequence[str],
        strings_of: Callable[[str], Sequence[str]] | None = None,
    ) -> list[Failure]:
        """For a GPU of this machine: every kernel of every transformed binary must resolve
        as the runtime looks it up for the GPU's agent, in whatever device package installed
        it. ``isas``: the agent's ISA with its active features (``gfx90a:sramecc+:xnack-``),
        or one per value of a feature detection could not tell (then one of them must
        resolve them all); ``strings_of`` gives the target ids the runtime tries for an ISA
        (by default :meth:`lookup_strings`). One failure per binary that misses any."""
        lookup = strings_of or self.lookup_strings
        shown = " or ".join(isas)
        failures = []
        for ref in refs:
            worst: tuple[list[int], list[str], list[str]] | None = None
            for isa in isas:
                strings = list(lookup(isa))
                _paths, archives, broken = self._archives_for(ref, strings)
                missing = [
                    i for i in ref.co_indices if _find(archives, ref.key(i), strings) is None
                ]
                if not missing:
                    worst = None
                    break
                worst = worst or (missing, strings, broken)
            if worst is not None:
                missing, strings, broken = worst
                notes = "; ".join(broken)
                failures.append(
                    Failure(
                        self.rel(ref.path),
                        shown,
                        None,
                        f"{len(missing)} of {len(ref.co_indices)} kernels have no code object "
                        f"for {shown} (looked for {', '.join(strings)})"
                        + (f"; {notes}" if notes else ""),
                    )
                )
        return failures

    def check(self, wheels: Sequence[DeviceWheel], dirs: Iterable[Path]) -> KpackReport:
        """Check every transformed binary under ``dirs`` against the installed targets."""
        report = KpackReport()
        refs, report.failures = self.transformed(dirs)
        report.binaries = [self.rel(r.path) for r in refs]
        report.targets = self.installed_targets(wheels, refs)
        for ref in refs:
            lookups, failures = self.check_binary(ref, report.targets)
            report.lookups += lookups
            report.failures += failures
        return report


def _find(
    archives: Sequence[KpackArchive], key: str, strings: Sequence[str]
) -> tuple[KpackArchive, ArchiveEntry] | None:
    """Arch-first: for each target string, each archive listing it, in candidate order."""
    for string in strings:
        for archive in archives:
            if string in archive.gfx_arches:
                entry = archive.get(key, string)
                if entry is not None:
                    return archive, entry
    return None
