"""The kpack integrity self-test (rocm_sdk._kpack, _kpack_archive, _kpack_installed,
_kpack_report, _kpack_check, tests/kpack_test.py).

Fixtures come from our engine as the oracle: Debian's librocrand transformed with
``kpack.transform.transform_binary``, its code objects extracted with
``extract_kernels`` and written per target with ``kpack.archive.write_kpack`` (both
schemes), laid out like an installed site-packages with fake device wheels.
"""

from __future__ import annotations

import re
import shutil
import struct
import unittest
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kpack import resolve
from kpack.archive import KernelInput, KpackArchive, Scheme, write_kpack
from kpack.transform import extract_kernels, transform_binary
from tests.templates.tpl_kit import fake_install, importable, rocm_sdk_tree
from tests.templates.tpl_rendering import context

pytestmark = pytest.mark.real

VERSION = "7.1.0"
CTX = context("kpack", ("gfx90a", "gfx1030"), version=VERSION)
LIBS = "_rocm_sdk_libraries"
NAME = "math-libs/rocRAND/stage/lib/librocrand.so.1.1"
PATTERN = "../.kpack/rand_lib_@GFXARCH@.kpack"
BINARY = f"{LIBS}/lib/librocrand.so.1"
KEY = f"{NAME}#0"
# installed device wheels (base target -> the targets of its archives); rocrand also has
# gfx803, gfx906:xnack- and gfx908:xnack- code, whose device wheels are not installed
INSTALLED = {
    "gfx90a": ("gfx90a:xnack+", "gfx90a:xnack-"),
    "gfx1030": ("gfx1030",),
    "gfx900": ("gfx900:xnack-",),
}
SCHEMES: tuple[Scheme, ...] = ("zstd-per-kernel", "none")


@dataclass(frozen=True)
class Inputs:
    original: Path
    transformed: Path
    archives: dict[tuple[str, str], Path]  # (scheme, target) -> archive
    rocm_src: Path


@pytest.fixture(scope="module")
def inputs(
    debian_package: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory
) -> Inputs:
    original = debian_package("librocrand1") / "usr/lib/x86_64-linux-gnu/librocrand.so.1.1"
    tmp = tmp_path_factory.mktemp("kpack_inputs")
    transformed = tmp / "librocrand.so.1"
    transform_binary(original, transformed, kernel_name=NAME, search_paths=[PATTERN])
    kernels = extract_kernels(original)
    archives: dict[tuple[str, str], Path] = {}
    for scheme in SCHEMES:
        for kernel in kernels:
            path = tmp / scheme / f"rand_lib_{kernel.target}.kpack"
            path.parent.mkdir(exist_ok=True)
            item = KernelInput(f"{NAME}#{kernel.index}", kernel.target, kernel.read())
            write_kpack(
                path, [item], group_name="rand_lib", gfx_arch_family=kernel.target, scheme=scheme
            )
            archives[(scheme, kernel.target)] = path
    rocm_sdk_tree(CTX, tmp / "rocm")
    return Inputs(original, transformed, archives, tmp / "rocm" / "src")


@dataclass
class Site:
    path: Path
    scheme: str
    mods: Any  # the rendered rocm_sdk._kpack_check module
    installed: Any  # the rendered rocm_sdk._kpack_installed module

    def kpack(self, target: str) -> Path:
        return self.path / LIBS / ".kpack" / f"rand_lib_{target}.kpack"

    def check(self, decompress: bool = True) -> tuple[Any, list[Any]]:
        from rocm_sdk._kpack_archive import zstandard_decompress

        check = self.mods
        wheels = self.installed.find_device_wheels(self.path)
        with check.KpackChecker(self.path, zstandard_decompress() if decompress else None) as c:
            return c.check(wheels, [self.path / LIBS]), c.check_device_archives(wheels)


@contextmanager
def installed(inputs: Inputs, tmp_path: Path, scheme: str) -> Iterator[Site]:
    """rocm_sdk, the libraries package with librocrand, and the INSTALLED device wheels."""
    root = tmp_path / "site"
    shutil.copytree(inputs.rocm_src / "rocm_sdk", root / "rocm_sdk")
    fake_install(root, "rocm-sdk-libraries", VERSION, {f"{LIBS}/__init__.py": b""})
    (root / LIBS / "lib").mkdir()
    shutil.copy2(inputs.transformed, root / BINARY)
    for base, targets in INSTALLED.items():
        files = {
            f"{LIBS}/.kpack/rand_lib_{t}.kpack": inputs.archives[(scheme, t)].read_bytes()
            for t in targets
        }
        fake_install(root, f"rocm-sdk-device-{base}", VERSION, files)
    with importable(root):
        from rocm_sdk import _kpack_check, _kpack_installed

        yield Site(root, scheme, _kpack_check, _kpack_installed)


@pytest.fixture(params=SCHEMES)
def site(request: pytest.FixtureRequest, inputs: Inputs, tmp_path: Path) -> Iterator[Site]:
    with installed(inputs, tmp_path, request.param) as value:
        yield value


@pytest.fixture
def zstd_site(inputs: Inputs, tmp_path: Path) -> Iterator[Site]:
    with installed(inputs, tmp_path, "zstd-per-kernel") as value:
        yield value


@pytest.fixture
def none_site(inputs: Inputs, tmp_path: Path) -> Iterator[Site]:
    with installed(inputs, tmp_path, "none") as value:
        yield value


@pytest.fixture(scope="module")
def runtime(inputs: Inputs) -> SimpleNamespace:
    """The rendered rocm_sdk._elf, _kpack, _kpack_archive, _kpack_report and _zstd_frame
    modules (usable after the purge)."""
    with importable(inputs.rocm_src):
        from rocm_sdk import _elf, _kpack, _kpack_archive, _kpack_report, _zstd_frame

        return SimpleNamespace(
            elf=_elf, kpack=_kpack, archive=_kpack_archive, report=_kpack_report, zf=_zstd_frame
        )


def failures_text(failures: list[Any]) -> str:
    from rocm_sdk._kpack_report import format_failures

    return "\n".join(format_failures(failures))


# --- archive surgery -----------------------------------------------------------------------


def rewrite(
    path: Path,
    toc_edit: Callable[[dict[str, Any]], None] | None = None,
    payload_edit: Callable[[list[bytes]], None] | None = None,
) -> None:
    """Re-serialise an archive after editing its TOC and/or its per-ordinal payloads."""
    raw = path.read_bytes()
    _magic, _version, toc_offset = struct.unpack_from("<4sIQ", raw)
    toc = msgpack.unpackb(raw[toc_offset:], raw=False)
    payloads: list[bytes] = []
    if toc["compression_scheme"] == "none":
        payloads = [raw[b["offset"] : b["offset"] + b["size"]] for b in toc["blobs"]]
    else:
        pos = toc["zstd_offset"]
        (count,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        for _ in range(count):
            (size,) = struct.unpack_from("<I", raw, pos)
            payloads.append(raw[pos + 4 : pos + 4 + size])
            pos += 4 + size
    if payload_edit:
        payload_edit(payloads)
    if toc["compression_scheme"] == "none":
        blob, offset, blobs = b"", 64, []
        for data in payloads:
            blobs.append({"offset": offset + len(blob), "size": len(data)})
            blob += data
        toc["blobs"] = blobs
    else:
        blob = struct.pack("<I", len(payloads))
        blob += b"".join(struct.pack("<I", len(d)) + d for d in payloads)
        toc["zstd_offset"], toc["zstd_size"] = 64, len(blob)
    if toc_edit:
        toc_edit(toc)
    header = struct.pack("<4sIQ", b"KPAK", 1, 64 + len(blob)).ljust(64, b"\0")
    path.write_bytes(header + blob + msgpack.packb(toc, use_bin_type=True))


# --- the check on an installed layout ------------------------------------------------------


@pytest.mark.parametrize("decompress", [True, False], ids=["zstandard", "frame-walk"])
def test_good_layout_passes(site: Site, decompress: bool) -> None:
    report, archive_failures = site.check(decompress)
    assert report.failures == [], report.message()
    assert archive_failures == []
    assert report.binaries == [BINARY]
    assert report.targets == (
        "gfx1030",
        "gfx900",
        "gfx900:xnack-",
        "gfx90a",
        "gfx90a:xnack+",
        "gfx90a:xnack-",
    )
    assert report.lookups == 6


def test_uninstalled_targets_are_not_required(site: Site) -> None:
    """rocrand has gfx803/gfx906/gfx908 code too; without their device wheels that is fine,
    even with a stray gfx803 archive lying around."""
    shutil.copy2(site.kpack("gfx1030"), site.kpack("gfx803"))
    report, _ = site.check()
    assert "gfx803" not in report.targets and report.failures == []


def test_missing_archive_for_an_installed_target(site: Site) -> None:
    # Without any archive for a target, the binary looks as if it had no code for that
    # target (a fat binary built without it); the device wheel's RECORD says otherwise.
    site.kpack("gfx1030").unlink()
    report, archive_failures = site.check()
    assert report.failures == []
    assert "listed in the RECORD of rocm_sdk_device_gfx1030-7.1.0 but missing" in failures_text(
        archive_failures
    )


def test_target_the_binary_was_never_built_for_is_not_a_failure(site: Site, inputs: Inputs) -> None:
    """A device wheel for a target the library has no code for (another library's wheel)."""
    fake_install(site.path, "rocm-sdk-device-gfx803", VERSION, {})
    report, archive_failures = site.check()
    assert report.failures == [] and archive_failures == []


def test_missing_variant_archive(site: Site) -> None:
    site.kpack("gfx90a:xnack+").unlink()
    report, archive_failures = site.check()
    assert report.failures == []
    assert len(archive_failures) == 1


def test_archive_lacking_the_key(site: Site) -> None:
    def rename(toc: dict[str, Any]) -> None:
        toc["toc"] = {f"{NAME}#1": toc["toc"][KEY]}

    rewrite(site.kpack("gfx900:xnack-"), toc_edit=rename)
    report, archive_failures = site.check()
    assert archive_failures == []
    text = report.message()
    # reported once, for the variant whose archive lacks the key
    assert [(f.target, f.co_index) for f in report.failures] == [("gfx900:xnack-", 0)]
    assert (
        f"{BINARY}: gfx900:xnack-: co_index 0: {NAME}#<co_index> is missing from "
        f"{LIBS}/.kpack/rand_lib_gfx900:xnack-.kpack (targets ['gfx900:xnack-', 'gfx900'])"
    ) in text


@pytest.mark.parametrize("decompress", [True, False], ids=["zstandard", "frame-walk"])
@pytest.mark.parametrize("damage", ["truncate", "content-size", "block-type"])
def test_broken_zstd_frame(
    zstd_site: Site, runtime: SimpleNamespace, decompress: bool, damage: str
) -> None:
    def edit(payloads: list[bytes]) -> None:
        frame = bytearray(payloads[0])
        at = runtime.zf.parse_frame_header(bytes(frame)).header_size
        if damage == "truncate":
            del frame[-1000:]
        elif damage == "content-size":
            frame[at - 1] ^= 0x01  # the last byte of the header is Frame_Content_Size's
        else:
            frame[at] |= 0x06  # the first block becomes the reserved block type 3
        payloads[0] = bytes(frame)

    rewrite(zstd_site.kpack("gfx1030"), payload_edit=edit)
    report, _ = zstd_site.check(decompress)
    text = report.message()
    assert [(f.target, f.co_index) for f in report.failures] == [("gfx1030", 0)], text
    assert f"{LIBS}/.kpack/rand_lib_gfx1030.kpack: toc['{KEY}']['gfx1030'] (ordinal 0)" in text
    if damage == "content-size":
        assert "zstd frame declares" in text
    elif decompress:
        assert "is broken: zstandard:" in text
    else:
        assert "is broken: " in text and "zstandard" not in text


def test_none_scheme_blob_of_the_wrong_size(none_site: Site) -> None:
    rewrite(none_site.kpack("gfx1030"), payload_edit=lambda p: p.__setitem__(0, p[0][:-1]))
    report, _ = none_site.check()
    assert "blob is 1642415 bytes, original_size is 1642416" in report.message()


def test_original_size_differs(site: Site) -> None:
    def grow(toc: dict[str, Any]) -> None:
        toc["toc"][KEY]["gfx90a:xnack-"]["original_size"] += 1

    rewrite(site.kpack("gfx90a:xnack-"), toc_edit=grow)
    report, _ = site.check()
    text = report.message()
    assert [(f.target, f.co_index) for f in report.failures] == [("gfx90a:xnack-", 0)]
    if site.scheme == "none":
        assert "blob is 1716776 bytes, original_size is 1716777" in text
    else:
        assert "zstd frame declares 1716776 bytes, original_size is 1716777" in text


def test_gfx_arches_not_matching_the_file_name(site: Site) -> None:
    plus, minus = site.kpack("gfx90a:xnack+"), site.kpack("gfx90a:xnack-")
    shutil.copy2(minus, plus)
    report, archive_failures = site.check()
    assert (
        "gfx_arches ['gfx90a:xnack-'] do not match the file name's target 'gfx90a:xnack+'"
    ) in failures_text(archive_failures)
    text = report.message()
    assert [(f.target, f.co_index) for f in report.failures] == [("gfx90a:xnack+", 0)]
    assert "no archive lists any of ['gfx90a:xnack+', 'gfx90a'] in gfx_arches" in text


def test_toc_target_missing_from_gfx_arches(site: Site) -> None:
    def add(toc: dict[str, Any]) -> None:
        toc["toc"][f"{NAME}#9"] = {"gfx1100": dict(toc["toc"][KEY]["gfx1030"])}

    rewrite(site.kpack("gfx1030"), toc_edit=add)
    report, archive_failures = site.check()
    assert report.failures == []
    assert (
        "TOC targets ['gfx1100'] are missing from gfx_arches (the runtime never finds them)"
        in failures_text(archive_failures)
    )


def test_unreadable_archive(site: Site) -> None:
    site.kpack("gfx1030").write_bytes(b"KPAK" + b"\x02\0\0\0" + bytes(100))
    report, archive_failures = site.check()
    assert "unsupported format version 2" in failures_text(archive_failures)
    assert "rand_lib_gfx1030.kpack is unreadable (unsupported format version 2)" in report.message()


def test_device_wheel_shipping_another_base(site: Site, inputs: Inputs) -> None:
    fake_install(
        site.path,
        "rocm-sdk-device-gfx803",
        VERSION,
        {
            f"{LIBS}/.kpack/rand_lib_gfx906:xnack-.kpack": inputs.archives[
                (site.scheme, "gfx906:xnack-")
            ].read_bytes(),
        },
    )
    report, archive_failures = site.check()
    assert (
        "shipped by rocm_sdk_device_gfx803-7.1.0, whose target is gfx803, not gfx906"
        in failures_text(archive_failures)
    )
    # gfx803 is installed now; rocrand has no gfx803 archive, so no gfx803 code: not a failure
    assert report.failures == []


def test_half_transformed_binary_is_reported(
    site: Site, inputs: Inputs, runtime: SimpleNamespace
) -> None:
    shutil.copy2(inputs.original, site.path / LIBS / "lib" / "librocrand_plain.so.1")
    broken = site.path / LIBS / "lib" / "libbroken.so"
    segment = next(
        s for s in runtime.elf.read_sections(inputs.transformed) if s.name == ".hipFatBinSegment"
    )
    data = bytearray(inputs.transformed.read_bytes())
    assert data[segment.offset : segment.offset + 4] == b"HIPK"
    data[segment.offset : segment.offset + 4] = b"FPIH"  # HIPF (0x48495046) on disk
    broken.write_bytes(bytes(data))
    report, _ = site.check()
    assert report.binaries == [BINARY]  # the untransformed copy is not kpack's business
    assert (
        f"{LIBS}/lib/libbroken.so: .hipFatBinSegment: 1 of 1 wrapper(s) are not HIPK "
        "although .rocm_kpack_ref exists" in report.message()
    )


def test_corrupt_marker_is_reported(site: Site, inputs: Inputs, runtime: SimpleNamespace) -> None:
    marker = next(
        s for s in runtime.elf.read_sections(inputs.transformed) if s.name == ".rocm_kpack_ref"
    )
    data = bytearray(inputs.transformed.read_bytes())
    data[marker.offset : marker.offset + 3] = b"\x91\xa1x"  # a one-element array, not a map
    (site.path / BINARY).write_bytes(bytes(data))
    report, _ = site.check()
    assert report.binaries == []
    assert f"{BINARY}: .rocm_kpack_ref: expected a map, got list" in report.message()


@pytest.mark.parametrize(
    ("tail", "value", "message"),
    [
        (b"\0\0\0", {"kpack_search_paths": [PATTERN], "kernel_name": NAME}, None),
        (b"\0x", {"kpack_search_paths": [PATTERN], "kernel_name": NAME}, "2 stray byte(s)"),
        (b"", {"kpack_search_paths": [], "kernel_name": NAME}, "non-empty list of strings"),
        (b"", {"kpack_search_paths": [PATTERN]}, "kernel_name must be a string, got None"),
        (b"", {"kpack_search_paths": [PATTERN], "kernel_name": b"x"}, "must be a string"),
    ],
)
def test_decode_marker(
    runtime: SimpleNamespace, tail: bytes, value: dict[str, Any], message: str | None
) -> None:
    raw = msgpack.packb(value, use_bin_type=True) + tail
    if message is None:
        assert runtime.kpack.decode_marker(raw) == (NAME, (PATTERN,))
    else:
        with pytest.raises(runtime.kpack.KpackError, match=re.escape(message)):
            runtime.kpack.decode_marker(raw)


# --- our readers against the engine's ------------------------------------------------------


def test_marker_and_wrappers_match_the_engine(inputs: Inputs, tmp_path: Path) -> None:
    with importable(inputs.rocm_src):
        from rocm_sdk import _kpack

        ours = _kpack.read_kpack_ref(inputs.transformed)
        theirs = resolve.read_kpack_ref(inputs.transformed)
        assert ours is not None and theirs is not None
        assert (
            (ours.kernel_name, ours.search_paths, ours.co_indices)
            == (theirs.kernel_name, theirs.search_paths, theirs.co_indices)
            == (NAME, (PATTERN,), (0,))
        )
        assert _kpack.read_kpack_ref(inputs.original) is None
        assert resolve.read_kpack_ref(inputs.original) is None
        (tmp_path / "text").write_text("not ELF")
        assert _kpack.read_kpack_ref(tmp_path / "text") is None


@pytest.mark.parametrize("scheme", SCHEMES)
def test_archive_reader_matches_the_engine(inputs: Inputs, scheme: str) -> None:
    path = inputs.archives[(scheme, "gfx90a:xnack+")]
    with importable(inputs.rocm_src):
        from rocm_sdk._kpack_archive import KpackArchive as Ours
        from rocm_sdk._kpack_archive import zstandard_decompress

        with Ours.open(path) as ours, KpackArchive.open(path) as theirs:
            assert ours.gfx_arches == theirs.gfx_arches == ("gfx90a:xnack+",)
            assert ours.scheme == theirs.scheme == scheme
            assert sorted(ours.entries) == theirs.keys()
            for key, entry in ours.entries.items():
                other = theirs.entry(*key)
                assert (entry.ordinal, entry.original_size, entry.offset, entry.size) == (
                    other.ordinal,
                    other.original_size,
                    other.offset,
                    other.size,
                )
                assert ours.entry_problem(entry, None) is None
                assert ours.entry_problem(entry, zstandard_decompress()) is None
                assert entry.original_size == len(theirs.read(*key))


@pytest.fixture(scope="module")
def small_archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Two-target, three-kernel archives of compressible fake code objects, per scheme."""
    tmp = tmp_path_factory.mktemp("small")
    kernels = [
        KernelInput(f"lib/x.so#{i}", t, (t.encode() + bytes([i])) * (300 + 200 * i))
        for i in range(2)
        for t in ("gfx942", "gfx942:xnack+")
    ]
    out: dict[str, bytes] = {}
    for scheme in SCHEMES:
        write_kpack(tmp / scheme, kernels, group_name="g", gfx_arch_family="gfx942", scheme=scheme)
        out[scheme] = (tmp / scheme).read_bytes()
    return out


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(SCHEMES), st.integers(min_value=0), st.integers(0, 255), st.booleans())
def test_damaged_archives_raise_only_our_error(
    runtime: SimpleNamespace,
    small_archives: dict[str, bytes],
    tmp_path_factory: pytest.TempPathFactory,
    scheme: str,
    where: int,
    byte: int,
    truncate: bool,
) -> None:
    data = bytearray(small_archives[scheme])
    if truncate:
        del data[where % len(data) :]
    else:
        data[where % len(data)] = byte
    path = tmp_path_factory.getbasetemp() / "damaged.kpack"
    path.write_bytes(bytes(data))
    try:
        archive = runtime.archive.KpackArchive.open(path)
    except runtime.kpack.KpackError:
        return
    with archive:
        for entry in archive.entries.values():
            for decompress in (None, runtime.archive.zstandard_decompress()):
                problem = archive.entry_problem(entry, decompress)
                assert problem is None or isinstance(problem, str)


@given(
    st.lists(
        st.sampled_from(["xnack+", "xnack-", "sramecc+", "sramecc-", "tgsplit+"]),
        max_size=3,
        unique=True,
    ),
    st.sampled_from(["gfx942", "gfx90a", "gfx9-4-generic", "amdgcn-amd-amdhsa--gfx1100"]),
)
def test_candidate_targets_match_the_engine(
    runtime: SimpleNamespace, features: list[str], base: str
) -> None:
    isa = ":".join([base, *features])
    assert runtime.kpack.candidate_targets(isa) == resolve.candidate_targets(isa)


def test_failures_are_grouped_by_co_index_ranges(runtime: SimpleNamespace) -> None:
    failure = runtime.report.Failure
    failures = [failure("lib/x.so", "gfx942", i, "missing") for i in (7, 0, 1, 2, 5, 6, 9)]
    failures.append(failure("lib/x.so", None, None, "bad marker"))
    assert runtime.report.format_failures(failures) == [
        "  lib/x.so: gfx942: co_index 0-2,5-7,9: missing",
        "  lib/x.so: bad marker",
    ]


# --- wiring into rocm-sdk test -------------------------------------------------------------


def _run_selftest(site: Site) -> unittest.TestResult:
    from rocm_sdk import tests
    from rocm_sdk.tests import kpack_test

    assert "kpack_test" in tests.MODULES
    suite = unittest.defaultTestLoader.loadTestsFromModule(kpack_test)
    result = unittest.TestResult()
    suite.run(result)
    return result


def test_selftest_passes_on_the_good_layout(site: Site) -> None:
    result = _run_selftest(site)
    assert result.wasSuccessful(), result.failures + result.errors
    assert result.testsRun == 2 and not result.skipped


def test_selftest_reports_every_problem_in_one_failure(site: Site) -> None:
    site.kpack("gfx1030").unlink()
    rewrite(site.kpack("gfx900:xnack-"), toc_edit=lambda t: t["toc"].clear())
    result = _run_selftest(site)
    failed = {test.id().rsplit(".", 1)[1]: text for test, text in result.failures}
    assert set(failed) == {
        "testDeviceArchivesMatchTheirNames",
        "testKernelsFoundForInstalledTargets",
    }
    text = failed["testKernelsFoundForInstalledTargets"]
    assert "1 kpack problem(s) in 1 transformed binaries" in text
    assert f"{BINARY}: gfx900:xnack-: co_index 0: {NAME}#<co_index> is missing" in text
    assert (
        "listed in the RECORD of rocm_sdk_device_gfx1030-7.1.0 but missing"
        in failed["testDeviceArchivesMatchTheirNames"]
    )


def test_selftest_skips_without_device_wheels(site: Site, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hint names a command that changes the outcome: 'rocm[device]' installs nothing
    where no GPU is visible, so a target is named then."""
    for dist_info in site.path.glob("rocm_sdk_device_*.dist-info"):
        shutil.rmtree(dist_info)
    monkeypatch.setenv("ROCM_BOOTSTRAP_DISABLE_DETECTION", "1")
    result = _run_selftest(site)
    assert result.wasSuccessful()
    assert [reason for _test, reason in result.skipped] == [
        "no rocm-sdk-device-* wheel is installed, so no device code to check; no GPU is "
        "visible, so 'rocm[device]' installs none: pip install 'rocm[device-gfx1030]' (this "
        "build has gfx1030, gfx90a)"
    ]
    monkeypatch.delenv("ROCM_BOOTSTRAP_DISABLE_DETECTION")
    monkeypatch.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", "gfx90a")
    result = _run_selftest(site)
    assert [reason for _test, reason in result.skipped] == [
        "no rocm-sdk-device-* wheel is installed, so no device code to check; "
        "pip install 'rocm[device]'"
    ]


def test_a_processor_falls_back_to_its_generic_target(zstd_site: Site, inputs: Inputs) -> None:
    """gfx942's device wheel has no rocrand archive; gfx9-4-generic's has (rocrand's gfx1030
    code object, relabeled: the check compares bytes and sizes, not ISAs). The gfx942 lookup
    goes to the generic archive, as the runtime's does, so damage there fails both."""
    from rocm_sdk import _dist_info
    from rocm_sdk._kpack_archive import zstandard_decompress

    site = zstd_site
    data = next(k for k in extract_kernels(inputs.original) if k.target == "gfx1030").read()
    generic = site.kpack("gfx9-4-generic")
    write_kpack(generic, [KernelInput(KEY, "gfx9-4-generic", data)], group_name="rand_lib",
                gfx_arch_family="gfx9-4-generic")  # fmt: skip
    fake_install(site.path, "rocm-sdk-device-gfx942", VERSION, {})
    fake_install(site.path, "rocm-sdk-device-gfx9-4-generic", VERSION, {
        f"{LIBS}/.kpack/rand_lib_gfx9-4-generic.kpack": generic.read_bytes()})  # fmt: skip

    def check(generic_of: Any) -> Any:
        wheels = site.installed.find_device_wheels(site.path)
        with site.mods.KpackChecker(site.path, zstandard_decompress(), generic_of) as c:
            return c.check(wheels, [site.path / LIBS])

    report = check(_dist_info.generic_target)
    assert report.failures == [], report.message()
    assert {"gfx942", "gfx9-4-generic"} <= set(report.targets)

    def shrink(toc: dict[str, Any]) -> None:
        for entry in toc["toc"].values():
            for info in entry.values():
                info["original_size"] -= 1

    rewrite(generic, toc_edit=shrink)
    with_fallback = {f.target for f in check(_dist_info.generic_target).failures}
    assert with_fallback == {"gfx942", "gfx9-4-generic"}
    assert {f.target for f in check(None).failures} == {"gfx9-4-generic"}


# --- Windows: PE host binaries -----------------------------------------------------------


def test_transformed_pe_dlls_are_checked_like_elf_libraries(inputs: Inputs, tmp_path: Path) -> None:
    """A kpack-transformed Windows DLL (linked by lld-link, transformed by our engine) in
    the libraries package's ``bin/``: the self-test finds it, reads its ``.kpackrf``
    marker as the engine does, resolves every wrapper, and fails on a damaged archive."""
    from kpack.transform import transform_pe
    from tests.kpack.bundle_fixtures import sample_bundle
    from tests.kpack.pe_fixtures import build_pe

    dll = build_pe(tmp_path / "build" / "fat.dll",
                   [sample_bundle(["gfx90a:xnack+", "gfx1030"], size=400),
                    sample_bundle(["gfx90a:xnack+", "gfx1030"], size=500)])  # fmt: skip
    root = tmp_path / "site"
    shutil.copytree(inputs.rocm_src / "rocm_sdk", root / "rocm_sdk")
    fake_install(root, "rocm-sdk-libraries", VERSION, {f"{LIBS}/__init__.py": b""})
    (root / LIBS / "bin").mkdir(parents=True)
    name = "math-libs/fat/stage/bin/fat.dll"
    plan = transform_pe(dll, root / LIBS / "bin/fat.dll", kernel_name=name,
                        search_paths=["../.kpack/fat_lib_@GFXARCH@.kpack"])  # fmt: skip
    by_target: dict[str, list[KernelInput]] = {}
    for kernel in plan.kernels:
        by_target.setdefault(kernel.target, []).append(
            KernelInput(f"{name}#{kernel.index}", kernel.target, kernel.read()))  # fmt: skip
    for base in ("gfx90a", "gfx1030"):
        files = {}
        for target, items in by_target.items():
            if target.split(":")[0] == base:
                path = tmp_path / f"fat_lib_{target}.kpack"
                write_kpack(path, items, group_name="fat_lib", gfx_arch_family=target)
                files[f"{LIBS}/.kpack/fat_lib_{target}.kpack"] = path.read_bytes()
        fake_install(root, f"rocm-sdk-device-{base}", VERSION, files)
    with importable(root):
        from rocm_sdk import _kpack, _kpack_check, _kpack_installed
        from rocm_sdk._kpack_archive import zstandard_decompress

        ref = _kpack.read_kpack_ref(root / LIBS / "bin/fat.dll")
        engine = resolve.read_kpack_ref(root / LIBS / "bin/fat.dll")
        assert ref is not None and engine is not None
        assert (ref.kernel_name, ref.search_paths, ref.co_indices) == (
            engine.kernel_name, engine.search_paths, engine.co_indices)  # fmt: skip
        wheels = _kpack_installed.find_device_wheels(root)
        with _kpack_check.KpackChecker(root, zstandard_decompress()) as checker:
            report = checker.check(wheels, [root / LIBS])
        assert report.binaries == [f"{LIBS}/bin/fat.dll"]
        assert report.failures == [] and report.lookups == 6, report.message()  # 2 x 3 targets
        damaged = root / LIBS / ".kpack" / "fat_lib_gfx1030.kpack"
        damaged.write_bytes(damaged.read_bytes()[:-40])
        with _kpack_check.KpackChecker(root, zstandard_decompress()) as checker:
            broken = checker.check(wheels, [root / LIBS])
        assert broken.failures and "fat_lib_gfx1030" in broken.message()


# --- device wheels of the wheel splitter (kpack split-wheel) -----------------------------


@pytest.fixture(scope="module")
def torch_split(inputs: Inputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fat torch wheel holding Debian's librocrand, split by our wheel splitter as TheRock
    splits torch: host wheel ``torch`` and ``amd-torch-device-<key>`` wheels."""
    from kpack import wheelsplit
    from tests.kpack.wheel_fixtures import make_fat_wheel

    tmp = tmp_path_factory.mktemp("torch")
    fat = make_fat_wheel(tmp / "fat", inputs.original)
    options = wheelsplit.SplitOptions(
        overlay_root="torch/", device_package_prefix="amd-torch-device"
    )
    wheelsplit.split_wheel(fat, tmp / "out", options)
    return tmp / "out"


def _unpack(wheel: Path, site: Path) -> None:
    """Install a wheel the way pip lays it out (its files and dist-info under ``site``)."""
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)


def _gpu_selftest(gpu: str, monkeypatch: pytest.MonkeyPatch) -> unittest.TestResult:
    from rocm_sdk.tests import gpu_test

    monkeypatch.setenv("ROCM_SDK_KFD_TOPOLOGY", "/nonexistent")
    monkeypatch.setenv("ROCM_BOOTSTRAP_FORCE_GFX_ARCH", gpu)
    test = gpu_test.GpuCoverageTest("testDeviceCodeForEveryDetectedGpu")
    result = unittest.TestResult()
    unittest.TestSuite([test]).run(result)  # a suite: the class's detection runs first
    return result


def test_splitter_device_wheels_are_found_and_checked(
    site: Site, torch_split: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch split into amd-torch-device-<key> wheels: find_device_wheels finds them (host,
    archives), and the GPU check covers torch's transformed library: gfx90a is served by
    amd-torch-device-gfx90a, gfx1030 (our rocrand code installed) fails naming torch's
    extra; a splitter wheel in another site dir (--target + PYTHONPATH) serves it too."""
    _unpack(torch_split / "torch-2.9.0-py3-none-linux_x86_64.whl", site.path)
    _unpack(torch_split / "amd_torch_device_gfx90a-2.9.0-py3-none-linux_x86_64.whl", site.path)
    found = {w.name: w for w in site.installed.find_device_wheels(site.path)}
    torch = found["amd_torch_device_gfx90a-2.9.0"]
    assert (torch.base, torch.host, torch.roots) == ("gfx90a", "torch", ("torch",))
    assert sorted(torch.archives) == [
        "torch/.kpack/torch_gfx90a:xnack+.kpack",
        "torch/.kpack/torch_gfx90a:xnack-.kpack",
    ]
    assert "rocm_sdk_device_gfx90a-7.1.0" in found  # ours still
    served = _gpu_selftest("gfx90a", monkeypatch)
    assert served.wasSuccessful() and not served.skipped, served.failures + served.skipped
    failed = _gpu_selftest("gfx1030", monkeypatch)
    text = failed.failures[0][1] if failed.failures else ""
    assert (
        "gfx1030 (found by forced) has no device code for 1 of 2 host libraries; fix: "
        "pip install 'torch[device-gfx1030]'" in text
    ), failed.failures + failed.errors
    assert "torch/lib/librocrand.so.1: gfx1030: " in text
    # the integrity self-test checks torch's archives as it checks ours
    result = _run_selftest(site)
    assert result.wasSuccessful(), result.failures + result.errors
    damaged = site.path / "torch" / ".kpack" / "torch_gfx90a:xnack+.kpack"
    damaged.write_bytes(damaged.read_bytes()[:-64])
    result = _run_selftest(site)
    assert "torch_gfx90a:xnack+" in "".join(t for _c, t in result.failures), result.failures
    # the splitter's gfx1030 wheel in another site dir on sys.path serves torch for gfx1030
    layer = tmp_path / "layer"
    _unpack(torch_split / "amd_torch_device_gfx1030-2.9.0-py3-none-linux_x86_64.whl", layer)
    monkeypatch.syspath_prepend(str(layer))
    layered = _gpu_selftest("gfx1030", monkeypatch)
    assert layered.wasSuccessful(), layered.failures + layered.errors
    from rocm_sdk._coverage import layered_archives

    assert layered_archives() == [layer / "torch" / ".kpack" / "torch_gfx1030.kpack"]
