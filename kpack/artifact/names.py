"""TheRock artifact naming, shared by the splitter and the package builder.

An artifact directory is ``{name}_{component}_{target}``; its ``artifact_manifest.txt``
lists stage directories, relative and without ``..``. A target is ``generic``, a GPU
family (legacy builds) or an ISA target id ``gfx<hex>[:feature±…]`` or LLVM generic target
``gfx9-4-generic[:feature±…]`` (kpack-split builds).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from kpack.common.safepath import resolve_in_tree, safe_relpath
from kpack.errors import ArtifactError

__all__ = [
    "COMPONENTS",
    "MANIFEST",
    "ArtifactId",
    "Component",
    "check_manifest_line",
    "check_stage_dir",
    "check_symlink",
    "read_manifest",
]

MANIFEST = "artifact_manifest.txt"

Component = Literal["lib", "run", "dbg", "dev", "doc", "test"]
COMPONENTS: tuple[Component, ...] = ("lib", "run", "dbg", "dev", "doc", "test")


@dataclass(frozen=True, order=True)
class ArtifactId:
    name: str
    component: Component
    target: str

    @property
    def dirname(self) -> str:
        return f"{self.name}_{self.component}_{self.target}"

    @classmethod
    def parse(cls, dirname: str) -> ArtifactId | None:
        """None unless the name splits into exactly three fields with a known component."""
        parts = dirname.split("_")
        if len(parts) != 3 or not all(parts) or parts[1] not in COMPONENTS:
            return None
        return cls(parts[0], parts[1], parts[2])


def check_manifest_line(line: str, manifest: Path) -> str:
    """Validate one ``artifact_manifest.txt`` line (a safe relative path); return it as POSIX.

    Refused: absolute paths, ``~``, backslashes, ``.`` and ``..`` components (a stage line
    ``.`` would make the artifact dir itself, manifest included, a stage), empty components,
    control characters and over-long names.
    """
    if line.startswith("~"):
        raise ArtifactError(f"stage directory {line!r} is absolute", path=manifest)
    return safe_relpath(
        line, what="stage directory", source=manifest, error=ArtifactError
    ).as_posix()


def read_manifest(artifact_dir: Path) -> tuple[Path, tuple[str, ...]]:
    """The validated, sorted, de-duplicated stage lines of ``artifact_dir``'s manifest.

    The manifest must be a regular file inside the artifact (a symlink is refused: it could
    make us read any file on the machine). Blank lines are skipped, as TheRock's reader does;
    a stage dir nested inside another listed one is an error, since every file below it
    would be shipped twice under two different relpaths.
    """
    manifest = artifact_dir / MANIFEST
    try:
        st = os.lstat(manifest)
    except FileNotFoundError:
        raise ArtifactError(f"artifact directory has no {MANIFEST}", path=artifact_dir) from None
    if stat.S_ISLNK(st.st_mode):
        raise ArtifactError(
            "is a symlink; refusing to read a manifest from elsewhere", path=manifest
        )
    if not stat.S_ISREG(st.st_mode):
        raise ArtifactError("is not a regular file", path=manifest)
    try:
        text = manifest.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArtifactError(f"not UTF-8 text: {exc}", path=manifest) from exc
    stages = sorted(
        {check_manifest_line(raw.strip(), manifest) for raw in text.splitlines() if raw.strip()}
    )
    listed = set(stages)
    for stage in stages:
        outer = next((str(p) for p in PurePosixPath(stage).parents if str(p) in listed), None)
        if outer is not None:
            raise ArtifactError(
                f"stage directory {stage!r} lies inside stage directory {outer!r}", path=manifest
            )
    return manifest, tuple(stages)


def check_stage_dir(artifact_dir: Path, stage: str, manifest: Path) -> bool:
    """True when ``stage`` is a real directory inside ``artifact_dir``; False when missing.

    A stage dir that is a symlink, passes through one, or is not a directory is an error.
    """
    path = artifact_dir / stage
    current = artifact_dir
    for part in PurePosixPath(stage).parts:
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return False
        if stat.S_ISLNK(st.st_mode):
            raise ArtifactError(
                f"stage directory {stage!r} passes through symlink "
                f"{current.relative_to(artifact_dir)}",
                path=manifest,
            )
        if not stat.S_ISDIR(st.st_mode):
            raise ArtifactError(f"stage directory {stage!r} is not a directory", path=manifest)
    return path.is_dir()


def check_symlink(stage_dir: Path, link: Path) -> str:
    """The text of symlink ``link``; an error when it resolves outside ``stage_dir``.

    Resolved hop by hop against the tree (:func:`kpack.common.safepath.resolve_in_tree`), so a chain
    of links that each look harmless but together climb out, or a link through a linked
    directory, is refused as surely as ``-> /etc/passwd``. A dangling link inside, or a loop
    (which reaches nothing), is left to the layout rules, which drop it with a warning.
    """
    target = os.readlink(link)
    resolve_in_tree(stage_dir, link, error=ArtifactError, loops_dangle=True)
    return target
