"""The wheel splitter on real ROCm wheels whose device code is not (only) in the package:
cyllama-rocm 0.7.0 in auditwheel's layout (the HIP library in ``cyllama_rocm.libs/``) and
jax-rocm10-pjrt 0.12.0 (ROCm 10.1, 27 targets up to gfx1250, ``Root-Is-Purelib: true``).

Each is split once, with no ``--overlay-root``; the outputs are checked with the
independent readers of :mod:`tests.pypi_inputs` (pyelftools, ``zstandard``, ``struct``),
``readelf`` and the runtime's lookup.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile
from isal import isal_zlib

import kpack.wheelsplit as spw
from kpack.resolve import resolve_binary
from tests.kpack.bundle_fixtures import read_kpack_by_spec
from tests.kpack.wheel_fixtures import raw_member
from tests.pypi_inputs import (
    CYLLAMA,
    JAX10_PJRT,
    Digests,
    PypiWheel,
    fat_members,
    fat_sections,
    independent_code_objects,
    pypi_wheel,
)

pytestmark = pytest.mark.real

HIP_LIB = "cyllama_rocm.libs/libggml-hip-1f7b8bcc.so"
PLUGIN = "jax_plugins/xla_rocm10/xla_rocm_plugin.so"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


class Split:
    """One real wheel, split with no overlay root, its outputs extracted into ``tree``."""

    def __init__(self, spec: PypiWheel, base: Path) -> None:
        self.wheel = pypi_wheel(spec)
        self.fat = fat_members(self.wheel, base / "input")
        self.out, self.tree = base / "out", base / "tree"
        records = _Records()
        logging.getLogger("kpack").addHandler(records)
        try:
            options = spw.SplitOptions(None, "amd-device", (), jobs=2)
            self.report = spw.split_wheel(self.wheel, self.out, options)
        finally:
            logging.getLogger("kpack").removeHandler(records)
        self.warnings = records.messages
        self.archived: Digests = collections.Counter()
        for whl in sorted(self.out.glob("*.whl")):
            with zipfile.ZipFile(whl) as zf:
                zf.extractall(self.tree)
        for archive in (p for p in self.tree.rglob("*.kpack") if p.is_file()):
            for (_key, target), data in read_kpack_by_spec(archive.read_bytes())[1].items():
                self.archived[(target, hashlib.sha256(data).hexdigest())] += 1

    def expected(self) -> Digests:
        return sum((independent_code_objects(so) for so in self.fat), collections.Counter())


@pytest.fixture(scope="module")
def cyllama(tmp_path_factory: pytest.TempPathFactory) -> Split:
    return Split(CYLLAMA, tmp_path_factory.mktemp("cyllama"))


@pytest.fixture(scope="module")
def jax10(tmp_path_factory: pytest.TempPathFactory) -> Split:
    return Split(JAX10_PJRT, tmp_path_factory.mktemp("jax10"))


def _sections(path: Path) -> list[tuple[str, str, int, int]]:
    with path.open("rb") as f:
        return [(s.name, s["sh_type"], s["sh_addr"], s["sh_size"])
                for s in ELFFile(f).iter_sections()]  # fmt: skip


def test_an_auditwheel_wheel_splits_with_no_overlay_root_and_no_fat_library_left(
    cyllama: Split,
) -> None:
    assert [so.relative_to(so.parents[1]).as_posix() for so in cyllama.fat] == [HIP_LIB]
    assert [row.arcname for row in cyllama.report.libraries] == [HIP_LIB]
    assert fat_sections(cyllama.tree) == []
    expected = cyllama.expected()
    assert sum(expected.values()) == 420
    assert cyllama.archived == expected
    assert sorted(p.relative_to(cyllama.tree).as_posix()
                  for p in cyllama.tree.rglob("*.kpack") if p.is_file()) == [
        f"cyllama_rocm.libs/.kpack/cyllama_rocm_{t}.kpack" for t in ("gfx1100", "gfx90a", "gfx942")
    ]  # fmt: skip
    host = cyllama.tree / HIP_LIB
    for arch in ("gfx90a", "gfx942", "gfx1100"):
        assert not resolve_binary(host, [arch], env={}).missing, arch
    assert resolve_binary(host, ["gfx1030"], env={}).missing  # the check can fail


def test_every_original_section_of_the_auditwheel_library_stays_in_place(
    cyllama: Split,
) -> None:
    """Same index, name, address and size for every section (``.hip_fatbin`` keeps its
    address range but no bytes in the file; ``.shstrtab`` grows by the new name); only
    ``.rocm_kpack_ref`` is added, at the end."""
    before, after = _sections(cyllama.fat[0]), _sections(cyllama.tree / HIP_LIB)
    assert len(after) > len(before)
    for old, new in zip(before, after, strict=False):
        if old[0] == ".hip_fatbin":
            assert (new[0], new[1], new[2], new[3]) == (old[0], "SHT_NOBITS", old[2], old[3])
        elif old[0] == ".shstrtab":
            assert new[:3] == old[:3] and new[3] == old[3] + len(".rocm_kpack_ref\0")
        else:
            assert new == old, (old, new)
    assert [s[0] for s in after[len(before) :]] == [".rocm_kpack_ref"]
    proc = subprocess.run(["readelf", "-lSdW", str(cyllama.tree / HIP_LIB)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert proc.returncode == 0 and not proc.stderr, proc.stderr


def test_the_auditwheel_wheel_with_its_package_as_overlay_root_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The call that used to exit 0 with a fat 'host' wheel and one warning."""
    out = tmp_path / "out"
    code = spw.main(["--input", str(pypi_wheel(CYLLAMA)), "--output-dir", str(out),
                     "--device-package-prefix", "x", "--overlay-root", "cyllama/"])  # fmt: skip
    assert code == 1
    assert f"{HIP_LIB}: fat binary outside the overlay root cyllama/" in capsys.readouterr().err
    assert not out.exists()


def test_sizes_before_and_after(cyllama: Split) -> None:
    """60 MB in; the host wheel keeps well under half of it, the rest in three device
    wheels that hold the code objects compressed."""
    report = cyllama.report
    assert report.host_size * 2 < report.input_size
    assert sorted(row.key for row in report.device_wheels) == ["gfx1100", "gfx90a", "gfx942"]


def test_jax_rocm10_splits_into_27_device_wheels_up_to_gfx1250(jax10: Split) -> None:
    keys = sorted(row.key for row in jax10.report.device_wheels)
    assert len(keys) == 27 and "gfx1250" in keys
    expected = jax10.expected()
    assert sum(expected.values()) == 1215
    assert jax10.archived == expected
    assert fat_sections(jax10.tree) == []
    for arches in (["gfx1250"], ["gfx942:sramecc+:xnack-"], ["gfx900"]):
        assert not resolve_binary(jax10.tree / PLUGIN, arches, env={}).missing, arches


def test_jax_rocm10_keeps_root_is_purelib_and_warns_once(jax10: Split) -> None:
    """Its WHEEL says ``Root-Is-Purelib: true``: every one of the 28 outputs carries the
    input's WHEEL byte for byte (before: false in each, and one warning per output)."""
    with zipfile.ZipFile(jax10.wheel) as zf:
        wheel_info = zf.read("jax_rocm10_pjrt-0.12.0.dist-info/WHEEL")
    assert b"Root-Is-Purelib: true" in wheel_info
    outputs = sorted(jax10.out.glob("*.whl"))
    assert len(outputs) == 28
    for whl in outputs:
        with zipfile.ZipFile(whl) as zf:
            info = next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL"))
            assert zf.read(info) == wheel_info, whl.name
    assert len(jax10.warnings) == len(set(jax10.warnings)), jax10.warnings
    assert not any("Root-Is-Purelib" in w for w in jax10.warnings)


@pytest.mark.parametrize("which", ["cyllama", "jax10"])
def test_the_host_libraries_reuse_the_input_deflate_blocks(
    which: str, request: pytest.FixtureRequest
) -> None:
    """The edited library in the host wheel is the input's deflate stream spliced: two
    independent decoders give back its bytes, and stretches of the input's compressed bytes
    are found in it unchanged (nothing compressed anew could hold them)."""
    split: Split = request.getfixturevalue(which)
    name = HIP_LIB if which == "cyllama" else PLUGIN
    host = next(p for p in split.out.glob("*.whl") if not p.name.startswith("amd_device"))
    raw = raw_member(host, name)
    with zipfile.ZipFile(host) as z:
        content = z.read(name)  # zipfile checks the CRC
    assert zlib.decompress(raw, -15) == content
    inflater = isal_zlib.decompressobj(-15)
    assert inflater.decompress(raw) == content and inflater.eof and not inflater.unused_data
    # the first megabyte of the library (headers, symbols, relocations) is kept: its blocks,
    # past the patched headers, are copied with their bit offsets, so whole bytes match
    original = raw_member(split.wheel, name)
    samples = [original[i : i + 512] for i in range(256 << 10, 1 << 20, 4096)]
    found = sum(sample in raw[: 2 << 20] for sample in samples)
    assert found >= len(samples) // 2, (found, len(samples))
