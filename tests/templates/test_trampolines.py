"""Console-script trampolines of rocm-sdk-core and rocm-profiler (§17, U5, U6, Q8)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.templates.tpl_kit import (
    fake_install,
    platform_init,
    pure_package_files,
    rocm_sdk_tree,
    tar_bytes,
)
from tests.templates.tpl_rendering import context

VERSION = "7.1.0"
CTX = context("kpack", ("gfx942",), nonce="_v7", version=VERSION)
CORE, DEVEL, PROF, LIBS = (
    "_rocm_sdk_core_v7",
    "_rocm_sdk_devel_v7",
    "_rocm_profiler_v7",
    "_rocm_sdk_libraries_v7",
)
SH = "#!/bin/sh\n"
X = 0o755


def make_site(tmp_path: Path, devel: bool = True) -> Path:
    site = tmp_path / "site"
    rocm_sdk_tree(CTX, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    core = {
        **pure_package_files("core", "rocm_sdk_core", CTX, this_package_entry="core"),
        **platform_init(CORE),
        f"{CORE}/bin/hipconfig": (SH + 'echo "core hipconfig $*"\nexit 3\n').encode(),
        f"{CORE}/bin/amd-smi": (SH + 'echo "core amd-smi"\n').encode(),
    }
    fake_install(
        site, "rocm-sdk-core", VERSION, core, {f"{CORE}/bin/hipconfig": X, f"{CORE}/bin/amd-smi": X}
    )
    fake_install(site, "rocm-sdk-libraries", VERSION, platform_init(LIBS))
    if devel:
        members = [
            ("dir", DEVEL, None),
            ("file", f"{DEVEL}/__init__.py", b""),
            ("exe", f"{DEVEL}/bin/hipconfig", SH + 'echo "devel hipconfig $*"\n'),
            ("sym", f"{DEVEL}/bin/amd-smi", f"../../{CORE}/bin/amd-smi"),
        ]
        fake_install(
            site,
            "rocm-sdk-devel",
            VERSION,
            {
                **pure_package_files("devel", "rocm_sdk_devel", CTX, this_package_entry="devel"),
                "rocm_sdk_devel/_devel.tar": tar_bytes(members),
            },
        )
    return site


def run_script(
    site: Path,
    func: str,
    *args: str,
    package: str = "rocm_sdk_core",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    code = f"import sys\nfrom {package}._cli import {func}\n{func}()"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_SDK_")}
    full_env.update(env or {}, PYTHONPATH=str(site))
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_core_without_devel(tmp_path: Path) -> None:
    site = make_site(tmp_path, devel=False)
    proc = run_script(site, "hipconfig", "--version", "a b")
    assert proc.stdout == "core hipconfig --version a b\n"
    assert proc.returncode == 3  # exit status passes through


def test_devel_is_expanded_first(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    proc = run_script(site, "hipconfig", "--rocmpath")
    assert proc.stdout == "devel hipconfig --rocmpath\n", proc.stderr
    assert (site / DEVEL / "__init__.py").is_file()
    assert not (site / "rocm_sdk_devel" / "_devel.tar").exists()


def test_no_expansion_when_disabled(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    proc = run_script(site, "hipconfig", env={"ROCM_SDK_NO_DEVEL_EXPANSION": "1"})
    assert proc.stdout == "core hipconfig \n"
    assert not (site / DEVEL).exists()


def test_info_tools_never_expand(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    assert run_script(site, "amd_smi").stdout == "core amd-smi\n"
    assert not (site / DEVEL).exists()
    run_script(site, "hipconfig")
    proc = run_script(site, "amd_smi")  # now runs from the expanded devel tree
    assert proc.stdout == "core amd-smi\n" and proc.returncode == 0


def test_device_links_reconciled_before_running_from_devel(tmp_path: Path) -> None:
    """U6: a device wheel installed after the expansion is linked by the next tool run."""
    site = make_site(tmp_path)
    run_script(site, "hipconfig")
    kpack = ".kpack/blas_lib_gfx942.kpack"
    link = {"relpath": kpack, "target": f"../../{LIBS}/{kpack}"}
    manifest = {"version": VERSION, "links": [link]}
    fake_install(
        site,
        "rocm-sdk-device-gfx942",
        VERSION,
        {
            f"{LIBS}/{kpack}": b"code",
            f"{LIBS}/.devel_links/gfx942.json": json.dumps(manifest).encode(),
        },
    )
    run_script(site, "hipconfig")
    assert (site / DEVEL / kpack).samefile(site / LIBS / kpack)


def test_unknown_function_and_missing_tool(tmp_path: Path) -> None:
    site = make_site(tmp_path, devel=False)
    proc = run_script(site, "no_such_tool")
    assert proc.returncode != 0 and "ImportError" in proc.stderr
    (site / CORE / "bin" / "amd-smi").unlink()
    proc = run_script(site, "amd_smi")
    assert proc.returncode == 127 and "cannot run" in proc.stderr


def make_profiler_site(tmp_path: Path) -> Path:
    site = make_site(tmp_path, devel=False)
    tool = SH + 'echo "LD=$LD_LIBRARY_PATH"\necho "PY=$PYTHONPATH"\necho "ARGS=$*"\n'
    fake_install(
        site,
        "rocm-profiler",
        VERSION,
        {
            **pure_package_files("profiler", "rocm_profiler", CTX, this_package_entry="profiler"),
            **platform_init(PROF),
            f"{PROF}/bin/rocprof-sys-run": tool.encode(),
            f"{PROF}/lib/librocprof-sys-dl.so.1": b"dl",
            f"{PROF}/lib/libprofiler-hub.so.0": b"hub",
            f"{PROF}/lib/librocprof-sys.so": b"shipped unversioned",
            f"{PROF}/lib/librocprof-sys.so.1": b"versioned",
        },
        {f"{PROF}/bin/rocprof-sys-run": X},
    )
    return site


def profiler_record(site: Path) -> list[str]:
    with open(site / f"rocm_profiler-{VERSION}.dist-info" / "RECORD", newline="") as f:
        return [row[0] for row in csv.reader(f) if row]


def test_profiler_environment_and_aliases(tmp_path: Path) -> None:
    site = make_profiler_site(tmp_path)
    env = {"LD_LIBRARY_PATH": "/old/lib", "PYTHONPATH": "ignored"}
    proc = run_script(site, "rocprof_sys_run", "--version", package="rocm_profiler", env=env)
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split("=", 1) for line in proc.stdout.splitlines())
    assert lines["LD"] == os.pathsep.join(
        [str(site / PROF / "lib"), str(site / CORE / "lib/rocm_sysdeps/lib"), "/old/lib"]
    )
    assert lines["PY"].split(os.pathsep)[0] == str(site / PROF / "libexec/rocprofiler-compute")
    assert lines["ARGS"] == "--version"
    lib = site / PROF / "lib"
    assert os.readlink(lib / "librocprof-sys-dl.so") == "librocprof-sys-dl.so.1"
    assert os.readlink(lib / "libprofiler-hub.so") == "libprofiler-hub.so.0"
    assert not (lib / "librocprof-sys.so").is_symlink()  # a shipped file stays
    rows = profiler_record(site)
    assert rows.count(f"{PROF}/lib/librocprof-sys-dl.so") == 1
    assert rows.count(f"{PROF}/lib/libprofiler-hub.so") == 1
    assert f"{PROF}/lib/librocprof-sys.so" in rows
    before = (site / f"rocm_profiler-{VERSION}.dist-info" / "RECORD").read_bytes()
    run_script(site, "rocprof_sys_run", package="rocm_profiler")
    assert (site / f"rocm_profiler-{VERSION}.dist-info" / "RECORD").read_bytes() == before


@pytest.mark.parametrize("damage", ["alias", "record"])
def test_profiler_aliases_repaired(tmp_path: Path, damage: str) -> None:
    site = make_profiler_site(tmp_path)
    run_script(site, "rocprof_sys_run", package="rocm_profiler")
    alias = site / PROF / "lib" / "librocprof-sys-dl.so"
    if damage == "alias":
        alias.unlink()
    else:
        record = site / f"rocm_profiler-{VERSION}.dist-info" / "RECORD"
        rows = [r for r in record.read_text().splitlines() if "librocprof-sys-dl.so," not in r]
        record.write_text("\n".join(rows) + "\n")
    run_script(site, "rocprof_sys_run", package="rocm_profiler")
    assert alias.is_symlink()
    assert profiler_record(site).count(f"{PROF}/lib/librocprof-sys-dl.so") == 1
