"""Database handlers (kpack.md §4): every row of the table, the arch collapse, the YAML."""

from __future__ import annotations

from pathlib import Path

import pytest

from kpack.databases import (
    DatabaseMatch,
    base_arch,
    handler_names,
    load_handlers,
    match_database,
)
from kpack.errors import ManifestError, UsageError

ALL = load_handlers()

# (relpath below the stage dir, handler, shard key, base arch)
MATCHES = [
    # rocBLAS / hipBLASLt / hipSPARSELt: gfx<digits><letters>[-xnack±] in the name
    (
        "lib/rocblas/library/TensileLibrary_lazy_gfx90a-xnack+.co",
        "rocblas",
        "gfx90a-xnack+",
        "gfx90a",
    ),
    (
        "lib/rocblas/library/TensileLibrary_lazy_gfx90a-xnack-.dat",
        "rocblas",
        "gfx90a-xnack-",
        "gfx90a",
    ),
    ("lib/rocblas/library/TensileLibrary_lazy_gfx942.dat", "rocblas", "gfx942", "gfx942"),
    ("lib/rocblas/library/TensileLibrary_gfx1030.co", "rocblas", "gfx1030", "gfx1030"),
    (
        "lib/rocblas/library/Kernels.so-000-gfx90a-xnack+.hsaco",
        "rocblas",
        "gfx90a-xnack+",
        "gfx90a",
    ),
    ("lib/rocblas/2.47.0/library/TensileLibrary_gfx1102.co", "rocblas", "gfx1102", "gfx1102"),
    # ... or a per-arch directory .../library/<arch>/<any file>
    ("lib/rocblas/library/gfx942/x.dat", "rocblas", "gfx942", "gfx942"),
    (
        "lib/rocblas/library/gfx90a:xnack+/sub/TensileLibrary.dat",
        "rocblas",
        "gfx90a:xnack+",
        "gfx90a",
    ),
    ("lib/hipblaslt/library/TensileLibrary_lazy_gfx1100.dat", "hipblaslt", "gfx1100", "gfx1100"),
    ("lib/hipblaslt/library/extop_gfx942.co", "hipblaslt", "gfx942", "gfx942"),
    ("lib/hipblaslt/library/gfx950/Kernels.hsaco", "hipblaslt", "gfx950", "gfx950"),
    ("lib/hipsparselt/library/Kernels.so-000-gfx942.hsaco", "hipsparselt", "gfx942", "gfx942"),
    # MIOpen: the explicit list, longest listed arch that is a prefix (CU counts glued on)
    ("share/miopen/db/gfx90878.HIP.fdb.txt", "miopen", "gfx908", "gfx908"),
    ("share/miopen/db/gfx942130.db.txt", "miopen", "gfx942", "gfx942"),
    ("share/miopen/db/gfx1030_36.db.txt", "miopen", "gfx1030", "gfx1030"),
    ("share/miopen/db/gfx90a68.kdb", "miopen", "gfx90a", "gfx90a"),
    ("share/miopen/db/gfx1151_40.kdb", "miopen", "gfx1151", "gfx1151"),
    ("share/miopen/db/gfx908.tn.model", "miopen", "gfx908", "gfx908"),
    ("lib/libMIOpenCK_gfx942.so", "miopen", "gfx942", "gfx942"),
    ("lib/libMIOpenCKGroupedConv_fwd_gfx90a.so", "miopen", "gfx90a", "gfx90a"),
    ("bin/MIOpenCKGemm_gfx1100.dll", "miopen", "gfx1100", "gfx1100"),
    # AOTriton: strip amd-, gfx11xx -> gfx11, gfx120x -> gfx12_0, others pass through
    ("lib/aotriton.images/amd-gfx1100/flash/attn_fwd.aks2", "aotriton", "gfx11", "gfx11"),
    ("lib/aotriton.images/amd-gfx11xx/flash/attn_fwd.aks2", "aotriton", "gfx11", "gfx11"),
    ("lib/aotriton.images/amd-gfx1151/x.aks2", "aotriton", "gfx11", "gfx11"),
    ("lib/aotriton.images/amd-gfx120x/x.aks2", "aotriton", "gfx12_0", "gfx12_0"),
    ("lib/aotriton.images/amd-gfx1201/x.aks2", "aotriton", "gfx12_0", "gfx12_0"),
    ("lib/aotriton.images/amd-gfx942/x.aks2", "aotriton", "gfx942", "gfx942"),
    ("lib/aotriton.images/amd-gfx950/x.aks2", "aotriton", "gfx950", "gfx950"),
    ("lib/aotriton.images/amd-gfx90a/x.aks2", "aotriton", "gfx90a", "gfx90a"),
    # directory-named arches
    (
        "lib/hip_kernel_provider/asm_kernels/gfx942/fmha.co",
        "hip-kernel-provider-asm",
        "gfx942",
        "gfx942",
    ),
    (
        "share/hipkernelprovider/engines/arch_content/gemm/gfx950/k.co",
        "hipkernelprovider",
        "gfx950",
        "gfx950",
    ),
    # MIOpen's list reaches gfx1250 (and its -strict variant)
    ("share/miopen/db/gfx1250_128.db.txt", "miopen", "gfx1250", "gfx1250"),
    ("share/miopen/db/gfx1250-strict_128.kdb", "miopen", "gfx1250-strict", "gfx1250-strict"),
    ("lib/libMIOpenCKGroupedConv_gfx1250-strict.so", "miopen", "gfx1250-strict", "gfx1250-strict"),
    # Composable Kernel per-arch static libraries: ':' -> '_', '+' -> 'p', '-' -> '_'
    ("lib/libdevice_conv_operations_gfx942.a", "composablekernel", "gfx942", "gfx942"),
    ("lib/libdevice_conv_operations_gfx90a_xnackp.a", "composablekernel", "gfx90a", "gfx90a"),
    (
        "lib/libdevice_conv_operations_gfx942_sramecc__xnack_.a",
        "composablekernel",
        "gfx942",
        "gfx942",
    ),
    (
        "lib/libdevice_conv_operations_gfx1250_strict.a",
        "composablekernel",
        "gfx1250-strict",
        "gfx1250-strict",
    ),
    ("lib/device_conv_operations_gfx1100.lib", "composablekernel", "gfx1100", "gfx1100"),
    ("lib/device_conv_operations_gfx950_xnackp.lib", "composablekernel", "gfx950", "gfx950"),
    # hipKernelProvider: arch_content or test_arch_content, the arch dir at any depth
    (
        "lib/hipdnn_plugins/engines/arch_content/hip-kernel-provider/gfx942/k.co",
        "hipkernelprovider",
        "gfx942",
        "gfx942",
    ),
    (
        "lib/hipdnn_plugins/engines/arch_content/gfx1100/k.co",
        "hipkernelprovider",
        "gfx1100",
        "gfx1100",
    ),
    (
        "lib/hipdnn_plugins/engines/arch_content/rocke/a/b/gfx950/sub/k.co",
        "hipkernelprovider",
        "gfx950",
        "gfx950",
    ),
    (
        "lib/hipdnn_plugins/engines/test_arch_content/hip-kernel-provider/unit/shared/gfx90a/t.co",
        "hipkernelprovider",
        "gfx90a",
        "gfx90a",
    ),
    (
        "lib/hipdnn_plugins/engines/arch_content/hkp/gfx1250-strict/k.co",
        "hipkernelprovider",
        "gfx1250-strict",
        "gfx1250-strict",
    ),
    # RocJitsu translations: share/rocjitsu/translations/<domain>/v1/<sha256>.(man|obj)
    (
        f"share/rocjitsu/translations/gfx1250-b0-a0/v1/{'ab' * 32}.man",
        "hotswap_cache",
        "gfx1250",
        "gfx1250",
    ),
    (
        f"share/rocjitsu/translations/gfx1250-b0-a0/v1/{'0f' * 32}.obj",
        "hotswap_cache",
        "gfx1250",
        "gfx1250",
    ),
]

NO_MATCH = [
    "lib/rocblas/library/TensileLibrary_lazy_Mapping.dat",  # no arch: stays generic
    "lib/rocblas/library/TensileLibrary_fallback.dat",
    "lib/hipblaslt/library/hipblasltTransform.hsaco",
    "lib/librocblas.so.5.1",
    "lib/TensileLibrary_gfx942.co",  # outside */library
    "share/miopen/db/readme.txt",
    "share/miopen/db/gfx1234_20.kdb",  # not on the explicit list
    "share/miopen/db/gfx90878.HIP.fdb.json",  # not a database suffix
    "lib/libMIOpenCK_gfx942.so.1",
    "lib/aotriton.images/amd-gfx942",  # a file, not the per-arch directory
    "lib/hip_kernel_provider/asm_kernels/common/x.co",
    "share/hipkernelprovider/engines/arch_content/gemm/k.co",
    "lib/hipdnn_plugins/engines/arch_content/gfx942",  # the arch dir needs a file below it
    "lib/hipdnn_plugins/arch_content/gfx942/k.co",  # the container sits below engines/
    "lib/hipdnn_plugins/engines/other_content/hkp/gfx942/k.co",
    "lib/hipdnn_plugins/engines/arch_content/hkp/gfx942_tests/k.co",  # not an arch dir name
    "lib/libdevice_conv_operations.a",  # CK's unsuffixed archive stays generic
    "lib/libdevice_conv_operations_gfx942.so",
    "lib/libdevice_conv_operations_gfx90a_xnack+.a",  # not the sanitized spelling
    # RocJitsu: only the real layout and a listed domain
    f"share/rocjitsu/translations/gfx942-a0/v1/{'ab' * 32}.man",  # unknown domain
    f"share/rocjitsu/translations/gfx1250-b0-a0/v2/{'ab' * 32}.man",  # unknown schema
    "share/rocjitsu/translations/gfx1250-b0-a0/v1/notahash.obj",
    f"share/rocjitsu/translations/gfx1250-b0-a0/v1/{'ab' * 32}.bin",
    f"share/rocjitsu/translations/gfx1250-b0-a0/v1/x/{'ab' * 32}.man",
    f"lib/share/rocjitsu/translations/gfx1250-b0-a0/v1/{'ab' * 32}.man",  # not at the root
    "share/rccl/hotswap_cache/gfx942/allreduce.bin",  # the layout guessed before
    "lib/rccl/RocJitsu/cache/gfx90a:xnack-/k.hsaco",
    # a retired .kpm manifest in .kpack/ is plain data
    ".kpack/blas_lib.kpm",
    ".kpack/blas_lib_gfx942.kpm",
]


@pytest.mark.parametrize(("relpath", "handler", "key", "base"), MATCHES)
def test_every_row_of_the_handler_table(relpath: str, handler: str, key: str, base: str) -> None:
    found = match_database(relpath, ALL)
    assert found is not None, relpath
    assert (found.handler.name, found.arch_key, found.base_arch) == (handler, key, base)
    # the handler alone claims it too, and no other handler does
    assert match_database(relpath, load_handlers([handler])) == found
    others = [h for h in ALL if h.name != handler]
    assert match_database(relpath, others) is None


@pytest.mark.parametrize("relpath", NO_MATCH)
def test_files_without_a_detectable_arch_stay_generic(relpath: str) -> None:
    assert match_database(relpath, ALL) is None


def test_handlers_only_match_when_selected() -> None:
    path = "lib/rocblas/library/TensileLibrary_lazy_gfx942.dat"
    assert match_database(path, load_handlers(["miopen", "aotriton"])) is None
    assert match_database(path, ()) is None


def test_file_order_decides_and_first_match_wins() -> None:
    # Claimed by both rocblas (arch in a name below rocblas/library) and miopen (miopen/db).
    path = "lib/rocblas/library/miopen/db/gfx942130.kdb"
    handlers = load_handlers(["miopen", "rocblas"])  # order of the names does not matter
    assert [h.name for h in handlers] == ["rocblas", "miopen"]
    found = match_database(path, handlers)
    assert found is not None and found.handler.name == "rocblas"
    assert found.arch_key == "gfx942130"  # rocblas keeps the raw name; miopen would say gfx942
    only_miopen = match_database(path, load_handlers(["miopen"]))
    assert only_miopen is not None and only_miopen.arch_key == "gfx942"


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("gfx942:sramecc+:xnack-", "gfx942"),
        ("gfx90a-xnack+", "gfx90a"),
        ("gfx90a-xnack-", "gfx90a"),
        ("gfx90a:xnack+", "gfx90a"),
        ("gfx1100", "gfx1100"),
        ("gfx12_0", "gfx12_0"),
    ],
)
def test_base_arch(text: str, base: str) -> None:
    assert base_arch(text) == base


def _match(relpath: str) -> DatabaseMatch:
    found = match_database(relpath, ALL)
    assert found is not None
    return found


def test_gpu_targets_scope_on_the_base_arch() -> None:
    tensile = _match("lib/rocblas/library/TensileLibrary_lazy_gfx90a-xnack+.co")
    assert tensile.in_scope(None)
    assert tensile.in_scope(["gfx90a"])
    assert tensile.in_scope(["gfx942", "gfx90a:xnack-"])  # any feature variant selects gfx90a
    assert not tensile.in_scope(["gfx942"])
    miopen = _match("share/miopen/db/gfx90878.HIP.fdb.txt")
    assert miopen.in_scope(["gfx908"]) and not miopen.in_scope(["gfx90a"])


def test_gpu_targets_scope_follows_the_aotriton_families() -> None:
    gfx11 = _match("lib/aotriton.images/amd-gfx11xx/x.aks2")
    assert gfx11.in_scope(["gfx1100"]) and gfx11.in_scope(["gfx1151"])
    assert not gfx11.in_scope(["gfx942", "gfx1201"])
    gfx12 = _match("lib/aotriton.images/amd-gfx120x/x.aks2")
    assert gfx12.in_scope(["gfx1201"]) and not gfx12.in_scope(["gfx1100"])


def test_handler_names_in_file_order() -> None:
    assert handler_names() == (
        "rocblas",
        "hipblaslt",
        "hipsparselt",
        "miopen",
        "composablekernel",
        "aotriton",
        "hip-kernel-provider-asm",
        "hipkernelprovider",
        "hotswap_cache",
    )


def test_unknown_handler_name() -> None:
    with pytest.raises(UsageError, match=r"unknown database handler.*rocfft.*known: aotriton"):
        load_handlers(["rocblas", "rocfft"])


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "databases.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_custom_yaml_with_an_explicit_arch_list(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "handlers:\n"
        "  tuned:\n"
        "    description: longest prefix wins\n"
        "    rules: ['(?:^|/)tuned/(?P<arch>[^/]+)\\.db$']\n"
        "    arches: [gfx90, gfx908, gfx9]\n",
    )
    handlers = load_handlers(path=path)
    assert handler_names(path) == ("tuned",)
    found = match_database("share/tuned/gfx90878.db", handlers)
    assert found is not None and found.arch_key == "gfx908"
    found = match_database("share/tuned/gfx90c.db", handlers)
    assert found is not None and found.arch_key == "gfx90"
    assert match_database("share/tuned/gfx1100.db", handlers) is None


@pytest.mark.parametrize(
    ("body", "key", "problem"),
    [
        ("    description: x\n", "handlers.bad.rules", "non-empty list"),
        ("    description: x\n    rules: ['gfx[0-9]+']\n", "handlers.bad.rules[0]", "(?P<arch>"),
        (
            "    description: x\n    rules: ['(?P<arch>gfx']\n",
            "handlers.bad.rules[0]",
            "invalid regular expression",
        ),
        (
            "    description: x\n    rules: ['(?P<arch>gfx.*)']\n    colour: red\n",
            "handlers.bad.colour",
            "unknown key",
        ),
        ("    rules: ['(?P<arch>gfx.*)']\n", "handlers.bad.description", "non-empty string"),
        (
            "    description: x\n    rules: ['(?P<arch>gfx.*)']\n    arches: [gfx908, sm_80]\n",
            "handlers.bad.arches",
            "sm_80",
        ),
        (
            "    description: x\n    rules: ['(?P<arch>gfx.*)']\n    arches: [gfx908, gfx908]\n",
            "handlers.bad.arches",
            "listed twice",
        ),
        (
            "    description: x\n    rules: ['(?P<arch>gfx.*)']\n    families: [{match: x}]\n",
            "handlers.bad.families[0]",
            "'match' and 'key'",
        ),
        (
            "    description: x\n    rules: ['(?P<arch>gfx.*)']\n"
            "    families: [{match: 'gfx11..', key: 'GFX 11'}]\n",
            "handlers.bad.families[0].key",
            "GFX 11",
        ),
    ],
)
def test_invalid_yaml_names_file_and_key(tmp_path: Path, body: str, key: str, problem: str) -> None:
    path = _write(tmp_path, "handlers:\n  bad:\n" + body)
    with pytest.raises(ManifestError) as info:
        load_handlers(path=path)
    text = str(info.value)
    assert str(path) in text
    assert any(p.startswith(f"{key}:") and problem in p for p in info.value.problems), text


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "handlers:\n"
        "  one:\n    rules: ['(?P<arch>x']\n"
        "  two:\n    description: y\n    rules: []\n    arches: [nope]\n",
    )
    with pytest.raises(ManifestError) as info:
        load_handlers(path=path)
    keys = sorted(p.split(":")[0] for p in info.value.problems)
    assert keys == [
        "handlers.one.description",
        "handlers.one.rules[0]",
        "handlers.two.arches",
        "handlers.two.rules",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[1, 2]\n",
        "handlers: {}\n",
        "handlers: 3\n",
        "handlers: {a: 1}\nextra: 2\n",
        "handlers: [\n",
    ],
)
def test_malformed_documents(tmp_path: Path, text: str) -> None:
    with pytest.raises(ManifestError, match=str(tmp_path)):
        load_handlers(path=_write(tmp_path, text))
