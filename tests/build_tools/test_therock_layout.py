"""TheRock's wheel layout, as binaries built against TheRock's wheels see it.

jax-rocm10-pjrt 0.12.0's ``jax_plugins/xla_rocm10/xla_rocm_plugin.so`` reaches ROCm through
RUNPATH entries such as ``$ORIGIN/../../_rocm_sdk_core/lib``, ``…/_rocm_sdk_libraries/lib``
(kpack-split) and ``…/_rocm_sdk_libraries_gfx94X_dcgpu/lib`` (legacy, family case kept). A
probe library with that RUNPATH (read from the real plugin with pyelftools) and the plugin's
NEEDED entries that our set ships, placed where the plugin installs, must have every one of
them resolved by ld.so inside our installed set, at the directory TheRock's wheels hold it in.

The sample tree ships few of the plugin's libraries, so the tree gets small gcc-built
libraries under the plugin's other SONAMEs, each in the artifact and at the relpath TheRock
installs it (``librccl.so.1`` in ``rccl_lib``, ``librocm_sysdeps_numa.so.1`` under
``lib/rocm_sysdeps/lib`` of ``sysdeps_lib`` ...). ``libamdhip64.so.7`` is left out: the sample
set's HIP runtime is Debian's ``libamdhip64.so.5``, another ROCm version, not another place.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from ..conftest import require
from .conftest import VERSION, build_dist, install
from .treeutil import add_artifact

pytestmark = [pytest.mark.real, pytest.mark.compile, pytest.mark.slow]

LD_SO = Path("/lib64/ld-linux-x86-64.so.2")
PLUGIN = "jax_plugins/xla_rocm10/xla_rocm_plugin.so"
FAMILY = "gfx94X-dcgpu"


@dataclass(frozen=True)
class Home:
    """Where TheRock installs a library: its artifact (``{t}``: the artifact's target),
    its stage and its directory below the platform package, and which package it is in."""

    artifact: str
    stage: str
    subdir: str
    package: str  # 'core' or 'libraries'


#: The plugin's ROCm libraries and where TheRock's wheels hold them (its artifact
#: descriptors, ``py_packaging.py``'s ``rpath_dep(core, "lib/rocm_sysdeps/lib")`` and
#: ``_dist_info.py``'s ``LibraryEntry`` relpaths). ``None``: the sample tree has it.
HOMES: dict[str, Home | None] = {
    "libhsa-runtime64.so.1": None,
    "librocprofiler-sdk.so.1": Home("rocprofiler-sdk_lib_generic", "profiler/stage", "lib", "core"),
    "libamd_smi.so.27": Home("core-amdsmi_lib_generic", "core/amdsmi/stage", "lib", "core"),
    "librocm_sysdeps_drm.so.2": Home(
        "sysdeps_lib_generic", "sysdeps/stage", "lib/rocm_sysdeps/lib", "core"
    ),
    "librocm_sysdeps_drm_amdgpu.so.1": Home(
        "sysdeps_lib_generic", "sysdeps/stage", "lib/rocm_sysdeps/lib", "core"
    ),
    "librocm_sysdeps_numa.so.1": Home(
        "sysdeps_lib_generic", "sysdeps/stage", "lib/rocm_sysdeps/lib", "core"
    ),
    "librccl.so.1": Home("rccl_lib_{t}", "comm-libs/rccl/stage", "lib", "libraries"),
    "libhipblaslt.so.1": Home("blas_lib_{t}", "math-libs/BLAS/hipBLASLt/stage", "lib", "libraries"),
    "librocblas.so.5": Home("blas_lib_{t}", "math-libs/BLAS/rocBLAS/stage", "lib", "libraries"),
    "libhipfft.so.0": Home("fft_lib_{t}", "math-libs/hipFFT/stage", "lib", "libraries"),
    "libMIOpen.so.1": Home("miopen_lib_{t}", "ml-libs/MIOpen/stage", "lib", "libraries"),
}


@dataclass(frozen=True)
class Plugin:
    runpath: str
    needed: tuple[str, ...]


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Plugin:
    """The real plugin's RUNPATH and NEEDED, read with pyelftools."""
    from tests.pypi_inputs import JAX10_PJRT, pypi_wheel

    out = tmp_path_factory.mktemp("jax10")
    with zipfile.ZipFile(pypi_wheel(JAX10_PJRT)) as zf:
        path = Path(zf.extract(PLUGIN, out))
    with path.open("rb") as f:
        dynamic = ELFFile(f).get_section_by_name(".dynamic")
        assert isinstance(dynamic, DynamicSection)
        tags = [(t.entry.d_tag, t) for t in dynamic.iter_tags()]
        runpath = [t.runpath for tag, t in tags if tag == "DT_RUNPATH"]
        needed = tuple(t.needed for tag, t in tags if tag == "DT_NEEDED")
    path.unlink()
    assert len(runpath) == 1, runpath
    return Plugin(runpath[0], needed)


def test_the_plugin_reaches_rocm_as_the_issue_says(plugin: Plugin) -> None:
    entries = plugin.runpath.split(":")
    for entry in (
        "_rocm_sdk_core/lib",
        "_rocm_sdk_libraries/lib",
        f"_rocm_sdk_libraries_{FAMILY.replace('-', '_')}/lib",
    ):
        assert f"$ORIGIN/../../{entry}" in entries
    rocm = [
        n for n in plugin.needed if n in HOMES or n.startswith(("librocm_sysdeps_", "libamdhip64"))
    ]
    assert sorted(rocm) == sorted([*HOMES, "libamdhip64.so.7"])


def _gcc() -> str:
    gcc = shutil.which("gcc")
    require(gcc is not None, "gcc is not installed")
    assert gcc is not None
    return gcc


def _stub(gcc: str, soname: str, out: Path) -> bytes:
    """A small shared library named ``soname``."""
    src = out / f"{soname}.c"
    symbol = "".join(c if c.isalnum() else "_" for c in soname)
    src.write_text(f"int {symbol}_probe(void) {{ return 1; }}\n")
    lib = out / soname
    subprocess.run(
        [gcc, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(lib), str(src)], check=True
    )
    return lib.read_bytes()


def _tree(base: Path, out: Path, target: str) -> Path:
    """``base`` plus a stub library for every plugin SONAME the sample tree lacks."""
    tree = out / "artifacts"
    shutil.copytree(base, tree, symlinks=True)
    gcc, stubs = _gcc(), out / "stubs"
    stubs.mkdir()
    by_artifact: dict[tuple[str, str], dict[str, bytes | str]] = {}
    for soname, home in HOMES.items():
        if home is None:
            continue
        key = (home.artifact.format(t=target), home.stage)
        by_artifact.setdefault(key, {})[f"{home.subdir}/{soname}"] = _stub(gcc, soname, stubs)
    for (artifact, stage), files in by_artifact.items():
        manifest = tree / artifact / "artifact_manifest.txt"
        stages = manifest.read_text() if manifest.is_file() else ""  # fft_lib: a second stage
        add_artifact(tree, artifact, stage, files, manifest=stages + stage + "\n")
    return tree


def _probe(gcc: str, site: Path, plugin: Plugin, platform: dict[str, str]) -> Path:
    """A library with the plugin's RUNPATH, linked against our installed copies of the
    plugin's NEEDED libraries (in the plugin's order), where the plugin installs."""
    where = site / Path(PLUGIN).parent
    where.mkdir(parents=True)
    src = where / "probe.c"
    src.write_text("int probe(void) { return 0; }\n")
    libs = [site / platform[_package(n)] / _subdir(n) / n for n in plugin.needed if n in HOMES]
    probe = where / "probe.so"
    cmd = [gcc, "-shared", "-fPIC", "-o", str(probe), str(src), "-Wl,--enable-new-dtags",
           f"-Wl,-rpath,{plugin.runpath}", "-Wl,--no-as-needed", *map(str, libs)]  # fmt: skip
    subprocess.run(cmd, check=True)
    return probe


def _package(soname: str) -> str:
    home = HOMES[soname]
    return "core" if home is None else home.package


def _subdir(soname: str) -> str:
    home = HOMES[soname]
    return "lib" if home is None else home.subdir


def _resolved(probe: Path, preload: list[Path]) -> dict[str, str]:
    """SONAME -> path, as ld.so resolves the probe's dependencies (``--list``)."""
    cmd = [str(LD_SO), "--preload", " ".join(map(str, preload)), "--list", str(probe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = {}
    for line in proc.stdout.splitlines():
        name, arrow, rest = line.strip().partition(" => ")
        if arrow:
            out[name] = rest.rsplit(" (", 1)[0]
        elif name.startswith("/"):  # a preloaded object, by its path (named by its SONAME)
            path = name.rsplit(" (", 1)[0]
            out[Path(path).name] = path
    return out


@pytest.mark.parametrize("mode", ["kpack-split", "legacy"])
def test_a_binary_built_against_therocks_wheels_resolves_in_ours(
    plugin: Plugin, tmp_path: Path, mode: str
) -> None:
    require(LD_SO.is_file(), f"{LD_SO} is missing")
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    kpack = mode == "kpack-split"
    sample = make_sample_tree(tmp_path / "sample", cache_dir=None, family=FAMILY, kpack_split=kpack)
    tree = _tree(sample, tmp_path, "generic" if kpack else FAMILY)
    dist = build_dist(tree, tmp_path / "out")
    site = install(dist, tmp_path / "venv", f"rocm[libraries]=={VERSION}")
    libraries = (
        "_rocm_sdk_libraries" if kpack else f"_rocm_sdk_libraries_{FAMILY.replace('-', '_')}"
    )
    platform = {"core": "_rocm_sdk_core", "libraries": libraries}
    for soname in HOMES:  # TheRock's directories, by the same names
        assert (site / platform[_package(soname)] / _subdir(soname) / soname).is_file(), soname

    probe = _probe(_gcc(), site, plugin, platform)
    # librocm_sysdeps_* sit in _rocm_sdk_core/lib/rocm_sysdeps/lib, as in TheRock's core
    # wheel (checked above). The plugin's RUNPATH names that directory for neither set: the
    # plugin finds them by SONAME once the ROCm runtime, whose own RUNPATH reaches them, has
    # loaded them; ld.so --preload stands for that here
    sysdeps = sorted((site / "_rocm_sdk_core/lib/rocm_sysdeps/lib").glob("librocm_sysdeps_*"))
    assert len(sysdeps) == 3, sysdeps
    resolved = _resolved(probe, sysdeps)
    for soname in (n for n in plugin.needed if n in HOMES):
        expected = site / platform[_package(soname)] / _subdir(soname) / soname
        assert soname in resolved, (soname, resolved)
        assert Path(resolved[soname]).resolve() == expected.resolve(), (soname, resolved[soname])
    runpath = [e.replace("$ORIGIN", str(probe.parent)) for e in plugin.runpath.split(":")]
    direct = {Path(e).resolve() for e in runpath if Path(e).is_dir()}
    assert direct == {(site / platform[p] / "lib").resolve() for p in ("core", "libraries")}
