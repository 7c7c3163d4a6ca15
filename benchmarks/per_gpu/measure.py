"""One row per GPU: its ``rocm[libraries,device]``, the legacy ``rocm[libraries]`` of its
family, and the set's ``rocm[libraries,device-all]``, each as pip resolves it
(:mod:`.pip`); the builder's report.json held to pip's figures."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name

from build_tools.targets import FamilyTable, load_family_table
from kpack.errors import PackagingError, UsageError
from kpack.targets import is_processor, target_order

from .pip import Digests, PackageSet, Resolution, check_against_dist, resolve

__all__ = ["DEVICE", "GpuRow", "Measurement", "gpus_of", "measure", "report_checks"]

LIBRARIES = "rocm-sdk-libraries"
DEVICE = "rocm-sdk-device-"


@dataclass(frozen=True, kw_only=True)
class GpuRow:
    """A GPU's downloads: kpack ``rocm[libraries,device]`` and, where a family of the legacy
    set serves it, legacy ``rocm[libraries]`` from that family's index."""

    gpu: str
    one: Resolution
    legacy: Resolution | None
    legacy_family: str | None


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """``rocm[libraries,device-all]`` of the kpack set and a row per GPU."""

    every: Resolution
    rows: tuple[GpuRow, ...]
    report_checks: tuple[str, ...]  # the builder's report.json against pip

    @property
    def mismatches(self) -> tuple[str, ...]:
        return tuple(line for line in self.report_checks if " != " in line)


def report_checks(pset: PackageSet, every: Resolution, rows: Sequence[GpuRow]) -> list[str]:
    """The builder's report.json beside ``dist/`` held to pip (it counts the wheels, not the
    sdist): one line per figure compared, ``!=`` where they differ."""
    path = pset.dist.parent / "report.json"
    if not path.is_file():
        return []
    targets = {t["target"]: t for t in json.loads(path.read_text(encoding="utf-8"))["targets"]}
    found: list[tuple[str, str, int, int]] = []
    for row in rows:
        res, key = (row.one, row.gpu) if pset.mode == "kpack" else (row.legacy, row.legacy_family)
        if res is None or key is None or key not in targets:
            continue
        found.append((key, "download_bytes", targets[key]["download_bytes"], _wheels(res)))
        if pset.mode == "kpack":
            fat = targets[key]["fat_download_bytes"]
            found.append((key, "fat_download_bytes", fat, _wheels(every)))
    return [
        f"{path}: {key} {name} {said} {'==' if said == pip else '!='} pip's wheels {pip}"
        for key, name, said, pip in found
    ]


def _wheels(res: Resolution) -> int:
    return sum(f.size for f in res.files if f.name.endswith(".whl"))


def gpus_of(every: Resolution) -> tuple[str, ...]:
    """The processors the kpack set has a ``device-<gfx>`` extra for, in natural order."""
    names = (e.removeprefix("device-") for e in every.extras if e.startswith("device-"))
    return tuple(sorted((n for n in names if is_processor(n)), key=target_order))


def _legacy_family(pset: PackageSet, gpu: str, table: FamilyTable) -> str | None:
    """The family whose index serves ``gpu`` (``""``: the flat index), or None."""
    if not pset.families:
        return ""
    return next((f for f in pset.families if _covers(table, f, gpu)), None)


def _covers(table: FamilyTable, family: str, gpu: str) -> bool:
    wanted = canonicalize_name(family)
    known = {canonicalize_name(f): ts for f, ts in table.families.items()}
    return gpu in known.get(wanted, (family,))


def _legacy(
    pset: PackageSet, gpu: str, table: FamilyTable, work: Path, digests: Digests
) -> tuple[Resolution | None, str | None]:
    family = _legacy_family(pset, gpu, table)
    if family is None:
        return None, None
    res = resolve(pset.index_of(family), f"rocm[libraries]=={pset.version}", gpu, work)
    check_against_dist(res, pset.dist_dirs(family), digests)
    chosen = [p.removeprefix(LIBRARIES + "-") for p in res.projects(LIBRARIES + "-")]
    if len(chosen) != 1 or not _covers(table, chosen[0], gpu):
        return None, None  # the selector fell back to a family that is not this GPU's
    spelled = (f for f in (*pset.families, *table.families) if canonicalize_name(f) == chosen[0])
    return res, next(spelled, chosen[0])  # the family as the set spells it


def measure(
    kpack: PackageSet, legacy: PackageSet | None, work: Path, targets: Sequence[str] = ()
) -> Measurement:
    digests, table = Digests(), load_family_table()
    every = resolve(kpack.index, f"rocm[libraries,device-all]=={kpack.version}", None, work)
    check_against_dist(every, kpack.dist_dirs(None), digests)
    gpus = gpus_of(every)
    if not gpus:
        raise UsageError("the rocm sdist has no device-<gfx> extra: not a kpack-split set",
                         path=kpack.index)  # fmt: skip
    unknown = sorted(set(targets) - set(gpus))
    if unknown:
        raise UsageError(f"--targets {', '.join(unknown)}: the set has no device-<gfx> extra "
                         f"for them (it has {', '.join(gpus)})")  # fmt: skip
    rows = []
    for gpu in [g for g in gpus if g in targets] if targets else gpus:
        one = resolve(kpack.index, f"rocm[libraries,device]=={kpack.version}", gpu, work)
        check_against_dist(one, kpack.dist_dirs(None), digests)
        if not one.projects(DEVICE):
            raise PackagingError(f"rocm[device] installs no device wheel for {gpu}",
                                 path=kpack.index)  # fmt: skip
        old, family = _legacy(legacy, gpu, table, work, digests) if legacy else (None, None)
        rows.append(GpuRow(gpu=gpu, one=one, legacy=old, legacy_family=family))
    checks = report_checks(kpack, every, rows)
    checks += report_checks(legacy, every, rows) if legacy else []
    return Measurement(every=every, rows=tuple(rows), report_checks=tuple(checks))
