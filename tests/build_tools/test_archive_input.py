"""The builder reads TheRock's artifact archives as it reads extracted trees (issue 31,
item 3): the real sample tree in both modes, packed as TheRock packs it (zstd, xz, plain
tar, and a mix of archives and directories), builds byte for byte what the directory
tree builds; an artifact present twice, and a bad archive, fail with one error naming the
archive, a non-zero exit and nothing written."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from build_tools.build_python_packages import main

from ..conftest import require
from .archive_kit import pack_artifact, pack_tree
from .conftest import VERSION

pytestmark = [pytest.mark.real, pytest.mark.compile]


def _tree(tmp_path_factory: pytest.TempPathFactory, kpack: bool) -> Path:
    require(shutil.which("hipcc") is not None, "hipcc is not installed")
    from sample_tree.make_sample_tree import make_sample_tree

    out = tmp_path_factory.mktemp("tree") / "artifacts"
    return make_sample_tree(out, cache_dir=None, family="gfx90a-dcgpu", kpack_split=kpack)


@pytest.fixture(scope="module", params=[False, True], ids=["legacy", "kpack"])
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _tree(tmp_path_factory, bool(request.param))


@pytest.fixture(scope="module")
def one_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mode's tree, for what goes wrong before any package is planned."""
    return _tree(tmp_path_factory, True)


@pytest.fixture(scope="module")
def reference(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the builder writes from the extracted tree."""
    dest = tmp_path_factory.mktemp("from-dirs")
    assert _build(tree, dest) == 0
    outputs = _outputs(dest)
    assert any(name.endswith(".whl") for name in outputs)
    return outputs


def _outputs(dest: Path) -> dict[str, str]:
    """Every output's digest: dist/ and the report (not the run record, which names DEST)."""
    return {
        p.relative_to(dest).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dest.rglob("*"))
        if p.is_file() and p.name != ".build-python-packages.json"
    }


def _member_names(archive: Path) -> list[str]:
    import tarfile

    import zstandard

    with archive.open("rb") as raw:
        reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            return [info.name for info in tar]


def _build(src: Path, dest: Path, *extra: str) -> int:
    return main(
        ["--artifact-dir", str(src), "--dest-dir", str(dest), "--version", VERSION, "-q", *extra]
    )


@pytest.mark.parametrize(
    ("compression", "mixed", "order"),
    [
        ("zstd", False, "sorted"),
        ("xz", True, "sorted"),
        ("none", False, "sorted"),
        ("pyzstd", False, "unsorted"),  # as TheRock writes: its library, its member order
        ("pyzstd-seekable", False, "sorted"),
    ],
)
def test_archives_build_the_bytes_of_the_extracted_tree(
    tree: Path,
    reference: dict[str, str],
    tmp_path: Path,
    compression: str,
    mixed: bool,
    order: str,
) -> None:
    keep = frozenset({"base_lib_generic", "core-hip_lib_generic"}) if mixed else frozenset()
    packed = pack_tree(tree, tmp_path / "packed", compression, keep=keep, order=order)
    if order == "unsorted":  # the members really come in another order than sorted
        names = _member_names(max(packed.glob("*.tar.zst"), key=lambda p: p.stat().st_size))
        assert names[0] == "artifact_manifest.txt" and names[1:] != sorted(names[1:])
    assert any(packed.glob("*.tar*")) and all(
        p.is_dir() == (p.name in keep) for p in packed.iterdir()
    )
    assert _build(packed, tmp_path / "from-archives") == 0
    assert _outputs(tmp_path / "from-archives") == reference
    leftovers = [p.name for p in (tmp_path / "from-archives").iterdir() if "staging" in p.name]
    assert leftovers == []  # the spool is gone


def test_dry_run_reads_archives_and_writes_nothing(one_tree: Path, tmp_path: Path) -> None:
    packed = pack_tree(one_tree, tmp_path / "packed")
    assert _build(packed, tmp_path / "out", "--dry-run") == 0
    assert not (tmp_path / "out").exists()


def test_an_artifact_both_as_directory_and_archive_is_an_error(
    one_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = pack_tree(one_tree, tmp_path / "packed", keep=frozenset({"core-hip_lib_generic"}))
    pack_artifact(one_tree / "core-hip_lib_generic", packed, "xz")
    pack_artifact(one_tree / "base_lib_generic", packed, "xz")
    assert _build(packed, tmp_path / "out") != 0
    err = capsys.readouterr().err
    assert "core-hip_lib_generic: present 2 times" in err
    assert "core-hip_lib_generic.tar.xz, core-hip_lib_generic/" in err
    assert "base_lib_generic.tar.xz, base_lib_generic.tar.zst" in err
    assert not (tmp_path / "out").exists()


def _corrupt(path: Path) -> None:
    """Bytes flipped inside the compressed data; zstd frames carry no checksum unless
    asked to (TheRock's writer does not), so the sidecar digest is what notices it."""
    _flip(path)
    Path(f"{path}.sha256sum").write_text(hashlib.sha256(b"as uploaded").hexdigest() + "\n")


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0x5A for b in data[middle : middle + 64])
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size * 2 // 3])


def _recompress_as_xz(path: Path) -> None:
    """An xz stream under a .tar.zst name (the wrong compression)."""
    import lzma

    import zstandard

    tar = zstandard.ZstdDecompressor().stream_reader(path.read_bytes(), read_across_frames=True)
    path.write_bytes(lzma.compress(tar.read()))


@pytest.mark.parametrize(
    ("spoil", "needle"),
    [
        (_truncate, "truncated or corrupt"),
        (_corrupt, "does not match core-hip_lib_generic.tar.zst.sha256sum"),
        (_recompress_as_xz, "is not a zstd stream (its first bytes are xz's)"),
    ],
    ids=["truncated", "corrupt", "wrong-compression"],
)
def test_a_bad_archive_is_one_error_naming_it(
    one_tree: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    spoil: object,
    needle: str,
) -> None:
    packed = pack_tree(one_tree, tmp_path / "packed")
    victim = packed / "core-hip_lib_generic.tar.zst"
    spoil(victim)  # type: ignore[operator]
    assert _build(packed, tmp_path / "out") == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(victim) in err[0] and needle in err[0], err
    assert not (tmp_path / "out").exists()


def test_corrupt_xz_is_caught_by_its_check(
    one_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """xz streams carry a CRC64 (every preset's default check): a flipped byte is an error without
    any sidecar."""
    packed = pack_tree(one_tree, tmp_path / "packed", "xz")
    victim = packed / "core-hip_lib_generic.tar.xz"
    _flip(victim)
    assert _build(packed, tmp_path / "out") == 1
    err = capsys.readouterr().err
    assert str(victim) in err and "truncated or corrupt" in err
    assert not (tmp_path / "out").exists()


def test_a_matching_sidecar_is_accepted(
    tree: Path, reference: dict[str, str], tmp_path: Path
) -> None:
    packed = pack_tree(tree, tmp_path / "packed", keep=frozenset({"core-hip_lib_generic"}))
    shutil.rmtree(packed / "core-hip_lib_generic")
    pack_artifact(tree / "core-hip_lib_generic", packed, sidecar=True)
    assert _build(packed, tmp_path / "out") == 0
    assert _outputs(tmp_path / "out") == reference
