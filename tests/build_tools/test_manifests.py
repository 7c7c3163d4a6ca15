from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from build_tools._data import data_dir
from build_tools.manifests import PackageKind, load_manifests
from kpack.errors import ManifestError


def test_shipped_manifests_load() -> None:
    m = load_manifests()
    assert {s.kind for s in m.packages.values()} == set(PackageKind)
    core = m.packages["core"]
    assert core.required and not core.target_specific
    assert "{target_family}" in m.packages["libraries"].dist
    assert any(lib.shortname == "amdhip64" for lib in m.libraries)


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "manifests"
    shutil.copytree(data_dir("manifests"), target)
    return target


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("    kind: core\n", "    kind: cor\n", "packages.core.kind"),
        (
            "        components: [lib, run]\n",
            "        components: [lib, runtime]\n",
            "packages.core.select[0].components",
        ),
        ("    required: true\n", "    required: yes-please\n", "packages.core.required"),
        (
            "    summary: ROCm SDK core runtime, compiler and tools\n",
            "    summary: x\n    sumary: typo\n",
            "packages.core.sumary",
        ),
        (
            "      - {package: core, subdir: lib/llvm/lib}\n",
            "      - {package: nonexistent, subdir: lib/llvm/lib}\n",
            "packages.core.rpath_deps[0]",
        ),
    ],
)
def test_invalid_packages_yaml_names_file_and_key(
    tmp_path: Path, old: str, new: str, key: str
) -> None:
    d = _copy(tmp_path)
    path = d / "packages.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(ManifestError) as info:
        load_manifests(d)
    assert str(path) in str(info.value) and key in str(info.value)


def test_all_problems_reported_together(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    path = d / "packages.yaml"
    text = path.read_text().replace("    kind: core\n", "    kind: nope\n")
    text = text.replace("    kind: devel\n", "    kind: also-nope\n")
    path.write_text(text)
    with pytest.raises(ManifestError) as info:
        load_manifests(d)
    assert len(info.value.problems) >= 2


def test_invalid_libraries_yaml(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    path = d / "libraries.yaml"
    path.write_text("libraries:\n  - {shortname: x, package: nowhere, so_pattern: 'libx.so*'}\n")
    with pytest.raises(ManifestError, match=r"libraries\[0\]\.package"):
        load_manifests(d)


def test_malformed_yaml(tmp_path: Path) -> None:
    d = _copy(tmp_path)
    (d / "packages.yaml").write_text("packages: [unclosed\n")
    with pytest.raises(ManifestError, match=r"packages\.yaml"):
        load_manifests(d)
