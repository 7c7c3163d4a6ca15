"""What an input directory holds: artifact dirs, artifact archives, or both.

TheRock leaves artifacts either extracted (``{name}_{component}_{target}/``) or as the
archives ``artifact_manager.py fetch --no-extract`` downloads
(``{name}_{component}_{target}.tar.zst`` / ``.tar.xz``; we read ``.tar`` too), each
perhaps with a ``.sha256sum`` sidecar. :func:`find_inputs` sorts one directory's entries
into the two kinds and refuses, all problems at once: a directory or archive whose name
does not parse, an artifact dir that is a symlink, an archive that is not a regular file,
and one artifact present twice (a directory and an archive, or two archives): no silent
winner. Regular files that are neither (checksums of no archive, logs) and hidden entries
are skipped with a notice; a sidecar beside its archive is read with it.
"""

from __future__ import annotations

import stat
from pathlib import Path

from kpack.artifact.names import ArtifactId
from kpack.artifact.packed import SIDECAR_SUFFIX, PackedArtifact, archive_id
from kpack.errors import ArtifactError

__all__ = ["find_inputs"]

_NAME_RULE = "{name}_{component}_{target}"


def find_inputs(root: Path) -> tuple[list[Path], list[PackedArtifact], list[str]]:
    """``(artifact dirs, archives, notices)`` of ``root``, each sorted by artifact name."""
    dirs: dict[str, Path] = {}
    archives: dict[str, list[PackedArtifact]] = {}
    problems: list[str] = []
    notices: list[str] = []
    children = sorted(root.iterdir(), key=lambda p: p.name)
    names = {c.name for c in children}
    for child in children:
        st = child.lstat()
        found = archive_id(child.name)
        if child.name.startswith("."):
            notices.append(f"skipping {child}: not an artifact directory")
        elif found is not None and not stat.S_ISDIR(st.st_mode):
            art_id, _ = found
            if art_id is None:
                problems.append(f"{child.name}: archive name does not parse as {_NAME_RULE}")
            elif not stat.S_ISREG(st.st_mode):
                problems.append(f"{child.name}: is not a regular file")
            else:
                packed = PackedArtifact(id=art_id, path=child, size=st.st_size)
                archives.setdefault(art_id.dirname, []).append(packed)
        elif found is not None:
            problems.append(f"{child.name}: is a directory named like an artifact archive")
        elif stat.S_ISLNK(st.st_mode):
            problems.append(f"{child.name}: is a symlink (artifact dirs are never followed)")
        elif not stat.S_ISDIR(st.st_mode):
            sidecar_of = child.name.removesuffix(SIDECAR_SUFFIX)
            if sidecar_of == child.name or sidecar_of not in names:
                notices.append(f"skipping {child}: not an artifact directory")
        elif ArtifactId.parse(child.name) is None:
            problems.append(f"{child.name}: directory name does not parse as {_NAME_RULE}")
        else:
            dirs[child.name] = child
    for name, found_packed in sorted(archives.items()):
        forms = [p.path.name for p in found_packed] + ([f"{name}/"] if name in dirs else [])
        if len(forms) > 1:
            problems.append(
                f"{name}: present {len(forms)} times ({', '.join(forms)}); keep one form"
            )
    if problems:
        raise ArtifactError("not artifact directories or archives", path=root, problems=problems)
    chosen = [p[0] for _, p in sorted(archives.items())]
    return [dirs[n] for n in sorted(dirs)], chosen, notices
