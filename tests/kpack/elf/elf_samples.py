"""Tiny real binaries built once per session from ``data/``, plus the oracles tests use.

The oracles (``readelf``, ``patchelf``, a struct-level program-header reader, ``ld.so``
itself) are independent of the code under test; only :func:`check_oracles` also runs
:func:`kpack.elf.verify_elf`.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from kpack.elf import verify_elf

DATA = Path(__file__).parent / "data"
LLVM_BIN = Path("/usr/lib/llvm-15/bin")
LONG_RPATH = "/opt/" + "long-unused-directory-name/" * 6 + "lib"
SHORT_RPATH = "/o"
RUNPATH = "/opt/unused/runpath"
SHARED_RPATH = "/y/demo_answer"

PT_LOAD, PT_DYNAMIC, PT_INTERP, PT_PHDR = 1, 2, 3, 6
DT_NULL, DT_STRTAB, DT_STRSZ, DT_RPATH, DT_RUNPATH = 0, 5, 10, 15, 29

Phdr = tuple[int, int, int, int, int, int, int]  # type offset vaddr filesz memsz flags align


def run(cmd: list[str | os.PathLike[str]], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run ``cmd``; fail with its output if it exits non-zero."""
    proc = subprocess.run(
        [os.fspath(c) for c in cmd], capture_output=True, text=True, check=False, **kwargs
    )  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    return proc


def lld_env() -> dict[str, str] | None:
    """Environment in which ``gcc -fuse-ld=lld`` finds ``ld.lld``, or None."""
    if shutil.which("ld.lld"):
        return dict(os.environ)
    if (LLVM_BIN / "ld.lld").exists():
        return {**os.environ, "PATH": f"{LLVM_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return None


@dataclass
class Samples:
    root: Path
    libs: dict[str, Path] = field(default_factory=dict)  # variant -> libdemo.so.1
    exes: dict[str, Path] = field(default_factory=dict)  # variant -> demo executable
    throwers: dict[str, Path] = field(default_factory=dict)  # variant -> libthrower.so
    catcher: Path | None = None  # linked against libthrower.so
    user: Path | None = None  # libuser.so, NEEDED libdemo.so.1
    phdrs_tool: Path | None = None
    obj: Path | None = None  # demo.o (ET_REL)
    archive: Path | None = None  # libdemo.a
    lld: bool = False
    relr: bool = False


def _compile(
    out: Path, sources: list[Path], flags: list[str], env: dict[str, str] | None = None
) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    compiler = "g++" if any(s.suffix == ".cpp" for s in sources) else "gcc"
    run([compiler, "-O1", "-g0", *map(str, sources), *flags, "-o", str(out)], env=env)
    return out


def _supports(flag: str, root: Path) -> bool:
    probe = root / "probe"
    probe.mkdir(parents=True, exist_ok=True)
    try:
        _compile(probe / "p.so", [DATA / "demo.c"], ["-shared", "-fPIC", flag])
    except AssertionError:
        return False
    return True


def _gap_script(root: Path, name: str, flags: list[str], source: Path) -> Path | None:
    """GNU ld's default script with 0x100 free bytes after the headers (or None).

    Linking with it leaves room to grow the program-header table in place.
    """
    proc = subprocess.run(
        ["gcc", str(source), *flags, "-Wl,--verbose", "-o", os.devnull],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    parts = proc.stdout.split("=" * 50)
    if proc.returncode != 0 or len(parts) < 3 or "+ SIZEOF_HEADERS;" not in parts[1]:
        return None
    script = root / f"{name}.ld"
    body = parts[1].split("\n", 1)[1].rsplit("\n", 1)[0]
    script.write_text(body.replace("+ SIZEOF_HEADERS;", "+ SIZEOF_HEADERS + 0x100;"))
    return script


def build_samples(root: Path) -> Samples:
    """Compile every sample under ``root`` (gcc/g++ required; lld and RELR when present)."""
    s = Samples(root)
    shared = ["-shared", "-fPIC"]
    soname = ["-Wl,-soname,libdemo.so.1"]
    lib_variants: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "gnu": (soname, None),
        "gnu-nosoname": ([], None),
        "gnu-runpath": ([*soname, f"-Wl,--enable-new-dtags,-rpath,{RUNPATH}"], None),
        "gnu-rpath-long": ([*soname, f"-Wl,--disable-new-dtags,-rpath,{LONG_RPATH}"], None),
        "gnu-rpath-short": ([*soname, f"-Wl,--disable-new-dtags,-rpath,{SHORT_RPATH}"], None),
        # the RPATH string's tail is also the name of the exported symbol demo_answer
        "gnu-rpath-shared": ([*soname, f"-Wl,--disable-new-dtags,-rpath,{SHARED_RPATH}"], None),
    }
    root.mkdir(parents=True, exist_ok=True)
    gap = _gap_script(root, "shared-gap", shared, DATA / "demo.c")
    if gap is not None:
        lib_variants["gnu-gap"] = ([*soname, f"-Wl,-T,{gap}"], None)
    s.relr = _supports("-Wl,-z,pack-relative-relocs", root)
    if s.relr:
        lib_variants["gnu-relr"] = ([*soname, "-Wl,-z,pack-relative-relocs"], None)
    env = lld_env()
    s.lld = env is not None
    if env is not None:
        lld = ["-fuse-ld=lld", *soname]
        lib_variants["lld"] = (lld, env)
        lib_variants["lld-runpath"] = ([*lld, f"-Wl,--enable-new-dtags,-rpath,{RUNPATH}"], env)
        lib_variants["lld-relr"] = ([*lld, "-Wl,-z,pack-relative-relocs"], env)
    for name, (flags, lib_env) in lib_variants.items():
        out = root / "libs" / name / "libdemo.so.1"
        s.libs[name] = _compile(out, [DATA / "demo.c"], [*shared, *flags], lib_env)

    libdir = s.libs["gnu"].parent
    link = [f"-L{libdir}", "-l:libdemo.so.1"]
    exe_variants: dict[str, tuple[list[str], dict[str, str] | None]] = {
        "pie": (["-fPIE", "-pie"], None),
        "nopie": (["-fno-PIE", "-no-pie"], None),
        "pie-runpath": (["-fPIE", "-pie", "-Wl,--enable-new-dtags,-rpath,/opt/nowhere"], None),
    }
    pie_gap = _gap_script(root, "pie-gap", ["-fPIE", "-pie", *link], DATA / "main.c")
    if pie_gap is not None:
        exe_variants["pie-gap"] = (["-fPIE", "-pie", f"-Wl,-T,{pie_gap}"], None)
    if env is not None:
        exe_variants["lld-pie"] = (["-fPIE", "-pie", "-fuse-ld=lld"], env)
        exe_variants["lld-nopie"] = (["-fno-PIE", "-no-pie", "-fuse-ld=lld"], env)
    for name, (flags, exe_env) in exe_variants.items():
        s.exes[name] = _compile(
            root / "exes" / name / "demo", [DATA / "main.c"], [*flags, *link], exe_env
        )

    thrower_variants = {"gnu": ([], None)} | ({"lld": (["-fuse-ld=lld"], env)} if env else {})
    for name, (flags, t_env) in thrower_variants.items():
        out = root / "throwers" / name / "libthrower.so"
        s.throwers[name] = _compile(out, [DATA / "thrower.cpp"], [*shared, *flags], t_env)
    tdir = s.throwers["gnu"].parent
    s.catcher = _compile(
        root / "catcher" / "catcher", [DATA / "catcher.cpp"], [f"-L{tdir}", "-lthrower"]
    )
    s.user = _compile(root / "user" / "libuser.so", [DATA / "user.c"], [*shared, *link])
    s.phdrs_tool = _compile(root / "tools" / "phdrs", [DATA / "phdrs.c"], ["-ldl"])
    s.obj = _compile(root / "obj" / "demo.o", [DATA / "demo.c"], ["-c", "-fPIC"])
    s.archive = root / "obj" / "libdemo.a"
    run(["ar", "rcs", str(s.archive), str(s.obj)])
    return s


def readelf(path: Path, *options: str) -> str:
    """``readelf -W <options>``; fails if readelf prints anything on stderr."""
    proc = run(["readelf", "-W", *options, str(path)])
    if proc.stderr.strip():
        raise AssertionError(f"readelf {' '.join(options)} {path} warned:\n{proc.stderr}")
    return proc.stdout


def patchelf(*args: str | os.PathLike[str]) -> str:
    return run(["patchelf", *args]).stdout.strip()


def file_phdrs(path: Path) -> list[Phdr]:
    """The program headers of ``path``, read with ``struct`` (independent of kpack.elf)."""
    data = path.read_bytes()
    (phoff,) = struct.unpack_from("<Q", data, 32)
    (phnum,) = struct.unpack_from("<H", data, 56)
    out = []
    for i in range(phnum):
        p_type, flags, off, vaddr, _, filesz, memsz, align = struct.unpack_from(
            "<IIQQQQQQ", data, phoff + 56 * i
        )
        out.append((p_type, off, vaddr, filesz, memsz, flags, align))
    return out


def dynamic_entries(path: Path) -> list[tuple[int, int]]:
    """All slots of PT_DYNAMIC (struct-level, independent of kpack.elf)."""
    data = path.read_bytes()
    dyn = next(p for p in file_phdrs(path) if p[0] == PT_DYNAMIC)
    return [struct.unpack_from("<qQ", data, dyn[1] + 16 * i) for i in range(dyn[3] // 16)]


def parse_phdr_lines(text: str) -> list[Phdr]:
    rows = [tuple(int(v) for v in line.split()) for line in text.splitlines() if line.strip()]
    return [r for r in rows if len(r) == 7]  # type: ignore[misc]


def loaded_phdrs(tool: Path, lib: Path) -> list[Phdr]:
    """Program headers ``ld.so`` reports for ``lib`` through ``dl_iterate_phdr``."""
    return parse_phdr_lines(run([tool, str(lib)]).stdout)


def python_call(lib: Path, function: str, arg: int, env: dict[str, str] | None = None) -> int:
    """Load ``lib`` with ``ctypes.CDLL`` in a fresh interpreter and call ``function(arg)``."""
    code = (
        "import ctypes, sys\n"
        f"lib = ctypes.CDLL({str(lib)!r})\n"
        f"fn = lib.{function}\n"
        "fn.argtypes = [ctypes.c_int]; fn.restype = ctypes.c_int\n"
        f"print(fn({arg}))\n"
    )
    return int(run([sys.executable, "-c", code], env=env).stdout.strip())


_CACHE: dict[str, Samples] = {}


def samples_once(root_factory: object) -> Samples:
    """Build the samples once per session (``root_factory`` is ``tmp_path_factory``)."""
    if "samples" not in _CACHE:
        root = root_factory.mktemp("elf-samples")  # type: ignore[attr-defined]
        _CACHE["samples"] = build_samples(root)
    return _CACHE["samples"]


def check_oracles(before: Path, after: Path, entries: tuple[str, ...]) -> None:
    """Everything that must hold for any successful edit, by tools other than ours."""
    assert patchelf("--print-rpath", after) == ":".join(entries)
    assert patchelf("--print-needed", after) == patchelf("--print-needed", before)
    if "SONAME" in readelf(before, "-d"):
        assert patchelf("--print-soname", after) == patchelf("--print-soname", before)
    dynamic = readelf(after, "-d", "-l")
    assert dynamic.count("(RPATH)") == 1
    assert "(RUNPATH)" not in dynamic
    readelf(after, "-a")  # no warnings at all
    new_warnings = verify_elf(after, name=str(after))
    assert set(new_warnings) <= set(verify_elf(before, name=str(before))), new_warnings
    old, new = file_phdrs(before), file_phdrs(after)
    added = [p for p in new if p not in old]
    kept = [p for p in new if p in old]
    # E2/E3: at most one new PT_LOAD (R or RW, never first); other segments keep type/flags
    loads = [p for p in new if p[0] == PT_LOAD]
    new_loads = [p for p in added if p[0] == PT_LOAD]
    assert len(new) - len(old) == len(new_loads) <= 1
    for p in new_loads:
        assert p[5] in (4, 6) and p != loads[0] and p == loads[-1]
    assert [(p[0], p[5]) for p in old] == [(p[0], p[5]) for p in new if p not in new_loads]
    for p in old:
        if p[0] not in (PT_PHDR, PT_DYNAMIC):
            assert p in kept
    for kind in (PT_PHDR, PT_INTERP):
        assert sum(p[0] == kind for p in new) == sum(p[0] == kind for p in old)
    slots = dynamic_entries(after)
    assert [t for t, _ in slots].count(DT_RPATH) == 1
    assert DT_RUNPATH not in [t for t, _ in slots]
