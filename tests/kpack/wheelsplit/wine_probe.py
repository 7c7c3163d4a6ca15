"""Load a Windows HIP DLL with a real PE loader (Wine) and record what the HIP runtime is
handed, the way CLR receives it.

A HIP DLL's static constructors call ``__hipRegisterFatBinary(&wrapper)`` for each wrapper
when the DLL loads. Here ``amdhip64_*.dll`` is a stub (built with clang and lld-link, no
CRT) whose ``__hipRegisterFatBinary`` prints, per call, the wrapper's magic, ``reserved1``
(the ``co_index`` after the transform), the ``binary`` pointer as the loader relocated it,
and the first 48 bytes it points at. The other HIP libraries the DLL imports are stubs with
the same export names; the MSVC runtime is Wine's own. A probe EXE reserves the DLL's
preferred base first, so the loader must rebase it and apply every base relocation, then
loads it and prints the base it got.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pefile

from tests.conftest import require
from tests.kpack.pe_fixtures import CLANG, LLD_LINK

WINE = "/usr/lib/wine/wine64"
DLLTOOL = "llvm-dlltool-15"
#: libraries the stubs stand in for (any other import must be Wine's own)
HIP_LIBRARIES = ("amdhip64", "hipblas", "rocblas", "libhipblaslt", "hipblaslt", "hipsparse")
_REGISTER = {b"__hipRegisterFatBinary", b"__hipUnregisterFatBinary", b"__hipRegisterFunction"}

_KERNEL32 = """LIBRARY kernel32.dll
EXPORTS
LoadLibraryA
GetStdHandle
WriteFile
ExitProcess
VirtualAlloc
GetCommandLineA
FreeLibrary
"""

_COMMON = r"""
typedef void *HANDLE;
__declspec(dllimport) HANDLE __stdcall GetStdHandle(unsigned long);
__declspec(dllimport) int __stdcall WriteFile(HANDLE, const void *, unsigned long,
                                              unsigned long *, void *);
static void out(const char *s, int n) {
    unsigned long w; WriteFile(GetStdHandle((unsigned long)-11), s, (unsigned long)n, &w, 0);
}
static int hex(unsigned long long v, int digits, char *buf) {
    for (int i = digits - 1; i >= 0; --i) { buf[i] = "0123456789abcdef"[v & 15]; v >>= 4; }
    return digits;
}
static int put(char *buf, const char *s) {
    int n = 0;
    while (s[n]) { buf[n] = s[n]; ++n; }
    return n;
}
"""

_RUNTIME = (
    _COMMON
    + r"""
struct W { unsigned magic, version; const unsigned char *binary; unsigned long long reserved1; };
static void *handle;
__declspec(dllexport) void **__hipRegisterFatBinary(const struct W *w) {
    char line[256]; int n = put(line, "register ");
    for (int i = 0; i < 4; ++i) line[n++] = ((const char *)&w->magic)[i];
    line[n++] = ' '; n += hex(w->version, 8, line + n);
    line[n++] = ' '; n += hex(w->reserved1, 16, line + n);
    line[n++] = ' '; n += hex((unsigned long long)w->binary, 16, line + n);
    line[n++] = ' ';
    for (int i = 0; i < 48; ++i) n += hex(w->binary[i], 2, line + n);
    line[n++] = '\n';
    out(line, n);
    return &handle;
}
__declspec(dllexport) void __hipUnregisterFatBinary(void **h) { (void)h; }
__declspec(dllexport) void __hipRegisterFunction(void **h, const void *f, char *d, const char *m,
        int t, void *a, void *b, void *c, void *e, int *s) {
    (void)h; (void)f; (void)d; (void)m; (void)t; (void)a; (void)b; (void)c; (void)e; (void)s;
}
__declspec(dllexport) int hip_stub(void) { return 0; }
int __stdcall entry(void *a, unsigned long b, void *c) { (void)a; (void)b; (void)c; return 1; }
"""
)

_PROBE = (
    _COMMON
    + r"""
__declspec(dllimport) HANDLE __stdcall LoadLibraryA(const char *);
__declspec(dllimport) void __stdcall ExitProcess(unsigned);
__declspec(dllimport) void *__stdcall VirtualAlloc(void *, unsigned long long, unsigned long,
                                                   unsigned long);
__declspec(dllimport) char *__stdcall GetCommandLineA(void);
__declspec(dllimport) int __stdcall FreeLibrary(HANDLE);
/* probe.exe <dll> <preferred base, hex>: occupy the base, load the DLL, unload it */
int main_entry(void) {
    char *c = GetCommandLineA(), name[260], line[64];
    unsigned long long base = 0;
    int n = 0;
    while (*c && *c != ' ') ++c;
    while (*c == ' ') ++c;
    while (*c && *c != ' ' && n < 259) name[n++] = *c++;
    name[n] = 0;
    while (*c == ' ') ++c;
    for (; *c && *c != ' '; ++c)
        base = base * 16 + (unsigned)(*c <= '9' ? *c - '0' : *c - 'a' + 10);
    void *r = VirtualAlloc((void *)base, 1 << 16, 0x2000 /* MEM_RESERVE */, 0x01);
    n = put(line, "reserved "); n += hex((unsigned long long)r, 16, line + n); line[n++] = '\n';
    out(line, n);
    HANDLE h = LoadLibraryA(name);
    n = put(line, "loaded "); n += hex((unsigned long long)h, 16, line + n); line[n++] = '\n';
    out(line, n);
    if (!h) ExitProcess(2);
    FreeLibrary(h);
    ExitProcess(0);
    return 0;
}
"""
)


@dataclass(frozen=True)
class Registration:
    magic: bytes  # as on disk: b"FPIH" (HIPF) or b"HIPK"
    version: int
    reserved1: int
    binary: int  # the pointer, relocated by the loader
    head: bytes  # the first 48 bytes it points at


@dataclass(frozen=True)
class Load:
    reserved: int  # the address the probe occupied (the DLL's preferred base)
    base: int  # where the loader put the DLL
    registrations: list[Registration]


def tools_available() -> None:
    for tool in (CLANG, LLD_LINK, DLLTOOL):
        require(shutil.which(tool) is not None, f"{tool} is not installed (apt install llvm-15)")
    require(os.access(WINE, os.X_OK), f"{WINE} is not installed (apt install wine64)")


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"{cmd[0]}: {proc.stdout}{proc.stderr}"


def _compile(name: str, source: str, work: Path) -> str:
    (work / f"{name}.c").write_text(source)
    _run([CLANG, "--target=x86_64-pc-windows-msvc", "-O1", "-c", f"{name}.c", "-o",
          f"{name}.obj"], work)  # fmt: skip
    return f"{name}.obj"


class WineProbe:
    """A directory with the probe, the stubs and a Wine prefix; :meth:`load` copies a DLL
    in (with stubs for the HIP libraries it imports) and loads it."""

    def __init__(self, work: Path) -> None:
        tools_available()
        self.work = work
        work.mkdir(parents=True, exist_ok=True)
        (work / "kernel32.def").write_text(_KERNEL32)
        _run([DLLTOOL, "-m", "i386:x86-64", "-d", "kernel32.def", "-l", "kernel32.lib"], work)
        self._runtime = _compile("runtime", _RUNTIME, work)
        probe = _compile("probe", _PROBE, work)
        _run([LLD_LINK, "/nodefaultlib", "/entry:main_entry", "/subsystem:console",
              "/out:probe.exe", probe, "kernel32.lib"], work)  # fmt: skip
        self.env = {
            **os.environ,
            "WINEPREFIX": str(work / "prefix"),
            "WINEDEBUG": "-all",
            "WINEDLLOVERRIDES": "mscoree,mshtml=",  # no Mono or Gecko installer prompts
        }

    def _stubs(self, dll: pefile.PE) -> None:
        for imp in getattr(dll, "DIRECTORY_ENTRY_IMPORT", []):
            name = imp.dll.decode()
            if not name.lower().startswith(HIP_LIBRARIES) or (self.work / name).exists():
                continue
            exports = [f"/export:{i.name.decode()}=hip_stub" for i in imp.imports
                       if i.name is not None and i.name not in _REGISTER]  # fmt: skip
            _run([LLD_LINK, "/nodefaultlib", "/dll", "/entry:entry", f"/out:{name}",
                  self._runtime, "kernel32.lib", *exports], self.work)  # fmt: skip

    def load(self, data: bytes, name: str) -> Load:
        pe = pefile.PE(data=data, fast_load=True)
        pe.parse_data_directories(
            directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]]
        )
        self._stubs(pe)
        (self.work / name).write_bytes(data)
        preferred = f"{pe.OPTIONAL_HEADER.ImageBase:x}"
        proc = subprocess.run(
            [WINE, "probe.exe", name, preferred], cwd=self.work, env=self.env,
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        assert proc.returncode == 0, f"wine exit {proc.returncode}: {proc.stdout}{proc.stderr}"
        reserved = base = -1
        registrations = []
        for line in proc.stdout.splitlines():
            word, *rest = line.split()
            if word == "reserved":
                reserved = int(rest[0], 16)
            elif word == "loaded":
                base = int(rest[0], 16)
            elif word == "register":
                magic, version, reserved1, binary, head = rest
                registrations.append(Registration(magic.encode(), int(version, 16),
                                                  int(reserved1, 16), int(binary, 16),
                                                  bytes.fromhex(head)))  # fmt: skip
        return Load(reserved, base, registrations)

    def close(self) -> None:
        subprocess.run(["/usr/lib/wine/wineserver64", "-k"], env=self.env, capture_output=True,
                       check=False)  # fmt: skip
