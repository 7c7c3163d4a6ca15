"""Bulk unbundle: every device code object of a fat binary (or offload-bundle file) as a file.

Names follow rocm-kpack's ``bulk_unbundle`` (TheRock's ``comm-libs/rccl-translate`` hands
the directory to a translator that reads them): a code object is ``<bundle triple>.hsaco``
(``.elf`` for a triple that does not start with ``hip``), in section order over every
bundle, host entries left out; when one triple occurs more than once (one bundle per
translation unit), every name carries its position in that order: ``<triple>_<i>.hsaco``.
``gfx_arch`` keeps the code objects of one base architecture (``gfx90a`` keeps
``gfx90a:xnack+`` too), counted after the choice.

The files are written beside the output, then published with the output-dir rule of
:mod:`kpack.artifact.output`, its record kept beside the output dir (never inside: the dir
is another program's input).
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kpack.artifact.output import Staging
from kpack.bundle import iter_bundles
from kpack.common.outputs import Owns
from kpack.common.safepath import Root, safe_component
from kpack.errors import ArtifactError, BundleError, UsageError
from kpack.hipfmt import identify
from kpack.transform import inspect_fat_binary

__all__ = ["UnbundleResult", "bundle_triples", "unbundle_binary", "unbundled_names"]


@dataclass(frozen=True, kw_only=True)
class UnbundleResult:
    source: Path
    output_dir: Path
    names: tuple[str, ...]  # in section order
    triples: tuple[str, ...]  # each file's bundle triple


def unbundled_names(triples: Sequence[str]) -> list[str]:
    """rocm-kpack's file name for each code object's triple (see the module docstring)."""
    indexed = len(set(triples)) != len(triples)
    names = []
    for i, triple in enumerate(triples):
        suffix = ".hsaco" if triple.startswith("hip") else ".elf"
        names.append(f"{triple}_{i}{suffix}" if indexed else f"{triple}{suffix}")
    return names


@contextmanager
def _section(path: Path) -> Iterator[memoryview]:
    """The bytes holding ``path``'s offload bundles: its ``.hip_fatbin`` (ELF) or
    ``.hip_fat`` (PE) section, or the whole file for a bundle file."""
    with open(path, "rb") as f:
        kind = identify(f.read(24))
    if kind in ("elf", "pe"):
        info = inspect_fat_binary(path)
        if info is None:
            raise UsageError("has no device code section", path=path)
        if info.already_transformed:
            raise UsageError("already split: its device code is in .kpack archives", path=path)
        start, size = info.hip_fatbin_offset, info.hip_fatbin_size
    elif kind == "bundle":
        start, size = 0, path.stat().st_size
    else:
        raise UsageError("not an ELF or PE binary or an offload bundle file", path=path)
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    yield memoryview(mm)[start : start + size]  # views may outlive it; unmapped when dropped


def _base(target: str) -> str:
    return target.split(":", 1)[0]


def bundle_triples(path: Path) -> tuple[str, ...]:
    """The triple of every device code object of ``path``, in section order."""
    with _section(Path(path)) as view:
        return tuple(
            co.triple for bundle in iter_bundles(view, name=str(path)) for co in bundle.code_objects
        )


def unbundle_binary(
    path: Path,
    output_dir: Path,
    *,
    gfx_arch: str | None = None,
    force: bool = False,
    record: bool = True,
    owns: Owns = "recorded",
) -> UnbundleResult:
    """Write ``path``'s code objects into ``output_dir`` (see the module docstring); without
    ``record`` (a scratch dir) nothing is recorded beside it.

    Raises :class:`UsageError` when ``path`` has no device code or none for ``gfx_arch``;
    nothing is written then.
    """
    path, output_dir = Path(path), Path(output_dir)
    with _section(path) as view:
        chosen = [
            co
            for bundle in iter_bundles(view, name=str(path))
            for co in bundle.code_objects
            if gfx_arch is None or _base(co.target) == gfx_arch
        ]
        if not chosen:
            what = f" for architecture {gfx_arch!r}" if gfx_arch else ""
            raise UsageError(f"no code objects{what}", path=path)
        names = unbundled_names([co.triple for co in chosen])
        for name in names:
            safe_component(name, what="code object file name", source=path, error=BundleError)
        kept = output_dir.parent / f".{output_dir.name}.kpack-unbundle.json"
        staging = Staging(
            output_dir, force=force, protected=[path], record=kept if record else None, owns=owns
        )
        with staging:
            root = Root(staging.root, error=ArtifactError)
            for name, co in zip(names, chosen, strict=True):
                root.write_bytes(name, co.data, what="code object file")
            staging.publish(names)
    return UnbundleResult(
        source=path,
        output_dir=output_dir,
        names=tuple(names),
        triples=tuple(co.triple for co in chosen),
    )
