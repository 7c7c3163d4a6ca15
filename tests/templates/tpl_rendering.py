"""Render templates/ with the builder's own renderer (build_tools.render), on sample contexts."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from build_tools import render as builder_render
from kpack.generic_targets import generic_table
from kpack.owners import owner_table

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
MALICIOUS = "x'); import os; os.system('touch pwned') #"


def render(template: str, context: dict[str, Any]) -> str:
    """Render one template file (named relative to templates/) with the builder's renderer."""
    return builder_render.render_file(template, context).decode("utf-8")


def render_tree(subdir: str, context: dict[str, Any], dest: Path) -> None:
    """Render templates/<subdir> with the builder's renderer and write it below ``dest``."""
    for rel, (data, executable) in builder_render.render_tree(subdir, context).items():
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        if executable:
            out.chmod(0o755)


def _package(logical: str, dist: str, pure: str | None, required: bool) -> dict[str, Any]:
    return {
        "logical_name": logical,
        "dist_template": dist,
        "pure_template": pure,
        "required": required,
        "target_specific": "{target_family}" in dist,
    }


def _library(
    shortname: str, package: str, so: str, relpath: str = "lib", **kw: Any
) -> dict[str, Any]:
    return {
        "shortname": shortname,
        "package": package,
        "so_pattern": so,
        "dll_pattern": kw.get("dll"),
        "posix_relpath": relpath,
        "optional": kw.get("optional", False),
        "shipped": kw.get("shipped", True),
    }


def _script(name: str, package: str, relpath: str, **kw: Any) -> dict[str, Any]:
    return {
        "name": name,
        "package": package,
        "relpath": relpath,
        "func": kw.get("func", name.replace("-", "_").replace("+", "p")),
        "probe_args": kw.get("probe_args"),
        "expect": kw.get("expect"),
        "expand_devel": kw.get("expand_devel", True),
    }


LIBRARIES = [
    _library("amdhip64", "core", "libamdhip64.so*", dll="amdhip64*.dll"),
    _library("hiprtc", "core", "libhiprtc.so*", dll="hiprtc0*.dll"),
    _library("rocm_sysdeps_liblzma", "core", "librocm_sysdeps_liblzma.so*", "lib/rocm_sysdeps/lib"),
    _library("rocdxg", "core", "librocdxg.so*", optional=True, shipped=False),
    _library("hipblas", "libraries", "libhipblas.so*", dll="hipblas*.dll"),
    _library("rccl", "libraries", "librccl.so*"),
]

CONSOLE_SCRIPTS = [
    _script("hipconfig", "core", "bin/hipconfig", probe_args=["--version"], expect="HIP"),
    _script("amd-smi", "core", "bin/amd-smi", expand_devel=False),
    _script("amdclang++", "core", "lib/llvm/bin/amdclang++", func="amdclang_pp"),
    _script(
        "rocprof-sys-run",
        "profiler",
        "bin/rocprof-sys-run",
        probe_args=["--version"],
        expect="rocprof-sys-run",
    ),
]


def context(
    mode: str = "legacy",
    families: tuple[str, ...] = ("gfx94X-dcgpu",),
    *,
    version: str = "7.1.0",
    nonce: str = "",
    linux: tuple[str, ...] = (),
    windows: tuple[str, ...] = (),
    default: str | None = None,
    profiler: bool = True,
    devel: bool = True,
) -> dict[str, Any]:
    """A full template context for the meta package (``this_package_entry='meta'``)."""
    packages = [
        _package("meta", "rocm", "rocm_sdk", True),
        _package("core", "rocm-sdk-core", "rocm_sdk_core", True),
    ]
    if mode == "kpack":
        packages.append(_package("libraries", "rocm-sdk-libraries", "rocm_sdk_libraries", False))
        packages.append(_package("device", "rocm-sdk-device-{target_family}", None, False))
    else:
        packages.append(
            _package(
                "libraries",
                "rocm-sdk-libraries-{target_family}",
                "rocm_sdk_libraries_{target_family}",
                False,
            )
        )
    if devel:
        packages.append(_package("devel", "rocm-sdk-devel", "rocm_sdk_devel", False))
    if profiler:
        packages.append(_package("profiler", "rocm-profiler", "rocm_profiler", False))
    fams = sorted(families)
    return {
        "version": version,
        "nonce": nonce,
        "kpack_mode": mode == "kpack",
        "default_target_family": default if default is not None else (fams[0] if fams else None),
        "available_target_families": fams,
        "linux_target_families": sorted(linux),
        "windows_target_families": sorted(windows),
        "this_target_family": None,
        "this_package_entry": "meta",
        "libraries_py_package_name": None,
        "generic_targets": {g: list(m) for g, m in generic_table().members.items()},
        "package_owners": dict(owner_table().owners),
        "packages": packages,
        "libraries": copy.deepcopy(LIBRARIES),
        "console_scripts": copy.deepcopy(CONSOLE_SCRIPTS),
    }


SAMPLE_CONTEXTS: dict[str, dict[str, Any]] = {
    "legacy1": context("legacy", ("gfx94X-dcgpu",)),
    "legacy2": context("legacy", ("gfx94X-dcgpu", "gfx120X-all")),
    "kpack": context(
        "kpack",
        ("gfx942", "gfx1201", "gfx90a", "gfx942:xnack+"),
        nonce="_v7",
        linux=("gfx942", "gfx1201", "gfx90a"),
        windows=("gfx1201", "gfx942"),
    ),
    "kpack-generic": context(
        "kpack", ("gfx90a", "gfx942", "gfx9-4-generic", "gfx11-generic"), nonce="_v7"
    ),
    "malicious": context("legacy", (MALICIOUS,), nonce=MALICIOUS, version=MALICIOUS),
}
