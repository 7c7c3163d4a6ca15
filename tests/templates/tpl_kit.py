"""Test kit: rendered packages, fake installations, tiny wheels and shared libraries."""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.templates.tpl_rendering import render, render_tree

Files = Mapping[str, bytes]


def rocm_sdk_tree(ctx: dict[str, Any], dest: Path) -> Path:
    """The rendered rocm sdist tree (with _dist_info.py and PKG-INFO) at ``dest``."""
    render_tree("rocm", ctx, dest)
    (dest / "src" / "rocm_sdk" / "_dist_info.py").write_text(
        render("common/_dist_info.py.j2", ctx), encoding="utf-8"
    )
    meta = {
        "name": "rocm",
        "version": ctx["version"],
        "summary": "ROCm SDK for Python",
        "description": "# rocm\n\nThe ROCm SDK meta package.\n",
        "requires_dist": [f"rocm-sdk-core=={ctx['version']}"],
        "provides_extra": [],
        "dynamic": [],
    }
    (dest / "PKG-INFO").write_text(render("metadata/PKG-INFO.j2", meta), encoding="utf-8")
    return dest


def pure_package_files(
    kind: str, pure_name: str, ctx: dict[str, Any], **overrides: Any
) -> dict[str, bytes]:
    """Files of a rendered pure package (templates/<kind> plus _dist_info.py)."""
    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp:
        staging = Path(tmp)
        render_tree(kind, ctx, staging)
        for path in sorted(staging.rglob("*")):
            if path.is_file():
                out[f"{pure_name}/{path.relative_to(staging).as_posix()}"] = path.read_bytes()
    dist_ctx = {**ctx, **overrides}
    out[f"{pure_name}/_dist_info.py"] = render("common/_dist_info.py.j2", dist_ctx).encode()
    return out


def platform_init(name: str) -> dict[str, bytes]:
    return {f"{name}/__init__.py": render("platform/__init__.py", {}).encode()}


def _hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist_info_files(
    name: str, version: str, files: Files, entry_points: str | None, purelib: bool
) -> dict[str, bytes]:
    norm = name.replace("-", "_").lower()
    info = f"{norm}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode()
    wheel = (
        "Wheel-Version: 1.0\nGenerator: kit\n"
        f"Root-Is-Purelib: {'true' if purelib else 'false'}\nTag: py3-none-any\n"
    ).encode()
    extra = {f"{info}/METADATA": meta, f"{info}/WHEEL": wheel}
    if entry_points:
        extra[f"{info}/entry_points.txt"] = entry_points.encode()
    rows = [f"{p},sha256={_hash(d)},{len(d)}" for p, d in sorted({**files, **extra}.items())]
    rows.append(f"{info}/RECORD,,")
    extra[f"{info}/RECORD"] = ("\n".join(rows) + "\n").encode()
    return extra


def fake_install(
    site: Path, name: str, version: str, files: Files, modes: Mapping[str, int] | None = None
) -> Path:
    """Write ``files`` and a dist-info with a RECORD into ``site``; return the dist-info."""
    everything = {**files, **_dist_info_files(name, version, files, None, False)}
    for rel, data in everything.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if modes and rel in modes:
            path.chmod(modes[rel])
    norm = name.replace("-", "_").lower()
    return site / f"{norm}-{version}.dist-info"


def write_wheel(
    dist: Path,
    name: str,
    version: str,
    files: Files,
    *,
    entry_points: str | None = None,
    purelib: bool = False,
    executables: frozenset[str] = frozenset(),
) -> Path:
    norm = name.replace("-", "_").lower()
    path = dist / f"{norm}-{version}-py3-none-any.whl"
    members = {**files, **_dist_info_files(name, version, files, entry_points, purelib)}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in sorted(members.items()):
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if rel in executables else 0o100644) << 16
            zf.writestr(info, data)
    return path


def tar_bytes(members: list[tuple[str, str, bytes | str | None]], compression: str = "") -> bytes:
    """A tarball from (kind, name, data-or-linkname); kind: dir, file, exe, sym, hard."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{compression}") as tar:  # type: ignore[call-overload]
        for kind, name, payload in members:
            info = tarfile.TarInfo(name)
            info.mode = 0o755
            if kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif kind in ("file", "exe"):
                data = payload if isinstance(payload, bytes) else str(payload).encode()
                info.size, info.mode = len(data), 0o755 if kind == "exe" else 0o644
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = str(payload)
                tar.addfile(info)
    return buf.getvalue()


def sdist_bytes(tree: Path, top: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(tree, arcname=top, filter=lambda ti: None if "__pycache__" in ti.name else ti)
    return buf.getvalue()


@contextmanager
def importable(
    path: Path, prefixes: tuple[str, ...] = ("rocm_sdk", "_rocm", "rocm_profiler")
) -> Iterator[None]:
    """Put ``path`` first on sys.path; forget modules of the given prefixes afterwards."""

    def purge() -> None:
        for name in [m for m in sys.modules if m.startswith(prefixes)]:
            del sys.modules[name]

    purge()
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))
        purge()


def compile_library(
    out: Path,
    source: str,
    *,
    soname: str | None = None,
    link: Sequence[Path] = (),
    rpath: str | None = None,
) -> Path:
    """Compile a tiny C shared library with gcc (the test is skipped without gcc)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    src = out.with_suffix(".c")
    src.write_text(source)
    cmd = ["gcc", "-shared", "-fPIC", "-o", str(out), str(src)]
    if soname:
        cmd.append(f"-Wl,-soname,{soname}")
    for lib in link:
        cmd += [f"-L{lib.parent}", f"-l:{lib.name}"]
    if rpath is not None:
        cmd += [f"-Wl,-rpath,{rpath}", "-Wl,--disable-new-dtags"]
    subprocess.run(cmd, check=True, capture_output=True)
    src.unlink()
    return out
