"""The in-tree PEP 517 backend of the rocm sdist, called as a frontend would."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path
from typing import Any

import pytest
from packaging.metadata import Metadata

from tests.templates.tpl_kit import rocm_sdk_tree
from tests.templates.tpl_rendering import SAMPLE_CONTEXTS, context

CALL_HOOK = r"""
import json, os, sys
sys.path.insert(0, os.path.abspath("_backend"))
import rocm_sdk_backend as backend
hook, args = sys.argv[1], sys.argv[2:]
kwargs = {"metadata_directory": args.pop()} if hook == "build_wheel" and len(args) == 2 else {}
print(json.dumps(getattr(backend, hook)(*args, **kwargs)))
"""


def call_hook(tree: Path, hook: str, *args: str, family: str | None = None) -> object:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_SDK_")}
    if family is not None:
        env["ROCM_SDK_TARGET_FAMILY"] = family
    env["SOURCE_DATE_EPOCH"] = "1700000000"
    proc = subprocess.run(
        [sys.executable, "-c", CALL_HOOK, hook, *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def build(
    tmp_path: Path, ctx: dict[str, Any], family: str | None = None
) -> tuple[Path, dict[str, bytes]]:
    tree = rocm_sdk_tree(ctx, tmp_path / "rocm")
    out = tmp_path / "out"
    name = call_hook(tree, "build_wheel", str(out), family=family)
    wheel = out / str(name)
    with zipfile.ZipFile(wheel) as zf:
        members = {info.filename: zf.read(info) for info in zf.infolist()}
    return wheel, members


def metadata_of(members: dict[str, bytes]) -> tuple[list[str], list[str], str]:
    name = next(n for n in members if n.endswith(".dist-info/METADATA"))
    text = members[name].decode()
    Metadata.from_email(text, validate=True)
    msg = HeaderParser().parsestr(text)
    return msg.get_all("Requires-Dist") or [], msg.get_all("Provides-Extra") or [], text


def test_hooks_need_nothing(tmp_path: Path) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    assert call_hook(tree, "get_requires_for_build_wheel") == []
    assert call_hook(tree, "get_requires_for_build_sdist") == []
    assert "requires = []" in (tree / "pyproject.toml").read_text()


def test_legacy_single_family(tmp_path: Path) -> None:
    wheel, members = build(tmp_path, SAMPLE_CONTEXTS["legacy1"])
    assert wheel.name == "rocm-7.1.0-py3-none-any.whl"
    requires, extras, text = metadata_of(members)
    assert extras == ["devel", "libraries", "profiler"]
    assert requires == [
        "rocm-sdk-core==7.1.0",
        'rocm-sdk-devel==7.1.0; extra == "devel"',
        'rocm-sdk-libraries-gfx94X-dcgpu==7.1.0; extra == "libraries"',
        'rocm-profiler==7.1.0; extra == "profiler"',
    ]
    assert "Summary: ROCm SDK for Python" in text and "The ROCm SDK meta package." in text
    assert "Dynamic" not in text and text.startswith("Metadata-Version: 2.2\n")


def test_legacy_two_families_env_selects(tmp_path: Path) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS["legacy2"], family="gfx94X-dcgpu")
    requires, extras, _ = metadata_of(members)
    assert 'rocm-sdk-libraries-gfx94X-dcgpu==7.1.0; extra == "libraries"' in requires
    assert not any(e.startswith("device") for e in extras)  # Q10


def test_kpack_default_leaves_device_empty(tmp_path: Path) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS["kpack"])
    requires, extras, _ = metadata_of(members)
    assert extras == [
        "devel",
        "device",
        "device-all",
        "device-gfx1201",
        "device-gfx90a",
        "device-gfx942",
        "libraries",
        "profiler",
    ]
    assert not any('extra == "device"' in r for r in requires)
    assert 'rocm-sdk-libraries==7.1.0; extra == "libraries"' in requires
    assert 'rocm-sdk-device-gfx1201==7.1.0; extra == "device-gfx1201"' in requires
    linux_only = 'rocm-sdk-device-gfx90a==7.1.0; (sys_platform == "linux") and extra == "%s"'
    assert linux_only % "device-gfx90a" in requires
    assert linux_only % "device-all" in requires
    assert sum('extra == "device-all"' in r for r in requires) == 3


def test_kpack_env_target_with_feature(tmp_path: Path) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS["kpack"], family="gfx942:xnack+")
    requires, _, _ = metadata_of(members)
    assert 'rocm-sdk-device-gfx942==7.1.0; extra == "device"' in requires


def test_kpack_single_target_has_per_target_extra(tmp_path: Path) -> None:
    ctx = context("kpack", ("gfx942",), profiler=False)
    _, members = build(tmp_path, ctx, family="gfx942")
    requires, extras, _ = metadata_of(members)
    assert extras == ["devel", "device", "device-all", "device-gfx942", "libraries"]
    assert 'rocm-sdk-device-gfx942==7.1.0; extra == "device-gfx942"' in requires
    assert not any("profiler" in r for r in requires)


def test_windows_only_target_marker(tmp_path: Path) -> None:
    ctx = context("kpack", ("gfx942", "gfx1151"), linux=("gfx942",), windows=("gfx1151",))
    _, members = build(tmp_path, ctx, family="gfx1151")
    requires, _, _ = metadata_of(members)
    assert (
        'rocm-sdk-device-gfx1151==7.1.0; (sys_platform == "win32") and extra == "device"'
        in requires
    )


def test_one_platform_list_gives_no_markers(tmp_path: Path) -> None:
    ctx = context("kpack", ("gfx942", "gfx1201"), linux=("gfx942", "gfx1201"))
    _, members = build(tmp_path, ctx, family="gfx942")
    requires, _, _ = metadata_of(members)
    assert not any("sys_platform" in r for r in requires)


def test_wheel_contents_and_record(tmp_path: Path) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS["kpack"])
    names = list(members)
    info = "rocm-7.1.0.dist-info/"
    assert names[-1] == info + "RECORD"
    assert names[:-5] == sorted(names[:-5]) and all(n.startswith("rocm_sdk/") for n in names[:-5])
    for required in (
        "rocm_sdk/__init__.py",
        "rocm_sdk/_dist_info.py",
        "rocm_sdk/tests/utils.py",
        "rocm_sdk/tests/__init__.py",
    ):
        assert required in names
    assert not any("__pycache__" in n for n in names)
    assert b"rocm-sdk = rocm_sdk.__main__:main" in members[info + "entry_points.txt"]
    assert b"Root-Is-Purelib: true" in members[info + "WHEEL"]
    rows = [r.split(",") for r in members[info + "RECORD"].decode().splitlines()]
    assert sorted(r[0] for r in rows) == sorted(names)
    for path, digest, size in rows:
        if path.endswith("RECORD"):
            continue
        data = members[path]
        expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={expected}" and int(size) == len(data)


def test_wheel_is_reproducible(tmp_path: Path) -> None:
    first, _ = build(tmp_path / "a", SAMPLE_CONTEXTS["kpack"])
    second, _ = build(tmp_path / "b", SAMPLE_CONTEXTS["kpack"])
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_prepare_metadata_then_build(tmp_path: Path) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy2"], tmp_path / "rocm")
    meta_dir = tmp_path / "meta"
    name = call_hook(tree, "prepare_metadata_for_build_wheel", str(meta_dir), family="gfx120X-all")
    assert name == "rocm-7.1.0.dist-info"
    prepared = (meta_dir / str(name) / "METADATA").read_text()
    assert "rocm-sdk-libraries-gfx120X-all" in prepared
    # A later build with another environment still uses the prepared metadata (PEP 517).
    wheel = call_hook(
        tree, "build_wheel", str(tmp_path / "out"), str(meta_dir), family="gfx94X-dcgpu"
    )
    with zipfile.ZipFile(tmp_path / "out" / str(wheel)) as zf:
        assert zf.read("rocm-7.1.0.dist-info/METADATA").decode() == prepared


def test_build_sdist_is_reproducible(tmp_path: Path) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    names = [call_hook(tree, "build_sdist", str(tmp_path / d)) for d in ("a", "b")]
    assert names == ["rocm-7.1.0.tar.gz"] * 2
    a, b = (tmp_path / d / "rocm-7.1.0.tar.gz" for d in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()
    with tarfile.open(a) as tar:
        members = tar.getnames()
    assert "rocm-7.1.0/PKG-INFO" in members and "rocm-7.1.0/pyproject.toml" in members
    assert "rocm-7.1.0/_backend/rocm_sdk_backend.py" in members


def test_unavailable_env_family_fails_the_build(tmp_path: Path) -> None:
    tree = rocm_sdk_tree(SAMPLE_CONTEXTS["legacy1"], tmp_path / "rocm")
    env = dict(os.environ, ROCM_SDK_TARGET_FAMILY="gfx000")
    proc = subprocess.run(
        [sys.executable, "-c", CALL_HOOK, "build_wheel", str(tmp_path / "o")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode != 0 and "gfx000" in proc.stderr


@pytest.mark.parametrize("name", sorted(set(SAMPLE_CONTEXTS) - {"malicious"}))
def test_every_sample_builds(tmp_path: Path, name: str) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS[name])
    metadata_of(members)


# --- LLVM generic targets ---------------------------------------------------------------


def _extra(requires: list[str], extra: str) -> list[str]:
    return sorted(r.split(";")[0] for r in requires if r.endswith(f'extra == "{extra}"'))


def test_device_extras_pull_the_generic_target(tmp_path: Path) -> None:
    """gfx942 has its own wheel and gfx9-4-generic's; gfx950 (a member of gfx9-4-generic,
    LLVM AMDGPUUsage) and gfx1101 (of gfx11-generic) only their generic's; gfx90a none."""
    _, members = build(tmp_path, SAMPLE_CONTEXTS["kpack-generic"], family="gfx942")
    requires, extras, _ = metadata_of(members)
    assert _extra(requires, "device") == [
        "rocm-sdk-device-gfx9-4-generic==7.1.0",
        "rocm-sdk-device-gfx942==7.1.0",
    ]
    assert _extra(requires, "device-gfx942") == _extra(requires, "device")
    assert _extra(requires, "device-gfx950") == ["rocm-sdk-device-gfx9-4-generic==7.1.0"]
    assert _extra(requires, "device-gfx1101") == ["rocm-sdk-device-gfx11-generic==7.1.0"]
    assert _extra(requires, "device-gfx1151") == ["rocm-sdk-device-gfx11-generic==7.1.0"]
    assert _extra(requires, "device-gfx90a") == ["rocm-sdk-device-gfx90a==7.1.0"]
    assert _extra(requires, "device-gfx9-4-generic") == ["rocm-sdk-device-gfx9-4-generic==7.1.0"]
    assert len(_extra(requires, "device-all")) == 4
    assert "device-gfx1030" not in extras  # gfx10-3-generic has no wheel in this set
    assert "device-gfx908" not in extras


def test_env_target_without_its_own_wheel_resolves_to_its_generic(tmp_path: Path) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS["kpack-generic"], family="gfx1101:xnack-")
    requires, _, _ = metadata_of(members)
    assert _extra(requires, "device") == ["rocm-sdk-device-gfx11-generic==7.1.0"]


def test_env_generic_target_needs_only_itself(tmp_path: Path) -> None:
    _, members = build(tmp_path, SAMPLE_CONTEXTS["kpack-generic"], family="gfx9-4-generic")
    requires, _, _ = metadata_of(members)
    assert _extra(requires, "device") == ["rocm-sdk-device-gfx9-4-generic==7.1.0"]


def test_generic_wheel_carries_the_platform_of_its_processors(tmp_path: Path) -> None:
    ctx = context(
        "kpack",
        ("gfx942", "gfx9-4-generic", "gfx1201"),
        linux=("gfx942", "gfx9-4-generic"),
        windows=("gfx1201",),
    )
    _, members = build(tmp_path, ctx, family="gfx942")
    requires, _, _ = metadata_of(members)
    assert (
        'rocm-sdk-device-gfx9-4-generic==7.1.0; (sys_platform == "linux") and '
        'extra == "device-gfx950"'
    ) in requires
