"""PE/COFF HIP fat binaries built here the way the Windows toolchain lays them out.

clang (``--target=x86_64-pc-windows-msvc``) and lld-link place real offload bundles in a
``.hip_fat`` section and the 24-byte ``__CudaFatBinaryWrapper`` array in ``.hipFatB``; the
linker emits a DIR64 base relocation for every wrapper pointer. The bundles come from
real fat binaries (ROCm 7 CCOB v3 from PyPI, or hipcc-built ones), included byte for byte.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import require

CLANG = "clang-15"
LLD_LINK = "lld-link-15"

_SOURCE = r"""
__asm__(".section .hip_fat,\"dr\"\n"
{incbins}
        ".text\n");
{externs}
struct W {{ unsigned magic, version; const void *ptr; void *reserved1; }};
{wrappers}
/* host code and data, so the image looks like a real one */
static const unsigned int table[2048] = {{ {table} }};
__declspec(dllexport) unsigned int checksum_table(unsigned int seed) {{
    unsigned int s = seed;
    for (int i = 0; i < 2048; ++i) s = s * 31u + table[i];
    return s + {wrapper_use};
}}
int __stdcall entry(void *a, unsigned long b, void *c) {{ (void)a; (void)b; (void)c; return 1; }}
int main_entry(void) {{ return (int)checksum_table(7); }}
"""


def tools_available() -> None:
    for tool in (CLANG, LLD_LINK):
        require(shutil.which(tool) is not None, f"{tool} is not installed (apt install lld-15)")


def build_pe(
    dest: Path,
    bundles: list[bytes],
    *,
    exe: bool = False,
    wrappers: bool = True,
    target: str = "x86_64-pc-windows-msvc",
    machine: str | None = None,
    link_flags: tuple[str, ...] = (),
    debug: bool = False,
    host_data: bytes = b"",
) -> Path:
    """Compile and link a DLL (or EXE) whose ``.hip_fat`` holds ``bundles``, 4 KiB aligned
    each, and whose ``.hipFatB`` holds one HIPF wrapper per bundle (none with
    ``wrappers=False``); ``host_data``, if any, in a read-only ``.hostdat`` section (a large
    image's host code and data)."""
    tools_available()
    work = dest.parent / f"{dest.stem}.build"
    work.mkdir(parents=True, exist_ok=True)
    incbins, externs, decls, uses = [], [], [], []
    for i, data in enumerate(bundles):
        (work / f"b{i}.bin").write_bytes(data)
        incbins.append(
            f'        ".p2align 12\\n.globl fat{i}\\n.globl _fat{i}\\nfat{i}:\\n_fat{i}:\\n'
            f'.incbin \\"b{i}.bin\\"\\n"'
        )
        externs.append(f"extern const char fat{i}[];")
        if wrappers:
            decls.append(
                f'__attribute__((section(".hipFatB"), aligned(8))) '
                f"struct W w{i} = {{ 0x48495046u, 1u, fat{i}, 0 }};"
            )
            uses.append(f"w{i}.version")
        else:
            uses.append(f"(unsigned int)(unsigned long long)fat{i}")
    if host_data:
        (work / "host.bin").write_bytes(host_data)
        incbins.append(
            '        ".section .hostdat,\\"dr\\"\\n.globl hostdat\\nhostdat:\\n'
            '.incbin \\"host.bin\\"\\n"'
        )
        externs.append("extern const unsigned char hostdat[];")
        uses.append("hostdat[0]")
    table = ", ".join(str((i * 2654435761) & 0xFFFFFFFF) + "u" for i in range(2048))
    source = _SOURCE.format(
        incbins="\n".join(incbins), externs="\n".join(externs), wrappers="\n".join(decls),
        table=table, wrapper_use=" + ".join(uses) or "0",
    )  # fmt: skip
    (work / "k.c").write_text(source)
    subprocess.run(
        [CLANG, f"--target={target}", "-O1", *(["-g"] if debug else []), "-c", "k.c", "-o",
         "k.obj"],
        cwd=work, check=True, capture_output=True,
    )  # fmt: skip
    # /Brepro: the COFF timestamp is a hash of the output, not the link time, so a fixture is
    # the same bytes on every run (the output digests depend on it).
    link = [LLD_LINK, "/nodefaultlib", "/Brepro", f"/out:{dest}", "k.obj"]
    if machine:
        link.append(f"/machine:{machine}")
    link += ["/entry:main_entry", "/subsystem:console"] if exe else ["/dll", "/entry:entry"]
    link += list(link_flags)
    proc = subprocess.run(link, cwd=work, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return dest
