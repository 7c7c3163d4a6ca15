"""Every console script TheRock declares exists in ours whenever its binary ships.

The names are TheRock's (``rocm-sdk-core`` and ``rocm-profiler`` ``setup.py``, Linux); ours
are data in ``manifests/packages.yaml``. End to end, the sample tree gains the binaries it
lacks (stub executables at TheRock's relpaths), the packages are installed into a fresh
venv, and every script is run: it must reach its own binary with its arguments. Without
the binaries the scripts are not declared at all.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from build_tools.manifests import PackageKind, load_manifests

from .conftest import VERSION, build_dist, install

THEROCK_CORE = [
    "amdclang", "amdclang++", "amdclang-cpp", "amdclang-cl", "amdflang", "amdlld", "hipcc",
    "hipconfig", "hipify-clang", "offload-arch", "roc-obj", "roc-obj-extract", "roc-obj-ls",
    "amd-smi", "hipify-perl", "rocm_agent_enumerator", "rocminfo", "rocm-smi", "roccoremerge",
    "rocgdb", "rocpd", "rocpd2csv", "rocpd2otf2", "rocpd2pftrace", "rocpd2summary", "rocprofv3",
    "rocprofv3-attach", "rocprofv3-avail",
]  # fmt: skip
THEROCK_PROFILER = [
    "rocprof-compute", "rocprof-sys-attach", "rocprof-sys-avail", "rocprof-sys-causal",
    "rocprof-sys-instrument", "rocprof-sys-run", "rocprof-sys-sample", "rocprof-sys-python",
]  # fmt: skip
# where the stubs go: an artifact each package selects
ARTIFACT = {PackageKind.CORE: "rocprofiler-sdk_run_generic",
            PackageKind.PROFILER: "rocprofiler-systems_run_generic"}  # fmt: skip
STAGE = "stubs/stage"


def _declared() -> dict[PackageKind, dict[str, str]]:
    out: dict[PackageKind, dict[str, str]] = {}
    for spec in load_manifests().packages.values():
        if spec.kind in ARTIFACT:
            out.setdefault(spec.kind, {}).update({s.name: s.relpath for s in spec.console_scripts})
    return out


def test_every_therock_script_is_declared() -> None:
    declared = _declared()
    assert set(THEROCK_CORE) <= set(declared[PackageKind.CORE])
    assert set(THEROCK_PROFILER) <= set(declared[PackageKind.PROFILER])


def _stub(path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    version = "GNU gdb (stub) 15.0" if name == "rocgdb" else f"{name} stub 1.0"
    path.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then echo "{version}"; exit 0; fi\n'
        f'echo "stub {name}:$*"\n'
    )
    path.chmod(0o755)


def _entry_points(dist: Path, prefix: str) -> set[str]:
    import zipfile

    wheel = next(dist.glob(f"{prefix}-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt")]
        text = zf.read(names[0]).decode() if names else ""
    return {line.split("=")[0].strip() for line in text.splitlines() if "=" in line}


def test_scripts_exist_exactly_when_their_binaries_ship(sample_tree: Path, tmp_path: Path) -> None:
    declared = _declared()
    plain = build_dist(sample_tree, tmp_path / "plain")
    assert "rocgdb" not in _entry_points(plain, "rocm_sdk_core")  # no binary, no script
    tree = tmp_path / "tree"
    shutil.copytree(sample_tree, tree, symlinks=True)
    added: list[str] = []
    for kind, scripts in declared.items():
        artifact = tree / ARTIFACT[kind]
        for name, relpath in sorted(scripts.items()):
            shipped = [p for p in tree.glob(f"*_*_generic/**/{relpath}") if p.is_file()]
            if shipped:
                continue
            _stub(artifact / STAGE / relpath, name)
            added.append(name)
        manifest = artifact / "artifact_manifest.txt"
        stages = set(manifest.read_text().split()) if manifest.exists() else set()
        manifest.write_text("\n".join(sorted({*stages, STAGE})) + "\n")
    assert "rocgdb" in added and "rocprofv3" in added
    dist = build_dist(tree, tmp_path / "out")
    core = _entry_points(dist, "rocm_sdk_core")
    profiler = _entry_points(dist, "rocm_profiler")
    assert set(THEROCK_CORE) <= core and set(THEROCK_PROFILER) <= profiler
    venv = tmp_path / "venv"
    install(dist, venv, f"rocm[libraries,profiler]=={VERSION}")
    results = {}
    for name in added:
        proc = subprocess.run(
            [str(venv / "bin" / name), "a b", "-x"], capture_output=True, text=True, check=False
        )
        results[name] = (proc.returncode, proc.stdout.strip())
    expected = {name: (0, f"stub {name}:a b -x") for name in added}
    assert results == expected, json.dumps(results, indent=1)[-3000:]
    version = subprocess.run(
        [str(venv / "bin/rocgdb"), "--version"], capture_output=True, text=True, check=True
    )
    assert "GNU gdb" in version.stdout
