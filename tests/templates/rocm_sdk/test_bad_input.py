"""Bad input of the installed runtime's CLI (``rocm-sdk init``, ``path``, ``targets``): one
``rocm-sdk: error:`` line naming the input, exit 1, nothing changed; the devel tarball
expands within a limit, and a full disk names the file."""

from __future__ import annotations

import errno
import io
import json
import lzma
import os
import resource
import shutil
import signal
import subprocess
import sys
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.templates.tpl_kit import fake_install, importable, rocm_sdk_tree, tar_bytes
from tests.templates.tpl_rendering import context

VERSION = "7.1.0"
CTX = context("kpack", ("gfx942", "gfx1201"), nonce="_v7", version=VERSION)
TOP, CORE, LIBS = "_rocm_sdk_devel_v7", "_rocm_sdk_core_v7", "_rocm_sdk_libraries_v7"
TARBALL = Path("rocm_sdk_devel", "_devel.tar")
DEVEL_RECORD = Path(f"rocm_sdk_devel-{VERSION}.dist-info", "RECORD")
DEVICE_RECORD = Path(f"rocm_sdk_device_gfx942-{VERSION}.dist-info", "RECORD")
DIST_INFO_JSON = Path(CORE, "share", "therock", "dist_info.json")
MANIFEST = Path(LIBS, ".devel_links", "gfx942.json")
KPACK = ".kpack/blas_lib_gfx942.kpack"
BASE = [
    ("dir", TOP, None),
    ("file", f"{TOP}/__init__.py", b""),
    ("file", f"{TOP}/include/hip.h", b"#pragma once\n"),
]


def make_site(tmp_path: Path, members: list[Any] | None = None) -> Path:
    """A site-packages with the runtime, core, libraries, devel (a plain ``_devel.tar``) and
    the gfx942 device package."""
    site = tmp_path / "site"
    rocm_sdk_tree(CTX, tmp_path / "rocm")
    shutil.copytree(tmp_path / "rocm" / "src" / "rocm_sdk", site / "rocm_sdk")
    shutil.rmtree(tmp_path / "rocm")
    fake_install(
        site,
        "rocm-sdk-core",
        VERSION,
        {
            f"{CORE}/__init__.py": b"",
            DIST_INFO_JSON.as_posix(): b'{"dist_amdgpu_targets": "gfx942;gfx1201"}',
        },
    )
    fake_install(site, "rocm-sdk-libraries", VERSION, {f"{LIBS}/__init__.py": b""})
    fake_install(
        site,
        "rocm-sdk-devel",
        VERSION,
        {
            "rocm_sdk_devel/__init__.py": b"",
            TARBALL.as_posix(): tar_bytes(BASE if members is None else members),
        },
    )
    links = {"version": VERSION, "links": [{"relpath": KPACK, "target": f"../../{LIBS}/{KPACK}"}]}
    fake_install(
        site,
        "rocm-sdk-device-gfx942",
        VERSION,
        {
            f"{LIBS}/{KPACK}": b"code for gfx942",
            MANIFEST.as_posix(): json.dumps(links).encode(),
        },
    )
    return site


def snapshot(root: Path) -> dict[str, object]:
    """Every path under ``root``: a symlink's target, a file's bytes, or None for a dir."""
    out: dict[str, object] = {}
    for path in sorted(root.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = ("link", os.readlink(path))
        elif path.is_file():
            out[rel] = path.read_bytes()
        else:
            out[rel] = None
    return out


def cli(
    site: Path, *args: str, preexec: Callable[[], None] | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ROCM_SDK_")}
    environ.update(env, PYTHONPATH=str(site))
    return subprocess.run(
        [sys.executable, "-m", "rocm_sdk", *args],
        env=environ,
        capture_output=True,
        text=True,
        preexec_fn=preexec,
        check=False,
    )


def fails(
    site: Path,
    *args: str,
    preexec: Callable[[], None] | None = None,
    status: int = 1,
    **env: str,
) -> str:
    """The one error line of a command that must fail (exit ``status``: 2 for a usage
    error) and change nothing under the site."""
    before = snapshot(site.parent)
    proc = cli(site, *args, preexec=preexec, **env)
    assert proc.returncode == status, proc.stdout + proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rocm-sdk: error: "), proc.stderr
    assert proc.stdout == ""
    assert snapshot(site.parent) == before
    return lines[0][len("rocm-sdk: error: ") :]


def expands(site: Path, **env: str) -> None:
    proc = cli(site, "init", "--quiet", **env)
    assert proc.returncode == 0 and proc.stdout == proc.stderr == "", proc.stderr
    assert (site / TOP / "__init__.py").is_file() and not (site / TARBALL).exists()


# --- the devel tarball's size ---------------------------------------------------------------


def _header(name: str, size: int, kind: bytes = tarfile.REGTYPE, **fields: object) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.mode = size, kind, 0o644
    for key, value in fields.items():
        setattr(info, key, value)
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _base_blocks() -> bytes:
    """The members of BASE as tar blocks, without the end-of-archive marker."""
    data = b"#pragma once\n"
    return (
        _header(TOP, 0, tarfile.DIRTYPE)
        + _header(f"{TOP}/__init__.py", 0)
        + _header(f"{TOP}/include/hip.h", len(data))
        + data.ljust(512, b"\0")
    )


END = bytes(1024)  # the end-of-archive marker


def _xz_bomb(size: int) -> bytes:
    """A ``_devel.tar.xz`` of a few KB whose one big file is ``size`` zero bytes."""
    packer = lzma.LZMACompressor(format=lzma.FORMAT_XZ, preset=1)
    parts = [packer.compress(_base_blocks() + _header(f"{TOP}/share/zeros.bin", size))]
    block = bytes(1 << 20)
    for _ in range(size >> 20):
        parts.append(packer.compress(block))
    parts.append(packer.compress(bytes(size % (1 << 20)) + bytes(-size % 512) + END))
    parts.append(packer.flush())
    return b"".join(parts)


def use_tarball(site: Path, data: bytes, name: str = "_devel.tar") -> Path:
    (site / TARBALL).unlink()
    path = site / "rocm_sdk_devel" / name
    path.write_bytes(data)
    return path


@pytest.fixture(scope="module")
def xz_bomb() -> bytes:
    return _xz_bomb(300 << 20)  # 300 MiB of zeros in about 46 KB


def test_an_xz_bomb_is_refused_before_it_is_written(tmp_path: Path, xz_bomb: bytes) -> None:
    site = make_site(tmp_path)
    tarball = use_tarball(site, xz_bomb, "_devel.tar.xz")
    assert len(xz_bomb) < 100_000
    line = fails(site, "init")
    assert line == (
        f"{tarball} expands to more than {256 << 20} bytes, the limit (100 times the tarball's "
        "size, at least 256 MiB and at most 64 GiB); if this tarball is genuine, set "
        "ROCM_SDK_MAX_DEVEL_SIZE to a larger number of bytes"
    )


@pytest.mark.parametrize(
    ("size", "limit"),
    [(0, 256 << 20), (3 << 20, 300 << 20), (1 << 30, 64 << 30), (11 << 20, 1100 << 20)],
)
def test_the_default_limit_follows_the_tarball_size(tmp_path: Path, size: int, limit: int) -> None:
    with importable(make_site(tmp_path)):
        from rocm_sdk._limits import ExpansionLimit

        assert ExpansionLimit.default(size).limit == limit


def test_the_variable_raises_the_limit(tmp_path: Path, xz_bomb: bytes) -> None:
    site = make_site(tmp_path)
    use_tarball(site, xz_bomb, "_devel.tar.xz")
    expands(site, ROCM_SDK_MAX_DEVEL_SIZE=str(400 << 20))
    zeros = site / TOP / "share" / "zeros.bin"
    assert zeros.stat().st_size == 300 << 20
    zeros.unlink()  # pytest keeps the last runs' temp dirs


def test_a_declared_size_past_the_limit_is_refused_at_its_header(tmp_path: Path) -> None:
    """Only the header is there: the size it declares is checked before any data is read."""
    site = make_site(tmp_path)
    tarball = use_tarball(site, _base_blocks() + _header(f"{TOP}/lib/huge.a", 3 << 30))
    assert f"{tarball} expands to more than {256 << 20} bytes" in fails(site, "init")


def test_many_empty_members_count_against_the_limit(tmp_path: Path) -> None:
    members = BASE + [("file", f"{TOP}/share/e{i:04d}", b"") for i in range(400)]
    site = make_site(tmp_path, members)
    line = fails(site, "path", "--root", ROCM_SDK_MAX_DEVEL_SIZE="100000")
    assert line == (
        f"{site / TARBALL} expands to more than 100000 bytes, the limit (set by "
        "ROCM_SDK_MAX_DEVEL_SIZE); if this tarball is genuine, set ROCM_SDK_MAX_DEVEL_SIZE to "
        "a larger number of bytes"
    )


def test_a_tarball_exactly_at_the_limit_expands(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    size = (site / TARBALL).stat().st_size
    assert "expands to more than" in fails(site, "init", ROCM_SDK_MAX_DEVEL_SIZE=str(size - 1))
    expands(site, ROCM_SDK_MAX_DEVEL_SIZE=str(size))


@pytest.mark.parametrize("value", ["lots", "-1", "0", "1e9", "64GiB", "12\n34", "9" * 100_000])
def test_a_bad_limit_is_one_line(tmp_path: Path, value: str) -> None:
    site = make_site(tmp_path)
    line = fails(site, "init", ROCM_SDK_MAX_DEVEL_SIZE=value)
    assert line.startswith(f"ROCM_SDK_MAX_DEVEL_SIZE={value.strip()[:60]!r}"), line
    assert (
        line.endswith(
            "is not a number of bytes (a whole number above 0, such as 68719476736 for 64 GiB)"
        )
        and len(line) < 250
    )


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.XHDTYPE])
def test_an_extended_header_too_large_for_any_name_is_refused(tmp_path: Path, kind: bytes) -> None:
    """tarfile reads such a header's data into memory whole: 3 GiB of xz zeros would be 3 GiB
    of memory. Its declared size is checked first."""
    site = make_site(tmp_path)
    body = _header("././@LongLink", 3 << 30, kind) + bytes(4096)
    tarball = use_tarball(site, lzma.compress(body), "_devel.tar.xz")
    assert fails(site, "init") == (
        f"{tarball} is damaged (an extended header of {3 << 30} bytes; no name needs more "
        f"than {1 << 20})"
    )


def test_zero_blocks_after_the_end_count_against_the_limit(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    tarball = use_tarball(site, lzma.compress(tar_bytes(BASE) + bytes(2 << 20)), "_devel.tar.xz")
    assert fails(site, "init", ROCM_SDK_MAX_DEVEL_SIZE=str(1 << 20)) == (
        f"{tarball} expands to more than {1 << 20} bytes, the limit (set by "
        "ROCM_SDK_MAX_DEVEL_SIZE), in zero blocks after its end"
    )


def test_a_member_writes_no_more_than_its_declared_size(tmp_path: Path) -> None:
    with importable(make_site(tmp_path)):
        from rocm_sdk import _tar_expand

        out = io.BytesIO()
        _tar_expand._copy_declared(io.BytesIO(b"x" * 5000), out, 1234)
        assert out.getvalue() == b"x" * 1234
        with pytest.raises(tarfile.ReadError):
            _tar_expand._copy_declared(io.BytesIO(b"x" * 10), io.BytesIO(), 1234)


# --- names and member types -----------------------------------------------------------------


def _raw_member(name: bytes, kind: bytes = tarfile.REGTYPE, link: bytes = b"") -> bytes:
    header = bytearray(_header("placeholder", 0, kind))
    header[0:100] = name.ljust(100, b"\0")
    header[157:257] = link.ljust(100, b"\0")
    header[148:156] = b"        "
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


@pytest.mark.parametrize(
    ("name", "link", "what"),
    [
        (f"{TOP}/include/caf\xe9.h".encode("latin-1"), b"", "member"),
        (f"{TOP}/lib/alias".encode(), b"caf\xe9", "symlink"),
    ],
)
def test_a_name_that_is_not_utf8_is_refused(
    tmp_path: Path, name: bytes, link: bytes, what: str
) -> None:
    site = make_site(tmp_path)
    kind = tarfile.SYMTYPE if link else tarfile.REGTYPE
    tarball = use_tarball(site, _base_blocks() + _raw_member(name, kind, link) + END)
    line = fails(site, "init")
    assert line.startswith(f"{tarball}: {what} ") and line.endswith("is not valid UTF-8"), line


def test_a_sparse_member_is_refused(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    sparse = bytearray(_header(f"{TOP}/lib/holes.a", 0, tarfile.GNUTYPE_SPARSE))
    sparse[483:495] = b"%011o\0" % (1 << 30)  # realsize: 1 GiB of holes, no data
    sparse[148:156] = b"        "
    sparse[148:156] = b"%06o\0 " % sum(sparse)
    tarball = use_tarball(site, _base_blocks() + bytes(sparse) + END)
    assert fails(site, "init") == f"{tarball}: member '{TOP}/lib/holes.a' is a sparse file"


def test_a_member_error_names_the_tarball(tmp_path: Path) -> None:
    site = make_site(tmp_path, [*BASE, ("file", f"{TOP}/../evil", b"x")])
    assert fails(site, "init") == f"{site / TARBALL}: member '{TOP}/../evil' contains '..'"


# --- the machine fails ----------------------------------------------------------------------


def _limit_file_size() -> None:
    # Every write past 256 KiB fails with EFBIG, as a full disk fails with ENOSPC.
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_failing_write_names_the_file(tmp_path: Path) -> None:
    site = make_site(tmp_path, [*BASE, ("file", f"{TOP}/lib/big.a", os.urandom(1 << 20))])
    line = fails(site, "init", preexec=_limit_file_size)
    staging = site / f".{TOP}.partial"
    assert line == f"cannot expand {site / TARBALL}: {staging}/lib/big.a: File too large"


FULL_DISK = r"""
import json, os, shutil, subprocess, sys
site, mount = sys.argv[1], sys.argv[2]
copy = os.path.join(mount, "site")
shutil.copytree(site, copy, symlinks=True)
def tree():
    out = {}
    for root, dirs, files in os.walk(copy):
        for name in dirs + files:
            path = os.path.join(root, name)
            out[path] = None if os.path.isdir(path) else open(path, "rb").read().hex()
    return out
before = tree()
env = dict(os.environ, PYTHONPATH=copy)
proc = subprocess.run([sys.executable, "-B", "-m", "rocm_sdk", "init"], env=env,
                      capture_output=True, text=True)
print(json.dumps({"rc": proc.returncode, "err": proc.stderr, "same": tree() == before,
                  "copy": copy}))
"""


def test_a_full_disk_names_the_file(tmp_path: Path) -> None:
    """A real ENOSPC: a small tmpfs in a private mount namespace (skipped where unprivileged
    user namespaces are not allowed)."""
    unshare = shutil.which("unshare")
    probe = (
        subprocess.run([unshare or "unshare", "-rm", "true"], capture_output=True, check=False)
        if unshare
        else None
    )
    if probe is None or probe.returncode != 0:
        pytest.skip("no unprivileged mount namespace (unshare -rm) on this machine")
    site = make_site(tmp_path, [*BASE, ("file", f"{TOP}/lib/big.a", os.urandom(2 << 20))])
    used = sum(p.stat().st_size for p in site.rglob("*") if p.is_file())
    mount = tmp_path / "mnt"
    mount.mkdir()
    script = (
        f'mount -t tmpfs -o size={used + (1 << 20)} tmpfs "$1" && '
        f'exec "{sys.executable}" -c "$2" "$3" "$1"'
    )
    proc = subprocess.run(
        [unshare, "-rm", "sh", "-c", script, "sh", str(mount), FULL_DISK, str(site)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    copy = Path(result["copy"])
    assert result["rc"] == 1 and result["same"], result
    assert result["err"] == (
        f"rocm-sdk: error: cannot expand {copy / TARBALL}: {copy}/.{TOP}.partial/lib/big.a: "
        "No space left on device\n"
    )


def test_a_failed_record_append_leaves_the_record_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_site(tmp_path)
    record = site / DEVEL_RECORD
    before = record.read_bytes()
    with importable(site):
        from rocm_sdk import _record

        def half_then_full(handle: io.RawIOBase, data: bytes) -> None:
            handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(_record, "_write_all", half_then_full)
        with _record.locked_record(record) as locked, pytest.raises(OSError) as caught:
            locked.append([f"{TOP}/a", f"{TOP}/b"])
    assert caught.value.filename == str(record) and caught.value.errno == errno.ENOSPC
    assert record.read_bytes() == before


# --- the other files and variables the CLI reads --------------------------------------------


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"dist_amdgpu_targets": [1, 2]}', "dist_amdgpu_targets is not a target list: '[1, 2]'"),
        (
            b'{"dist_amdgpu_targets": "gfx942\\nerror: x"}',
            "dist_amdgpu_targets is not a target list: 'gfx942\\nerror: x'",
        ),
        (b"[" * 200_000, "nested too deeply (more than 512 levels of [ and {)"),
        (b"\xff\xfe", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
        (b'["gfx942"]', "has no dist_amdgpu_targets"),
    ],
)
def test_targets_with_a_bad_dist_info_json_is_one_line(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    site = make_site(tmp_path)
    (site / DIST_INFO_JSON).write_bytes(content)
    line = fails(site, "targets")
    assert str(site / DIST_INFO_JSON) in line and line.endswith(reason), line


#: detection off, so the output does not depend on this machine's GPUs
NO_DETECTION = {"ROCM_BOOTSTRAP_DISABLE_DETECTION": "1"}
NO_GPU_LINE = (
    "rocm: no GPU detected on this machine (KFD's sysfs topology has no GPU node and "
    "offload-arch found none); ROCM_BOOTSTRAP_FORCE_GFX_ARCH=gfxNNN names one"
)


@pytest.mark.parametrize("value", ["gfx942\nrocm: injected line", "gfx1250-strict" * 9000])
def test_targets_shows_a_strange_target_family_on_one_line(tmp_path: Path, value: str) -> None:
    site = make_site(tmp_path)
    (site / "rocm_sdk" / "_selection.json").write_text(
        '{"target_family": "gfx94X-dcgpu", "source": "env"}'
    )
    proc = cli(site, "targets", ROCM_SDK_TARGET_FAMILY=value, **NO_DETECTION)
    assert proc.returncode == 0 and proc.stdout == "gfx942;gfx1201\n", proc.stderr
    lines = proc.stderr.splitlines()
    assert lines[0] == NO_GPU_LINE
    assert lines[1] == (
        "rocm: the rocm package chose target family gfx94X-dcgpu when pip or uv built it "
        "(from env); that is a record, not this machine's state"
    )
    assert len(lines) == 3 and lines[2].startswith(f"rocm: ROCM_SDK_TARGET_FAMILY={value[:60]!r}")
    assert len(lines[2]) < 400


def test_targets_ignores_a_damaged_selection_record(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    (site / "rocm_sdk" / "_selection.json").write_text("[" * 200_000)
    proc = cli(site, "targets", **NO_DETECTION)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        0,
        "gfx942;gfx1201\n",
        NO_GPU_LINE + "\n",
    )


@pytest.mark.parametrize("record", [DEVEL_RECORD, DEVICE_RECORD])
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff,,\n", "'utf-8' codec can't decode byte 0xff in position 0: invalid start byte"),
        (b'"' + b"a" * 200_000 + b'"\n', "field larger than field limit (131072)"),
    ],
)
def test_an_unreadable_record_is_one_line(
    tmp_path: Path, record: Path, content: bytes, reason: str
) -> None:
    site = make_site(tmp_path)
    (site / record).write_bytes(content)
    assert fails(site, "path", "--root") == (
        f"{site / record} is not a RECORD file ({reason}); reinstall the package it belongs to"
    )


@pytest.mark.parametrize(
    ("content", "warning"),
    [
        (b'{"links": 5}', "its links are not a list"),
        (b'{"links": "abc"}', "its links are not a list"),
        (b"[" * 200_000, "nested too deeply"),
    ],
)
def test_a_damaged_device_link_manifest_is_one_warning(
    tmp_path: Path, content: bytes, warning: str
) -> None:
    site = make_site(tmp_path)
    (site / MANIFEST).write_bytes(content)
    proc = cli(site, "path", "--root")
    assert proc.returncode == 0 and proc.stdout == f"{site / TOP}\n", proc.stderr
    assert proc.stderr.startswith("rocm-sdk: WARNING: ignoring ") and proc.stderr.count("\n") == 1
    assert str(site / MANIFEST) in proc.stderr and warning in proc.stderr


def test_a_damaged_external_links_file_is_ignored(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    expands(site)
    (site / TOP / ".devel_external_links.json").write_text('[5, "x", null, {"relpath": 3}]')
    proc = cli(site, "path", "--root")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{site / TOP}\n", "")


def test_good_input_output_is_unchanged(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    (site / "rocm_sdk" / "_selection.json").write_text(
        '{"target_family": "gfx942", "source": "discovered"}'
    )
    proc = cli(site, "targets", ROCM_SDK_TARGET_FAMILY="gfx1201", **NO_DETECTION)
    assert proc.stdout == "gfx942;gfx1201\n"
    assert proc.stderr == (
        NO_GPU_LINE + "\n"
        "rocm: the rocm package chose target family gfx942 when pip or uv built it (from "
        "discovered); that is a record, not this machine's state\n"
        "rocm: ROCM_SDK_TARGET_FAMILY=gfx1201 now, but pip/uv reuse the wheel they built for "
        "gfx942; resolve again with: pip install --force-reinstall --no-deps --no-cache-dir "
        "rocm==7.1.0 (uv: --reinstall --no-cache)\n"
    )
    proc = cli(site, "init")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"Devel contents expanded to '{site / TOP}'\n"
    assert (site / TOP / KPACK).samefile(site / LIBS / KPACK)


def test_the_help_names_the_limit(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    help_text = cli(site, "init", "--help").stdout
    assert "ROCM_SDK_MAX_DEVEL_SIZE=<bytes> sets another limit" in " ".join(help_text.split())


# --- the external-links file is the runtime's own ----------------------------------------------


@pytest.mark.parametrize(
    "member",
    [
        ("sym", f"{TOP}/.devel_external_links.json", "../rocm_sdk/victim.txt"),
        ("hard", f"{TOP}/.devel_external_links.json", f"{TOP}/include/hip.h"),
        ("file", f"{TOP}/.devel_external_links.json", b'[{"relpath": "x", "target": "y"}]'),
        ("dir", f"{TOP}/.devel_external_links.json", None),
    ],
    ids=["symlink", "hardlink", "file", "dir"],
)
def test_a_member_named_like_the_external_links_file_is_refused(
    tmp_path: Path, member: tuple[str, str, bytes | str | None]
) -> None:
    """A symlink member ``.devel_external_links.json -> ../rocm_sdk/victim.txt`` became a
    hard link to the victim, and writing the external links through it replaced the victim's
    bytes with ``[]``: that name is the runtime's, refused in any member."""
    site = make_site(tmp_path, [*BASE, member])
    (site / "rocm_sdk" / "victim.txt").write_text("keep me\n")
    line = fails(site, "init")
    assert line == (
        f"{site / TARBALL}: member '{TOP}/.devel_external_links.json' has a name rocm-sdk "
        "reserves for its own records"
    )
    assert (site / "rocm_sdk" / "victim.txt").read_text() == "keep me\n"


# --- usage errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["bogus"], "argument COMMAND: invalid choice: 'bogus' (choose from "),
        ([], "the following arguments are required: COMMAND (see rocm-sdk --help)"),
        (["--bogus", "version"], "unrecognized arguments: --bogus (see rocm-sdk --help)"),
        (
            ["path"],
            "path: one of the arguments --cmake --root --bin is required "
            "(see rocm-sdk path --help)",
        ),
        (
            ["path", "--cmake", "--bin"],
            "path: argument --bin: not allowed with argument --cmake (see rocm-sdk path --help)",
        ),
        (["init", "--loud"], "unrecognized arguments: --loud (see rocm-sdk --help)"),
        (["version", "a\nrocm: injected"], r"unrecognized arguments: a\nrocm: injected (see "),
        (["version", "x" * 100_000], "unrecognized arguments: xxxx"),
    ],
    ids=["command", "none", "flag", "missing", "exclusive", "init-flag", "newline", "huge"],
)
def test_a_usage_error_is_one_line_and_exit_2(tmp_path: Path, argv: list[str], line: str) -> None:
    """``rocm-sdk bogus`` and bad flags: one ``rocm-sdk: error:`` line (not argparse's usage
    block) and exit status 2, as argparse and TheRock's ``rocm-sdk`` exit (1 in the previous
    release; every other error still exits 1)."""
    site = make_site(tmp_path)
    shown = fails(site, *argv, status=2)
    assert shown.startswith(line), shown
    assert shown.endswith("--help)") and len(shown) < 400, shown
    if argv == ["bogus"]:  # argparse quotes the choices or not, by Python version
        assert all(c in shown for c in ("path", "version", "targets", "init", "test"))
