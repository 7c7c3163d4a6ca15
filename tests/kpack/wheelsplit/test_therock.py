"""TheRock's wheel-splitter call site, run as its workflow writes it, on a real ROCm 7 wheel.

TheRock's PyTorch workflows (ROCm/TheRock 89553ce3746eda74ade42557470d25e37c91b6f0,
``.github/workflows/multi_arch_build_portable_linux_pytorch_wheels.yml`` lines 442-450; the
same command in ``..._ci.yml`` and the Windows twins) move the fat torch wheel out of the
dist dir and split it back into that dir, which already holds the other wheels of the build.
The command runs here through ``bash`` with the workflow's own quoting; only the values
specific to torch are changed to fit the cached PyPI wheel (jax-rocm7-plugin:
``jax_rocm7_plugin/`` for ``torch/``, ``amd-jax-device`` for ``amd-torch-device``), every flag
spelled as there. The ``torch-fat`` preset stays: its database handlers find nothing here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from email.parser import BytesHeaderParser
from pathlib import Path

import pytest
import rocm_bootstrap
from packaging.requirements import Requirement

from tests.pypi_inputs import JAX_PLUGIN, pypi_wheel

pytestmark = pytest.mark.real

THEROCK_COMMIT = "89553ce3746eda74ade42557470d25e37c91b6f0"
#: TheRock's lines, verbatim (the step's ``run:`` shell, GitHub's ``${{ }}`` left to the env).
TORCH_CALL = r"""
python -m rocm_kpack.tools.split_python_wheels \
  --input "${FAT_STAGE}"/torch-*.whl \
  --output-dir "${{ env.PACKAGE_DIST_DIR }}" \
  --device-package-prefix amd-torch-device \
  --overlay-root torch/ \
  --wheel-type torch-fat \
  --device-requires-dist "rocm-sdk-device-@GFXARCH@ == ${ROCM_SDK_VERSION}" \
  --compression zstd \
  -j "$(nproc)"
"""
SDK_VERSION = "7.99.0"
HOST = JAX_PLUGIN.filename
KEYS = ("gfx10-3-generic", "gfx11-generic", "gfx12-generic", "gfx9-4-generic", "gfx908", "gfx90a")
OTHER = "torchaudio-2.9.0-cp311-cp311-manylinux_2_28_x86_64.whl"  # already in the dist dir


def _modules() -> list[str]:
    """Ours, and rocm-kpack's module path as TheRock writes it (the project installs the
    ``rocm_kpack`` face beside ``kpack``)."""
    return ["kpack.tools.split_python_wheels", "rocm_kpack.tools.split_python_wheels"]


def _script(module: str, *extra: str) -> str:
    """TheRock's command with this wheel's values; the flags untouched."""
    text = TORCH_CALL.replace("rocm_kpack.tools.split_python_wheels", module)
    text = text.replace("${{ env.PACKAGE_DIST_DIR }}", "${PACKAGE_DIST_DIR}")
    text = text.replace("torch-*.whl", "jax_rocm7_plugin-*.whl")
    text = text.replace("amd-torch-device", "amd-jax-device")
    text = text.replace("--overlay-root torch/", f"--overlay-root {JAX_PLUGIN.overlay_root}")
    return text.rstrip() + "".join(f" \\\n  {e}" for e in extra) + "\n"


def _run(
    script: str, stage: Path, dist: Path, *, check: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "FAT_STAGE": str(stage),
        "PACKAGE_DIST_DIR": str(dist),
        "ROCM_SDK_VERSION": SDK_VERSION,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
        "SOURCE_DATE_EPOCH": "1700000000",
    }
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], env=env, capture_output=True, text=True
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _dists(dist: Path) -> list[str]:
    """What ``twine upload dist/*`` takes: the names the shell's ``*`` matches."""
    return sorted(n for n in os.listdir(dist) if not n.startswith("."))


def _device(key: str) -> str:
    return f"amd_jax_device_{key.replace('-', '_')}-0.10.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def _real_target(key: str) -> bool:
    """Whether TheRock publishes ``rocm-sdk-device-<key>``: rocm-kpack's splitter asks
    rocm-bootstrap whether the key's bundle is a real target's (``PackagingLevel.TARGET``);
    it knows no generic targets."""
    try:
        return rocm_bootstrap.lookup_bundle(key).level is rocm_bootstrap.PackagingLevel.TARGET
    except ValueError:
        return False


def _metadata(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        headers = BytesHeaderParser().parsebytes(z.read(name))
    return [str(v) for v in headers.get_all("Requires-Dist", [])]


@pytest.fixture(scope="module")
def stage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``FAT_STAGE``: the fat wheel, moved out of the dist dir as TheRock does."""
    where = tmp_path_factory.mktemp("fat-stage")
    (where / HOST).symlink_to(pypi_wheel(JAX_PLUGIN))
    return where


@pytest.mark.parametrize("module", _modules())
def test_the_torch_call_site_as_therock_writes_it(stage: Path, tmp_path: Path, module: str) -> None:
    dist = tmp_path / "packages" / "dist"
    dist.mkdir(parents=True)
    (dist / OTHER).write_bytes(b"torchaudio, shipped as it is")
    _run(_script(module), stage, dist)
    assert _dists(dist) == sorted([HOST, OTHER, *(_device(k) for k in KEYS)])
    assert (dist / OTHER).read_bytes() == b"torchaudio, shipped as it is"
    assert {_real_target(k) for k in KEYS} == {True, False}
    for key in KEYS:  # rocm-sdk-device-@GFXARCH@ only where TheRock's index has that package
        requires = _metadata(dist / _device(key))
        assert requires[0] == "jax-rocm7-plugin==0.10.0"
        sdk = [f"rocm-sdk-device-{key} == {SDK_VERSION}"] if _real_target(key) else []
        assert requires[1:] == sdk, key
        assert all(Requirement(r) for r in requires)
    extras = _metadata(dist / HOST)
    assert 'amd-jax-device-gfx9-4-generic==0.10.0; extra == "device-gfx942"' in extras
    reports = dist.with_name("dist-split-reports")
    assert sorted(_dists(reports)) == [
        "jax_rocm7_plugin-0.10.0-split-report.json",
        "jax_rocm7_plugin-0.10.0-split-report.md",
    ]


def test_a_rerun_replaces_its_outputs_and_nothing_else(stage: Path, tmp_path: Path) -> None:
    """TheRock re-runs a job into the same dist dir: the second run replaces what the first
    wrote (byte-identical here), keeps the other wheels, and drops an output the first run
    made and the second does not (a stale device wheel in the record)."""
    dist = tmp_path / "dist"
    dist.mkdir()
    (dist / OTHER).write_bytes(b"other")
    script = _script("kpack.tools.split_python_wheels")
    _run(script, stage, dist)
    first = {n: (dist / n).read_bytes() for n in _dists(dist)}
    _run(script, stage, dist)
    assert {n: (dist / n).read_bytes() for n in _dists(dist)} == first
    # a user's file in the way is never overwritten: one short error line, a few names
    for name in [HOST, *(_device(k) for k in KEYS)]:
        (dist / name).unlink()
        (dist / name).write_bytes(b"mine")
    failed = _run(script, stage, dist, check=False)
    lines = [x for x in failed.stderr.strip().splitlines() if not x.startswith("[")]  # progress
    assert failed.returncode == 1 and lines[0].startswith("error: ")
    assert "7 in the way, changed since kpack split-wheel wrote them" in lines[0]
    assert len(lines[0]) < 300
    assert lines[1:] == [
        *(
            f"  - {n}: changed since this tool wrote it (size {len(first[n])} -> 4 bytes)"
            for n in sorted([HOST, *(_device(k) for k in KEYS)])[:5]
        ),
        "  - ... and 2 more",
    ]
    assert all((dist / n).read_bytes() == b"mine" for n in _dists(dist) if n != OTHER)
    _run(_script("kpack.tools.split_python_wheels", "--force"), stage, dist)
    assert {n: (dist / n).read_bytes() for n in _dists(dist)} == first


def test_directory_output_is_the_unpacked_wheels(stage: Path, tmp_path: Path) -> None:
    wheels, dirs = tmp_path / "wheels", tmp_path / "dirs"
    _run(_script("kpack.tools.split_python_wheels"), stage, wheels)
    done = _run(
        _script(
            "kpack.tools.split_python_wheels",
            "--output-format directory",
            "--clang-offload-bundler /opt/rocm/llvm/bin/clang-offload-bundler",
        ),
        stage,
        dirs,
    )
    notices = [line for line in done.stderr.splitlines() if line.startswith("notice:")]
    assert len(notices) == 1 and "--clang-offload-bundler" in notices[0]
    assert _dists(dirs) == [n.removesuffix(".whl") for n in _dists(wheels)]
    for name in _dists(wheels):
        tree = dirs / name.removesuffix(".whl")
        with zipfile.ZipFile(wheels / name) as z:
            files = sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file())
            assert files == sorted(z.namelist()), name
            for info in z.infolist():
                assert (tree / info.filename).read_bytes() == z.read(info), info.filename
                assert os.access(tree / info.filename, os.X_OK) == bool(
                    (info.external_attr >> 16) & 0o100
                )


def test_an_unpacked_wheel_directory_as_input(stage: Path, tmp_path: Path) -> None:
    """The same outputs from the wheel and from its unpacked tree: the device wheels byte
    for byte; the host wheel with the same members, byte for byte (from the wheel its
    deflate streams are the input's, reused; from the tree they are compressed anew)."""
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(stage / HOST) as z:
        for info in z.infolist():
            z.extract(info, unpacked)
            mode = 0o755 if (info.external_attr >> 16) & 0o100 else 0o644
            (unpacked / info.filename).chmod(mode)
    from_wheel, from_dir = tmp_path / "a", tmp_path / "b"
    _run(_script("kpack.tools.split_python_wheels"), stage, from_wheel)
    script = _script("kpack.tools.split_python_wheels")
    script = script.replace('"${FAT_STAGE}"/jax_rocm7_plugin-*.whl', str(unpacked))
    _run(script, stage, from_dir)
    assert _dists(from_dir) == _dists(from_wheel)
    for name in _dists(from_wheel):
        if name.startswith("jax_rocm7_plugin-"):
            with zipfile.ZipFile(from_dir / name) as a, zipfile.ZipFile(from_wheel / name) as b:
                assert a.namelist() == b.namelist()
                for info in a.infolist():
                    assert a.read(info) == b.read(info.filename), info.filename
                    assert info.external_attr == b.getinfo(info.filename).external_attr
            continue
        assert (from_dir / name).read_bytes() == (from_wheel / name).read_bytes(), name
    assert sorted(os.listdir(unpacked)) == sorted(  # the input is read, never written
        {n.split("/", 1)[0] for n in zipfile.ZipFile(stage / HOST).namelist()}
    )


@pytest.mark.parametrize(
    "bad",
    [
        "rocm-sdk-device-@GFXARCH@ ==",
        "rocm sdk device == 7",
        "rocm-sdk-device-@GFXARCH@ == 7.1\nRequires-Dist: evil",
    ],
)
def test_a_bad_device_requires_dist_is_one_error(
    stage: Path, tmp_path: Path, bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    dist = tmp_path / "dist"
    script = _script("kpack.tools.split_python_wheels").replace(
        '"rocm-sdk-device-@GFXARCH@ == ${ROCM_SDK_VERSION}"', '"${BAD}"'
    )
    monkeypatch.setenv("BAD", bad)
    done = _run(script, stage, dist, check=False)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr  # a usage error
    assert lines[0].startswith("error: --device-requires-dist ")
    assert "not a PEP 508 requirement" in lines[0] or "line break" in lines[0]
    assert not dist.exists() and not list(tmp_path.iterdir())


def test_upstream_defaults_and_tmp_dir(
    stage: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--variant-label`` defaults to rocm-kpack's ``variant``; ``--tmp-dir`` holds the work
    dir (the unpacked input and the spools), and nothing is left there."""
    import tempfile

    from kpack import wheelsplit as spw
    from kpack.common import staging, tempdirs

    made: list[Path] = []

    def spy(path: Path) -> Path:
        made.append(path)
        return tempdirs.make_temp_dir(path)

    monkeypatch.setattr(staging, "make_temp_dir", spy)
    monkeypatch.setattr(tempfile, "tempdir", tempfile.tempdir)  # restored afterwards
    monkeypatch.setenv("TMPDIR", os.environ.get("TMPDIR", "/tmp"))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    argv = [
        "--input",
        str(stage / HOST),
        "--output-dir",
        str(tmp_path / "dist"),
        "--overlay-root",
        JAX_PLUGIN.overlay_root,
        "--device-package-prefix",
        "amd-jax-device",
        "--generate-variant-wheel",
        "--tmp-dir",
        str(scratch),
    ]
    assert spw.main(argv) == 0
    assert [p for p in made if p.parent == scratch] and list(scratch.iterdir()) == []
    names = _dists(tmp_path / "dist")
    assert HOST.removesuffix(".whl") + "-variant.whl" in names
    assert HOST.removesuffix(".whl") + "-null.whl" in names
