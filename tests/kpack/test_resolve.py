"""The runtime lookup model (kpack.md §7): marker reading, target order, archive search."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kpack.archive import KernelInput, write_kpack
from kpack.errors import ElfError, UsageError
from kpack.resolve import (
    KpackRef,
    candidate_archives,
    candidate_targets,
    check_variant_overlays,
    index_archive,
    kpack_disabled,
    read_kpack_ref,
    resolve_binary,
)
from kpack.transform import transform_binary
from tests.conftest import require
from tests.kpack.bundle_fixtures import fake_code_object, sample_bundle, section
from tests.kpack.transform_fixtures import synthetic

KERNEL = "math-libs/BLAS/rocBLAS/stage/lib/libsynth.so"
SEARCH = "../.kpack/blas_lib_@GFXARCH@.kpack"


# --- candidate targets ----------------------------------------------------------------------


def test_feature_subsets_in_descending_bitmask_order() -> None:
    assert candidate_targets("gfx942:sramecc+:xnack-") == (
        "gfx942:sramecc+:xnack-",
        "gfx942:sramecc+",
        "gfx942:xnack-",
        "gfx942",
    )
    assert candidate_targets("amdgcn-amd-amdhsa--gfx90a:xnack+") == ("gfx90a:xnack+", "gfx90a")
    assert candidate_targets("gfx1100") == ("gfx1100",)
    assert candidate_targets("gfx9-4-generic:sramecc+:xnack-")[-1] == "gfx9-4-generic"


def test_three_features_drop_from_the_right() -> None:
    assert candidate_targets("gfx9:a+:b-:c+") == (
        "gfx9:a+:b-:c+",
        "gfx9:a+:b-",
        "gfx9:a+:c+",
        "gfx9:a+",
        "gfx9:b-:c+",
        "gfx9:b-",
        "gfx9:c+",
        "gfx9",
    )


@pytest.mark.parametrize("isa", ["", ":xnack+", "gfx942:xnack", "gfx942::xnack+", "gfx942:+"])
def test_invalid_agent_isa(isa: str) -> None:
    with pytest.raises(UsageError, match="invalid agent ISA"):
        candidate_targets(isa)


@pytest.mark.parametrize(
    ("value", "disabled"),
    [("", False), ("0", False), ("0ff", False), ("1", True), ("yes", True), ("true", True)],
)
def test_rocm_kpack_disable(value: str, disabled: bool) -> None:
    assert kpack_disabled({"ROCM_KPACK_DISABLE": value}) is disabled
    assert kpack_disabled({}) is False


# --- candidate archives (no files needed) ---------------------------------------------------


def _ref(tmp_path: Path, *paths: str) -> KpackRef:
    return KpackRef(tmp_path / "lib" / "libx.so", KERNEL, paths, 0x1000, (0, 1))


def test_embedded_paths_expand_for_every_compatible_target(tmp_path: Path) -> None:
    ref = _ref(tmp_path, SEARCH, "/abs/@GFXARCH@.kpack", "fixed.kpack")
    got = candidate_archives(ref, ["gfx942:xnack+", "gfx9-4-generic:xnack+"], env={})
    lib = tmp_path / "lib"
    assert got == (
        lib / "../.kpack/blas_lib_gfx942:xnack+.kpack",
        lib / "../.kpack/blas_lib_gfx942.kpack",
        lib / "../.kpack/blas_lib_gfx9-4-generic:xnack+.kpack",
        lib / "../.kpack/blas_lib_gfx9-4-generic.kpack",
        Path("/abs/gfx942:xnack+.kpack"),
        Path("/abs/gfx942.kpack"),
        Path("/abs/gfx9-4-generic:xnack+.kpack"),
        Path("/abs/gfx9-4-generic.kpack"),
        lib / "fixed.kpack",
    )


def test_rocm_kpack_path_replaces_everything(tmp_path: Path) -> None:
    ref = _ref(tmp_path, SEARCH)
    env = {
        "ROCM_KPACK_PATH": "/a/x_@GFXARCH@.kpack::/b/y.kpack",
        "ROCM_KPACK_PATH_PREFIX": "/p/z.kpack",
    }
    assert candidate_archives(ref, ["gfx942"], env=env) == (
        Path("/a/x_@GFXARCH@.kpack"),  # used as given: no expansion
        Path("/b/y.kpack"),
    )


def test_rocm_kpack_path_prefix_comes_first(tmp_path: Path) -> None:
    ref = _ref(tmp_path, SEARCH)
    env = {"ROCM_KPACK_PATH": "", "ROCM_KPACK_PATH_PREFIX": "/p/one.kpack:/p/two_@GFXARCH@.kpack"}
    got = candidate_archives(ref, ["gfx90a:xnack-"], env=env)
    assert got[:3] == (
        Path("/p/one.kpack"),
        Path("/p/two_gfx90a:xnack-.kpack"),
        Path("/p/two_gfx90a.kpack"),
    )
    assert got[3:] == (
        tmp_path / "lib/../.kpack/blas_lib_gfx90a:xnack-.kpack",
        tmp_path / "lib/../.kpack/blas_lib_gfx90a.kpack",
    )


# --- a real transformed binary and real archives --------------------------------------------


@pytest.fixture(scope="module")
def transformed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gcc-built library with two wrappers (reversed order), transformed; installed under
    ``root/lib`` with its archives to go to ``root/.kpack``."""
    require(shutil.which("gcc") is not None, "gcc is not installed")
    tmp = tmp_path_factory.mktemp("resolve")
    content, starts = section(
        sample_bundle(["gfx942", "gfx942:xnack+"], size=700),
        sample_bundle(["gfx942", "gfx942:xnack+"], size=900),
    )
    src = synthetic(tmp / "build", "two", content, list(reversed(starts)))
    dest = tmp / "root" / "lib" / "libsynth.so"
    dest.parent.mkdir(parents=True)
    transform_binary(src, dest, kernel_name=KERNEL, search_paths=[SEARCH])
    return dest


def _archive(path: Path, target: str, keys: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    kernels = [KernelInput(k, target, fake_code_object(target, 300)) for k in keys]
    write_kpack(path, kernels, group_name="blas_lib", gfx_arch_family=target)
    return path


def test_read_kpack_ref(transformed: Path) -> None:
    ref = read_kpack_ref(transformed)
    assert ref is not None
    assert ref.kernel_name == KERNEL
    assert ref.search_paths == (SEARCH,)
    assert ref.co_indices == (0, 1)
    assert ref.notes == ()  # the pointer is written in place too
    with transformed.open("rb") as f:
        marker = ELFFile(f).get_section_by_name(".rocm_kpack_ref")
        assert marker is not None and ref.marker_addr == marker["sh_addr"]
    assert ref.key(1) == f"{KERNEL}#1"


def test_untransformed_files_have_no_ref(tmp_path: Path) -> None:
    require(shutil.which("gcc") is not None, "gcc is not installed")
    content, starts = section(sample_bundle(["gfx900"]))
    assert read_kpack_ref(synthetic(tmp_path, "plain", content, starts)) is None


def test_corrupt_marker_is_an_error(transformed: Path, tmp_path: Path) -> None:
    bad = tmp_path / "libbad.so"
    shutil.copy2(transformed, bad)
    with bad.open("rb") as f:
        marker = ELFFile(f).get_section_by_name(".rocm_kpack_ref")
        assert marker is not None
        offset = marker["sh_offset"]
    with bad.open("r+b") as f:
        f.seek(offset)
        f.write(b"\x91\xa1x")  # a one-element array, not a map
    with pytest.raises(ElfError, match="rocm_kpack_ref: expected a map"):
        read_kpack_ref(bad)


def _kpack_dir(transformed: Path, name: str) -> Path:
    root = transformed.parent.parent
    kdir = root / ".kpack"
    shutil.rmtree(kdir, ignore_errors=True)
    kdir.mkdir()
    return kdir


def test_arch_first_most_specific_target_wins(transformed: Path) -> None:
    kdir = _kpack_dir(transformed, "specific")
    keys = [f"{KERNEL}#0", f"{KERNEL}#1"]
    bare = _archive(kdir / "blas_lib_gfx942.kpack", "gfx942", keys)
    plus = _archive(kdir / "blas_lib_gfx942:xnack+.kpack", "gfx942:xnack+", keys)
    res = resolve_binary(transformed, ["gfx942:sramecc+:xnack+"], env={})
    assert [(lk.key, lk.target, lk.archive and lk.archive.name) for lk in res.lookups] == [
        (keys[0], "gfx942:xnack+", plus.name),
        (keys[1], "gfx942:xnack+", plus.name),
    ]
    assert not any(lk.older_runtime_fails for lk in res.lookups)
    minus = resolve_binary(transformed, ["gfx942:xnack-"], env={})
    assert {lk.target for lk in minus.lookups} == {"gfx942"}  # never the xnack+ archive
    assert {lk.archive and lk.archive.name for lk in minus.lookups} == {bare.name}
    assert check_variant_overlays([bare, plus]) == ()


def test_partial_overlay_falls_back_now_but_breaks_older_runtimes(transformed: Path) -> None:
    kdir = _kpack_dir(transformed, "overlay")
    bare = _archive(kdir / "blas_lib_gfx942.kpack", "gfx942", [f"{KERNEL}#0", f"{KERNEL}#1"])
    plus = _archive(kdir / "blas_lib_gfx942:xnack+.kpack", "gfx942:xnack+", [f"{KERNEL}#0"])
    res = resolve_binary(transformed, ["gfx942:xnack+"], env={})
    first, second = res.lookups
    assert (first.target, first.older_runtime_fails) == ("gfx942:xnack+", False)
    assert second.target == "gfx942"
    assert second.archive is not None and second.archive.resolve() == bare.resolve()
    assert second.older_runtime_fails
    assert res.archives[0].path.name == plus.name  # the expansion order: specific first
    gaps = check_variant_overlays([plus, bare])
    assert len(gaps) == 1
    gap = gaps[0]
    assert (gap.variant_target, gap.bare_target, gap.missing) == (
        "gfx942:xnack+",
        "gfx942",
        (f"{KERNEL}#1",),
    )
    assert gap.variant_archive.name == plus.name and gap.bare_archive.name == bare.name


def test_not_found_and_disable(transformed: Path) -> None:
    kdir = _kpack_dir(transformed, "missing")
    res = resolve_binary(transformed, ["gfx90a"], env={})
    assert res.archives == () and len(res.missing) == 2
    assert "no candidate archive exists" in res.missing[0].reason
    _archive(kdir / "blas_lib_gfx90a.kpack", "gfx90a", [f"{KERNEL}#0"])
    res = resolve_binary(transformed, ["gfx90a:xnack-"], env={})
    assert [lk.found for lk in res.lookups] == [True, False]
    assert (
        "no archive holds" in res.lookups[1].reason
        and "gfx90a:xnack-, gfx90a" in res.lookups[1].reason
    )
    off = resolve_binary(transformed, ["gfx90a"], env={"ROCM_KPACK_DISABLE": "1"})
    assert off.disabled and len(off.missing) == 2 and off.candidates == ()


def test_rocm_kpack_path_is_the_only_source(transformed: Path, tmp_path: Path) -> None:
    kdir = _kpack_dir(transformed, "env")
    _archive(kdir / "blas_lib_gfx942.kpack", "gfx942", [f"{KERNEL}#0", f"{KERNEL}#1"])
    elsewhere = _archive(tmp_path / "other.kpack", "gfx942", [f"{KERNEL}#0", f"{KERNEL}#1"])
    env = {"ROCM_KPACK_PATH": str(elsewhere)}
    res = resolve_binary(transformed, ["gfx942"], env=env)
    assert {lk.archive for lk in res.lookups} == {elsewhere}
    prefix = resolve_binary(transformed, ["gfx942"], env={"ROCM_KPACK_PATH_PREFIX": str(elsewhere)})
    assert {lk.archive for lk in prefix.lookups} == {elsewhere}
    # the same archive reached twice (a symlink) is opened once
    os.symlink(elsewhere, tmp_path / "alias.kpack")
    twice = resolve_binary(
        transformed, ["gfx942"], env={"ROCM_KPACK_PATH": f"{elsewhere}:{tmp_path / 'alias.kpack'}"}
    )
    assert len(twice.archives) == 1


def test_resolve_needs_a_transformed_binary(tmp_path: Path) -> None:
    require(shutil.which("gcc") is not None, "gcc is not installed")
    content, starts = section(sample_bundle(["gfx900"]))
    plain = synthetic(tmp_path, "plain", content, starts)
    with pytest.raises(UsageError, match="not a kpack-transformed binary"):
        resolve_binary(plain, ["gfx900"], env={})


def test_index_archive(tmp_path: Path) -> None:
    path = _archive(tmp_path / "a.kpack", "gfx1100", ["lib/x.so#0", "lib/x.so#3"])
    index = index_archive(path)
    assert index.gfx_arches == ("gfx1100",)
    assert index.has("lib/x.so#3", "gfx1100") and not index.has("lib/x.so#1", "gfx1100")


# --- LLVM generic targets -------------------------------------------------------------------


def test_the_generic_target_is_tried_after_the_isa(transformed: Path) -> None:
    """An agent ISA falls back to its generic target with the same features (kpack.md §7):
    #0 has gfx942 code, #1 only gfx9-4-generic code."""
    kdir = _kpack_dir(transformed, "generic")
    own = _archive(kdir / "blas_lib_gfx942.kpack", "gfx942", [f"{KERNEL}#0"])
    generic = _archive(
        kdir / "blas_lib_gfx9-4-generic.kpack", "gfx9-4-generic", [f"{KERNEL}#0", f"{KERNEL}#1"]
    )
    res = resolve_binary(transformed, ["gfx942:sramecc+:xnack-"], env={})
    assert res.arches == ("gfx942:sramecc+:xnack-", "gfx9-4-generic:sramecc+:xnack-")
    assert [(lk.target, lk.archive and lk.archive.name) for lk in res.lookups] == [
        ("gfx942", own.name),
        ("gfx9-4-generic", generic.name),
    ]
    alone = resolve_binary(transformed, ["gfx942"], env={}, with_generic=False)
    assert [lk.found for lk in alone.lookups] == [True, False]
    # gfx950 has no archive of its own: all from the generic; gfx90a has no generic at all
    assert not resolve_binary(transformed, ["gfx950"], env={}).missing
    assert len(resolve_binary(transformed, ["gfx90a"], env={}).missing) == 2
    # an explicitly given generic is not repeated
    twice = resolve_binary(transformed, ["gfx942", "gfx9-4-generic"], env={})
    assert twice.arches == ("gfx942", "gfx9-4-generic")


def test_verify_accepts_keys_that_only_the_generic_target_holds(transformed: Path) -> None:
    from kpack.errors import TransformError
    from kpack.verify import verify_binary

    kdir = _kpack_dir(transformed, "verify-generic")
    own = _archive(kdir / "blas_lib_gfx942.kpack", "gfx942", [f"{KERNEL}#0"])
    with pytest.raises(TransformError, match=r"1 wrapper key\(s\) missing for gfx942 or "
                       r"gfx9-4-generic: .*#1"):  # fmt: skip
        verify_binary(transformed, [own])
    generic = _archive(
        kdir / "blas_lib_gfx9-4-generic.kpack", "gfx9-4-generic", [f"{KERNEL}#0", f"{KERNEL}#1"]
    )
    report = verify_binary(transformed, [own, generic])
    assert report.targets == ("gfx942", "gfx9-4-generic")  # natural order
    assert report.kernels_checked == 3
    # the other way round is no fallback: a generic target has no generic of its own
    partial = _archive(kdir / "blas_lib_gfx9-4-generic.kpack", "gfx9-4-generic", [f"{KERNEL}#1"])
    full = _archive(kdir / "blas_lib_gfx942.kpack", "gfx942", [f"{KERNEL}#0", f"{KERNEL}#1"])
    with pytest.raises(TransformError, match="missing for gfx9-4-generic: "):
        verify_binary(transformed, [full, partial])
