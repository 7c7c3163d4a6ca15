"""Hostile and careless artifact trees (issue: untrusted inputs): each gives one error naming
the file and the problem, exit status 1, nothing written outside the temp dir, the destination
left as it was. Silent drops of TheRock's reader are errors here (or notices, for files)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from build_tools.build_python_packages import main
from kpack.cli import main as kpack_main

from .treeutil import add_artifact, write_manifest

THEROCK = "base_lib_generic/base/aux-overlay/stage/share/therock/therock_manifest.json"
REPO = Path(__file__).resolve().parents[2]


def _tree(root: Path) -> Path:
    write_manifest(root)
    add_artifact(root, "core-hip_lib_generic", "core/clr/stage", {"share/hip/version": b"5.2"})
    return root


def _snapshot(root: Path) -> dict[str, bytes | str | None]:
    out: dict[str, bytes | str | None] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        out[rel] = os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
    return out


def _fails(
    tree: Path,
    dest: Path,
    capsys: pytest.CaptureFixture[str],
    *needles: str,
    extra: tuple[str, ...] = (),
    status: int = 1,
) -> str:
    """One error line holding ``needles``, exit ``status`` (2 for a usage error), nothing
    written."""
    outside = dest.parent
    before = _snapshot(outside)
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0", *extra])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert rc == status, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    assert _snapshot(outside) == before  # nothing written, dest unchanged
    return err


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return _tree(tmp_path / "tree")


# --- symlinks -----------------------------------------------------------------------------


def test_a_chain_of_harmless_looking_links_that_climbs_out(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a/b/u -> . (stays at a/b); a/b/v -> u/../../.. : lexically "a/b/u/../../.." is the stage
    # root, really a/b/../../.. is one level above it.
    add_artifact(
        tree,
        "core-runtime_dev_generic",
        "s",
        {
            "include/a/b/h.h": b"h",
            "include/a/b/u": "symlink:.",
            "include/a/b/v": "symlink:u/../../../../etc",
        },
    )
    _fails(tree, tmp_path / "out", capsys, "include/a/b/v", "leads outside")


def test_a_link_through_a_linked_directory(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add_artifact(
        tree,
        "core-runtime_lib_generic",
        "s",
        {"lib/deep/x/y": "dir:", "lib/d": "symlink:deep/x/y", "lib/e": "symlink:d/../../../../.."},
    )
    _fails(tree, tmp_path / "out", capsys, "lib/e", "leads outside")


def test_the_splitter_refuses_the_same_chain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    art = add_artifact(
        tmp_path / "in",
        "rand_lib_gfx90a",
        "s",
        {"lib/a/b/u": "symlink:.", "lib/a/b/v": "symlink:u/../../../../x"},
    )
    rc = kpack_main(
        ["split-artifacts", "--artifact-dir", str(art), "--output-dir", str(tmp_path / "out")]
    )
    err = capsys.readouterr().err
    assert rc == 1 and "lib/a/b/v" in err and "leads outside" in err
    assert not (tmp_path / "out").exists()


def test_a_manifest_that_is_a_symlink_out_of_the_tree(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("s\n")
    art = add_artifact(tree, "blas_lib_generic", "s", {"a": b"a"})
    (art / "artifact_manifest.txt").unlink()
    (art / "artifact_manifest.txt").symlink_to(secret)
    _fails(tree, tmp_path / "out", capsys, "blas_lib_generic/artifact_manifest.txt", "is a symlink")


def test_an_artifact_dir_that_is_a_symlink(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = add_artifact(tmp_path / "elsewhere", "blas_lib_generic", "s", {"a": b"a"})
    (tree / "blas_lib_generic").symlink_to(real)
    _fails(tree, tmp_path / "out", capsys, "blas_lib_generic: is a symlink")


def test_a_stage_dir_through_a_symlink(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elsewhere = tmp_path / "elsewhere" / "stage"
    elsewhere.mkdir(parents=True)
    art = add_artifact(tree, "blas_lib_generic", "s", {"a": b"a"}, manifest="s\nlink/stage\n")
    (art / "link").symlink_to(elsewhere.parent)
    _fails(tree, tmp_path / "out", capsys, "passes through symlink link")


# --- silent wrong results -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("manifest", "needle"),
    [
        (".\n", "'.' path component"),
        ("s\ns/sub\n", "'s/sub' lies inside stage directory 's'"),
        ("s\n./s\n", "'.' path component"),
        ("s\n" + "x" * 300 + "/stage\n", "longer than 255 bytes"),
        ("s\na\\b\n", "backslash"),
    ],
)
def test_stage_lines_that_would_duplicate_or_escape(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: str, needle: str
) -> None:
    add_artifact(tree, "blas_lib_generic", "s", {"sub/a": b"a"}, manifest=manifest)
    _fails(tree, tmp_path / "out", capsys, "blas_lib_generic/artifact_manifest.txt", needle)


def test_dest_inside_the_tree_or_a_stage_dir(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for dest in (tree / "out", tree / "core-hip_lib_generic" / "core/clr/stage" / "out"):
        before = _snapshot(tree)
        rc = main(["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0"])
        err = capsys.readouterr().err
        assert rc == 2 and "lies inside --artifact-dir" in err, err  # a usage error
        assert _snapshot(tree) == before
    rc = main(["--artifact-dir", str(tree), "--dest-dir", str(tmp_path), "--version", "1.0"])
    assert rc == 2 and "lies inside --dest-dir" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name", ["rand_lib-gfx90a", "rand_library_gfx90a", "rand_lib_gfx90a_extra", "notes"]
)
def test_a_directory_whose_name_does_not_parse(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    add_artifact(tree, name, "s", {"lib/a": b"a"})
    _fails(tree, tmp_path / "out", capsys, f"{name}: directory name does not parse")


def test_files_and_hidden_dirs_are_skipped_with_a_notice(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "SHA256SUMS").write_text("x")
    (tree / ".git").mkdir()
    rc = main(
        [
            "--artifact-dir",
            str(tree),
            "--dest-dir",
            str(tmp_path / "out"),
            "--version",
            "1.0",
            "--dry-run",
            "-v",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "notice: skipping" in err and "SHA256SUMS" in err and ".git" in err


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ('{"flags": {"KPACK_SPLIT_ARTIFACTS": true}, "flags": {}}', "duplicate key 'flags'"),
        (
            '{"flags": {"KPACK_SPLIT_ARTIFACTS": true, "KPACK_SPLIT_ARTIFACTS": false}}',
            "duplicate key 'KPACK_SPLIT_ARTIFACTS'",
        ),
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}", "nested too deeply"),
        ('{"a": 1' + "0" * 5000 + "}", "malformed JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
    ],
)
def test_therock_manifest_json(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str | bytes, needle: str
) -> None:
    path = tree / THEROCK
    path.write_bytes(raw if isinstance(raw, bytes) else raw.encode())
    _fails(tree, tmp_path / "out", capsys, "therock_manifest.json", needle)


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        ("[" * 200_000 + "]" * 200_000, "nested too deeply"),
        ('{"rocm-version": "7.0", "rocm-version": "7.1"}', "duplicate key 'rocm-version'"),
        ('{"rocm-version": 7}', "'rocm-version' must be a non-empty string"),
    ],
)
def test_version_json(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], raw: str, needle: str
) -> None:
    version = tmp_path / "version.json"
    version.write_text(raw)
    dest = tmp_path / "out"
    rc = main(
        [
            "--artifact-dir",
            str(tree),
            "--dest-dir",
            str(dest),
            "--version",
            "",
            "--version-file",
            str(version),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1 and needle in err and "version.json" in err and "Traceback" not in err, err
    assert not dest.exists()


def test_non_utf8_targets_cmake(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmake = tmp_path / "therock_amdgpu_targets.cmake"
    cmake.write_bytes(b'therock_add_amdgpu_target(gfx942 "MI300" FAMILY gfx94X-all)\n# \xff\xfe\n')
    _fails(
        tree,
        tmp_path / "out",
        capsys,
        "therock_amdgpu_targets.cmake",
        "not UTF-8",
        extra=("--targets-cmake", str(cmake)),
    )


def test_a_family_name_that_is_a_path(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cmake = tmp_path / "therock_amdgpu_targets.cmake"
    cmake.write_text('therock_add_amdgpu_target(gfx942 "MI300" FAMILY ../../evil)\n')
    _fails(
        tree,
        tmp_path / "out",
        capsys,
        "family name '../../evil'",
        extra=("--targets-cmake", str(cmake)),
    )


@pytest.mark.parametrize("epoch", ["4294967296", "99999999999999", "1700000000000"])
def test_source_date_epoch_beyond_2106(
    tree: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    epoch: str,
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    _fails(tree, tmp_path / "out", capsys, "SOURCE_DATE_EPOCH", "after 2106-02-07", status=2)


# --- names ----------------------------------------------------------------------------------


def _add_bytes_file(tree: Path, dirname: str, stage: str, rel: bytes, data: bytes = b"x") -> Path:
    """A file whose name holds bytes that are not UTF-8 (as a Linux file system allows)."""
    art = add_artifact(tree, dirname, stage, {"include/ok.h": b"ok"})
    path = os.path.join(os.fsencode(art / stage), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return Path(os.fsdecode(path))


def _dest_with_dist(tmp_path: Path) -> Path:
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_bytes(b"old")
    return dest


@pytest.mark.parametrize(
    ("rel", "package", "arcname"),
    [
        # lib/cmake is excluded from core: the file goes into the devel tarball only
        (
            b"lib/cmake/hip/bad\xff.cmake",
            "rocm-sdk-devel",
            "_rocm_sdk_devel/lib/cmake/hip/bad\\xff",
        ),
        (b"include/bad\xff.h", "rocm-sdk-core", "_rocm_sdk_core/include/bad\\xff.h"),
    ],
)
def test_a_file_name_that_is_not_utf8(
    tree: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    rel: bytes,
    package: str,
    arcname: str,
) -> None:
    """Refused wherever it would go (a wheel cannot hold it; ``rocm-sdk init`` could not
    create it from the devel tarball), naming the package, the member and the file."""
    source = _add_bytes_file(tree, "core-hip_dev_generic", "core/clr/stage", rel)
    shown = str(source).replace("\udcff", "\\xff")
    err = _fails(
        tree,
        _dest_with_dist(tmp_path),
        capsys,
        "package member names that cannot be installed",
        f"{package}: {arcname}",
        f"(from {shown}) is not valid UTF-8",
    )
    assert "\\udcff" not in err


def test_a_devel_symlink_whose_target_is_not_utf8(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = _add_bytes_file(tree, "core-hip_dev_generic", "core/clr/stage", b"lib/cmake/b\xff")
    os.symlink(os.fsencode(source.name), os.path.join(os.fsencode(source.parent), b"link"))
    err = _fails(
        tree,
        _dest_with_dist(tmp_path),
        capsys,
        "rocm-sdk-devel: symlink target b\\xff is not valid UTF-8",
    )
    assert "rocm-sdk-devel: _rocm_sdk_devel/lib/cmake/b\\xff (from" in err


# --- outputs: planted symlinks are never written through ------------------------------------


def _elsewhere(tmp_path: Path) -> Path:
    target = tmp_path / "elsewhere" / "precious"
    target.parent.mkdir()
    target.write_bytes(b"precious\n")
    return target


@pytest.mark.parametrize("planted", ["report.json", "report.md", "dist"])
def test_a_symlink_planted_at_an_output_is_refused_then_replaced_not_followed(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """Not the builder's: refused without --force (nothing written); with it, replaced."""
    outside = _elsewhere(tmp_path)
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / planted).symlink_to(outside.parent if planted == "dist" else outside)
    argv = ["--artifact-dir", str(tree), "--dest-dir", str(dest), "--version", "1.0", "-q"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "not written by build-python-packages (see --force)" in err, err
    problem = "dist exists and is a symlink" if planted == "dist" else f"{planted}: a symlink"
    assert f"  - {problem}" in err, err
    assert [p.name for p in dest.iterdir()] == [planted] and (dest / planted).is_symlink()
    assert main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in dest.iterdir()) == [
        ".build-python-packages.json",
        "dist",
        "report.json",
        "report.md",
    ]
    assert not (dest / planted).is_symlink()
    assert outside.read_bytes() == b"precious\n"
    assert sorted(p.name for p in outside.parent.iterdir()) == ["precious"]


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("report.json", "report.json: a directory not written by this tool"),
        ("report.md", "report.md: a directory not written by this tool"),
        ("dist", "dist exists and is not a directory"),
    ],
)
def test_an_output_path_held_by_the_wrong_kind_is_refused_before_anything_is_written(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, problem: str
) -> None:
    """Publishing must not stop half way (``dist/`` replaced, then the report failing)."""
    dest = tmp_path / "out"
    if name != "dist":
        (dest / "dist").mkdir(parents=True)
        (dest / "dist" / "previous.whl").write_bytes(b"old")
        (dest / name).mkdir()
        (dest / name / "mine.txt").write_text("a user's")  # an empty dir would hold nothing
    else:
        dest.mkdir()
        (dest / "dist").write_bytes(b"a file")
    _fails(tree, dest, capsys, f"{dest}: cannot publish: 1 in the way", problem)


# --- the machine fails ----------------------------------------------------------------------


def _limit_file_size() -> None:
    # A file-size limit makes every write past 256 KiB fail with EFBIG, as a full disk fails
    # with ENOSPC: an OSError in the middle of writing a package.
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, 256 << 10))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def test_a_write_failing_half_way_gives_one_line_and_keeps_dist(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "tree")
    add_artifact(tree, "core-runtime_lib_generic", "s", {"share/big.bin": os.urandom(1 << 20)})
    dest = tmp_path / "out"
    (dest / "dist").mkdir(parents=True)
    (dest / "dist" / "previous.whl").write_text("old")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "build_tools.build_python_packages",
            "--artifact-dir",
            str(tree),
            "--dest-dir",
            str(dest),
            "--version",
            "1.0",
            "-q",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("notice: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "cannot write: File too large" in lines[0] and str(dest) in lines[0], proc.stderr
    assert sorted(p.name for p in dest.iterdir()) == ["dist"]
    assert [p.name for p in (dest / "dist").iterdir()] == ["previous.whl"]
