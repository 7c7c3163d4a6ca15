from __future__ import annotations

import posixpath

from build_tools.plan._rpath import PackageFiles, derive_rpath, origin_entry


def _resolve(entry: str, file_dir: str) -> str:
    assert entry.startswith("$ORIGIN")
    return posixpath.normpath(file_dir + entry[len("$ORIGIN") :])


CORE = PackageFiles.of(
    "_rocm_sdk_core",
    [
        "lib/libamdhip64.so.5",
        "lib/libhsa-runtime64.so.1",
        "lib/llvm/lib/libLLVM.so.15",
        "bin/tool",
    ],
)
LIBS = PackageFiles.of("_rocm_sdk_libraries_gfx90a_dcgpu", ["lib/librocrand.so.1", "lib/x/liby.so"])


def test_origin_entry() -> None:
    assert origin_entry("a/lib", "a/lib") == "$ORIGIN"
    assert origin_entry("a/lib", "b/lib") == "$ORIGIN/../../b/lib"


def test_library_gets_core_dir_and_every_needed_resolves() -> None:
    rp = derive_rpath(
        relpath="lib/x/liby.so",
        own=LIBS,
        original=(),
        needed=("librocrand.so.1", "libamdhip64.so.5", "libLLVM.so.15", "libc.so.6"),
        declared=[(CORE, "lib"), (CORE, "lib/host-math/lib")],
        search=[LIBS, CORE],
    )
    file_dir = "_rocm_sdk_libraries_gfx90a_dcgpu/lib/x"
    dirs = [_resolve(e, file_dir) for e in rp]
    # the declared dir that exists comes first; a missing declared dir is not added
    assert dirs[0] == "_rocm_sdk_core/lib"
    assert "_rocm_sdk_core/lib/host-math/lib" not in dirs
    for needed, provider in [
        ("librocrand.so.1", "_rocm_sdk_libraries_gfx90a_dcgpu/lib"),
        ("libamdhip64.so.5", "_rocm_sdk_core/lib"),
        ("libLLVM.so.15", "_rocm_sdk_core/lib/llvm/lib"),
    ]:
        assert provider in dirs, needed
    assert len(dirs) == len(set(dirs))


def test_original_first_and_no_duplicates() -> None:
    rp = derive_rpath(
        relpath="bin/tool",
        own=CORE,
        original=("$ORIGIN/../lib", "/opt/rocm/lib"),
        needed=("libamdhip64.so.5",),
        declared=[],
        search=[CORE],
    )
    assert rp == ("$ORIGIN/../lib", "/opt/rocm/lib")


def test_same_dir_gets_origin() -> None:
    rp = derive_rpath(
        relpath="lib/libamdhip64.so.5",
        own=CORE,
        original=(),
        needed=("libhsa-runtime64.so.1",),
        declared=[],
        search=[CORE],
    )
    assert rp == ("$ORIGIN",)


def test_nothing_needed_nothing_added() -> None:
    assert (
        derive_rpath(
            relpath="lib/libamdhip64.so.5",
            own=CORE,
            original=(),
            needed=("libc.so.6",),
            declared=[],
            search=[CORE],
        )
        == ()
    )
