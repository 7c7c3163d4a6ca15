"""The figures as a table (plain or Markdown) with the ratios' spread and what every GPU
downloads alike."""

from __future__ import annotations

import statistics
import zipfile
from pathlib import Path

from .measure import DEVICE, Measurement
from .pip import PackageSet, pip_version

__all__ = ["render", "report", "shared_files", "summary", "table"]


def _mb(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def shared_files(m: Measurement, dist: Path) -> list[str]:
    """The files every GPU's ``rocm[libraries,device]`` downloads, each wheel with its
    largest member (what most of a shared download is)."""
    if not m.rows:
        return []
    names = set.intersection(*({f.name for f in r.one.files} for r in m.rows))
    lines = []
    for f in (f for f in m.rows[0].one.files if f.name in names):
        what = f"{f.project}{' sdist' if f.name.endswith('.tar.gz') else ''} {_mb(f.size)}"
        if f.name.endswith(".whl"):
            with zipfile.ZipFile(dist / f.name) as zf:
                big = max(zf.infolist(), key=lambda i: i.compress_size)
            what += f" (largest member {big.filename}: {_mb(big.compress_size)} stored)"
        lines.append(what)
    return lines


def table(m: Measurement, *, with_legacy: bool) -> list[list[str]]:
    """Header and one row per GPU."""
    head = ["GPU", "device wheels", "rocm[libraries,device]", "rocm[libraries,device-all]"]
    head += ["one/all"] + (["legacy rocm[libraries]", "one/legacy"] if with_legacy else [])
    rows = [head]
    for r in m.rows:
        devices = "+".join(p.removeprefix(DEVICE) for p in r.one.projects(DEVICE))
        cells = [r.gpu, devices, _mb(r.one.total), _mb(m.every.total)]
        cells.append(f"{r.one.total / m.every.total:.3f}")
        if with_legacy and r.legacy is not None:
            cells += [f"{_mb(r.legacy.total)} ({r.legacy_family or 'its family'})"]
            cells += [f"{r.one.total / r.legacy.total:.3f}"]
        elif with_legacy:
            cells += ["— (no family of the set)", "—"]
        rows.append(cells)
    return rows


def summary(m: Measurement) -> list[str]:
    """min / median / max of each ratio, with the GPUs at the ends."""
    lines = []
    for name, pairs in (
        ("one/all", [(r.one.total / m.every.total, r.gpu) for r in m.rows]),
        ("one/legacy", [(r.one.total / r.legacy.total, r.gpu) for r in m.rows if r.legacy]),
    ):
        if pairs:
            low, high = min(pairs), max(pairs)
            mid = statistics.median(v for v, _ in pairs)
            lines.append(f"{name}: min {low[0]:.3f} ({low[1]}), median {mid:.3f}, "
                         f"max {high[0]:.3f} ({high[1]}) over {len(pairs)} GPUs")  # fmt: skip
    return lines


def render(rows: list[list[str]], *, markdown: bool) -> str:
    if markdown:
        rule = ["---" if i < 2 else "---:" for i in range(len(rows[0]))]  # numbers right
        return "\n".join("| " + " | ".join(r) + " |" for r in [rows[0], rule, *rows[1:]])
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    )


def report(m: Measurement, kpack: PackageSet, legacy: PackageSet | None, markdown: bool) -> str:
    head = [
        f"pip {pip_version()} --dry-run --report: bytes of every file it would download "
        "(the rocm sdist included), each checked against dist/",
        f"kpack set {kpack.version}: {kpack.origin or kpack.dist}; device-all is "
        f"{len(m.every.files)} files",
    ]
    if legacy is not None:
        count = len(legacy.families) or 1
        families = f"{count} famil{'y' if count == 1 else 'ies'}"
        head.append(f"legacy set: {legacy.origin or legacy.dist} ({families})")
    head += [f"every GPU downloads {line}" for line in shared_files(m, kpack.dist)]
    rows = table(m, with_legacy=legacy is not None)
    checked = len(m.report_checks)
    tail = [f"the builder's report.json: {checked - len(m.mismatches)} of {checked} figures "
            "equal pip's (wheels only)"] if checked else []  # fmt: skip
    return "\n".join([*head, "", render(rows, markdown=markdown), "", *summary(m), *tail])
