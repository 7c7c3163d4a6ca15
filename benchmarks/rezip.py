"""The baseline the wheel-split benchmarks measure against: a streaming rezip.

One Python process re-zips a wheel with ``zipfile``: each member is streamed from the
input straight into a new ``ZIP_DEFLATED`` level-6 archive (``zout.open(name, "w")``,
1 MiB copies, nothing extracted to disk). ``bench_split_wheel.py`` times it in-process;
``bench_small_wheels.py`` runs it as a whole process (``python benchmarks/rezip.py
WHEEL OUT_DIR``), as the split command is run. It imports nothing but ``zipfile``.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

__all__ = ["rezip"]


def rezip(wheel: Path, out_dir: Path) -> Path:
    """Re-zip ``wheel`` into ``out_dir`` (created) under its own name; return the copy."""
    out_dir.mkdir(parents=True, exist_ok=True)
    dest = out_dir / wheel.name
    with (
        zipfile.ZipFile(wheel) as zin,
        zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zout,
    ):
        for info in zin.infolist():
            with zin.open(info) as src, zout.open(info.filename, "w", force_zip64=True) as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
    return dest


if __name__ == "__main__":
    rezip(Path(sys.argv[1]), Path(sys.argv[2]))
