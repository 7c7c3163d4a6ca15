"""What the sample tree holds, planned as a value: its artifacts (TheRock's
``{name}_{component}_{target}`` names), their stage dirs and every leaf — a file copied from
an extracted Debian package or a compiled product, a text file, or a symlink. Planning reads
only metadata (links, modes) of its inputs; :func:`sample_tree.make_sample_tree.write_tree`
writes the plan.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from kpack.errors import ToolError
from sample_tree.compile import HIPSAMPLE_ARCHS, INFO_ARCHS, ROCPROF_SYS_TOOLS, SOURCES

__all__ = ["BASE", "Entry", "TreePlan", "plan_tree"]


NOTICE = "Sample ROCm artifact tree assembled from Debian packages for packaging tests.\n"


HIP = "core/clr/stage"


ROCR = "core/ROCR-Runtime/stage"


LLVM = "compiler/amd-llvm/stage"


ROCRAND = "math-libs/rocRAND/stage"


HIPRAND = "math-libs/hipRAND/stage"


ROCPRIM = "math-libs/rocPRIM/stage"


ROCFFT = "math-libs/rocFFT/stage"


PROFILER = "profiler/rocprofiler-systems/stage"


BASE = "base/aux-overlay/stage"


@dataclass(frozen=True)
class Entry:
    """One leaf of the tree: a copied file, a text file or a symlink (exactly one is set)."""

    artifact: str
    stage: str
    relpath: str
    source: Path | None = None
    text: str | None = None
    link: str | None = None
    mode: int = 0o644
    edits: tuple[tuple[str, str], ...] = ()
    """Text replacements applied, in order, to a copied ``source`` as it is written."""


@dataclass(frozen=True)
class TreePlan:
    """Everything to write: artifact dir -> stage dirs, and the sorted leaf entries."""

    stages: dict[str, tuple[str, ...]]
    entries: tuple[Entry, ...]


class _Planner:
    """Collects stage dirs and entries; :meth:`plan` freezes them into a :class:`TreePlan`."""

    def __init__(self) -> None:
        self.stages: dict[str, set[str]] = {}
        self.entries: dict[tuple[str, str, str], Entry] = {}

    def stage(self, artifact: str, stage: str) -> None:
        self.stages.setdefault(artifact, set()).add(stage)

    def put(self, entry: Entry) -> None:
        key = (entry.artifact, entry.stage, entry.relpath)
        if key in self.entries:
            raise ToolError(f"sample tree plans {'/'.join(key)} twice")
        self.stage(entry.artifact, entry.stage)
        self.entries[key] = entry

    def text(self, artifact: str, stage: str, relpath: str, text: str) -> None:
        self.put(Entry(artifact, stage, relpath, text=text))

    def link(self, artifact: str, stage: str, relpath: str, target: str) -> None:
        self.put(Entry(artifact, stage, relpath, link=target))

    def add(
        self,
        artifact: str,
        stage: str,
        relpath: str,
        source: Path,
        edits: tuple[tuple[str, str], ...] = (),
    ) -> None:
        """Add a file, a symlink (kept as a link) or a whole directory, sorted; ``edits``
        apply to every regular file added."""
        if source.is_symlink():
            target = os.readlink(source)
            if os.path.isabs(target):
                raise ToolError(f"absolute symlink {target!r} in a Debian package", path=source)
            self.link(artifact, stage, relpath, target)
        elif source.is_dir():
            for child in sorted(source.iterdir()):
                self.add(artifact, stage, f"{relpath}/{child.name}", child, edits)
        else:
            mode = 0o755 if source.stat().st_mode & 0o100 else 0o644
            self.put(Entry(artifact, stage, relpath, source=source, mode=mode, edits=edits))

    def plan(self) -> TreePlan:
        stages = {a: tuple(sorted(s)) for a, s in sorted(self.stages.items())}
        return TreePlan(stages, tuple(self.entries[k] for k in sorted(self.entries)))


def _one(root: Path, pattern: str) -> Path:
    """The one path matching ``pattern``; its last part is literal and may be a dangling link."""
    parents, _, name = pattern.rpartition("/")
    found = [d / name for d in sorted(root.glob(parents)) if os.path.lexists(d / name)]
    if len(found) != 1:
        raise ToolError(f"expected one match for {pattern!r}, found {len(found)}", path=root)
    return found[0]


def _add_library(
    p: _Planner, artifact: str, stage: str, root: Path, soname: str, dev: Path | None = None
) -> None:
    """Copy the real library behind the package's ``soname`` link, plus that link and, from
    the ``-dev`` package ``dev``, the linker name (``libfoo.so``): TheRock's ``lib``
    artifacts carry all three (``libamdhip64.so.7.1.0`` + symlinks ``.so.7``, ``.so``)."""
    link = _one(root, f"usr/lib/*/{soname}")
    real = link.parent / os.readlink(link) if link.is_symlink() else link
    if real == link or real.is_symlink() or not real.is_file():
        raise ToolError(f"{soname} is not a symlink to a regular file", path=link)
    p.add(artifact, stage, f"lib/{real.name}", real)
    p.add(artifact, stage, f"lib/{soname}", link)
    if dev is not None:
        linker = soname[: soname.index(".so") + 3]
        p.add(artifact, stage, f"lib/{linker}", _one(dev, f"usr/lib/*/{linker}"))


_CLIMB = 'get_filename_component(_IMPORT_PREFIX "${_IMPORT_PREFIX}" PATH)\n'


def _cmake_edits(root: Path, config_dir: Path) -> tuple[tuple[str, str], ...]:
    """Edits that relocate a Debian CMake package dir to TheRock's ``lib/cmake/<pkg>/``.

    Debian installs configs under ``usr/lib/<triplet>/cmake/<pkg>/`` (four levels below the
    prefix, which they climb) or ``usr/lib/cmake/<pkg>/`` (three), and names libraries and
    data under ``lib/<triplet>/``; TheRock's configs sit three levels down and name ``lib/``.
    """
    edits: list[tuple[str, str]] = []
    if config_dir.parent.parent.name != "lib":  # usr/lib/<triplet>/cmake/<pkg>
        edits += [("/../../../../", "/../../../"), (_CLIMB * 4, _CLIMB * 3)]
    triplets = sorted(d.name for d in (root / "usr/lib").glob("*-linux-gnu*"))
    return (*edits, *((f"lib/{t}", "lib") for t in triplets))


def _add_cmake(p: _Planner, artifact: str, stage: str, root: Path, package: str) -> None:
    """Add the Debian package's CMake dir for ``package`` at ``lib/cmake/<package>``."""
    found = [
        d
        for pattern in (f"usr/lib/*/cmake/{package}", f"usr/lib/cmake/{package}")
        for d in sorted(root.glob(pattern))
        if d.is_dir()
    ]
    if len(found) != 1:
        raise ToolError(f"expected one CMake dir for {package!r}, found {len(found)}", path=root)
    p.add(artifact, stage, f"lib/cmake/{package}", found[0], _cmake_edits(root, found[0]))


def _dist_targets() -> str:
    bases = [a.split(":")[0] for a in (*INFO_ARCHS, *HIPSAMPLE_ARCHS)]
    return ";".join(dict.fromkeys(bases))


def _plan_base(p: _Planner, kpack_split: bool) -> None:
    manifest = {
        "flags": {"KPACK_SPLIT_ARTIFACTS": kpack_split},
        "generator": "sample_tree/make_sample_tree.py",
        "submodules": [],
        "the_rock_commit": "sample",
    }
    dist_info = {"dist_amdgpu_targets": _dist_targets()}
    for name, value in (("therock_manifest.json", manifest), ("dist_info.json", dist_info)):
        p.text(
            "base_lib_generic",
            BASE,
            f"share/therock/{name}",
            json.dumps(value, indent=2, sort_keys=True) + "\n",
        )


def _plan_core(
    p: _Planner, debs: dict[str, Path], products: dict[str, Path], edge_cases: bool
) -> None:
    hip, hip_dev = debs["libamdhip64-5"], debs["libamdhip64-dev"]
    _add_library(p, "core-hip_lib_generic", HIP, hip, "libamdhip64.so.5", hip_dev)
    if edge_cases:
        p.link("core-hip_lib_generic", HIP, "lib/libhip-dangling.so.1", "libnot-there.so.1")
    p.add("core-hip_lib_generic", HIP, "share/hip/version", hip_dev / "usr/share/hip/version")
    p.text("core-hip_lib_generic", HIP, "share/therock/NOTICE.txt", NOTICE)

    p.add("core-hip_dev_generic", HIP, "include/hip", hip_dev / "usr/include/hip")
    for package in ("hip", "hip-lang"):
        _add_cmake(p, "core-hip_dev_generic", HIP, hip_dev, package)

    # hipcc and hipconfig are Perl wrappers that exec their .pl, which loads hipvars.pm;
    # hip-config.cmake checks that bin/hipcc and bin/hipconfig exist.
    for name in ("hipcc", "hipcc.pl", "hipconfig", "hipconfig.pl", "hipvars.pm"):
        p.add("core-hip_run_generic", HIP, f"bin/{name}", debs["hipcc"] / "usr/bin" / name)
    p.add(
        "core-hip_run_generic",
        HIP,
        "libexec/hip-sample/hip-sample-info",
        products["hip-sample-info"],
    )
    p.link(
        "core-hip_run_generic", HIP, "bin/hip-sample-info", "../libexec/hip-sample/hip-sample-info"
    )

    _plan_runtime(p, debs)


def _plan_runtime(p: _Planner, debs: dict[str, Path]) -> None:
    """ROCr and comgr with their headers and CMake packages (hip-config.cmake finds
    hsa-runtime64, amd_comgr and AMDDeviceLibs), and the device-library bitcode."""
    hsa_dev = debs["libhsa-runtime-dev"]
    _add_library(
        p,
        "core-runtime_lib_generic",
        ROCR,
        debs["libhsa-runtime64-1"],
        "libhsa-runtime64.so.1",
        hsa_dev,
    )
    p.text("core-runtime_lib_generic", ROCR, "share/therock/NOTICE.txt", NOTICE)
    p.add("core-runtime_dev_generic", ROCR, "include/hsa", hsa_dev / "usr/include/hsa")
    _add_cmake(p, "core-runtime_dev_generic", ROCR, hsa_dev, "hsa-runtime64")

    comgr_dev, device_libs = debs["libamd-comgr-dev"], debs["rocm-device-libs"]
    _add_library(
        p, "amd-llvm_lib_generic", LLVM, debs["libamd-comgr2"], "libamd_comgr.so.2", comgr_dev
    )
    p.add("amd-llvm_lib_generic", LLVM, "lib/amdgcn", _one(device_libs, "usr/lib/*/amdgcn"))
    p.add(
        "amd-llvm_dev_generic", LLVM, "include/amd_comgr.h", comgr_dev / "usr/include/amd_comgr.h"
    )
    _add_cmake(p, "amd-llvm_dev_generic", LLVM, comgr_dev, "amd_comgr")
    _add_cmake(p, "amd-llvm_dev_generic", LLVM, device_libs, "AMDDeviceLibs")


def _plan_math(
    p: _Planner, debs: dict[str, Path], products: dict[str, Path], lib_target: str
) -> None:
    rand = f"rand_lib_{lib_target}"
    for stage, lib, dev, sub in (
        (ROCRAND, "librocrand1", "librocrand-dev", "rocrand"),
        (HIPRAND, "libhiprand1", "libhiprand-dev", "hiprand"),
    ):
        _add_library(p, rand, stage, debs[lib], f"lib{sub}.so.1", debs[dev])
        p.add("rand_dev_generic", stage, f"include/{sub}", debs[dev] / "usr/include" / sub)
        _add_cmake(p, "rand_dev_generic", stage, debs[dev], sub)

    prim = debs["librocprim-dev"]
    p.add("prim_dev_generic", ROCPRIM, "include/rocprim", prim / "usr/include/rocprim")
    _add_cmake(p, "prim_dev_generic", ROCPRIM, prim, "rocprim")
    p.add("prim_doc_generic", ROCPRIM, "share/doc", prim / "usr/share/doc")

    fft = f"fft_lib_{lib_target}"
    p.add(fft, ROCFFT, "lib/libhipsample.so.1.0", products["libhipsample.so.1.0"])
    p.link(fft, ROCFFT, "lib/libhipsample.so.1", "libhipsample.so.1.0")
    p.add(fft, ROCFFT, "lib/libhipsample_lld.so.1", products["libhipsample_lld.so.1"])
    p.link("fft_dev_generic", ROCFFT, "lib/libhipsample.so", "libhipsample.so.1")
    p.add("fft_dev_generic", ROCFFT, "include/hipsample/hipsample.h", SOURCES / "hipsample.h")
    p.add("fft_test_generic", ROCFFT, "bin/hipsample-test", products["hipsample-test"])


def _plan_profiler(p: _Planner, products: dict[str, Path]) -> None:
    lib = "rocprofiler-systems_lib_generic"
    for real, soname in (
        ("librocprof-sys.so.1.2.0", "librocprof-sys.so.1"),
        ("libprofiler-hub.so.0.1.0", "libprofiler-hub.so.0"),
    ):
        p.add(lib, PROFILER, f"lib/{real}", products[real])
        p.link(lib, PROFILER, f"lib/{soname}", real)
    for tool in ROCPROF_SYS_TOOLS:
        p.add("rocprofiler-systems_run_generic", PROFILER, f"bin/{tool}", products[tool])


def plan_tree(
    debs: dict[str, Path],
    products: dict[str, Path],
    *,
    family: str,
    kpack_split: bool,
    edge_cases: bool = False,
) -> TreePlan:
    """The whole tree as a value; reads only metadata (links, modes) of its inputs."""
    p = _Planner()
    _plan_base(p, kpack_split)
    _plan_core(p, debs, products, edge_cases)
    _plan_math(p, debs, products, "generic" if kpack_split else family)
    _plan_profiler(p, products)
    return p.plan()
