"""Fetch real ROCm binaries from Debian's archive for samples and tests.

Debian bookworm ships real multi-architecture HIP fat binaries (``librocrand1``) and the
HIP runtime. ``apt-get download`` plus ``dpkg -x`` need no root and no GPU. Downloads are
cached by package name, so a second call costs nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from pathlib import Path

from kpack.errors import ToolError

__all__ = ["default_cache_dir", "extract_deb", "fetch_debs"]

log = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$ROCM_PACKAGING_CACHE`` or ``~/.cache/rocm-packaging``."""
    env = os.environ.get("ROCM_PACKAGING_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "rocm-packaging"


def _run(cmd: list[str], cwd: Path) -> None:
    if shutil.which(cmd[0]) is None:
        raise ToolError(f"{cmd[0]} is not installed; it is needed to fetch Debian packages")
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ToolError(
            f"command failed (exit {proc.returncode}): {' '.join(cmd)}\n"
            f"{proc.stdout}{proc.stderr}".rstrip()
        )


def _cached_deb(debs: Path, name: str) -> Path | None:
    found = sorted(debs.glob(f"{name}_*.deb"))
    return found[-1] if found else None


def extract_deb(deb: Path, dest: Path) -> Path:
    """Extract ``deb`` into ``dest`` (once; a finished extraction leaves a marker)."""
    marker = dest / ".extracted"
    if marker.exists():
        return dest
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    _run(["dpkg-deb", "-x", str(deb), str(partial)], cwd=partial)
    (partial / ".extracted").write_text(deb.name + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return dest


def fetch_debs(names: list[str], cache_dir: Path | None = None) -> dict[str, Path]:
    """Download (if not cached) and extract Debian packages; map name -> extracted root."""
    cache = cache_dir or default_cache_dir()
    debs = cache / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    missing = [n for n in names if _cached_deb(debs, n) is None]
    if missing:
        log.info("downloading Debian packages: %s", " ".join(missing))
        try:
            _run(["apt-get", "download", *missing], cwd=debs)
        except ToolError as exc:
            raise ToolError(
                f"{exc.message}\n(hint: run 'apt-get update' once, as root, then retry)"
            ) from exc
    roots: dict[str, Path] = {}
    for name in names:
        deb = _cached_deb(debs, name)
        if deb is None:
            raise ToolError(f"apt-get download did not produce a .deb for {name}")
        roots[name] = extract_deb(deb, cache / "extracted" / deb.stem)
    return roots
