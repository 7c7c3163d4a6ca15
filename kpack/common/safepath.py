"""Containment: the one place where paths made from input data are checked and written.

Every relative path taken from untrusted bytes — an offload-bundle triple, a ``.kpack`` TOC
key, an archive name, an ``artifact_manifest.txt`` line, a wheel member, a symlink target —
goes through :func:`safe_relpath` (or :func:`safe_component` for a single name) before any
file is created from it. Every write under an output root goes through :class:`Root`, which
refuses to leave that root: no ``..``, no absolute path, no existing symlink on the way,
no following a symlink at the final component. Symlinks found *inside an input tree* are
resolved with :func:`resolve_in_tree`, one hop at a time, and refused as soon as a hop
leaves the tree.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from kpack.common.outfile import output_file
from kpack.errors import RocmPackagingError, UnsafePathError

__all__ = [
    "MAX_COMPONENT_BYTES",
    "MAX_PATH_BYTES",
    "MAX_SYMLINK_HOPS",
    "Root",
    "case_collisions",
    "is_utf8",
    "open_new",
    "output_dir_problem",
    "resolve_in_tree",
    "safe_component",
    "safe_relpath",
    "shown_name",
    "windows_name_problem",
    "windows_platform",
]

#: The longest file name (one path component) Linux and Windows file systems accept, in bytes.
MAX_COMPONENT_BYTES = 255
#: The longest relative path we build from input data (Linux ``PATH_MAX``), in bytes.
MAX_PATH_BYTES = 4096
#: Symlink hops followed before a chain is called a loop (the kernel's ``ELOOP`` limit).
MAX_SYMLINK_HOPS = 40

#: Characters Windows file systems reject in a name (``:`` would open an NTFS stream).
_WINDOWS_BAD = frozenset('<>:"|?*\\') | frozenset(chr(c) for c in range(32))
_WINDOWS_RESERVED = frozenset(
    ["CON", "PRN", "AUX", "NUL", *(f"{port}{i}" for port in ("COM", "LPT") for i in range(1, 10))]
)

_Source = str | os.PathLike[str] | None
_ErrorType = type[RocmPackagingError]


def _encoded_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _check_text(value: object, what: str, source: _Source, error: _ErrorType) -> str:
    if not isinstance(value, str):
        raise error(f"{what} {value!r} is not text", path=source)
    if not value:
        raise error(f"{what} is empty", path=source)
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise error(f"{what} {value!r} contains control character {bad!r}", path=source)
    if "\\" in value:
        raise error(f"{what} {value!r} contains a backslash", path=source)
    try:
        _encoded_len(value)
    except UnicodeEncodeError:  # a lone surrogate no file system name decodes to
        raise error(f"{what} {value!r} is not valid text", path=source) from None
    return value


def safe_component(
    value: object, *, what: str, source: _Source = None, error: _ErrorType = UnsafePathError
) -> str:
    """``value`` as one file name: no separator, not ``.``/``..``, within the length limit."""
    text = _check_text(value, what, source, error)
    if "/" in text:
        raise error(f"{what} {text!r} contains '/'", path=source)
    if text in (".", ".."):
        raise error(f"{what} {text!r} is not a file name", path=source)
    if _encoded_len(text) > MAX_COMPONENT_BYTES:
        raise error(
            f"{what} {text[:40]!r}... is longer than {MAX_COMPONENT_BYTES} bytes", path=source
        )
    return text


def safe_relpath(
    value: object,
    *,
    what: str,
    source: _Source = None,
    error: _ErrorType = UnsafePathError,
    allow_dir_suffix: bool = False,
) -> PurePosixPath:
    """``value`` as a relative POSIX path that cannot leave the directory it is joined to.

    Refused: empty paths, absolute paths, drive letters (``C:``), backslashes, control
    characters, empty, ``.`` or ``..`` components, a component over
    :data:`MAX_COMPONENT_BYTES` and a whole path over :data:`MAX_PATH_BYTES`. A trailing
    ``/`` (a directory entry in a zip) is accepted only with ``allow_dir_suffix``.
    """
    text = _check_text(value, what, source, error)
    if text.startswith("/"):
        raise error(f"{what} {text!r} is absolute", path=source)
    if len(text) >= 2 and text[1] == ":" and text[0].isalpha():
        raise error(f"{what} {text!r} starts with a drive letter", path=source)
    if allow_dir_suffix and text.endswith("/"):
        text = text[:-1]
    if _encoded_len(text) > MAX_PATH_BYTES:
        raise error(f"{what} is longer than {MAX_PATH_BYTES} bytes", path=source)
    parts = text.split("/")
    for part in parts:
        if part in ("", ".", ".."):
            shown = "an empty" if not part else repr(part)
            raise error(f"{what} {value!r} has {shown} path component", path=source)
        if _encoded_len(part) > MAX_COMPONENT_BYTES:
            raise error(
                f"{what} {value!r} has a component longer than {MAX_COMPONENT_BYTES} bytes",
                path=source,
            )
    return PurePosixPath(*parts)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def resolve_in_tree(
    root: str | os.PathLike[str],
    path: str | os.PathLike[str],
    *,
    error: _ErrorType,
    loops_dangle: bool = False,
) -> Path | None:
    """Resolve every symlink in ``path`` (inside ``root``) one hop at a time.

    Returns the fully resolved path. Raises ``error`` naming ``path`` when any hop —
    an absolute target, a ``..`` that climbs above ``root``, a link to a link that does —
    leads outside ``root``. The final target need not exist. A chain longer than
    :data:`MAX_SYMLINK_HOPS` (a loop) is an error too, or, with ``loops_dangle``, returns
    None like any other link that resolves to nothing (it never reaches outside).
    """
    top = os.path.realpath(root)
    start = os.path.abspath(path)
    base = os.path.abspath(root)
    if not _inside(start, base):
        raise error(f"is not inside {root}", path=path)
    # Walk component by component from the real root, expanding links as they come.
    pending = list(reversed(PurePosixPath(os.path.relpath(start, base)).parts))
    current = top
    hops = 0
    while pending:
        part = pending.pop()
        if part == ".":
            continue
        if part == "..":
            if current == top:
                raise error(f"symlink chain leads outside {root} through '..'", path=path)
            current = os.path.dirname(current)
            continue
        candidate = os.path.join(current, part)
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            current = candidate
            continue
        if not stat.S_ISLNK(st.st_mode):
            current = candidate
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            if loops_dangle:
                return None
            raise error(f"symlink chain longer than {MAX_SYMLINK_HOPS} hops (a loop?)", path=path)
        target = os.readlink(candidate)
        if os.path.isabs(target):
            raise error(
                f"symlink {os.path.relpath(candidate, top)} -> {target} leads outside {root}",
                path=path,
            )
        # The target's parts are walked from the link's directory, so a '..' in it is
        # checked against the root like any other.
        pending.extend(reversed(PurePosixPath(target).parts))
    return Path(current)


def open_new(path: str | os.PathLike[str], *, mode: int = 0o644) -> BinaryIO:
    """``path`` created for writing, exclusively: nothing that exists there — a file, or a
    symlink planted by an earlier run or another user, dangling or not — is opened, followed
    or truncated (``O_CREAT | O_EXCL | O_NOFOLLOW``); it raises :class:`FileExistsError`.
    Every file written at a place someone else could have prepared goes through here; a file
    in a directory this process has just created, or one written to a temporary name and
    renamed into place (:func:`os.replace` never follows a symlink), need not. A failed
    write names ``path`` (:class:`kpack.common.outfile.OutputFile`)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_BINARY", 0), mode)
    return output_file(fd, path)


def output_dir_problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot become an output directory — it exists and is not a directory,
    or the nearest existing directory on the way is a file — or None."""
    current = Path(os.path.abspath(path))
    if os.path.lexists(current):
        return None if current.is_dir() else "exists and is not a directory"
    while not os.path.lexists(current.parent) and current.parent != current:
        current = current.parent
    if not current.parent.is_dir():
        return f"cannot be created: {current.parent} is not a directory"
    return None


class Root:
    """An output directory that every write of one operation stays inside.

    Paths are given relative (``str`` or :class:`PurePosixPath`) and validated with
    :func:`safe_relpath`. Parent directories are created one level at a time; an existing
    component that is a symlink, or not a directory, is refused, so nothing written here can
    land outside ``path`` whatever the tree already holds.
    """

    def __init__(self, path: str | os.PathLike[str], *, error: _ErrorType = UnsafePathError):
        self.path = Path(path)
        self.error = error

    def __repr__(self) -> str:
        return f"Root({str(self.path)!r})"

    def _rel(self, rel: str | PurePosixPath, what: str) -> PurePosixPath:
        text = rel.as_posix() if isinstance(rel, PurePosixPath) else rel
        return safe_relpath(text, what=what, source=self.path, error=self.error)

    def _ensure_dirs(self, parts: tuple[str, ...]) -> Path:
        self.path.mkdir(parents=True, exist_ok=True)  # the root itself is the caller's
        current = self.path
        for part in parts:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                try:
                    os.mkdir(current)
                except FileExistsError:
                    st = os.lstat(current)
                else:
                    continue
            if stat.S_ISLNK(st.st_mode):
                raise self.error(
                    f"refusing to write through symlink {current.relative_to(self.path)}",
                    path=self.path,
                )
            if not stat.S_ISDIR(st.st_mode):
                raise self.error(
                    f"{current.relative_to(self.path)} exists and is not a directory",
                    path=self.path,
                )
        return current

    def join(self, rel: str | PurePosixPath, *, what: str = "path") -> Path:
        """The absolute path of ``rel`` under the root (validated; nothing created)."""
        return self.path.joinpath(*self._rel(rel, what).parts)

    def mkdir(self, rel: str | PurePosixPath, *, what: str = "directory") -> Path:
        """Create ``rel`` and its parents inside the root; an existing directory is fine."""
        return self._ensure_dirs(self._rel(rel, what).parts)

    def mkdir_parent(self, rel: str | PurePosixPath, *, what: str = "path") -> Path:
        """Create the parents of ``rel`` inside the root; return ``rel``'s absolute path
        (for a writer that creates the file itself, such as a kernel copy)."""
        checked = self._rel(rel, what)
        return self._ensure_dirs(checked.parts[:-1]) / checked.parts[-1]

    @contextmanager
    def open_write(
        self, rel: str | PurePosixPath, *, what: str = "file", mode: int = 0o644
    ) -> Iterator[BinaryIO]:
        """A new file ``rel`` for writing; an existing file or symlink there is an error."""
        checked = self._rel(rel, what)
        parent = self._ensure_dirs(checked.parts[:-1])
        try:
            handle = open_new(parent / checked.parts[-1], mode=mode)
        except FileExistsError:
            raise self.error(f"{checked} already exists", path=self.path) from None
        except OSError as exc:
            if exc.errno == errno.ENAMETOOLONG:
                raise self.error(f"{checked}: file name too long", path=self.path) from None
            raise
        with handle:
            yield handle

    def write_bytes(
        self, rel: str | PurePosixPath, data: bytes | memoryview, *, what: str = "file"
    ) -> Path:
        """Write ``data`` to the new file ``rel``; returns its path."""
        with self.open_write(rel, what=what) as handle:
            handle.write(data)
        return self.join(rel, what=what)

    def symlink(self, rel: str | PurePosixPath, target: str, *, what: str = "symlink") -> Path:
        """Create symlink ``rel -> target``; the target must stay inside the root."""
        checked = self._rel(rel, what)
        if os.path.isabs(target) or not target:
            raise self.error(f"symlink {checked} -> {target!r} leaves the tree", path=self.path)
        depth = len(checked.parts) - 1
        for part in PurePosixPath(target).parts:
            if part == "..":
                depth -= 1
                if depth < 0:
                    raise self.error(
                        f"symlink {checked} -> {target!r} leaves the tree", path=self.path
                    )
            elif part != ".":
                depth += 1
        parent = self._ensure_dirs(checked.parts[:-1])
        link = parent / checked.parts[-1]
        os.symlink(target, link)
        return link


def windows_name_problem(path: str) -> str | None:
    """Why Windows could not create the ``/``-separated relative ``path`` (a component
    with ``<>:"|?*``, ``\\`` or a control character, a reserved device name such as
    ``NUL``, or one ending in a dot or space), or None."""
    for part in path.split("/"):
        bad = sorted(set(part) & _WINDOWS_BAD)
        if bad:
            return f"characters {''.join(bad)!r}"
        if part.split(".", 1)[0].upper() in _WINDOWS_RESERVED or part.endswith((".", " ")):
            return "a reserved or dotted name"
    return None


def windows_platform(tag: str) -> bool:
    """Whether the wheel tag (``py3-none-win_amd64``, a compressed ``win32.win_amd64``, or a
    bare platform tag) names a Windows platform (``win32``, ``win_amd64``, ``win_arm64``)."""
    platforms = tag.rsplit("-", 1)[-1].split(".")
    return any(p == "win32" or p.startswith("win_") for p in platforms)


def is_utf8(name: str) -> bool:
    """Whether ``name`` (decoded with ``surrogateescape``, as :func:`os.fsdecode` does) is
    valid UTF-8: the only names a wheel, a tarball member list or RECORD can carry as is."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """``name`` for a message: bytes that are not UTF-8 shown as ``\\xff``."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no byte decodes to
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return raw.decode("utf-8", "backslashreplace")


def case_collisions(names: Iterable[str]) -> list[str]:
    """Names among the ``/``-separated relative ``names`` that differ only in case
    (:meth:`str.casefold`), file or directory: one file on a case-insensitive file system
    such as Windows' NTFS, where one would overwrite the other. Each collision once, as
    ``'Foo.py' and 'foo.py'`` (for two directories, only the directories)."""
    # one entry per directory level: (parent's id, folded name) -> (spelling, own id)
    seen: dict[tuple[int, str], tuple[str, int]] = {}
    found: dict[str, None] = {}
    for name in names:
        parent, path = 0, ""
        for part in name.split("/"):
            spelling, node = seen.setdefault((parent, part.casefold()), (part, len(seen) + 1))
            if spelling != part:
                found[f"'{shown_name(path + spelling)}' and '{shown_name(path + part)}'"] = None
                break
            parent, path = node, f"{path}{part}/"
    return list(found)
