"""TheRock artifact naming, shared by the splitter and the package builder.

An artifact directory is ``{name}_{component}_{target}``; its ``artifact_manifest.txt``
lists stage directories, relative and without ``..``. A target is ``generic``, a GPU
family (legacy builds) or an ISA target id ``gfx<hex>[:feature±…]`` (kpack-split builds).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from kpack.errors import ArtifactError

__all__ = [
    "COMPONENTS",
    "ArtifactId",
    "Component",
    "base_target",
    "check_manifest_line",
    "is_isa_target",
]

Component = Literal["lib", "run", "dbg", "dev", "doc", "test"]
COMPONENTS: tuple[Component, ...] = ("lib", "run", "dbg", "dev", "doc", "test")

_ISA_RE = re.compile(r"^gfx[0-9a-f]+(:[A-Za-z0-9_-]+[+-])*$")


def is_isa_target(value: str) -> bool:
    """``gfx`` + hex digits, optionally ``:feature+`` / ``:feature-`` parts."""
    return bool(_ISA_RE.match(value))


def base_target(target: str) -> str:
    """The part before the first ``:`` (``gfx942:xnack+`` -> ``gfx942``)."""
    return target.split(":", 1)[0]


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
    """Validate one ``artifact_manifest.txt`` line (relative, no ``..``); return it as POSIX."""
    posix = PurePosixPath(line)
    if posix.is_absolute() or "\\" in line or line.startswith("~"):
        raise ArtifactError(f"stage directory {line!r} is absolute", path=manifest)
    if ".." in posix.parts:
        raise ArtifactError(f"stage directory {line!r} contains '..'", path=manifest)
    return posix.as_posix()
