"""TheRock's artifact archives read in one pass (:mod:`kpack.artifact.packed`): what an
archive can hold and a directory cannot is refused with the archive and member named;
what both can hold comes out as the extracted directory would."""

from __future__ import annotations

import io
import os
import random
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from build_tools.artifacts import scan_artifacts
from kpack.artifact.inputs import find_inputs
from kpack.artifact.names import ArtifactId
from kpack.artifact.packed import PackedArtifact, unpack_artifact
from kpack.errors import ArtifactError
from tests.build_tools.treeutil import write_manifest

STAGE = "math-libs/BLAS/stage"
NAME = "blas_lib_generic"

Member = tuple[tarfile.TarInfo, bytes | None]


def _file(name: str, data: bytes = b"x", mode: int = 0o644) -> Member:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    return info, data


def _special(name: str, kind: bytes, link: str = "") -> Member:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info, None


def _tar(members: list[Member], *, end: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    if not end:  # cut right after the last member: no end-of-archive blocks
        raw = raw[: _length_without_end(members)]
    return raw


def _length_without_end(members: list[Member]) -> int:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return tar.offset


def _basic() -> list[Member]:
    return [_file("artifact_manifest.txt", f"{STAGE}\n".encode()), _file(f"{STAGE}/lib/a.so")]


def _unpack(tmp_path: Path, raw: bytes, name: str = f"{NAME}.tar") -> Path:
    path = tmp_path / name
    path.write_bytes(raw)
    spool = tmp_path / "spool"
    spool.mkdir(exist_ok=True)
    art = ArtifactId.parse(NAME)
    assert art is not None
    return unpack_artifact(PackedArtifact(id=art, path=path, size=len(raw)), spool)


def test_a_plain_tar_unpacks_as_extracted(tmp_path: Path) -> None:
    out = _unpack(tmp_path, _tar(_basic()))
    assert (out / "artifact_manifest.txt").read_text() == f"{STAGE}\n"
    assert (out / STAGE / "lib/a.so").read_bytes() == b"x"


@pytest.mark.parametrize(
    ("members", "needle"),
    [
        ([_file(f"{STAGE}/x")], "first member must be the regular file artifact_manifest.txt"),
        ([], "holds no members"),
        ([*_basic(), _file("../evil")], "has '..' path component"),
        ([*_basic(), _file("/etc/evil")], "is absolute"),
        ([*_basic(), _file(f"{STAGE}/lib/a.so")], "is in the archive twice"),
        (
            [*_basic(), _special(f"{STAGE}/up", tarfile.SYMTYPE, "/tmp"), _file(f"{STAGE}/up/x")],
            "lies below the symlink member",
        ),
        ([*_basic(), _file(f"{STAGE}/lib/a.so/x")], "lies below the regular file member"),
        ([*_basic(), _special(f"{STAGE}/dev", tarfile.CHRTYPE)], "not a regular file, directory"),
        ([*_basic(), _special(f"{STAGE}/fifo", tarfile.FIFOTYPE)], "not a regular file, directory"),
        (
            [*_basic(), _special(f"{STAGE}/h", tarfile.LNKTYPE, "/etc/passwd")],
            "no earlier regular file member",
        ),
    ],
    ids=[
        "manifest-not-first",
        "empty",
        "dotdot",
        "absolute",
        "duplicate",
        "below-symlink",
        "below-file",
        "device",
        "fifo",
        "hardlink-outside",
    ],
)
def test_what_only_an_archive_can_hold_is_refused(
    tmp_path: Path, members: list[Member], needle: str
) -> None:
    with pytest.raises(ArtifactError, match=r"blas_lib_generic\.tar") as info:
        _unpack(tmp_path, _tar(members))
    assert needle in str(info.value)
    assert not list(Path("/tmp").glob("evil"))


def test_an_archive_cut_between_members_is_truncated(tmp_path: Path) -> None:
    with pytest.raises(ArtifactError, match="end-of-archive marker"):
        _unpack(tmp_path, _tar(_basic(), end=False))


def test_modes_as_therocks_fetch_extracts_them(tmp_path: Path) -> None:
    """tarfile's ``tar`` filter: setuid/setgid/sticky and group/other write bits go."""
    members = [
        *_basic(),
        _file(f"{STAGE}/bin/tool", b"t", 0o6777),
        _file(f"{STAGE}/r", b"r", 0o664),
    ]
    out = _unpack(tmp_path, _tar(members))
    assert stat.S_IMODE(os.lstat(out / STAGE / "bin/tool").st_mode) == 0o755
    assert stat.S_IMODE(os.lstat(out / STAGE / "r").st_mode) == 0o644


def test_a_hardlink_member_is_a_second_regular_file(tmp_path: Path) -> None:
    members = [*_basic(), _special(f"{STAGE}/lib/b.so", tarfile.LNKTYPE, f"{STAGE}/lib/a.so")]
    out = _unpack(tmp_path, _tar(members))
    assert (out / STAGE / "lib/b.so").read_bytes() == b"x"
    assert not (out / STAGE / "lib/b.so").is_symlink()


def _tree_with(tmp_path: Path, members: list[Member]) -> Path:
    root = tmp_path / "in"
    write_manifest(root)
    (root / f"{NAME}.tar").write_bytes(_tar(members))
    return root


def test_a_symlink_escaping_its_stage_names_the_archive_and_member(tmp_path: Path) -> None:
    root = _tree_with(
        tmp_path, [*_basic(), _special(f"{STAGE}/lib/evil", tarfile.SYMTYPE, "../../../../..")]
    )
    spool = tmp_path / "spool"
    spool.mkdir()
    with pytest.raises(ArtifactError) as info:
        scan_artifacts(root, spool=spool)
    text = str(info.value)
    assert f"{root / NAME}.tar (member {STAGE}/lib/evil)" in text, text
    assert str(spool) not in text


def test_an_archive_scans_as_its_directory(tmp_path: Path) -> None:
    symlink = _special(f"{STAGE}/lib/a.so.1", tarfile.SYMTYPE, "a.so")
    root = _tree_with(tmp_path, [*_basic(), symlink])
    spool = tmp_path / "spool"
    spool.mkdir()
    (art,) = [a for a in scan_artifacts(root, spool=spool).artifacts if a.id.dirname == NAME]
    assert [(e.relpath, e.kind.value, e.link) for e in art.entries] == [
        ("lib", "dir", None),
        ("lib/a.so", "file", None),
        ("lib/a.so.1", "symlink", "a.so"),
    ]


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (
            lambda r: (r / "x_y.tar.zst").write_bytes(b""),
            "x_y.tar.zst: archive name does not parse",
        ),
        (lambda r: (r / f"{NAME}.tar.xz").mkdir(), "is a directory named like an artifact archive"),
        (lambda r: (r / f"{NAME}.tar.zst").symlink_to(r / f"{NAME}.tar"), "is not a regular file"),
        (lambda r: (r / NAME).mkdir(), f"{NAME}: present 2 times ({NAME}.tar, {NAME}/)"),
    ],
)
def test_input_dir_problems(tmp_path: Path, make: Callable[[Path], object], needle: str) -> None:
    root = _tree_with(tmp_path, _basic())
    make(root)
    with pytest.raises(ArtifactError, match="not artifact directories or archives") as info:
        find_inputs(root)
    assert any(needle in p for p in info.value.problems), info.value.problems


def test_a_sidecar_rides_with_its_archive(tmp_path: Path) -> None:
    root = _tree_with(tmp_path, _basic())
    (root / f"{NAME}.tar.sha256sum").write_text("0" * 64 + "\n")
    (root / "other.sha256sum").write_text("")
    _, archives, notices = find_inputs(root)
    assert [a.path.name for a in archives] == [f"{NAME}.tar"]
    assert [n for n in notices if "sha256sum" in n] == [
        f"skipping {root / 'other.sha256sum'}: not an artifact directory"
    ]
    spool = tmp_path / "spool"
    spool.mkdir()
    with pytest.raises(ArtifactError, match=f"does not match {NAME}.tar.sha256sum"):
        unpack_artifact(archives[0], spool)


_SIZES = (0, 1, 511, 512, 513, (1 << 20) - 3, (1 << 20) + 512, 3 * (1 << 20) + 7)


def _compressed(raw: bytes, suffix: str) -> bytes:
    if suffix == ".tar.zst":
        import zstandard

        return zstandard.ZstdCompressor(level=3).compress(raw)
    if suffix == ".tar.xz":
        import lzma

        return lzma.compress(raw, preset=0)
    return raw


@pytest.mark.parametrize("suffix", [".tar", ".tar.zst", ".tar.xz"])
@pytest.mark.parametrize("fmt", [tarfile.PAX_FORMAT, tarfile.GNU_FORMAT], ids=["pax", "gnu"])
def test_member_data_of_every_size_and_long_names_land_as_gnu_tar_extracts_them(
    tmp_path: Path, suffix: str, fmt: int
) -> None:
    """Member data is read straight from the decompressor, header by header: sizes around
    the 512-byte blocks and the 1 MiB read buffer, names longer than ustar holds (PAX
    records or GNU long-name members ahead of the member), a hardlink member. GNU tar
    extracting the same archive is the oracle."""
    deep = "/".join(["d" * 40] * 4)
    members: list[Member] = [_file("artifact_manifest.txt", f"{STAGE}\n".encode())]
    for n, size in enumerate(_SIZES):
        data = bytes((n * 7 + i) % 251 for i in range(min(size, 4096))) * (size // 4096 + 1)
        members.append(_file(f"{STAGE}/{deep}/member-{n}-{'x' * 60}.bin", data[:size]))
    members.append(_special(f"{STAGE}/twin", tarfile.LNKTYPE, members[-1][0].name))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    raw = buf.getvalue()
    out = _unpack(tmp_path, _compressed(raw, suffix), f"{NAME}{suffix}")
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    (tmp_path / "plain.tar").write_bytes(raw)
    import subprocess

    subprocess.run(["tar", "-xf", str(tmp_path / "plain.tar"), "-C", str(oracle)], check=True)
    ours = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    theirs = {p.relative_to(oracle): p.read_bytes() for p in oracle.rglob("*") if p.is_file()}
    assert ours.keys() == theirs.keys()
    assert len(ours) == len(_SIZES) + 2
    assert all(ours[k] == theirs[k] for k in ours)


@pytest.mark.parametrize("suffix", [".tar", ".tar.zst"])
def test_an_archive_cut_inside_member_data_is_one_error(tmp_path: Path, suffix: str) -> None:
    members = [*_basic(), _file(f"{STAGE}/lib/big.so", bytes(3 << 20))]
    raw = _tar(members)
    cut = _compressed(raw[: len(raw) // 2], suffix)
    with pytest.raises(ArtifactError, match="truncated or corrupt") as info:
        _unpack(tmp_path, cut, f"{NAME}{suffix}")
    assert f"{NAME}{suffix}" in str(info.value)


@pytest.mark.parametrize("fmt", ["gnu", "posix"])
def test_a_sparse_member_lands_as_gnu_tar_extracts_it(tmp_path: Path, fmt: str) -> None:
    """GNU tar ``--sparse`` stores only a file's data regions (an old GNU sparse header, or
    PAX records with the region map ahead of the data): each region lands at its offset and
    the holes read as zeros, the file at its full size."""
    import subprocess

    src = tmp_path / "src"
    lib = src / STAGE / "lib"
    lib.mkdir(parents=True)
    (src / "artifact_manifest.txt").write_text(f"{STAGE}\n")
    size = 5 * (1 << 20) + 123
    with (lib / "holes.bin").open("wb") as f:
        for offset, data in (
            (0, b"head" * 1000),
            (2 << 20, b"\x7f" * 70000),
            (size - 9, b"tail!!!!!"),
        ):
            f.seek(offset)
            f.write(data)
    (lib / "after.txt").write_text("after")
    raw = tmp_path / "raw.tar"
    subprocess.run(
        [
            "tar",
            "--sparse",
            f"--format={fmt}",
            "-cf",
            str(raw),
            "-C",
            str(src),
            "artifact_manifest.txt",
            f"{STAGE}/lib/holes.bin",
            f"{STAGE}/lib/after.txt",
        ],
        check=True,
    )
    assert raw.stat().st_size < size  # the holes are not stored
    out = _unpack(tmp_path, raw.read_bytes())
    assert (out / STAGE / "lib/holes.bin").read_bytes() == (lib / "holes.bin").read_bytes()
    assert (out / STAGE / "lib/after.txt").read_text() == "after"


@pytest.mark.parametrize("where", ["header", "second-end-block"])
@pytest.mark.parametrize("suffix", [".tar", ".tar.zst"])
def test_a_damaged_header_is_an_error_not_the_end(tmp_path: Path, suffix: str, where: str) -> None:
    """tarfile ends its member list at a block that is no valid header; the members behind
    a damaged one must not be dropped unseen (a codec without checksums passes the bytes)."""
    members = [*_basic(), _file(f"{STAGE}/lib/b.so", b"b" * 700), _file(f"{STAGE}/lib/c.so")]
    raw = bytearray(_tar(members))
    if where == "header":
        at = _length_without_end(members[:-1])  # the header of c.so
        raw[at + 148] ^= 0x11  # its checksum field
    else:
        at = _length_without_end(members) + 512  # the second block of the end marker
        raw[at + 3] = 0x41
    with pytest.raises(ArtifactError, match="neither a member header nor") as info:
        _unpack(tmp_path, _compressed(bytes(raw), suffix), f"{NAME}{suffix}")
    assert f"{NAME}{suffix}" in str(info.value)
    assert f"offset {at // 512 * 512}" in str(info.value)


@pytest.mark.parametrize("compression", ["pyzstd", "pyzstd-seekable"])
def test_archives_written_by_therocks_zstd_library_unpack(tmp_path: Path, compression: str) -> None:
    """pyzstd, which TheRock's ``archive_util`` writes with: one frame through ``ZstdFile``,
    and the seekable format (many frames, the seek table in a skippable frame at the end)."""
    from tests.build_tools.archive_kit import pack_artifact

    art = tmp_path / NAME
    lib = art / STAGE / "lib"
    lib.mkdir(parents=True)
    (art / "artifact_manifest.txt").write_text(f"{STAGE}\n")
    data = bytes(range(256)) * 4096 + random.Random(31).randbytes(300_000)  # several frames
    (lib / "a.so").write_bytes(data)
    (tmp_path / "packed").mkdir()
    archive = pack_artifact(art, tmp_path / "packed", compression)
    raw = archive.read_bytes()
    seekable = raw[-4:] == (0x8F92EAB1).to_bytes(4, "little")  # the seek table's footer
    assert seekable == (compression == "pyzstd-seekable")
    out = _unpack(tmp_path, raw, archive.name)
    assert (out / STAGE / "lib/a.so").read_bytes() == data
