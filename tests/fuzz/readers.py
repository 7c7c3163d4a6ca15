"""The fuzz targets: every reader of untrusted bytes, each with real seeds.

ELF and the host-binary transform start from a gcc-built fat binary with real offload
bundles and from the machine's own executables; bundles from plain and CCOB v1-v3 (zstd,
zlib) encodings; ``.kpack`` archives from our writer in both schemes; wheels from our
wheel writer; the devel tarball from a tar like the ones we ship; JSON and YAML from the
manifests the tools read; TheRock's targets CMake file; raw deflate streams for the block
index of a wheel's large members (:mod:`.deflate_reader`).
"""

from __future__ import annotations

import importlib.util
import io
import lzma
import os
import shutil
import sys
import tarfile
import types
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from kpack.errors import PackagingError, RocmPackagingError

from .deflate_reader import DEFLATE_INDEX
from .harness import Reader

REPO = Path(__file__).resolve().parents[2]

__all__ = ["READERS", "reader"]


@cache
def _fat_binary() -> bytes:
    import tempfile

    from tests.kpack.bundle_fixtures import sample_bundle, section, spec_ccob
    from tests.kpack.transform_fixtures import synthetic

    content, starts = section(
        sample_bundle(["gfx900", "gfx90a:xnack+"], size=600),
        spec_ccob(sample_bundle(["gfx1030"], size=700), version=3),
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = synthetic(Path(tmp), "libfuzz.so", content, [starts[1], starts[0]])
        return bytes(path.read_bytes())


@cache
def _hipcc_binary() -> bytes | None:
    """A real hipcc-compiled fat library (two targets), when hipcc is on this machine."""
    hipcc = shutil.which("hipcc")
    if hipcc is None:
        return None
    import tempfile

    from tests.kpack.bundle_fixtures import KERNEL_A, compile_hip

    with tempfile.TemporaryDirectory() as tmp:
        lib = compile_hip(
            Path(hipcc), Path(tmp), {"a.hip": KERNEL_A}, ["gfx900", "gfx90a:xnack+"], "liba.so"
        )
        return bytes(lib.read_bytes())


def _debian_library() -> bytes | None:
    """Debian's real libhiprand (18 KB; downloaded once, then cached)."""
    from sample_tree.debian_inputs import fetch_debs

    root = fetch_debs(["libhiprand1"])["libhiprand1"]
    found = sorted(root.rglob("libhiprand.so.*"))
    real = [p for p in found if p.is_file() and not p.is_symlink()]
    return real[0].read_bytes() if real else None


def _transform_seeds() -> list[bytes]:
    return [b for b in (_fat_binary(), _hipcc_binary()) if b is not None]


def _elf_seeds() -> list[bytes]:
    seeds = [*_transform_seeds()]
    library = _debian_library()
    if library is not None:
        seeds.append(library)
    for name in ("true", "env"):
        found = shutil.which(name)
        if found:
            seeds.append(Path(found).read_bytes())
    return seeds


def _run_elf(data: bytes, work: Path) -> None:
    from kpack.elf import classify, plan_rpath_edit, scan_elf

    path = work / "f.so"
    path.write_bytes(data)
    classify(path)
    info = scan_elf(path)
    if info is not None:
        edit = plan_rpath_edit(path, ["$ORIGIN/../lib", "$ORIGIN"])
        if edit is not None:
            edit.write_to(work / "out.so")


def _run_transform(data: bytes, work: Path) -> None:
    from kpack.transform import inspect_fat_binary, plan_transform

    path = work / "f.so"
    path.write_bytes(data)
    info = inspect_fat_binary(path)
    if info is not None and not info.already_transformed:
        plan = plan_transform(
            path, kernel_name="lib/f.so", search_paths=["../.kpack/x_@GFXARCH@.kpack"]
        )
        plan.edit.write_to(work / "out.so")


def _bundle_seeds() -> list[bytes]:
    from tests.kpack.bundle_fixtures import sample_bundle, spec_ccob

    plain = sample_bundle(["gfx900", "gfx942:sramecc+:xnack-"], size=300)
    seeds = [plain]
    for version in (1, 2, 3):
        for method in ("zstd", "zlib"):
            seeds.append(spec_ccob(plain, version=version, method=method))
    return seeds


def _run_bundle(data: bytes, work: Path) -> None:
    from kpack.bundle import iter_bundles

    for bundle in iter_bundles(data, name="fuzz"):
        for co in bundle.code_objects:
            bytes(co.data[:16])


def _kpack_seeds() -> list[bytes]:
    import tempfile

    from kpack.archive import KernelInput, write_kpack

    kernels = [
        KernelInput("lib/a.so#0", "gfx942", b"\x7fELF" + bytes(range(200))),
        KernelInput("lib/a.so#1", "gfx90a:xnack+", b"\x7fELF" + b"x" * 300),
    ]
    seeds = []
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in ("none", "zstd-per-kernel"):
            path = Path(tmp) / f"{scheme}.kpack"
            write_kpack(path, kernels, group_name="a", gfx_arch_family="gfx942", scheme=scheme)
            seeds.append(path.read_bytes())
    return seeds


def _run_kpack(data: bytes, work: Path) -> None:
    from kpack.archive import KpackArchive

    path = work / "a.kpack"
    path.write_bytes(data)
    with KpackArchive.open(path) as archive:
        for key, target in archive:
            archive.read(key, target)


WHEEL = "torch-2.9.0-py3-none-linux_x86_64.whl"
WINDOWS_WHEEL = "torch-2.9.0-py3-none-win_amd64.whl"


def _wheel_seeds() -> list[bytes]:
    """Our writer's plain wheel, the same wheel with its RECORD hashed with sha384 (the
    reader checks any strong hashlib name), and one whose names differ only in case (fine
    on Linux, refused in a Windows wheel)."""
    import base64
    import hashlib
    import tempfile

    from kpack.wheelfile import Member, write_wheel
    from tests.kpack.wheel_fixtures import (
        make_plain_wheel,
        metadata,
        record_name,
        rewrite_zip,
    )

    def sha384(members: dict[str, bytes]) -> dict[str, bytes]:
        name = record_name(members)
        rows = []
        for line in members[name].decode().splitlines():
            arcname, digest, size = line.split(",")
            if digest:
                raw = hashlib.sha384(members[arcname]).digest()
                digest = "sha384=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
            rows.append(f"{arcname},{digest},{size}\n")
        members[name] = "".join(rows).encode()
        return members

    with tempfile.TemporaryDirectory() as tmp:
        plain = make_plain_wheel(Path(tmp))
        other = rewrite_zip(plain, Path(tmp) / "sha384.whl", sha384)
        cases = [Member(n, n.encode()) for n in ("torch/Version.py", "torch/version.py")]
        folded = write_wheel(
            Path(tmp) / "cases",
            dist_name="torch",
            version="2.9.0",
            tag="py3-none-any",
            members=cases,
            metadata=metadata(),
        ).path
        return [plain.read_bytes(), other.read_bytes(), folded.read_bytes()]


def _run_wheel(data: bytes, work: Path) -> None:
    """Every other input (by a bit of its checksum) is read as a Windows wheel, whose member
    names must not differ only in case."""
    import zlib

    from kpack.wheelfile._source import open_wheel

    path = work / (WINDOWS_WHEEL if zlib.crc32(data) & 1 else WHEEL)
    path.write_bytes(data)
    open_wheel(path, work / "in")


def _member_list(members: Sequence[tuple[str, bytes]]) -> bytes:
    return b"\0\0".join(name.encode() + b"\0" + data for name, data in members)


def _wheel_member_seeds() -> list[bytes]:
    import zipfile

    seeds = []
    for wheel in _wheel_seeds():
        with zipfile.ZipFile(io.BytesIO(wheel)) as zf:
            seeds.append(_member_list([(i.filename, zf.read(i)) for i in zf.infolist()]))
    return seeds


def _run_wheel_members(data: bytes, work: Path) -> None:
    """The input is a wheel's member list (``name\\0content``, ``\\0\\0`` between members),
    stored in a zip and read as a wheel: mutations reach the member names and RECORD's text,
    which the CRCs and deflate of a whole zip keep the "wheel" reader's mutations from."""
    import warnings
    import zipfile
    import zlib

    from kpack.wheelfile._source import open_wheel

    path = work / (WINDOWS_WHEEL if zlib.crc32(data) & 1 else WHEEL)
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # a duplicate name is the reader's to refuse
        for part in data.split(b"\0\0"):
            name, _, content = part.partition(b"\0")
            info = zipfile.ZipInfo(name[:1000].decode("utf-8", "replace"), (1980, 1, 1, 0, 0, 0))
            zf.writestr(info, content)
    open_wheel(path, work / "in")


#: RECORD syntax and hash names, the dist-info files, a case variant of the seed's members
#: (a collision in a Windows wheel), bytes that are not UTF-8, zip record signatures.
_WHEEL_TOKENS = (
    *b",sha256= sha256= shake_128= shake_256= md5= sha1= sha224= sha384= sha512=".split(),
    *b"blake2b= sha3_256= ,, RECORD.jws WHEEL METADATA .dist-info/ .dist-info/RECORD".split(),
    *b"torch-2.9.0.dist-info/RECORD torch-2.9.0.data/purelib/ TORCH/__init__.py".split(),
    *b"torch/lib/readme Torch/ \xff\xfe \xc3\x28 PK\x03\x04 PK\x01\x02 PK\x05\x06".split(),
    b",\n",
    b"=\n",
    b"\r\n",
    b"Root-Is-Purelib: true",
    b"Tag: py3-none-win_amd64",
)


@cache
def _tar_module() -> types.ModuleType:
    """``rocm_sdk._tar_expand`` from the templates, loaded without the package's __init__."""
    src = REPO / "templates" / "rocm" / "src" / "rocm_sdk"
    package = types.ModuleType("fuzz_rocm_sdk")
    package.__path__ = [str(src)]
    sys.modules["fuzz_rocm_sdk"] = package
    for name in ("_errors", "_jsonfile", "_limits", "_tar_expand"):
        spec = importlib.util.spec_from_file_location(f"fuzz_rocm_sdk.{name}", src / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["fuzz_rocm_sdk._tar_expand"]


def _tar_seeds() -> list[bytes]:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:

        def add(name: str, kind: bytes, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(f"_rocm_sdk_devel/{name}")
            info.type, info.size, info.linkname, info.mode = kind, len(data), link, 0o644
            tar.addfile(info, io.BytesIO(data) if data else None)

        add("include", tarfile.DIRTYPE)
        add("include/hip.h", tarfile.REGTYPE, b"#pragma once\n" * 20)
        add("lib", tarfile.DIRTYPE)
        add("lib/libx.so.1", tarfile.REGTYPE, b"\x7fELF" + bytes(100))
        add("lib/libx.so", tarfile.SYMTYPE, link="libx.so.1")
        add("lib/liby.so", tarfile.LNKTYPE, link="_rocm_sdk_devel/lib/libx.so.1")
    plain = buf.getvalue()
    return [plain, _tar_pax_seed(), lzma.compress(plain, preset=1)]


def _tar_pax_seed() -> bytes:
    """A pax tarball: long names and link targets in pax records (path=, linkpath=)."""
    buf = io.BytesIO()
    deep = "_rocm_sdk_devel/include/" + "/".join(["d" * 40] * 4)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kind, data, link in (
            (deep, tarfile.DIRTYPE, b"", ""),
            (f"{deep}/h\u00e9ader.h", tarfile.REGTYPE, b"#define X 1\n" * 8, ""),
            ("_rocm_sdk_devel/lib/alias", tarfile.SYMTYPE, b"", f"../include/{deep[24:]}"),
        ):
            info = tarfile.TarInfo(name)
            info.type, info.size, info.linkname, info.mode = kind, len(data), link, 0o644
            tar.addfile(info, io.BytesIO(data) if data else None)
    return buf.getvalue()


#: The expansion limit of the fuzzed devel tarball: small, so declared sizes cross it often.
_TAR_LIMIT = 1 << 20

_TAR_TOKENS = (
    *b"ustar\x0000 ././@LongLink ././@PaxHeader path= size= linkpath= mtime= ../ / \\ C:".split(),
    *b"hdrcharset=BINARY GNU.sparse.map= GNU.sparse.size= GNU.sparse.realsize=".split(),
    *b"GNU.sparse.major=1 _rocm_sdk_devel/ \xff\xfe 77777777777\x00 \xfd7zXZ\x00".split(),
    b"ustar  \x00",
    b"30 path=../x\n",
    b"\x80\x00\x00\x00\x00\x00\x00\x00\x40\x00\x00\x00",
)


def _run_tar(data: bytes, work: Path) -> None:
    tarball = work / "devel.tar"
    tarball.write_bytes(data)
    site = work / "site"
    site.mkdir()
    limit = sys.modules["fuzz_rocm_sdk._limits"].ExpansionLimit(_TAR_LIMIT, "fuzz")
    _tar_module().extract_tree(tarball, "_rocm_sdk_devel", site / "_rocm_sdk_devel", site, limit)
    written = sum(p.stat().st_size for p in site.rglob("*") if p.is_file() and not p.is_symlink())
    if written > _TAR_LIMIT:
        raise AssertionError(f"{written} bytes written past the {_TAR_LIMIT} byte limit")


def _json_seeds() -> list[bytes]:
    return [
        b'{"flags": {"KPACK_SPLIT_ARTIFACTS": true}, "commit": "abc", "subs": [1, 2.5, null]}',
        b'{"rocm-version": "7.9.0", "nested": {"a": [{"b": "\\u00e9"}]}}',
    ]


def _run_json(data: bytes, work: Path) -> None:
    from kpack.common.jsonfile import parse_json_object
    from kpack.errors import ArtifactError

    parse_json_object(data, source=work / "x.json", error=ArtifactError)


def _yaml_reader(name: str) -> Reader:
    """One of our YAML manifests, loaded by its own loader from a scratch directory."""

    def run(data: bytes, work: Path) -> None:
        from build_tools.manifests import load_manifests
        from kpack.databases import load_handlers
        from kpack.wheelsplit._types import load_wheel_types

        shutil.copy(REPO / "manifests" / "libraries.yaml", work / "libraries.yaml")
        shutil.copy(REPO / "manifests" / "packages.yaml", work / "packages.yaml")
        (work / name).write_bytes(data)
        if name == "databases.yaml":
            load_handlers(path=work / name)
        elif name == "wheel_types.yaml":
            load_wheel_types(work / name)
        else:
            load_manifests(work)

    seed = (REPO / "manifests" / name).read_bytes()
    return Reader(f"yaml-{name.split('.')[0]}", run, (RocmPackagingError,), lambda: [seed])


def _cmake_seeds() -> list[bytes]:
    return [
        b'# TheRock\ntherock_add_amdgpu_target(gfx942 "MI300X" FAMILY dcgpu-all gfx94X-all '
        b'gfx94X-dcgpu)\ntherock_add_amdgpu_target(gfx1100 "RX 7900" FAMILY dgpu-all '
        b"gfx110X-all gfx110X-dgpu EXCLUDE_TARGET_PROJECTS hipBLASLt)\n"
    ]


def _run_cmake(data: bytes, work: Path) -> None:
    from build_tools.targets import parse_targets_cmake

    path = work / "therock_amdgpu_targets.cmake"
    path.write_bytes(data)
    parse_targets_cmake(path)


_CMAKE_TOKENS = (
    *b"therock_add_amdgpu_target( FAMILY gfx1201 EXCLUDE_TARGET_PROJECTS ${T} ( )".split(),
    *b'#[[ ]] #[==[ ]==] [=[ ]=] # " \\" \\'.split(),
    b"\n",
    b"THEROCK_ADD_AMDGPU_TARGET (",
    b"function(therock_add_amdgpu_target x)",
)

_SHARD_VERSION = "7.99.0.dev0"
#: a shard's files: (project, device target, size)
_SHARD_FILES = (
    ("rocm", None, 100),
    ("rocm-sdk-core", None, 1000),
    ("rocm-sdk-libraries", None, 2000),
    ("rocm-sdk-device-gfx1200", "gfx1200", 300),
)


def _shard_file_name(project: str) -> str:
    if project == "rocm":
        return f"rocm-{_SHARD_VERSION}.tar.gz"
    return f"{project.replace('-', '_')}-{_SHARD_VERSION}-py3-none-linux_x86_64.whl"


def _shard_report_seeds() -> list[bytes]:
    from build_tools.report import DeviceRow, GenericRow, Report, target_rows

    _, core, libraries, device = (_shard_file_name(project) for project, _, _ in _SHARD_FILES)
    rows = (DeviceRow("gfx1200", device, 300, 4, 1),)
    generic = (GenericRow(core, 1000), GenericRow(libraries, 2000))
    targets = target_rows(3000, [("gfx1200", device, 300)])
    return [Report(_SHARD_VERSION, "kpack", rows, targets, generic).to_json().encode()]


def _run_shard_report(data: bytes, work: Path) -> None:
    """A shard's report.json, read and merged by assemble-shards against the shard's files
    (in memory: nothing is written), the merged report rendered."""
    from build_tools.assemble_shards import DistFile, Kind, Shard, parse_report, plan_assembly
    from build_tools.report import render_markdown

    (work / "report.json").write_bytes(data)
    report = parse_report(work / "report.json")
    files = tuple(
        DistFile(
            path=work / _shard_file_name(project),
            kind=Kind.DEVICE if target else Kind.GENERIC,
            project=project,
            version=_SHARD_VERSION,
            platforms=frozenset() if project == "rocm" else frozenset({"linux_x86_64"}),
            target=target,
            size=size,
            sha256="0" * 64,
        )
        for project, target, size in _SHARD_FILES
    )
    plan = plan_assembly([Shard(work, files, report)])
    if plan.report is not None:
        render_markdown(plan.report)
        plan.report.to_json()


_SHARD_REPORT_TOKENS = (
    *b'"device_wheels" "targets" "generic" "wheel" "target" "size" "kernels" "saving"'.split(),
    *b'"version" "mode" "legacy" NaN -Infinity 1e400 -1 null true [] {} "gfx942" "\\n"'.split(),
    b'"1.0 x"',
    f'"{_shard_file_name("rocm-sdk-core")}"'.encode(),
    b"9" * 5000,
)


def _pe_seeds() -> list[bytes]:
    """PE DLLs linked by lld-link with a plain and a compressed bundle (none without the
    Windows-target toolchain)."""
    import shutil
    import tempfile

    from tests.kpack.bundle_fixtures import sample_bundle, spec_ccob
    from tests.kpack.pe_fixtures import CLANG, LLD_LINK, build_pe

    if shutil.which(CLANG) is None or shutil.which(LLD_LINK) is None:
        return []
    plain = sample_bundle(["gfx900", "gfx942:sramecc+:xnack-"], size=300)
    with tempfile.TemporaryDirectory() as tmp:
        return [
            build_pe(Path(tmp) / "a.dll", [plain]).read_bytes(),
            build_pe(Path(tmp) / "b.dll", [plain, spec_ccob(plain, version=3)]).read_bytes(),
            # a debug directory entry (CodeView), and a COFF symbol and string table
            build_pe(Path(tmp) / "c.dll", [plain], link_flags=("/debug",)).read_bytes(),
            build_pe(
                Path(tmp) / "d.dll", [plain], debug=True, link_flags=("/debug:dwarf",)
            ).read_bytes(),
        ]


def _run_pe(data: bytes, work: Path) -> None:
    from kpack.transform import extract_pe_kernels, read_pe_fat, transform_pe

    path = work / "f.dll"
    path.write_bytes(data)
    fat = read_pe_fat(path)
    if fat is not None and fat.marker is None:
        for kernel in extract_pe_kernels(path):
            kernel.read()
        transform_pe(path, work / "out.dll", kernel_name="bin/f.dll",
                     search_paths=["../.kpack/x_@GFXARCH@.kpack"])  # fmt: skip


#: Section names, signatures and magics of a HIP fat PE image, header field values.
_PE_TOKENS = (
    *b".debug RSDS .hip_fat .hipFatB .kpackrf .reloc .rdata __CLANG_OFFLOAD_BUNDLE__".split(),
    *b"HIPF HIPK CCOB PE\x00\x00 MZ hipv4-amdgcn-amd-amdhsa--gfx942".split(),
    b"\x64\x86",
    b"\x0b\x02",
    b"\x00\x02\x00\x00",
    b"\x00\x10\x00\x00",
    b"\xff\xff\xff\xff",
    b"\x02\x00\x00\x00",
)


def _ours_tar() -> tuple[type[BaseException], ...]:
    errors = _tar_module()
    return (sys.modules["fuzz_rocm_sdk._errors"].RocmSdkError,) if errors else ()


@cache
def _backend() -> tuple[types.ModuleType, types.ModuleType, tuple[types.ModuleType, ...]]:
    """The rocm sdist's build backend and its requirements module (from the templates, as
    pip runs them) and two rendered ``_dist_info`` modules: legacy families, and processors
    with LLVM generic targets."""
    backend_dir = REPO / "templates" / "rocm" / "_backend"
    if str(backend_dir) not in sys.path:
        sys.path.insert(0, str(backend_dir))
    import tempfile

    from tests.templates.tpl_rendering import SAMPLE_CONTEXTS, render

    spec = importlib.util.spec_from_file_location(
        "fuzz_rocm_sdk_backend", backend_dir / "rocm_sdk_backend.py"
    )
    assert spec is not None and spec.loader is not None
    backend = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = backend
    spec.loader.exec_module(backend)
    modules = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("legacy2", "kpack-generic"):
            path = Path(tmp) / f"fuzz_dist_info_{name.replace('-', '_')}.py"
            path.write_text(render("common/_dist_info.py.j2", SAMPLE_CONTEXTS[name]))
            spec = importlib.util.spec_from_file_location(path.stem, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses resolve annotations through it
            spec.loader.exec_module(module)
            modules.append(module)
    return backend, sys.modules["rocm_sdk_requires"], tuple(modules)


def _env_value(raw: bytes) -> str:
    """An environment value as ``os.environ`` holds one (no NUL can be in the environment)."""
    return os.fsdecode(raw.replace(b"\0", b""))


def _run_backend(data: bytes, work: Path) -> None:
    """Input: ``ROCM_SDK_TARGET_FAMILY`` line, ``SOURCE_DATE_EPOCH`` line, then what
    offload-arch printed. The backend resolves the family and writes the metadata fields."""
    backend, requires, modules = _backend()
    family, _, rest = data.partition(b"\n")
    epoch, _, output = rest.partition(b"\n")
    saved = {k: os.environ.get(k) for k in ("ROCM_SDK_TARGET_FAMILY", "SOURCE_DATE_EPOCH")}
    os.environ["ROCM_SDK_TARGET_FAMILY"] = _env_value(family)
    os.environ["SOURCE_DATE_EPOCH"] = _env_value(epoch)
    try:
        for di in modules:
            _backend_metadata(backend, requires, di, output)
        backend._timestamp()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _backend_metadata(
    backend: types.ModuleType, requires: types.ModuleType, di: types.ModuleType, output: bytes
) -> None:
    capped = len(output) > di.OFFLOAD_ARCH_MAX_OUTPUT
    arches = [] if capped else di.parse_offload_arch(output)
    di.query_offload_arch = lambda: arches
    di.CACHED_TARGET_FAMILY = di.CACHED_TARGET_FAMILY_SOURCE = None
    family, _ = backend.resolve(di)
    if family not in di.AVAILABLE_TARGET_FAMILIES:
        raise AssertionError(f"resolved to {family!r}, which the build does not offer")
    reqs = requires.compute_requirements(di, lambda: backend.resolve(di))
    for field, value in requires.metadata_fields(reqs):
        if not value.isprintable():
            raise AssertionError(f"metadata field {field} is not one printable line: {value!r}")
    backend.selection(di)


def _backend_seeds() -> list[bytes]:
    """Inputs both builds resolve: from the variable, from offload-arch, or the default."""
    return [
        b"gfx942:sramecc+:xnack-\n1700000000\ngfx942:sramecc+:xnack-\ngfx90a\n",
        b"\n\ngfx1201\ngfx942\ngfx1201\n",
        b"gfx942:xnack+\n315532800\n",
        b"\n-5\n" + b"gfx1100\n" * 40 + b"gfx1151\n",
        b"\n\ngfx950\n",
    ]


_BACKEND_TOKENS = (
    *b"gfx94X-dcgpu gfx110X-all gfx120X-all gfx1250-strict gfx942 gfx950 gfx1151".split(),
    *b"gfx942:sramecc+:xnack- gfx90a:xnack+ gfx9-4-generic gfx11-generic gfx12-generic".split(),
    *b"-all -dcgpu -dgpu -igpu :xnack- ; ../ \x85 \xe2\x80\xa8 \x00 \xff".split(),
    *b"4294967296 4354819200 1700000000000 -1 1e9".split(),
    b"\n",
    b"\r\n",
    b" ",
)


def _shard_sdist_seeds() -> list[bytes]:
    """Uncompressed tars (the reader gzips them, so mutations reach the tar headers) of a
    sound ``rocm`` sdist and of one with a link, plus one sound gzipped sdist."""
    import gzip
    import io
    import tarfile

    def tar(extra: bool) -> bytes:
        top = f"rocm-{_SHARD_VERSION}"
        out = io.BytesIO()
        with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as archive:
            for name, data in (
                ("PKG-INFO", f"Metadata-Version: 2.1\nName: rocm\nVersion: {_SHARD_VERSION}\n"),
                ("pyproject.toml", "[build-system]\nrequires = []\n"),
                ("src/rocm_sdk/__init__.py", ""),
            ):
                info = tarfile.TarInfo(f"{top}/{name}")
                info.size = len(data.encode())
                archive.addfile(info, io.BytesIO(data.encode()))
            if extra:
                link = tarfile.TarInfo(f"{top}/src/link")
                link.type, link.linkname = tarfile.SYMTYPE, "rocm_sdk/__init__.py"
                archive.addfile(link)
        return out.getvalue()

    return [tar(False), tar(True), gzip.compress(tar(False), mtime=0)]


def _run_shard_sdist(data: bytes, work: Path) -> None:
    """A shard's ``rocm`` sdist, checked as assemble-shards checks every input archive; its
    problems are raised as one error (a refusal), anything else escaping is a finding."""
    import gzip

    from build_tools.shards.archives import archive_problems

    path = work / f"rocm-{_SHARD_VERSION}.tar.gz"
    path.write_bytes(data if data[:2] == b"\x1f\x8b" else gzip.compress(data, mtime=0))
    problems = archive_problems(path, "rocm", _SHARD_VERSION)
    if problems:
        raise PackagingError("invalid shard input", path=path, problems=problems)


_SHARD_SDIST_TOKENS = (
    b"ustar",
    b"ustar\x0000",
    f"rocm-{_SHARD_VERSION}/".encode(),
    b"../",
    b"/etc/passwd",
    b"PKG-INFO",
    b"Name: rocm\n",
    b"Version: ",
    b"path=",
    b"linkpath=",
    b"size=",
    b"././@LongLink",
    b"\x00" * 512,
    b"\xff\xfe",
)


def _run_shard_wheel(data: bytes, work: Path) -> None:
    """A shard's wheel, checked as assemble-shards checks every input archive (a zip, a
    wheel whose name matches its METADATA, its RECORD verified, and what a device wheel
    holds counted); its problems are one error, anything else escaping is a finding."""
    from build_tools.shards.archives import check_archive

    path = work / WHEEL
    path.write_bytes(data)
    _, problems = check_archive(path, "torch", "2.9.0", count=True)
    if problems:
        raise PackagingError("invalid shard input", path=path, problems=problems)


#: Target ids and bundle syntax a mutation cannot find by chance.
_TARGET_TOKENS = (
    b"gfx90a:xnack+",
    b"gfx942:sramecc+:xnack-",
    b"gfx9-4-generic",
    b"gfx1250-strict",
    b"gfx11-generic",
    b":xnack-",
    b"gfx",
)

_BUNDLE_TOKENS = (
    *_TARGET_TOKENS,
    b"__CLANG_OFFLOAD_BUNDLE__",
    b"CCOB",
    b"hipv4-amdgcn-amd-amdhsa--",
    b"hip-amdgcn-amd-amdhsa--",
    b"host-x86_64-unknown-linux-gnu-",
    b"\x28\xb5\x2f\xfd",  # a zstd frame's magic
    b"\x78\x9c",  # a zlib stream's header
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x00" * 8,
)

_KPACK_TOKENS = (
    *_TARGET_TOKENS,
    b"KPAK\x01\x00\x00\x00",
    b"compression_scheme",
    b"zstd-per-kernel",
    b"none",
    b"original_size",
    b"zstd_offset",
    b"zstd_size",
    b"gfx_arch_family",
    b"gfx_arches",
    b"group_name",
    b"toc",
    b"#0",
    b"\xce\xff\xff\xff\xff",  # msgpack uint32 max
    b"\xcf\xff\xff\xff\xff\xff\xff\xff\xff",  # msgpack uint64 max
    b"\xc0",  # msgpack nil
)

_ELF_TOKENS = (
    b".hip_fatbin",
    b".hipFatBinSegment",
    b".rocm_kpack_ref",
    b".dynamic",
    b".dynsym",
    b".dynstr",
    b".shstrtab",
    b"\x7fELF\x02\x01\x01",
    b"__CLANG_OFFLOAD_BUNDLE__",
    b"\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\x00" * 8,
)


def _ours_backend() -> tuple[type[BaseException], ...]:
    return (_backend()[0].BackendError,)


READERS: Sequence[Reader] = (
    Reader("elf", _run_elf, (RocmPackagingError,), _elf_seeds, tokens=_ELF_TOKENS),
    Reader(
        "transform", _run_transform, (RocmPackagingError,), _transform_seeds, tokens=_ELF_TOKENS
    ),
    Reader("bundle", _run_bundle, (RocmPackagingError,), _bundle_seeds, tokens=_BUNDLE_TOKENS),
    Reader("kpack", _run_kpack, (RocmPackagingError,), _kpack_seeds, tokens=_KPACK_TOKENS),
    Reader("wheel", _run_wheel, (RocmPackagingError,), _wheel_seeds, tokens=_WHEEL_TOKENS),
    DEFLATE_INDEX,
    Reader(
        "wheel-members",
        _run_wheel_members,
        (RocmPackagingError,),
        _wheel_member_seeds,
        tokens=_WHEEL_TOKENS,
    ),
    Reader("tar", _run_tar, _ours_tar(), _tar_seeds, tokens=_TAR_TOKENS),
    Reader("json", _run_json, (RocmPackagingError,), _json_seeds),
    *(
        _yaml_reader(n)
        for n in ("packages.yaml", "libraries.yaml", "databases.yaml", "wheel_types.yaml")
    ),
    Reader("cmake", _run_cmake, (RocmPackagingError,), _cmake_seeds, tokens=_CMAKE_TOKENS),
    Reader("pe", _run_pe, (RocmPackagingError,), _pe_seeds, tokens=_PE_TOKENS),
    Reader(
        "shard-report",
        _run_shard_report,
        (RocmPackagingError,),
        _shard_report_seeds,
        tokens=_SHARD_REPORT_TOKENS,
    ),
    Reader("backend", _run_backend, _ours_backend(), _backend_seeds, tokens=_BACKEND_TOKENS),
    Reader(
        "shard-sdist",
        _run_shard_sdist,
        (RocmPackagingError,),
        _shard_sdist_seeds,
        tokens=_SHARD_SDIST_TOKENS,
    ),
    Reader(
        "shard-wheel",
        _run_shard_wheel,
        (RocmPackagingError,),
        _wheel_seeds,
        tokens=_WHEEL_TOKENS,
    ),
)


def reader(name: str) -> Reader:
    return next(r for r in READERS if r.name == name)
